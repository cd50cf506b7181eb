"""One node's GPU time in the three tiers over a window: what the node page shows.

The accounting rollups (services/accounting.py) are per job, GPU type and capacity tier, not per
node, so a node's tiers are read from the rows that do name the node, within the raw retention
(QM["RAW_SAMPLE_RETENTION_DAYS"], 7 days), in a fixed number of queries:

- **allocated**: the node's `AllocationGpu` rows, each held from its allocation's bind to its
  release (or to the moment a gang member on this node exited on its own, `allocation.released`
  with reason `MemberExited`), exactly as the rollup reads them (`accounting.held_spans`);
- **active** (allocated and not stalled): the node's own agent samples (`UsageSample`), GPUs ×
  seconds × reported device activity, cut exactly at the window's edges and the buckets' bounds,
  and never more than allocated for an allocation in a bucket. Time no sample covers is not
  active, as in the rollup. With hour or day buckets (24 hours and more) the whole hours come
  from the node's `NodeActivityRollup` rows (the same sums per allocation and UTC hour, folded
  in by the accounting run, `node_activity.fold_node_activity`) and only the window's partial
  first and last hours, and samples not folded yet, from the samples: a busy node's week is about 1,400 rows
  and 3,000 samples instead of 480,000 samples, with the same figures to float rounding
  (`hourly=False` reads every sample, the tests' and the benchmark's reference);
- **productive** (active and doing useful work): a gang reports its progress once, from the node
  of rank 0, so a node's own samples cannot say which of its active time was productive. The
  job's rollup rows of the same bucket can: the node's active GPU-seconds of a job × the job's
  productive ÷ active in that bucket. A job alone on the node gets exactly its productive
  GPU-seconds; a gang's productive time is shared among its nodes in proportion to their active
  time. Time the rollup has not reached yet is left out: the window ends at the accounting
  cursor, like every other tier chart.
- **capacity**: the node's GPUs × the time since it joined the fleet (its first registration, or
  its creation through the API or the admin) within the window, and since the accounting began
  (its first minute of the fleet's capacity kept): a fresh fleet's first hour is not read as
  the share of the hour it existed, as on the overview.

Per GPU: allocated is exact per slot; an agent reports one activity per job and node (the mean
over that job's GPUs there), so a job's GPUs on the node share its active and productive time
evenly.

A window reaching back beyond the raw retention starts at its horizon (`reaches_back_to`), the
raw rows being gone. The hourly activity rows are kept as long as the hour rollups, so the
active tier could reach further; the figures stop at the horizon still, where the samples the
page's figures are checked against end (docs/dashboards.md).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import Q, Sum

from controlplane.choices import EventKind
from controlplane.models import (
    AccountingCursor,
    AllocationGpu,
    Event,
    FleetRollup,
    Node,
    NodeActivityRollup,
    UsageRollup,
)
from controlplane.services import accounting, utilization_series
from controlplane.services.node_activity import HOUR, US, epoch_seconds, grouped, sample_arm
from controlplane.services.usage_tiers import floor_to, from_us, quantize_down, to_us

GPU_HOUR = Decimal(3600)


@dataclass(frozen=True)
class NodeTierBucket:
    """One bucket of the chart, cut to the window: GPU-seconds per tier and of capacity."""

    start: datetime
    end: datetime
    capacity: Decimal
    allocated: Decimal
    active: Decimal
    productive: Decimal


@dataclass(frozen=True)
class GpuTiers:
    """One GPU slot of the node over the window, in GPU-seconds."""

    index: int
    capacity: Decimal
    allocated: Decimal
    active: Decimal
    productive: Decimal


@dataclass(frozen=True)
class NodeTiers:
    start: datetime  # what the figures cover: [start, end)
    end: datetime
    asked_start: datetime  # the window asked for
    asked_end: datetime
    bucket: int
    reaches_back_to: datetime  # the raw retention's horizon: nothing per node before it
    rolled_until: datetime | None
    joined_at: datetime | None  # inside the window: capacity counts from here
    accounting_began: datetime | None  # inside the window: nor was anything rolled before this
    capacity: Decimal
    allocated: Decimal
    active: Decimal
    productive: Decimal
    buckets: list[NodeTierBucket]
    gpus: list[GpuTiers]

    @property
    def empty(self) -> bool:
        return self.end <= self.start

    @property
    def unrolled_s(self) -> float:
        """How far before the window's end the figures stop: the time since the last rollup."""
        return (self.asked_end - self.end).total_seconds()

    @property
    def cut_at_horizon(self) -> bool:
        return self.asked_start < self.reaches_back_to

    def hours(self, tier: str) -> Decimal:
        value: Decimal = getattr(self, tier)
        return value / GPU_HOUR

    def share(self, tier: str) -> float | None:
        return float(getattr(self, tier) / self.capacity) if self.capacity > 0 else None


_NODE_JOINS = Q(kind=EventKind.NODE_REGISTERED, reason="Registered") | Q(kind=EventKind.CONFIG_CHANGED,
                                                                          reason="NodeCreated")


def node_tiers(node: Node, start: datetime, end: datetime, now: datetime, bucket: int | None = None, *,
               hourly: bool = True) -> NodeTiers:
    """The node's capacity, allocated, active and productive GPU-seconds over [start, end) (cut
    to the raw retention and to where the rollup has reached), per bucket and per GPU. At most
    seven queries, whatever the node's history: the cursor, when the node joined, when the
    accounting began, its GPUs' holders, gang members gone early, its activity (one grouped read
    of its samples, and of its hourly activity rows with hour and day buckets) and its jobs'
    rollup rows.

    With hour or day buckets the whole hours come from `NodeActivityRollup` and only the
    window's partial first and last hours (and samples not folded yet) from the raw samples;
    `hourly=False` reads every sample instead (the same figures, to float rounding: the
    benchmark's and the tests' reference)."""
    bucket = bucket or utilization_series.choose_bucket(start, end, now)
    horizon = accounting.raw_horizon(now)
    rolled, folded, longest = (AccountingCursor.objects.filter(name=accounting.CURSOR_NAME)
                               .values_list("rolled_until", "last_node_sample_id", "longest_node_sample_s").first()
                               or (None, 0, 0.0))
    lo = max(start, horizon)
    hi = min(end, rolled) if rolled is not None else lo
    empty = NodeTiers(lo, lo, start, end, bucket, horizon, rolled, None, None, Decimal(0), Decimal(0),
                      Decimal(0), Decimal(0), [], [])
    if hi <= lo:
        return empty
    joined = (Event.objects.filter(_NODE_JOINS, node=node).order_by("created_at")
              .values_list("created_at", flat=True).first())
    began = (FleetRollup.objects.filter(bucket=accounting.MINUTE, start__gte=floor_to(lo, accounting.MINUTE))
             .order_by("start").values_list("start", flat=True).first())
    began = began if began is not None and began > lo else None
    lo_us, hi_us, step = to_us(lo), to_us(hi), bucket * US
    keys = list(range(lo_us // step, (hi_us - 1) // step + 1))  # bucket numbers since the epoch

    def cut(k: int) -> tuple[int, int]:
        return max(lo_us, k * step), min(hi_us, (k + 1) * step)

    # Capacity: the node's GPUs from when it joined, and the accounting watched.
    counted_from = max(to_us(t) for t in (lo, joined, began) if t is not None)
    capacity: dict[int, int] = {}
    for k in keys:
        a, b = cut(k)
        capacity[k] = node.gpu_count * max(0, b - max(a, counted_from))

    # Allocated: each GPU slot's holders, per bucket (GPU-µs, exact).
    spans = _spans(node, lo, hi)
    allocated: dict[tuple[int, int], int] = defaultdict(int)  # (allocation, bucket) → GPU-µs
    slot_allocated: dict[int, int] = defaultdict(int)
    gpus_of: dict[int, list[int]] = defaultdict(list)  # allocation → its slots on this node
    job_of: dict[int, int] = {}
    for allocation_id, job_id, index, s0, s1 in spans:
        gpus_of[allocation_id].append(index)
        job_of[allocation_id] = job_id
        a, b = max(s0, lo_us), min(s1 if s1 is not None else hi_us, hi_us)
        if b <= a:
            continue
        slot_allocated[index] += b - a
        for k in range(a // step, (b - 1) // step + 1):
            c0, c1 = cut(k)
            allocated[(allocation_id, k)] += max(0, min(b, c1) - max(a, c0))

    # Active: the node's samples, per allocation and bucket, never above allocated.
    seen = _active(node, lo_us, hi_us, bucket, (folded, longest) if hourly else None)
    active: dict[tuple[int, int], Decimal] = {}
    for key, gpu_us in seen.items():
        if key[0] in job_of:
            active[key] = min(quantize_down(gpu_us / US), Decimal(allocated.get(key, 0)).scaleb(-6))

    # Productive: the node's active × its job's productive ÷ active in the bucket.
    ratio = _productive_ratios({job_of[a] for a, _ in active}, bucket, lo, hi)
    productive: dict[tuple[int, int], Decimal] = {}
    for (allocation_id, k), value in active.items():
        r = ratio.get((job_of[allocation_id], k))
        productive[(allocation_id, k)] = quantize_down(value * r) if r is not None else Decimal(0)

    def per_bucket(cells: dict[tuple[int, int], Decimal]) -> dict[int, Decimal]:
        sums: dict[int, Decimal] = defaultdict(Decimal)
        for (_, k), value in cells.items():
            sums[k] += value
        return sums

    allocated_k = per_bucket({key: Decimal(v).scaleb(-6) for key, v in allocated.items()})
    active_k, productive_k = per_bucket(active), per_bucket(productive)
    buckets = []
    for k in keys:
        a, b = cut(k)
        buckets.append(NodeTierBucket(
            # a step starts where capacity starts counting (the node joined, the accounting began)
            start=from_us(max(a, min(b, counted_from))), end=from_us(b), capacity=Decimal(capacity[k]).scaleb(-6),
            allocated=allocated_k.get(k, Decimal(0)), active=active_k.get(k, Decimal(0)),
            productive=productive_k.get(k, Decimal(0)),
        ))
    per_slot_active: dict[int, Decimal] = defaultdict(Decimal)
    per_slot_productive: dict[int, Decimal] = defaultdict(Decimal)
    for (allocation_id, _), value in active.items():
        slots = gpus_of[allocation_id]
        for index in slots:
            per_slot_active[index] += value / len(slots)
    for (allocation_id, _), value in productive.items():
        slots = gpus_of[allocation_id]
        for index in slots:
            per_slot_productive[index] += value / len(slots)
    slot_capacity = Decimal(sum(capacity.values())).scaleb(-6) / node.gpu_count
    gpus = [
        GpuTiers(index=i, capacity=slot_capacity, allocated=Decimal(slot_allocated.get(i, 0)).scaleb(-6),
                 active=quantize_down(per_slot_active.get(i, Decimal(0))),
                 productive=quantize_down(per_slot_productive.get(i, Decimal(0))))
        for i in range(max([node.gpu_count - 1, *slot_allocated]) + 1)
    ]
    return NodeTiers(
        start=lo, end=hi, asked_start=start, asked_end=end, bucket=bucket, reaches_back_to=horizon,
        rolled_until=rolled, joined_at=joined if joined is not None and joined > lo else None,
        accounting_began=began,
        capacity=Decimal(sum(capacity.values())).scaleb(-6), allocated=sum(allocated_k.values(), Decimal(0)),
        active=sum(active_k.values(), Decimal(0)), productive=sum(productive_k.values(), Decimal(0)),
        buckets=buckets, gpus=gpus,
    )


def _spans(node: Node, lo: datetime, hi: datetime) -> list[tuple[int, int, int, int, int | None]]:
    """(allocation, job, GPU index, held from µs, held until µs or None) of every slot of the node
    held at some point in [lo, hi). Two queries."""
    rows = list(
        AllocationGpu.objects.filter(node=node, allocation__created_at__lt=hi)
        .filter(Q(allocation__released_at__isnull=True) | Q(allocation__released_at__gt=lo))
        .values_list("allocation_id", "allocation__job_id", "gpu_index", "allocation__created_at",
                     "allocation__released_at")
    )
    # A gang member whose processes ended frees this node's GPUs before the allocation settles.
    member_end = dict(
        Event.objects.filter(kind=EventKind.ALLOCATION_RELEASED, reason="MemberExited", node=node,
                             allocation_id__in={r[0] for r in rows})
        .values_list("allocation_id", "created_at")
    ) if rows else {}
    out = []
    for allocation_id, job_id, index, created, released in rows:
        early = member_end.get(allocation_id)
        if early is not None and (released is None or early < released):
            released = early
        out.append((allocation_id, job_id, index, to_us(created), to_us(released) if released is not None else None))
    return out


def _active(node: Node, lo_us: int, hi_us: int, bucket: int, folded: tuple[int, float] | None
            ) -> dict[tuple[int, int], float]:
    """GPU-µs × activity of the node's samples per (allocation, bucket number), each sample cut
    to [lo, hi) and at the buckets' bounds, in one grouped query.

    With hour or day buckets and `folded` (the cursor's `last_node_sample_id` and the longest
    of those samples), the whole hours [h0, h1) inside the window come from the node's
    `NodeActivityRollup` rows, which hold every sample up to that id (each row read as one
    sample spanning its hour). The samples read are then the folded ones of the partial hours at
    the edges — found through the (node, ended_at) index between the edge's start and its end
    plus the longest sample, as no folded sample crossing the edge ends later — and the ones
    above that id over the whole window (not folded yet; few, found by id). Otherwise every
    sample of the window.

    The cursor is read one query before the rows: a run committing in between folds samples
    above the id read, which this query then counts twice if they lie in the window's whole
    hours — a late sample (resent after a partition), folded in those few milliseconds, for one
    rendering. Samples of the present hour, the usual ones, are read raw either way."""
    adapt = connection.ops.adapt_datetimefield_value
    node_in = "node_id = %s AND ended_at > %s AND started_at < %s"
    h0, h1 = -(-lo_us // (HOUR * US)) * HOUR * US, hi_us // (HOUR * US) * HOUR * US
    if not folded or not folded[0] or bucket % HOUR or h1 <= h0:  # (id 0: nothing folded yet)
        arms = [sample_arm(node_in, [node.pk, adapt(from_us(lo_us)), adapt(from_us(hi_us))], lo_us, hi_us)]
    else:
        through, longest = folded
        reach = int(longest * US) + US  # a second's margin over the float
        arms = [_hour_arm(node, h0, h1)]
        for a, b in ((lo_us, h0), (h1, hi_us)):
            if b > a:
                arms.append(sample_arm(node_in + " AND ended_at < %s AND id <= %s",
                                        [node.pk, adapt(from_us(a)), adapt(from_us(b)), adapt(from_us(b + reach)),
                                         through], a, b))
        arms.append(sample_arm(node_in + " AND id > %s",
                                [node.pk, adapt(from_us(lo_us)), adapt(from_us(hi_us)), through], lo_us, hi_us))
    return {(a, k): gpu_us for (_, a, k), gpu_us in grouped(arms, bucket).items()}


def _hour_arm(node: Node, h0_us: int, h1_us: int) -> tuple[str, list[object]]:
    """The node's hourly activity rows of [h0, h1), each read as one sample spanning its hour."""
    table = connection.ops.quote_name(NodeActivityRollup._meta.db_table)
    adapt = connection.ops.adapt_datetimefield_value
    return (f"SELECT allocation_id AS a, active_gpu_seconds / {HOUR}.0 AS w, {epoch_seconds('start')} AS s0, "
            f"{epoch_seconds('start')} + {HOUR}.0 AS s1 FROM {table} WHERE node_id = %s AND start >= %s AND start < %s",
            [node.pk, adapt(from_us(h0_us)), adapt(from_us(h1_us))])


def _productive_ratios(job_ids: set[int], bucket: int, lo: datetime, hi: datetime) -> dict[tuple[int, int], Decimal]:
    """(job, bucket number) → the job's productive ÷ active GPU-seconds over that bucket, from
    its rollup rows (all GPU types, tiers and borrowed flags of the job together). One query."""
    if not job_ids:
        return {}
    step = timedelta(seconds=bucket)
    rows = (
        UsageRollup.objects.filter(accounting.in_bucket(bucket, lo, hi), job_id__in=job_ids)
        .values("job_id", "start").annotate(active=Sum("active_gpu_seconds"), productive=Sum("productive_gpu_seconds"))
    )
    out = {}
    for r in rows:
        active = Decimal(r["active"] or 0)
        if active > 0:
            k = to_us(r["start"]) // (int(step.total_seconds()) * US)
            out[(r["job_id"], k)] = min(Decimal(1), Decimal(r["productive"] or 0) / active)
    return out
