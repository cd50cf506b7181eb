"""Accounting: the three utilization tiers, their cost, and the rollups every reader uses.

Definitions (docs/accounting.md has them in full, with the formulas):
  - allocated GPU-seconds: held by a live allocation, from its bind to its release (a gang is
    bound whole, so an assembling gang never counts);
  - active GPU-seconds: allocated × the device activity the agents report, per sample interval;
  - productive GPU-seconds: retained progress ÷ the job's fault-free rate (progress per active
    GPU-second over its best steady window), at most active. Work replayed since the last
    checkpoint of an eviction or failure is not retained; stalls lower the rate.
  - cost: GPU-seconds × the $/GPU-hour of the node's GPU type and capacity tier in force then.

The rollup (`roll_up`, every ~15 s from the Celery task) keeps three granularities in step:
  1. lock the cursor row (a concurrent run finds it locked and does nothing);
  2. re-derive the trailing minutes (REROLL_MINUTES back to now) for every job from
     allocations, agent samples, loss windows and prices, with the fleet's capacity and each
     team's idle guarantee;
  3. re-derive, job by job, older minutes that late news changed: a sample that arrived late,
     an eviction whose lost work reaches back to the last checkpoint, a failure, a bind or a
     release stamped in the past;
  4. update each job's fault-free rate from its new steady minutes and, where it moved,
     recompute that job's productive tier;
  5. sum minutes into hours and hours into days for every cell touched;
  6. fold new scheduling-cycle durations and job events into the /metrics counters;
  7. move the cursor.
Everything happens in one transaction: readers see the rollups before or after a run, never
half of one. Raw samples are dropped by `apply_retention` only once their minutes are rolled.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cached_property
from typing import Any

import structlog
from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import Count, DecimalField, F, FloatField, Max, Min, Q, QuerySet, Sum, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Least, Round, Trunc

from controlplane.choices import EventKind, JobState
from controlplane.models import (
    AccountingCursor,
    Allocation,
    AllocationGpu,
    Event,
    FleetRollup,
    FleetSample,
    GpuType,
    GroupRollup,
    Job,
    JobProgressRate,
    Node,
    NodeActivityRollup,
    PriceRate,
    Quota,
    QuotaRollup,
    UsageRollup,
    UsageSample,
)
from controlplane.models.usage import TOKEN_SUM_FIELDS, USAGE_SUM_FIELDS, RollupBucket
from controlplane.services.instants import no_zone_said
from controlplane.services.node_activity import fold_node_activity
from controlplane.services.nodes import RETIRED_REASON, RETURNED_REASON
from controlplane.services.usage_tiers import (
    EVICTED,
    FAILED,
    MINUTE_US,
    STEADY_MINUTES,
    US_PER_HOUR,
    USD_QUANTUM,
    Derivation,
    Guarantee,
    Holding,
    JobMinute,
    LossWindow,
    PriceBook,
    QuotaCell,
    Sample,
    Span,
    apportion,
    best_steady_window,
    ceil_to,
    derive_minutes,
    floor_to,
    from_us,
    idle_guarantees,
    productive_of,
    progress_unit,
    to_us,
)

log = structlog.get_logger(__name__)

CURSOR_NAME = "usage"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE, HOUR, DAY, MONTH = RollupBucket.MINUTE, RollupBucket.HOUR, RollupBucket.DAY, RollupBucket.MONTH
#: Minutes re-derived on every run, so samples that arrive a little late are simply included.
REROLL_MINUTES = 5
#: A run that finds a backlog (first start, a long outage) rolls at most this much, then the
#: next run goes on, so no single transaction grows without bound.
MAX_CATCH_UP = timedelta(hours=6)
#: Relative change of a job's average rate (before it has a steady window) worth a rewrite.
UNSTEADY_RATE_TOLERANCE = 0.001
#: Scheduling-cycle duration buckets (seconds) of the admission-attempt histogram.
CYCLE_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Event kinds whose counts /metrics exposes as counters.
COUNTED_EVENT_KINDS = (
    EventKind.JOB_BOUND,
    EventKind.JOB_FINISHED,
    EventKind.JOB_PREEMPTED,
    EventKind.JOB_RESIZED,
    EventKind.JOB_REQUEUED,
    EventKind.JOB_TIMED_OUT,
)
_REQUEUE_KINDS = (EventKind.JOB_PREEMPTED, EventKind.JOB_RESIZED, EventKind.JOB_REQUEUED)
_DIMENSIONS = ("job_id", "team_id", "project_id", "priority_class_id", "gpu_type_id", "capacity_tier", "borrowed")
_GROUP_DIMENSIONS = _DIMENSIONS[1:]
_CAPACITY_FIELDS = ("capacity_gpu_seconds", "capacity_cost_usd")
_QUOTA_FIELDS = (
    "nominal_gpu_seconds", "used_gpu_seconds", "borrowed_gpu_seconds", "lent_gpu_seconds", "idle_gpu_seconds",
    "idle_cost_usd",
)


def raw_retention() -> timedelta:
    """How long raw samples (and minute rollups) are kept: QM["RAW_SAMPLE_RETENTION_DAYS"], 7."""
    return timedelta(days=float(settings.QM.get("RAW_SAMPLE_RETENTION_DAYS", 7)))


def hour_retention() -> timedelta:
    """How long hour rollups are kept: QM["HOUR_ROLLUP_RETENTION_DAYS"], 400. Days are kept."""
    return timedelta(days=float(settings.QM.get("HOUR_ROLLUP_RETENTION_DAYS", 400)))


def raw_horizon(now: datetime) -> datetime:
    """Minute rows and raw samples exist from here on (UTC midnight, so whole days re-sum)."""
    return floor_to(now - raw_retention(), DAY)


def hour_horizon(now: datetime) -> datetime:
    return floor_to(now - hour_retention(), DAY)


# ------------------------------------------------------------------------------ the rollup


@dataclass(frozen=True)
class RollupResult:
    ran: bool
    rolled_from: datetime | None = None
    rolled_until: datetime | None = None
    late_jobs: int = 0
    rate_changes: int = 0
    rows_written: int = 0
    duration_ms: float = 0.0


@dataclass
class _Touched:
    """What a run changed, so step 5 re-sums exactly those hours and days."""

    all_jobs_hours: set[datetime] = field(default_factory=set)
    job_hours: dict[int, set[datetime]] = field(default_factory=lambda: defaultdict(set))
    fleet_minutes: list[tuple[datetime, datetime]] = field(default_factory=list)
    fleet_hours: set[datetime] = field(default_factory=set)
    quota_hours: set[datetime] = field(default_factory=set)
    #: Days whose hour rows were repriced in place (their minutes are gone): their day rows
    #: (jobs, fleet, guarantees) and group rows are re-summed from those hours.
    days_from_hours: set[datetime] = field(default_factory=set)
    #: Days whose jobs' day rows were repriced in place (their hours are gone too): their
    #: group rows (and months) are re-summed.
    group_days: set[datetime] = field(default_factory=set)
    rows_written: int = 0

    def minutes(self, start: datetime, end: datetime, job_id: int | None) -> None:
        hours = _slots(start, end, HOUR)
        if job_id is None:
            self.all_jobs_hours.update(hours)
        else:
            self.job_hours[job_id].update(hours)
        self.fleet_minutes.append((start, end))
        self.fleet_hours.update(hours)


def _slots(start: datetime, end: datetime, bucket: int) -> list[datetime]:
    out, t = [], floor_to(start, bucket)
    while t < end:
        out.append(t)
        t += timedelta(seconds=bucket)
    return out


def in_bucket(bucket: int, start: datetime, end: datetime) -> Q:
    """Rows of `bucket` starting in [start, end), each start named (`start = ANY(...)`).

    Not a range: the minute rows crowd the recent end of the `start` histogram, so PostgreSQL
    overestimates a recent range of hour or day rows a hundredfold and scans the whole table;
    a list of starts is estimated from the column's distinct count and read through the index."""
    return Q(bucket=bucket, start__in=_bucket_starts(start, end, bucket))


def roll_up(now: datetime) -> RollupResult:
    """One run of the accounting rollup up to `now` (see the module docstring for the steps)."""
    started = time.perf_counter()
    AccountingCursor.objects.get_or_create(name=CURSOR_NAME)
    with transaction.atomic():
        # 1. one run at a time; a second one skips instead of waiting behind the first.
        cursor = AccountingCursor.objects.select_for_update(skip_locked=True).filter(name=CURSOR_NAME).first()
        if cursor is None:
            return RollupResult(ran=False)
        horizon = raw_horizon(now)
        first_run = cursor.rolled_until is None
        if first_run:
            begin = _first_activity(horizon, now)
        else:
            begin = floor_to(min(cursor.rolled_until, now), MINUTE) - timedelta(minutes=REROLL_MINUTES)
            begin = max(begin, _first_rolled_minute(cursor.rolled_until))
        begin = max(begin, horizon)
        end = min(now, begin + MAX_CATCH_UP)
        top_sample = UsageSample.objects.aggregate(m=Max("id"))["m"] or 0
        top_event = Event.objects.aggregate(m=Max("id"))["m"] or 0
        late_jobs, late_quota = ({}, []) if first_run else _late_news(cursor, begin, horizon, top_sample, top_event)
        prices = price_book()
        touched = _Touched()
        job_minutes: dict[int, dict[int, JobMinute]] = defaultdict(dict)
        # 2. the trailing minutes, all jobs, with capacity and idle guarantees
        derivation = _derive_and_store(begin, end, None, prices, touched)
        _merge_minutes(job_minutes, derivation)
        _store_capacity(begin, end, prices, touched)
        _store_idle_guarantees(begin, end, prices, touched)
        # 3. late news, job by job
        for job_id, ranges in late_jobs.items():
            for a, b in _merge_ranges(ranges):
                a = max(horizon, floor_to(a, MINUTE) - timedelta(minutes=STEADY_MINUTES - 1))
                b = min(begin, ceil_to(b, MINUTE))
                if b > a:
                    _merge_minutes(job_minutes, _derive_and_store(a, b, job_id, prices, touched))
        for a, b in _merge_ranges(late_quota):
            a, b = max(horizon, floor_to(a, MINUTE)), min(begin, ceil_to(b, MINUTE))
            if b > a:
                _store_idle_guarantees(a, b, prices, touched)
        # 4. fault-free rates
        changed = _update_rates(job_minutes, now, horizon)
        for job_id in changed:
            _reprice_productive(job_id, horizon, touched)
        # 5. minutes → hours → days
        _resum(touched)
        # 6. /metrics counters, and the nodes' hourly activity (the node page's active tier)
        _fold_cycle_durations(cursor)
        _fold_event_counts(cursor, top_event)
        fold_node_activity(cursor, top_sample)
        # 7. move on
        cursor.rolled_until = end
        cursor.last_sample_id = max(cursor.last_sample_id, top_sample)
        cursor.last_event_id = max(cursor.last_event_id, top_event)
        cursor.updated_at = now
        cursor.save()
    duration_ms = (time.perf_counter() - started) * 1000
    if prices.unpriced_gpu_us:
        log.warning("usage without a price", unpriced_gpu_hours=round(prices.unpriced_gpu_us / 3.6e9, 4),
                    hint="add a PriceRate for every GPU type and capacity tier in the fleet")
    return RollupResult(ran=True, rolled_from=begin, rolled_until=end, late_jobs=len(late_jobs),
                        rate_changes=len(changed), rows_written=touched.rows_written, duration_ms=duration_ms)


def _first_activity(horizon: datetime, now: datetime) -> datetime:
    """Where the very first run starts: the earliest allocation still held or released within
    the raw retention, else now."""
    first = Allocation.objects.filter(Q(released_at__isnull=True) | Q(released_at__gt=horizon)).aggregate(
        t=Min("created_at")
    )["t"]
    return floor_to(first, MINUTE) if first is not None else floor_to(now, MINUTE)


def _first_rolled_minute(rolled_until: datetime) -> datetime:
    """Where the rollups begin: the earliest minute of capacity or guarantees still kept (else
    the minute rolled last). The trailing re-derivation never reaches back before it: the
    second run would otherwise write capacity and idle guarantees for the five minutes before
    the first run, time the accounting never watched (usage there is late news, found by id)."""
    starts = [
        model.objects.filter(bucket=MINUTE).aggregate(t=Min("start"))["t"] for model in (FleetRollup, QuotaRollup)
    ]
    known = [t for t in starts if t is not None]
    return min(known) if known else floor_to(rolled_until, MINUTE)


def catch_up(now: datetime, max_runs: int = 1000) -> RollupResult:
    """Run the rollup until it reaches `now` (a backlog takes several runs of MAX_CATCH_UP)."""
    result = roll_up(now)
    for _ in range(max_runs):
        if not result.ran or result.rolled_until is None or result.rolled_until >= now:
            break
        result = roll_up(now)
    return result


def _merge_minutes(into: dict[int, dict[int, JobMinute]], derivation: Derivation) -> None:
    for job_id, minutes in derivation.job_minutes.items():
        into[job_id].update(minutes)


def _merge_ranges(ranges: Iterable[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    merged: list[tuple[datetime, datetime]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


# ---------------------------------------------------------------------------- late news


def _late_news(
    cursor: AccountingCursor, begin: datetime, horizon: datetime, top_sample: int, top_event: int
) -> tuple[dict[int, list[tuple[datetime, datetime]]], list[tuple[datetime, datetime]]]:
    """Job ranges before `begin` that changed since the last run, and ranges whose idle
    guarantees changed (an allocation's start or end stamped before `begin`)."""
    jobs: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    quota: list[tuple[datetime, datetime]] = []

    def add(job_id: int | None, a: datetime, b: datetime, *, holdings: bool = False) -> None:
        a, b = max(a, horizon), min(b, begin)
        if job_id is None or b <= a:
            return
        jobs[job_id].append((a, b))
        if holdings:
            quota.append((a, b))

    for job_id, s0, s1 in UsageSample.objects.filter(
        id__gt=cursor.last_sample_id, id__lte=top_sample, started_at__lt=begin, ended_at__gt=horizon
    ).values_list("job_id", "started_at", "ended_at"):
        add(job_id, s0, s1)
    events = Event.objects.filter(
        id__gt=cursor.last_event_id, id__lte=top_event,
        kind__in=[EventKind.JOB_BOUND, EventKind.ALLOCATION_RELEASED, EventKind.ALLOCATION_FENCED,
                  EventKind.JOB_FINISHED, *_REQUEUE_KINDS],
    ).values("kind", "job_id", "allocation_id", "created_at", "data")
    failed_checks: list[dict[str, Any]] = []
    for e in events:
        if e["kind"] in (EventKind.JOB_BOUND, EventKind.ALLOCATION_RELEASED, EventKind.ALLOCATION_FENCED):
            add(e["job_id"], e["created_at"], begin, holdings=True)
        elif e["kind"] in _REQUEUE_KINDS:
            window = _requeue_window(e, _gpus_at_eviction([e["allocation_id"]])[0].get(e["allocation_id"], 0))
            if window is not None:
                add(e["job_id"], from_us(window.start_us), from_us(window.end_us))
        else:
            failed_checks.append(e)
    if failed_checks:
        for window, job_id in _failure_windows([e["job_id"] for e in failed_checks if e["job_id"]]):
            add(job_id, from_us(window.start_us), from_us(window.end_us))
    return jobs, quota


# --------------------------------------------------------------------------- derivation


def price_book(gpu_type_ids: Iterable[int] | None = None) -> PriceBook:
    """Every price rate (of these GPU types; None: all), as the rollup, a repricing and a job's
    runs (`run_costs`) price with them: one query, none for no GPU type."""
    rows = PriceRate.objects.all()
    if gpu_type_ids is not None:
        rows = rows.filter(gpu_type_id__in=list(gpu_type_ids))
    return PriceBook.from_rows(rows.values_list("gpu_type_id", "capacity_tier", "effective_from", "usd_per_gpu_hour"))


def _spans(start: datetime, end: datetime, job_id: int | None,
           job_ids: Sequence[int] | None = None) -> tuple[list[Span], dict[int, int]]:
    """Allocations' GPUs per node held at some point in [start, end), and each job's team (of
    one job, of the jobs in `job_ids`, or of every job)."""
    qs = AllocationGpu.objects.filter(allocation__created_at__lt=end).filter(
        Q(allocation__released_at__isnull=True) | Q(allocation__released_at__gt=start)
    )
    if job_id is not None:
        qs = qs.filter(allocation__job_id=job_id)
    if job_ids is not None:
        qs = qs.filter(allocation__job_id__in=list(job_ids))
    rows = list(
        qs.values(
            "allocation_id", "node_id", "allocation__job_id", "allocation__job__team_id", "allocation__created_at",
            "allocation__released_at", "allocation__borrowed", "node__gpu_type_id", "node__capacity_tier",
        ).annotate(gpus=Count("id"))
    )
    # A gang member whose processes ended frees its node's GPUs before the allocation settles.
    member_end = {
        (a, n): t
        for a, n, t in Event.objects.filter(
            kind=EventKind.ALLOCATION_RELEASED, reason="MemberExited", node__isnull=False,
            allocation_id__in={r["allocation_id"] for r in rows},
        ).values_list("allocation_id", "node_id", "created_at")
    }
    spans, teams = [], {}
    for r in rows:
        released = r["allocation__released_at"]
        early = member_end.get((r["allocation_id"], r["node_id"]))
        if early is not None and (released is None or early < released):
            released = early
        spans.append(
            Span(
                allocation_id=r["allocation_id"], job_id=r["allocation__job_id"], node_id=r["node_id"],
                gpus=r["gpus"], start_us=to_us(r["allocation__created_at"]),
                end_us=to_us(released) if released is not None else None, borrowed=r["allocation__borrowed"],
                gpu_type_id=r["node__gpu_type_id"], capacity_tier=r["node__capacity_tier"],
            )
        )
        teams[r["allocation__job_id"]] = r["allocation__job__team_id"]
    return spans, teams


def _samples(start: datetime, end: datetime, allocation_ids: set[int]) -> list[Sample]:
    if not allocation_ids:
        return []
    return [
        Sample(allocation_id=a, node_id=n, start_us=to_us(s0), end_us=to_us(s1), gpus=g, activity=act,
               steps=steps, useful_tokens=tokens)
        for a, n, s0, s1, g, act, steps, tokens in UsageSample.objects.filter(
            allocation_id__in=allocation_ids, ended_at__gt=start, started_at__lt=end
        ).values_list("allocation_id", "node_id", "started_at", "ended_at", "gpus", "gpu_activity", "steps",
                      "useful_tokens")
    ]


def _allocation_gpus(allocation_ids: Iterable[int | None]) -> dict[int, int]:
    ids = [a for a in allocation_ids if a is not None]
    return dict(
        AllocationGpu.objects.filter(allocation_id__in=ids).values("allocation_id").annotate(n=Count("id"))
        .values_list("allocation_id", "n")
    )


def _gpus_at_eviction(allocation_ids: Iterable[int | None], counted: dict[int, int] | None = None
                      ) -> tuple[dict[int, int], dict[int, frozenset[int]]]:
    """The GPUs each allocation held when it was stopped, as the transitions service counts
    them for the lost work it records (`transitions.held_until_stop`): all of its GPUs but those
    of gang members gone on their own before the stop; and those members' nodes, which the loss
    spares. Dividing the record by every GPU the allocation ever had made a loss window too
    short: a gang fenced after its member on b had finished showed half the preemption waste the
    job recorded. `counted`: every GPU of each allocation, when the caller has them (spans)."""
    gpus = dict(counted) if counted is not None else _allocation_gpus(allocation_ids)
    spared: dict[int, set[int]] = defaultdict(set)
    for allocation_id, node_id, data in Event.objects.filter(
        allocation_id__in=list(gpus), kind=EventKind.ALLOCATION_RELEASED, reason="MemberExited"
    ).values_list("allocation_id", "node_id", "data"):
        if isinstance(data, dict) and not data.get("stopping"):
            gpus[allocation_id] -= int(data.get("gpus") or 0)
            if node_id is not None:
                spared[allocation_id].add(node_id)
    return gpus, {a: frozenset(nodes) for a, nodes in spared.items()}


def _requeue_window(event: dict[str, Any], gpus: int, spared: frozenset[int] = frozenset()) -> LossWindow | None:
    """An eviction's lost work: the transitions service recorded GPUs × time since the last
    checkpoint (or the start) as `lost_gpu_seconds`; the window ends at the eviction."""
    lost = float((event.get("data") or {}).get("lost_gpu_seconds") or 0.0)
    if gpus <= 0 or lost <= 0 or event.get("allocation_id") is None:
        return None
    end = to_us(event["created_at"])
    return LossWindow(event["allocation_id"], end - round(lost * 1_000_000 / gpus), end, EVICTED, spared)


def _loss_windows(job_ids: set[int], allocation_gpus: dict[int, int]) -> list[LossWindow]:
    """Eviction windows (from requeue events) and failure windows of these jobs."""
    if not job_ids:
        return []
    windows: list[LossWindow] = []
    at_eviction, spared = _gpus_at_eviction(allocation_gpus, allocation_gpus)
    created = dict(
        Allocation.objects.filter(pk__in=allocation_gpus).values_list("pk", "created_at")
    )
    for e in Event.objects.filter(
        job_id__in=job_ids, kind__in=_REQUEUE_KINDS, allocation_id__in=list(allocation_gpus)
    ).values("allocation_id", "created_at", "data"):
        window = _requeue_window(e, at_eviction.get(e["allocation_id"], 0), spared.get(e["allocation_id"], frozenset()))
        if window is None:
            continue
        since = created.get(window.allocation_id)
        # Snap to the bind when the record's rounding (1 ms) lands just before it.
        if since is not None and abs(window.start_us - to_us(since)) < 1000:
            window = LossWindow(window.allocation_id, to_us(since), window.end_us, EVICTED, window.spared_nodes)
        windows.append(window)
    windows.extend(w for w, _ in _failure_windows(job_ids))
    return windows


def _failure_windows(job_ids: Iterable[int]) -> list[tuple[LossWindow, int]]:
    """A job that failed or hit its runtime limit loses what its last allocation did since the
    job's last checkpoint (all of it if it never checkpointed during that allocation)."""
    out = []
    jobs = Job.objects.filter(pk__in=set(job_ids), state__in=[JobState.FAILED, JobState.TIMED_OUT]).values(
        "pk", "last_checkpoint_at"
    )
    for job in jobs:
        last = (
            Allocation.objects.filter(job_id=job["pk"], released_at__isnull=False)
            .order_by("-generation").values("pk", "created_at", "released_at").first()
        )
        if last is None:
            continue
        since = last["created_at"]
        if job["last_checkpoint_at"] is not None and job["last_checkpoint_at"] > since:
            since = job["last_checkpoint_at"]
        if since < last["released_at"]:
            out.append((LossWindow(last["pk"], to_us(since), to_us(last["released_at"]), FAILED), job["pk"]))
    return out


def _derive_and_store(
    start: datetime, end: datetime, job_id: int | None, prices: PriceBook, touched: _Touched
) -> Derivation:
    """Recompute the minute rows of [start, end) (of one job, or of all jobs) from raw data."""
    spans, _ = _spans(start, end, job_id)
    allocation_gpus: dict[int, int] = defaultdict(int)
    for span in spans:
        allocation_gpus[span.allocation_id] += span.gpus
    samples = _samples(start, end, set(allocation_gpus))
    losses = _loss_windows({s.job_id for s in spans}, dict(allocation_gpus))
    derivation = derive_minutes(to_us(start), to_us(end), spans, samples, losses, prices)
    job_ids = {key[1] for key in derivation.cells}
    meta = {
        pk: (team, project, pc)
        for pk, team, project, pc in Job.objects.filter(pk__in=job_ids).values_list(
            "pk", "team_id", "project_id", "priority_class_id"
        )
    }
    rates = {
        r.job_id: (r.unit, r.per_active_gpu_second) for r in JobProgressRate.objects.filter(job_id__in=job_ids)
    }
    token_jobs = _token_jobs(derivation, job_ids, touched)
    stale = UsageRollup.objects.filter(in_bucket(MINUTE, start, end))
    if job_id is not None:
        stale = stale.filter(job_id=job_id)
    stale.delete()
    rows = []
    for (minute, jid, gpu_type_id, tier, borrowed), cell in derivation.cells.items():
        team_id, project_id, pc_id = meta[jid]
        unit, rate = rates.get(jid, (None, None))
        active = cell.active
        cost = cell.cost_usd.quantize(USD_QUANTUM)
        tokens_job = jid in token_jobs
        rows.append(
            UsageRollup(
                bucket=MINUTE, start=from_us(minute), job_id=jid, team_id=team_id, project_id=project_id,
                priority_class_id=pc_id, gpu_type_id=gpu_type_id, capacity_tier=tier, borrowed=borrowed,
                allocated_gpu_seconds=cell.allocated, active_gpu_seconds=active,
                productive_gpu_seconds=productive_of(active, cell.retained_progress(unit or "steps"), rate),
                reported_gpu_seconds=cell.reported, lost_gpu_seconds=cell.lost, steps=cell.steps,
                useful_tokens=cell.useful_tokens, retained_steps=cell.retained_steps,
                retained_tokens=cell.retained_tokens, cost_usd=cost,
                lost_cost_usd=cell.lost_cost_usd.quantize(USD_QUANTUM),
                token_gpu_seconds=cell.allocated if tokens_job else Decimal(0),
                token_cost_usd=cost if tokens_job else Decimal(0),
            )
        )
    UsageRollup.objects.bulk_create(rows, batch_size=2000)
    touched.rows_written += len(rows)
    touched.minutes(start, end, job_id)
    return derivation


def _token_jobs(derivation: Derivation, job_ids: set[int], touched: _Touched) -> set[int]:
    """The jobs of a derivation that have reported useful tokens: in these minutes, to their
    agent (`Job.useful_tokens`) or in minutes rolled before. All their GPU time is token work
    (the numerator of $ per useful token). A job whose first tokens come after minutes already
    rolled (start-up, a model still loading) has those rows counted as token work now, at every
    granularity in place, and the group rows of their days re-summed."""
    found = {key[1] for key, cell in derivation.cells.items() if cell.useful_tokens > 0}
    rest = job_ids - found
    if rest:
        found |= set(Job.objects.filter(pk__in=rest, useful_tokens__gt=0).values_list("pk", flat=True))
        rest = job_ids - found
    if rest:
        found |= set(UsageRollup.objects.filter(bucket=DAY, job_id__in=rest, useful_tokens__gt=0)
                     .values_list("job_id", flat=True).distinct())
    if found:
        untagged = list(UsageRollup.objects.filter(bucket=DAY, job_id__in=found,
                                                   allocated_gpu_seconds__gt=F("token_gpu_seconds"))
                        .values_list("job_id", "start").distinct())
        if untagged:
            UsageRollup.objects.filter(job_id__in={j for j, _ in untagged}).exclude(
                token_gpu_seconds=F("allocated_gpu_seconds"), token_cost_usd=F("cost_usd"),
            ).update(token_gpu_seconds=F("allocated_gpu_seconds"), token_cost_usd=F("cost_usd"))
            touched.group_days.update(day for _, day in untagged)
    return found


@dataclass(frozen=True)
class _NodeSpan:
    """A node's GPUs in the fleet over [joined_us, left_us) (None: before or after the window)."""

    gpu_type_id: int
    tier: str
    gpus: int
    joined_us: int | None
    left_us: int | None


_NODE_JOINS = Q(kind=EventKind.NODE_REGISTERED, reason="Registered") | Q(kind=EventKind.CONFIG_CHANGED,
                                                                          reason="NodeCreated")


# Retiring a node takes it out of the fleet, returning it to service brings it back
# (services/nodes.py records both as node.state events with these reasons).
_RETIRED, _RETURNED = RETIRED_REASON, RETURNED_REASON


def _retirements(start: datetime) -> dict[int, list[tuple[int | None, int | None]]]:
    """When each node that was retired (now, or at some instant from `start` on) was in the
    fleet from `start` on: [(from_us, until_us)], None for before or after the window; an empty
    list for a node retired before `start` and not returned since. A node missing here was in
    the fleet throughout, as far as retirement goes (joins and deletions are _fleet_spans')."""
    flips: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for node_id, data, reason, at in Event.objects.filter(
        kind=EventKind.NODE_STATE, reason__in=(_RETIRED, _RETURNED), created_at__gt=start
    ).order_by("created_at", "id").values_list("node_id", "data", "reason", "created_at"):
        # A deleted node's events lose their node_id; their data keep it.
        key = node_id if node_id is not None else (data or {}).get("node_id")
        if key is not None:
            flips[int(key)].append((reason, to_us(at)))
    out: dict[int, list[tuple[int | None, int | None]]] = {}
    for node_id, retired_at in Node.objects.filter(retired_at__isnull=False).values_list("id", "retired_at"):
        if node_id not in flips:
            out[node_id] = [] if retired_at <= start else [(None, to_us(retired_at))]
    for node_id, seen in flips.items():
        inside = seen[0][0] == _RETIRED  # in the fleet until its first retirement since `start`
        since: int | None = None
        spans: list[tuple[int | None, int | None]] = []
        for reason, at in seen:
            if reason == _RETIRED and inside:
                spans.append((since, at))
                inside = False
            elif reason == _RETURNED and not inside:
                since, inside = at, True
        if inside:
            spans.append((since, None))
        out[node_id] = spans
    return out


def _within(joined: int | None, left: int | None, spans: list[tuple[int | None, int | None]] | None,
            ) -> list[tuple[int | None, int | None]]:
    """[joined, left) cut to the spans a node was not retired in (None: no retirement)."""
    if spans is None:
        return [(joined, left)]
    cut = []
    for a, b in spans:
        lo = a if joined is None else (joined if a is None else max(a, joined))
        hi = b if left is None else (left if b is None else min(b, left))
        if lo is None or hi is None or hi > lo:
            cut.append((lo, hi))
    return cut


def _fleet_spans(start: datetime) -> list[_NodeSpan]:
    """The nodes in the fleet at some instant from `start` on, each with when it joined (its
    agent's first registration, or its creation through the API or the admin) and, for a node
    deleted since, when it left. A node without such an event since `start` was there before.
    A retired node is out of the fleet from its retirement (``retired_at``) until it is
    returned to service, if ever: its capacity before that still counts."""
    joined: dict[int, int] = {}
    for node_id, data, at in Event.objects.filter(_NODE_JOINS, created_at__gt=start).values_list(
        "node_id", "data", "created_at"
    ):
        # A deleted node's events lose their node_id; its audit record keeps its id.
        key = node_id if node_id is not None else ((data or {}).get("after") or {}).get("id")
        if key is not None:
            joined[key] = min(joined.get(key, to_us(at)), to_us(at))
    retirements = _retirements(start)
    spans = [
        _NodeSpan(gpu_type_id, tier, gpus, a, b)
        for node_id, gpu_type_id, tier, gpus in Node.objects.values_list("id", "gpu_type_id", "capacity_tier",
                                                                         "gpu_count")
        for a, b in _within(joined.get(node_id), None, retirements.get(node_id))
    ]
    deleted = list(Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="NodeDeleted", created_at__gt=start)
                   .values_list("data", "created_at"))
    if deleted:
        type_ids = dict(GpuType.objects.values_list("name", "id"))
        for data, at in deleted:
            before = (data or {}).get("before") or {}
            gpu_type_id = type_ids.get(before.get("gpu_type"))
            if gpu_type_id is None or not before.get("gpu_count"):
                continue  # its GPU type was renamed or deleted since: nothing left to price it by
            spans.extend(_NodeSpan(gpu_type_id, str(before.get("capacity_tier")), int(before["gpu_count"]), a, b)
                         for a, b in _within(joined.get(before.get("id")), to_us(at),
                                             retirements.get(before.get("id"))))
    return spans


def _store_capacity(start: datetime, end: datetime, prices: PriceBook, touched: _Touched) -> None:
    """The fleet's GPUs per (type, tier) for each minute of [start, end), priced.

    Capacity is the nodes in the fleet, each from when it joined (registered or was created) and,
    if deleted, until it was; it is written for the trailing minutes only and kept as it was when
    late news re-derives older usage. (Before, every node registered when the minute was rolled
    counted for all of it: nodes registered at 23:20:24 appeared in the capacity from 23:15.)"""
    whole: dict[tuple[int, str], int] = defaultdict(int)
    partial: list[_NodeSpan] = []
    for span in _fleet_spans(start):
        if span.joined_us is None and span.left_us is None:
            whole[(span.gpu_type_id, span.tier)] += span.gpus
        else:
            partial.append(span)
    rows = []
    s_us, e_us = to_us(start), to_us(end)
    for minute in _slots(start, end, MINUTE):
        m0 = max(to_us(minute), s_us)
        m1 = min(to_us(minute) + MINUTE_US, e_us)
        gpu_us: dict[tuple[int, str], int] = defaultdict(int)
        cost: dict[tuple[int, str], Decimal] = defaultdict(Decimal)
        for (gpu_type_id, tier), gpus in whole.items():
            gpu_us[(gpu_type_id, tier)] += gpus * (m1 - m0)
            cost[(gpu_type_id, tier)] += prices.cost(gpu_type_id, tier, m0, m1, gpus)
        for span in partial:
            a = max(m0, span.joined_us if span.joined_us is not None else m0)
            b = min(m1, span.left_us if span.left_us is not None else m1)
            if b > a:
                gpu_us[(span.gpu_type_id, span.tier)] += span.gpus * (b - a)
                cost[(span.gpu_type_id, span.tier)] += prices.cost(span.gpu_type_id, span.tier, a, b, span.gpus)
        for (gpu_type_id, tier), held_us in gpu_us.items():
            rows.append(
                FleetRollup(
                    bucket=MINUTE, start=minute, gpu_type_id=gpu_type_id, capacity_tier=tier,
                    capacity_gpu_seconds=Decimal(held_us).scaleb(-6),
                    capacity_cost_usd=cost[(gpu_type_id, tier)].quantize(USD_QUANTUM),
                )
            )
    FleetRollup.objects.filter(in_bucket(MINUTE, start, end)).update(
        capacity_gpu_seconds=0, capacity_cost_usd=0
    )
    _upsert(FleetRollup, rows, ["bucket", "start", "gpu_type", "capacity_tier"], list(_CAPACITY_FIELDS))
    touched.rows_written += len(rows)


def _store_idle_guarantees(start: datetime, end: datetime, prices: PriceBook, touched: _Touched) -> None:
    """Each team's guarantee per GPU type, minute by minute: used, lent, idle (exact sweep).

    The sweep sees the fleet the capacity rows count (`_fleet_spans`: each node from when it
    joined, until it was deleted or retired, to the microsecond), and a guarantee counts only
    while the fleet has GPUs of its type: with none there is nothing reserved to sit idle. Before
    (2 Dec), guarantees counted from the start of the first minute rolled, before any node had
    registered: the demo's first 20 seconds read 0.52 idle reserved H100 GPU-hours ($1.31) that
    no capacity, and no `__idle__`, had."""
    guarantees = [
        Guarantee(team_id=t, gpu_type_id=g, nominal_gpus=n, lending_limit=lend, cohort_id=c)
        for t, g, n, lend, c in Quota.objects.values_list(
            "team_id", "gpu_type_id", "nominal_gpus", "lending_limit", "team__cohort_id"
        )
    ]
    # The fleet's GPUs per type, as _store_capacity counts them: nodes there throughout, and
    # nodes that joined or left (deleted, retired, returned) inside the window.
    steady: dict[int, int] = defaultdict(int)
    moving: list[_NodeSpan] = []
    for node in _fleet_spans(start):
        if node.joined_us is None and node.left_us is None:
            steady[node.gpu_type_id] += node.gpus
        else:
            moving.append(node)
    spans, teams = _spans(start, end, None)
    s_us, e_us = to_us(start), to_us(end)
    holdings = [
        Holding(teams[s.job_id], s.gpu_type_id, s.gpus, max(s.start_us, s_us), min(s.end_us or e_us, e_us))
        for s in spans
    ]
    rows = []
    for minute in _slots(start, end, MINUTE):
        m0, m1 = max(to_us(minute), s_us), min(to_us(minute) + MINUTE_US, e_us)
        here = [h for h in holdings if h.start_us < m1 and h.end_us > m0]
        # Pieces of the minute with a constant fleet: cut where a node joins or leaves.
        cuts = sorted({m0, m1} | {t for n in moving for t in (n.joined_us, n.left_us)
                                  if t is not None and m0 < t < m1})
        cells = {(g.team_id, g.gpu_type_id): QuotaCell() for g in guarantees}
        for a, b in zip(cuts, cuts[1:], strict=False):
            capacity = steady
            if moving:
                capacity = defaultdict(int, steady)
                for n in moving:
                    if (n.joined_us is None or n.joined_us <= a) and (n.left_us is None or n.left_us >= b):
                        capacity[n.gpu_type_id] += n.gpus
            backed = [g for g in guarantees if capacity.get(g.gpu_type_id, 0) > 0]
            if not backed:
                continue
            piece = here if (a, b) == (m0, m1) else [h for h in here if h.start_us < b and h.end_us > a]
            for key, cell in idle_guarantees(a, b, backed, piece, capacity, prices).items():
                into = cells[key]
                into.nominal_gpu_us += cell.nominal_gpu_us
                into.used_gpu_us += cell.used_gpu_us
                into.borrowed_gpu_us += cell.borrowed_gpu_us
                into.lent_gpu_us += cell.lent_gpu_us
                into.idle_cost_usd += cell.idle_cost_usd
        for (team_id, gpu_type_id), cell in cells.items():
            nominal, used, borrowed, lent, idle = cell.parts()
            rows.append(
                QuotaRollup(
                    bucket=MINUTE, start=minute, team_id=team_id, gpu_type_id=gpu_type_id, nominal_gpu_seconds=nominal,
                    used_gpu_seconds=used, borrowed_gpu_seconds=borrowed, lent_gpu_seconds=lent,
                    idle_gpu_seconds=idle, idle_cost_usd=cell.idle_cost_usd.quantize(USD_QUANTUM),
                )
            )
    QuotaRollup.objects.filter(in_bucket(MINUTE, start, end)).delete()
    QuotaRollup.objects.bulk_create(rows, batch_size=2000)
    touched.rows_written += len(rows)
    touched.quota_hours.update(_slots(start, end, HOUR))


def _upsert(model: Any, rows: Sequence[Any], unique: list[str], update: list[str]) -> None:
    if rows:
        model.objects.bulk_create(rows, batch_size=2000, update_conflicts=True, unique_fields=unique,
                                  update_fields=update)


# ------------------------------------------------------------------------- fault-free rates


def _update_rates(job_minutes: dict[int, dict[int, JobMinute]], now: datetime, horizon: datetime) -> set[int]:
    """Raise each job's fault-free rate to its best new steady window; until a job has one, use
    its average so far. Returns the jobs whose rate (or unit) changed."""
    if not job_minutes:
        return set()
    existing = {r.job_id: r for r in JobProgressRate.objects.filter(job_id__in=list(job_minutes))}
    changed: set[int] = set()
    unsteady: list[int] = []
    for job_id, minutes in job_minutes.items():
        current = existing.get(job_id)
        steps = sum(m.steps for m in minutes.values())
        tokens = sum(m.useful_tokens for m in minutes.values())
        unit = progress_unit(steps, tokens, current.unit if current else None)
        if unit is None:
            continue
        window = best_steady_window(minutes, unit)
        unit_changed = current is not None and current.unit != unit
        if current is not None and current.steady and not unit_changed:
            if window is None or window.per_active_gpu_second <= current.per_active_gpu_second:
                continue
        if window is None:
            unsteady.append(job_id)
            continue
        _save_rate(job_id, unit, window.per_active_gpu_second, True, from_us(window.start_us),
                   from_us(window.end_us), now, current)
        changed.add(job_id)
    for job_id, unit, rate in _average_rates(unsteady, existing, horizon):
        current = existing.get(job_id)
        # An average moves a little with every report; rewrite the job's rows only when it
        # moves by more than UNSTEADY_RATE_TOLERANCE (a steady window replaces it anyway).
        if current is not None and current.unit == unit and (
            abs(rate - current.per_active_gpu_second) <= UNSTEADY_RATE_TOLERANCE * current.per_active_gpu_second
        ):
            continue
        _save_rate(job_id, unit, rate, False, None, None, now, current)
        changed.add(job_id)
    return changed


def _average_rates(
    job_ids: list[int], existing: dict[int, JobProgressRate], horizon: datetime
) -> list[tuple[int, str, float]]:
    if not job_ids:
        return []
    out = []
    totals = (
        UsageRollup.objects.filter(bucket=MINUTE, start__gte=horizon, job_id__in=job_ids)
        .values("job_id")
        .annotate(steps=Sum("steps"), tokens=Sum("useful_tokens"), active=Sum("active_gpu_seconds"))
    )
    for t in totals:
        current = existing.get(t["job_id"])
        unit = progress_unit(t["steps"] or 0.0, t["tokens"] or 0.0, current.unit if current else None)
        active = float(t["active"] or 0)
        progress = (t["steps"] if unit == "steps" else t["tokens"]) or 0.0
        if unit is not None and active > 0 and progress > 0:
            out.append((t["job_id"], unit, progress / active))
    return out


def _save_rate(job_id: int, unit: str, rate: float, steady: bool, w0: datetime | None, w1: datetime | None,
               now: datetime, current: JobProgressRate | None) -> None:
    JobProgressRate.objects.update_or_create(
        job_id=job_id,
        defaults={"unit": unit, "per_active_gpu_second": rate, "steady": steady, "window_start": w0,
                  "window_end": w1, "updated_at": now},
    )
    log.debug("fault-free rate", job=job_id, unit=unit, rate=rate, steady=steady,
              previous=current.per_active_gpu_second if current else None)


def _reprice_productive(job_id: int, horizon: datetime, touched: _Touched) -> None:
    """A job's rate moved: recompute its productive tier on every minute row still kept, in one
    UPDATE: productive = min(active, round(retained progress ÷ rate, µs)).

    Hours before the raw-sample horizon keep the productive figure they were summed with (their
    minutes are gone); see docs/accounting.md, "Retention"."""
    rate = JobProgressRate.objects.get(job_id=job_id)
    rows = UsageRollup.objects.filter(bucket=MINUTE, job_id=job_id, start__gte=horizon)
    retained = F("retained_steps") if rate.unit == "steps" else F("retained_tokens")
    rows.update(productive_gpu_seconds=Least(
        F("active_gpu_seconds"),
        Round(Cast(retained / Value(rate.per_active_gpu_second), DecimalField(max_digits=30, decimal_places=9)), 6),
    ))
    span = rows.aggregate(first=Min("start"), last=Max("start"))
    if span["first"] is not None:
        touched.minutes(span["first"], span["last"] + timedelta(minutes=1), job_id)


# ------------------------------------------------------------------------------ re-summing


def _resum(touched: _Touched) -> None:
    """Minutes → hours → days, for every cell a run touched (hours and days are plain sums)."""
    # Every hour first, then the days they make up (a day must never sum stale hours).
    _resum_jobs(HOUR, touched.all_jobs_hours, None)
    for job_id, hours in touched.job_hours.items():
        _resum_jobs(HOUR, hours - touched.all_jobs_hours, job_id)
    days_all = {floor_to(h, DAY) for h in touched.all_jobs_hours} | touched.days_from_hours
    _resum_jobs(DAY, days_all, None)
    days = set(days_all)
    for job_id, hours in touched.job_hours.items():
        job_days = {floor_to(h, DAY) for h in hours}
        _resum_jobs(DAY, job_days - days_all, job_id)
        days |= job_days
    _resum_groups(days | touched.group_days)
    for a, b in _merge_ranges(touched.fleet_minutes):
        _resum_fleet_usage(MINUTE, floor_to(a, MINUTE), b)
    _resum_fleet(HOUR, touched.fleet_hours)
    _resum_fleet(DAY, {floor_to(h, DAY) for h in touched.fleet_hours} | touched.days_from_hours)
    _resum_quota(HOUR, touched.quota_hours)
    _resum_quota(DAY, {floor_to(h, DAY) for h in touched.quota_hours} | touched.days_from_hours)


def _finer(bucket: int) -> int:
    return MINUTE if bucket == HOUR else HOUR


#: The longest range re-summed in one query: a price correction reaching a year back re-sums a
#: year of days, which in one piece would hold every job's day rows of the year in memory.
MAX_RESUM_RUN = timedelta(days=7)


def _runs(starts: Iterable[datetime], bucket: int) -> list[tuple[datetime, datetime]]:
    """Bucket starts as contiguous [first, end) ranges of at most MAX_RESUM_RUN (whole buckets),
    so each range is re-summed in one query."""
    step = timedelta(seconds=bucket)
    most = max(step, MAX_RESUM_RUN // step * step)
    out = []
    for a, b in _merge_ranges((s, s + step) for s in starts):
        while b - a > most:
            out.append((a, a + most))
            a += most
        out.append((a, b))
    return out


def _slot(bucket: int) -> Trunc:
    return Trunc("start", "hour" if bucket == HOUR else "day", tzinfo=UTC)


def _resum_jobs(bucket: int, starts: Iterable[datetime], job_id: int | None) -> None:
    for a, b in _runs(starts, bucket):
        source = UsageRollup.objects.filter(in_bucket(_finer(bucket), a, b))
        target = UsageRollup.objects.filter(in_bucket(bucket, a, b))
        if job_id is not None:
            source, target = source.filter(job_id=job_id), target.filter(job_id=job_id)
        summed = (*USAGE_SUM_FIELDS, *TOKEN_SUM_FIELDS)
        sums = source.annotate(slot=_slot(bucket)).values("slot", *_DIMENSIONS).annotate(
            **{f"s_{f}": Sum(f) for f in summed}
        )
        rows = [
            UsageRollup(bucket=bucket, start=s["slot"], **{d: s[d] for d in _DIMENSIONS},
                        **{f: s[f"s_{f}"] for f in summed})
            for s in sums
        ]
        target.delete()
        UsageRollup.objects.bulk_create(rows, batch_size=2000)


def floor_month(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month(month: datetime) -> datetime:
    return month.replace(year=month.year + (month.month == 12), month=month.month % 12 + 1)


def _resum_groups(days: set[datetime]) -> None:
    """The job-less day rows of the touched days (sums of every job's day rows), then the
    calendar months those days belong to (sums of their day rows)."""
    usage = [*USAGE_SUM_FIELDS, *TOKEN_SUM_FIELDS]
    for a, b in _runs(days, DAY):
        sums = (
            UsageRollup.objects.filter(in_bucket(DAY, a, b))
            .values("start", *_GROUP_DIMENSIONS).annotate(**{f"s_{f}": Sum(f) for f in usage})
        )
        rows = [GroupRollup(bucket=DAY, start=s["start"], **{d: s[d] for d in _GROUP_DIMENSIONS},
                            **{f: s[f"s_{f}"] for f in usage}) for s in sums]
        GroupRollup.objects.filter(in_bucket(DAY, a, b)).delete()
        GroupRollup.objects.bulk_create(rows, batch_size=2000)
    for month in sorted({floor_month(d) for d in days}):
        sums = (
            GroupRollup.objects.filter(in_bucket(DAY, month, next_month(month)))
            .values(*_GROUP_DIMENSIONS).annotate(**{f"s_{f}": Sum(f) for f in usage})
        )
        rows = [GroupRollup(bucket=MONTH, start=month, **{d: s[d] for d in _GROUP_DIMENSIONS},
                            **{f: s[f"s_{f}"] for f in usage}) for s in sums]
        GroupRollup.objects.filter(bucket=MONTH, start=month).delete()
        GroupRollup.objects.bulk_create(rows, batch_size=2000)


def _resum_fleet_usage(bucket: int, start: datetime, end: datetime) -> None:
    """The usage columns of the fleet's `bucket` rows over [start, end): sums of the jobs' rows
    of the same bucket (minutes as they are rolled; hours and days whose finer rows are gone
    after a price correction repriced the jobs' rows in place)."""
    usage = [f for f in USAGE_SUM_FIELDS]
    FleetRollup.objects.filter(in_bucket(bucket, start, end)).update(**{f: 0 for f in usage})
    sums = (
        UsageRollup.objects.filter(in_bucket(bucket, start, end))
        .values("start", "gpu_type_id", "capacity_tier")
        .annotate(**{f"s_{f}": Sum(f) for f in usage})
    )
    rows = [
        FleetRollup(bucket=bucket, start=s["start"], gpu_type_id=s["gpu_type_id"], capacity_tier=s["capacity_tier"],
                    **{f: s[f"s_{f}"] for f in usage})
        for s in sums
    ]
    _upsert(FleetRollup, rows, ["bucket", "start", "gpu_type", "capacity_tier"], usage)


def _resum_fleet(bucket: int, starts: Iterable[datetime]) -> None:
    _resum_coarser(FleetRollup, ("gpu_type_id", "capacity_tier"), [*USAGE_SUM_FIELDS, *_CAPACITY_FIELDS], bucket, starts)


def _resum_quota(bucket: int, starts: Iterable[datetime]) -> None:
    _resum_coarser(QuotaRollup, ("team_id", "gpu_type_id"), list(_QUOTA_FIELDS), bucket, starts)


def _resum_coarser(
    model: type[FleetRollup] | type[QuotaRollup], keys: tuple[str, str], fields: list[str], bucket: int,
    starts: Iterable[datetime],
) -> None:
    """Rebuild the `bucket` rows over `starts` as the sums of the next finer bucket's rows."""
    for a, b in _runs(starts, bucket):
        sums = (
            model.objects.filter(in_bucket(_finer(bucket), a, b))
            .annotate(slot=_slot(bucket)).values("slot", *keys)
            .annotate(**{f"s_{f}": Sum(f) for f in fields})
        )
        rows = [
            model(bucket=bucket, start=s["slot"], **{k: s[k] for k in keys}, **{f: s[f"s_{f}"] for f in fields})
            for s in sums
        ]
        model.objects.filter(in_bucket(bucket, a, b)).delete()
        model.objects.bulk_create(rows, batch_size=2000)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ price corrections


def reprice(since: datetime, now: datetime, keys: Iterable[tuple[int, str]] | None = None) -> int:
    """A price rate was added, corrected, moved or removed with effect from `since`: rewrite
    the cost of every rollup from there on at the rates now in the table, as if they had been
    known when those minutes were rolled (cost = GPU-seconds × the rate in force then).

    Minutes priced by one rate throughout are rewritten in place (GPU-seconds × rate), for jobs,
    capacity and idle guarantees; a minute a rate starts inside is re-derived from the raw rows
    (split at the instant, as the rollup does). Before the earliest minute kept (the raw
    retention), the hour rows there — and the day rows where the hours are gone too — are
    rewritten the same way wherever one rate prices the whole bucket; a bucket a rate starts
    inside cannot be split without its finer rows, keeps the price it had and is logged
    (`_reprice_before_minutes`). Hours, days and the group rows are then re-summed.
    `keys`: the (GPU type, capacity tier) pairs whose rates changed (None: all); only their
    rows, and the idle guarantees of their GPU types, are rewritten. Returns the rollup rows
    rewritten. Holds the cursor lock (waits for a running rollup). Runs as the Celery task
    `qm.accounting.reprice`, queued when a rate is saved (controlplane/signals.py)."""
    only = {(int(g), str(t)) for g, t in keys} if keys is not None else None
    with transaction.atomic():
        cursor = AccountingCursor.objects.select_for_update().filter(name=CURSOR_NAME).first()
        if cursor is None or cursor.rolled_until is None or since >= cursor.rolled_until:
            return 0
        kept = [m.objects.filter(bucket=MINUTE).aggregate(t=Min("start"))["t"]
                for m in (UsageRollup, FleetRollup, QuotaRollup)]
        first_kept = min((t for t in kept if t is not None), default=None)
        prices = price_book()
        touched = _Touched()
        older = _Repriced()
        clock = [time.perf_counter()]
        minutes_from = first_kept if first_kept is not None else cursor.rolled_until
        if floor_to(since, MINUTE) < minutes_from:
            older = _reprice_before_minutes(since, minutes_from, prices, only, touched,
                                            _changed_until(since, prices, only))
        clock.append(time.perf_counter())
        rows = 0
        start = minutes_from
        if first_kept is not None:
            start, end = max(floor_to(since, MINUTE), first_kept), cursor.rolled_until
            rows = _reprice_minutes(start, end, prices, only, touched)
        clock.append(time.perf_counter())
        _resum(touched)
        clock.append(time.perf_counter())
    log.info("repriced", since=since.isoformat(), minutes_from=start.isoformat(),
             minute_rows=rows + touched.rows_written, hour_rows=older.hour_rows, day_rows=older.day_rows,
             kept_buckets=older.kept, before_minutes_s=round(clock[1] - clock[0], 2),
             minutes_s=round(clock[2] - clock[1], 2), resum_s=round(clock[3] - clock[2], 2))
    return rows + touched.rows_written + older.hour_rows + older.day_rows


def _reprice_minutes(start: datetime, end: datetime, prices: PriceBook, only: set[tuple[int, str]] | None,
                     touched: _Touched) -> int:
    """Reprice the minute rows of [start, end) (all kept): in place where one rate prices the
    whole minute, re-derived from the raw rows where a rate starts inside it. Marks the hours
    and days above them for re-summing; returns the rows rewritten in place."""
    s_us, e_us = to_us(start), to_us(end)
    # Minutes a rate starts inside (not on the minute): re-derived, not rewritten in place.
    cut = sorted({from_us(t // MINUTE_US * MINUTE_US) for key in prices.keys() for t in prices.starts(key)
                  if s_us < t < e_us and t % MINUTE_US})
    rows = 0
    for model in (UsageRollup, FleetRollup):
        cells = set(model.objects.filter(bucket=MINUTE, start__gte=start, start__lt=end)
                    .values_list("gpu_type_id", "capacity_tier").distinct())
        for gpu_type_id, tier in cells:
            if only is not None and (gpu_type_id, tier) not in only:
                continue
            for a, b, rate in _uniform_pieces(prices.segments(gpu_type_id, tier, s_us, e_us), e_us):
                rows += model.objects.filter(
                    bucket=MINUTE, start__gte=a, start__lt=b, gpu_type_id=gpu_type_id, capacity_tier=tier,
                ).exclude(start__in=cut).update(**_priced(model, rate))
    for gpu_type_id in set(QuotaRollup.objects.filter(bucket=MINUTE, start__gte=start, start__lt=end)
                           .values_list("gpu_type_id", flat=True).distinct()):
        if only is not None and gpu_type_id not in {g for g, _ in only}:
            continue
        for a, b, rate in _uniform_pieces(_reserved_segments(prices, gpu_type_id, s_us, e_us), e_us):
            rows += QuotaRollup.objects.filter(
                bucket=MINUTE, start__gte=a, start__lt=b, gpu_type_id=gpu_type_id,
            ).exclude(start__in=cut).update(**_priced(QuotaRollup, rate))
    for minute in cut:
        m1 = min(minute + timedelta(minutes=1), end)
        _derive_and_store(minute, m1, None, prices, touched)
        _reprice_capacity_minute(minute, m1, prices)
        _store_idle_guarantees(minute, m1, prices, touched)
    touched.minutes(start, end, None)
    touched.quota_hours.update(_slots(start, end, HOUR))
    return rows


_PER_GPU_SECOND = Decimal(3600)


def _priced(model: Any, rate: Decimal | None) -> dict[str, Any]:
    """The UPDATE that prices `model`'s rows at `rate` $/GPU-hour (None: before the first rate,
    nothing): jobs' cost and lost cost, the fleet's capacity cost, a guarantee's idle cost."""
    per_s = (rate or Decimal(0)) / _PER_GPU_SECOND
    if model is FleetRollup:
        return {"capacity_cost_usd": F("capacity_gpu_seconds") * per_s}
    if model is QuotaRollup:
        return {"idle_cost_usd": F("idle_gpu_seconds") * per_s}
    return {"cost_usd": F("allocated_gpu_seconds") * per_s, "lost_cost_usd": F("lost_gpu_seconds") * per_s,
            "token_cost_usd": F("token_gpu_seconds") * per_s}


@dataclass
class _Repriced:
    """What `_reprice_before_minutes` rewrote, and how many buckets kept their price."""

    hour_rows: int = 0
    day_rows: int = 0
    kept: int = 0


_BUCKET_NAMES = {HOUR: "hour", DAY: "day"}


def _changed_until(since: datetime, prices: PriceBook, only: set[tuple[int, str]] | None) -> datetime | None:
    """Where the prices a change (from `since`, of one GPU type and tier) can have moved end:
    the next rate of that type and tier after `since` — a rate added, corrected, removed or
    moved within one type and tier changes prices only up to there; None: no end known (several
    types or tiers, or a call for all of them). Rows past it are repriced all the same (they come
    out as they were); only the warnings about buckets kept at their price are limited to it."""
    if only is None or len(only) != 1:
        return None
    (key,) = only
    later = [t for t in prices.starts(key) if t > to_us(since)]
    return from_us(later[0]) if later else None


def _reprice_before_minutes(since: datetime, minutes_from: datetime, prices: PriceBook,
                            only: set[tuple[int, str]] | None, touched: _Touched,
                            changed_until: datetime | None = None) -> _Repriced:
    """A price change reaching before the earliest minute kept: reprice the coarser rows that
    exist there. Hours wholly before the minutes kept (hour retention, 400 days), then days
    before the earliest hour kept (days are kept for ever). A bucket one rate prices
    throughout is rewritten in place from its GPU-seconds — exact, as its minutes were priced
    at that one rate; a bucket a rate starts inside keeps its old price and is logged (its
    split needs the finer rows retention dropped). The fleet's usage columns of those buckets
    are re-summed from the jobs' rows at once, the days above repriced hours and the group rows
    of every day touched by `_resum` (marked in `touched`)."""
    done = _Repriced()
    end = minutes_from
    # hours before the minutes kept, then days before the hours kept
    for bucket, days_to_resum in ((HOUR, touched.days_from_hours), (DAY, touched.group_days)):
        end = floor_to(end, bucket)
        firsts = [m.objects.filter(bucket=bucket, start__lt=end).aggregate(t=Min("start"))["t"]
                  for m in (UsageRollup, FleetRollup, QuotaRollup)]
        first = min((t for t in firsts if t is not None), default=end)
        start = max(floor_to(since, bucket), first)
        if start < end:
            rows, kept, spans = _reprice_buckets(bucket, start, end, prices, only, changed_until)
            if bucket == HOUR:
                done.hour_rows = rows
            else:
                done.day_rows = rows
            done.kept += kept
            for a, b in spans:
                _resum_fleet_usage(bucket, a, b)
                days_to_resum.update(_slots(a, b, DAY))
        end = first
    return done


def _reprice_buckets(bucket: int, start: datetime, end: datetime, prices: PriceBook,
                     only: set[tuple[int, str]] | None, changed_until: datetime | None = None,
                     ) -> tuple[int, int, list[tuple[datetime, datetime]]]:
    """Reprice the `bucket` rows (hours or days, both ends aligned) of [start, end) in place,
    one UPDATE per table, (GPU type, tier) and stretch of whole buckets under one rate. Returns
    the rows rewritten, the buckets that kept their old price (each logged) and the stretches
    where rows were rewritten (to re-sum above). A bucket a rate starts inside that begins at or
    after `changed_until` keeps its price silently: the change did not reach it, so the split
    it was rolled with still holds."""
    s_us, e_us = to_us(start), to_us(end)
    rows = 0
    spans: list[tuple[datetime, datetime]] = []

    def update(qs: Any, model: Any, a: datetime, b: datetime, rate: Decimal | None) -> int:
        n: int = qs.update(**_priced(model, rate))
        if n:
            spans.append((a, b))
        return n

    # (bucket start, GPU type, tier) → (tables, instants where a rate starts inside the bucket)
    kept: dict[tuple[datetime, int, str], tuple[set[str], set[datetime]]] = {}
    cells = set(FleetRollup.objects.filter(in_bucket(bucket, start, end))
                .values_list("gpu_type_id", "capacity_tier").distinct())
    for gpu_type_id, tier in sorted(cells):
        if only is not None and (gpu_type_id, tier) not in only:
            continue
        pieces, cuts = _whole_buckets(prices.segments(gpu_type_id, tier, s_us, e_us), bucket)
        for model in (UsageRollup, FleetRollup):
            for a, b, rate in pieces:
                rows += update(model.objects.filter(in_bucket(bucket, a, b), gpu_type_id=gpu_type_id,
                                                    capacity_tier=tier), model, a, b, rate)
            for at, boundary in cuts:
                if changed_until is not None and at >= changed_until:
                    continue
                if model.objects.filter(bucket=bucket, start=at, gpu_type_id=gpu_type_id,
                                        capacity_tier=tier).exists():
                    entry = kept.setdefault((at, gpu_type_id, tier), (set(), set()))
                    entry[0].add(model.__name__)
                    entry[1].add(boundary)
    touched_types = {g for g, _ in only} if only is not None else None
    for gpu_type_id in sorted(set(QuotaRollup.objects.filter(in_bucket(bucket, start, end))
                                  .values_list("gpu_type_id", flat=True).distinct())):
        if touched_types is not None and gpu_type_id not in touched_types:
            continue
        pieces, cuts = _whole_buckets(_reserved_segments(prices, gpu_type_id, s_us, e_us), bucket)
        for a, b, rate in pieces:
            rows += update(QuotaRollup.objects.filter(in_bucket(bucket, a, b), gpu_type_id=gpu_type_id),
                           QuotaRollup, a, b, rate)
        for at, boundary in cuts:
            if changed_until is not None and at >= changed_until:
                continue
            if not QuotaRollup.objects.filter(bucket=bucket, start=at, gpu_type_id=gpu_type_id).exists():
                continue
            b_us = to_us(boundary)
            # the idle guarantee's price follows the reserved rate rule: name the tiers pricing
            # it on either side of the change
            for tier in {prices.reserved_rate_key(gpu_type_id, b_us - 1), prices.reserved_rate_key(gpu_type_id, b_us)}:
                if tier is not None:
                    entry = kept.setdefault((at, gpu_type_id, tier), (set(), set()))
                    entry[0].add(QuotaRollup.__name__)
                    entry[1].add(boundary)
    if kept:
        from controlplane.models import GpuType

        names = dict(GpuType.objects.filter(pk__in={g for _, g, _ in kept}).values_list("pk", "name"))
        for (at, gpu_type_id, tier), (tables, boundaries) in sorted(kept.items()):
            log.warning(
                "price change inside a rollup bucket whose finer rows are gone: kept its old price",
                bucket=_BUCKET_NAMES[bucket], start=_iso(at), gpu_type=names.get(gpu_type_id, str(gpu_type_id)),
                gpu_type_id=gpu_type_id, capacity_tier=tier, tables=sorted(tables),
                rate_changes_at=[_iso(t) for t in sorted(boundaries)],
                why=f"a rate starts inside this {_BUCKET_NAMES[bucket]} and retention has dropped the finer rows "
                    "that would split it",
                hint="correct prices within the raw retention (QM_RAW_SAMPLE_RETENTION_DAYS) to have them "
                     "applied to the minute",
            )
    return rows, len({at for at, _, _ in kept}), _merge_ranges(spans)


def _whole_buckets(
    segments: Sequence[tuple[int, int, Decimal | None]], bucket: int
) -> tuple[list[tuple[datetime, datetime, Decimal | None]], list[tuple[datetime, datetime]]]:
    """Price segments of a bucket-aligned range as stretches of whole buckets under one rate,
    and the buckets a rate change cuts (bucket start, instant of the change). Neighbouring
    segments at the same rate are one: a rate that starts at the price before it cuts nothing."""
    merged: list[tuple[int, int, Decimal | None]] = []
    for a, b, rate in segments:
        if merged and merged[-1][2] == rate:
            merged[-1] = (merged[-1][0], b, rate)
        else:
            merged.append((a, b, rate))
    step = bucket * 1_000_000
    pieces = []
    for a, b, rate in merged:
        lo, hi = -(-a // step) * step, b // step * step
        if hi > lo:
            pieces.append((from_us(lo), from_us(hi), rate))
    cuts = [(from_us(a // step * step), from_us(a)) for a, _, _ in merged[1:] if a % step]
    return pieces, cuts


def _uniform_pieces(
    segments: Sequence[tuple[int, int, Decimal | None]], end_us: int
) -> list[tuple[datetime, datetime, Decimal | None]]:
    """Price segments as the minute starts wholly inside each (the last, partial minute of the
    rollup counts as inside when no rate starts in it)."""
    out = []
    for a, b, rate in segments:
        lo = -(-a // MINUTE_US) * MINUTE_US
        hi = -(-b // MINUTE_US) * MINUTE_US if b == end_us else b // MINUTE_US * MINUTE_US
        if hi > lo:
            out.append((from_us(lo), from_us(hi), rate))
    return out


def _reserved_segments(prices: PriceBook, gpu_type_id: int, start_us: int, end_us: int
                       ) -> list[tuple[int, int, Decimal | None]]:
    """[start, end) cut where the rate pricing an idle guarantee changes (reserved, else
    on-demand, else spot, as `usage_tiers._price_idle` picks it)."""
    starts = {t for tier in ("reserved", "on_demand", "spot") for t in prices.starts((gpu_type_id, tier))
              if start_us < t < end_us}
    bounds = [start_us, *sorted(starts), end_us]
    out = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        tier = prices.reserved_rate_key(gpu_type_id, a)
        out.append((a, b, prices.rate_at(gpu_type_id, tier, a) if tier is not None else None))
    return out


def _reprice_capacity_minute(start: datetime, end: datetime, prices: PriceBook) -> None:
    """The capacity cost of one minute a rate starts inside: its GPUs (constant over the
    minute) priced piece by piece."""
    seconds = Decimal((end - start).total_seconds())
    for row in FleetRollup.objects.filter(bucket=MINUTE, start=start):
        gpus = row.capacity_gpu_seconds / seconds
        row.capacity_cost_usd = prices.cost(row.gpu_type_id, row.capacity_tier, to_us(start), to_us(end),
                                            gpus).quantize(USD_QUANTUM)
        row.save(update_fields=["capacity_cost_usd"])


# ------------------------------------------------------------------------ /metrics counters


def _fold_cycle_durations(cursor: AccountingCursor) -> None:
    """Scheduling-cycle durations recorded in FleetSample → a cumulative histogram on the cursor."""
    bounds_ms = [b * 1000 for b in CYCLE_BUCKETS_S]
    agg = FleetSample.objects.filter(id__gt=cursor.last_fleet_sample_id).aggregate(
        top=Max("id"), n=Count("id"), total_ms=Sum("cycle_ms"),
        **{f"le{i}": Count("id", filter=Q(cycle_ms__lte=ms)) for i, ms in enumerate(bounds_ms)},
    )
    if not agg["n"]:
        return
    counts = list(cursor.cycle_bucket_counts or [0] * len(CYCLE_BUCKETS_S))
    counts += [0] * (len(CYCLE_BUCKETS_S) - len(counts))
    for i in range(len(CYCLE_BUCKETS_S)):
        counts[i] += agg[f"le{i}"]
    cursor.cycle_bucket_counts = counts
    cursor.cycle_count += agg["n"]
    cursor.cycle_sum_s += float(agg["total_ms"] or 0.0) / 1000
    cursor.last_fleet_sample_id = agg["top"]


#: The event-count key under which the evictions' lost GPU-seconds accumulate.
LOST_GPU_SECONDS_KEY = "lost_gpu_seconds"


def _fold_event_counts(cursor: AccountingCursor, top_event: int) -> None:
    """New job events → counts by kind, team, priority class and reason, and the GPU-seconds the
    evictions threw away, for /metrics."""
    new = Event.objects.filter(id__gt=cursor.last_counted_event_id, id__lte=top_event)
    rows = (
        new.filter(kind__in=COUNTED_EVENT_KINDS)
        .values("kind", "team__name", "job__priority_class__name", "reason")
        .annotate(n=Count("id"))
    )
    counts = dict(cursor.event_counts or {})
    for r in rows:
        key = "|".join([r["kind"], r["team__name"] or "", r["job__priority_class__name"] or "", r["reason"] or ""])
        counts[key] = counts.get(key, 0) + r["n"]
    lost = new.filter(kind__in=_REQUEUE_KINDS).aggregate(
        s=Sum(Cast(KeyTextTransform("lost_gpu_seconds", "data"), FloatField()))
    )["s"]
    if lost:
        counts[LOST_GPU_SECONDS_KEY] = counts.get(LOST_GPU_SECONDS_KEY, 0.0) + float(lost)
    cursor.event_counts = counts
    cursor.last_counted_event_id = max(cursor.last_counted_event_id, top_event)


# -------------------------------------------------------------------------------- retention


@dataclass(frozen=True)
class RetentionResult:
    ran: bool
    samples_deleted: int = 0
    minute_rows_deleted: int = 0
    hour_rows_deleted: int = 0


def apply_retention(now: datetime, batch: int = 50_000) -> RetentionResult:
    """Drop raw samples and minute rows older than the raw retention, and hour rows older than
    the hour retention, but only where coarser rollups already hold them: a sample goes only if
    its whole interval lies before the point the rollups are complete to.

    Holds the cursor lock, so it never runs beside a rollup (which re-sums hours from minutes).
    """
    with transaction.atomic():
        cursor = AccountingCursor.objects.select_for_update(skip_locked=True).filter(name=CURSOR_NAME).first()
        if cursor is None or cursor.rolled_until is None:
            return RetentionResult(ran=False)
        horizon = min(raw_horizon(now), floor_to(cursor.rolled_until, HOUR))
        samples = _delete_in_batches(UsageSample.objects.filter(ended_at__lte=horizon), batch)
        minutes = sum(
            _delete_in_batches(model.objects.filter(bucket=MINUTE, start__lt=horizon), batch)
            for model in (UsageRollup, FleetRollup, QuotaRollup)
        )
        old = min(hour_horizon(now), floor_to(cursor.rolled_until, DAY))
        hours = sum(
            _delete_in_batches(model.objects.filter(bucket=HOUR, start__lt=old), batch)
            for model in (UsageRollup, FleetRollup, QuotaRollup)
        )
        hours += _delete_in_batches(NodeActivityRollup.objects.filter(start__lt=old), batch)
    log.info("usage retention", samples=samples, minute_rows=minutes, hour_rows=hours, horizon=horizon.isoformat())
    return RetentionResult(ran=True, samples_deleted=samples, minute_rows_deleted=minutes, hour_rows_deleted=hours)


def _delete_in_batches(qs: Any, batch: int) -> int:
    total = 0
    while True:
        ids = list(qs.values_list("pk", flat=True)[:batch])
        if not ids:
            return total
        deleted, _ = qs.model.objects.filter(pk__in=ids).delete()
        total += deleted


# ============================================================================ reading: showback

GROUP_BY = ("team", "project", "job", "priority_class")
IDLE = "__idle__"
UNALLOCATED = "__unallocated__"
_HOUR_S = Decimal(3600)
_ZERO, _ONE = Decimal(0), Decimal(1)
_WINDOW_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: The longest window answered (ten years): a window is read as lists of bucket starts.
_MAX_WINDOW_S = 3660 * 86400


class AccountingQueryError(ValueError):
    """A showback or utilization request that cannot be answered; `field` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    label: str
    #: A relative window's length ("24h": 24 hours back from now). Showback reads it as that
    #: long, ending where the accounting has rolled whole minutes (`showback`).
    length: timedelta | None = None


def parse_window(text: str, now: datetime) -> Window:
    """A window as OpenCost spells it: a duration back from now ("30m", "24h", "7d", "2w"),
    "today", "yesterday", or two RFC 3339 instants "start,end"."""
    text = (text or "").strip()
    if not text:
        raise AccountingQueryError("window", "Give a window such as 7d, 24h, today or start,end (RFC 3339).")
    if text in ("today", "yesterday"):
        day = floor_to(now, DAY)
        return Window(day, now, text) if text == "today" else Window(day - timedelta(days=1), day, text)
    if "," in text:
        parts = text.split(",")
        if len(parts) != 2:
            raise AccountingQueryError("window", f"'{text}' is not a window: give two RFC 3339 instants, start,end.")
        first, second = parts
        start, end = _instant(first), _instant(second)
        if end <= start:
            # `start,start` is an empty window, not one that "ends before it starts".
            raise AccountingQueryError("window", f"The window ends ({second}) when it starts ({first}): it covers no "
                                       "time." if end == start else f"The window ends ({second}) before it starts "
                                       f"({first}).")
        if start >= now:
            raise AccountingQueryError("window", f"The window starts ({first}) after now ({_iso(now)}): nothing "
                                       "has been used there yet.")
        end = min(end, now)
        if (end - start).total_seconds() > _MAX_WINDOW_S:
            raise AccountingQueryError("window", f"'{text}' spans more than ten years; use a shorter window.")
        return Window(start, end, text)
    number, unit = text[:-1], text[-1:].lower()
    if unit not in _WINDOW_UNITS or not number.isdigit() or int(number) <= 0:
        raise AccountingQueryError(
            "window", f"'{text}' is not a window: use a positive whole number with m, h, d or w (7d), "
            "today, yesterday, or start,end in RFC 3339."
        )
    seconds = int(number) * _WINDOW_UNITS[unit]
    if seconds > _MAX_WINDOW_S:
        raise AccountingQueryError("window", f"'{text}' reaches back more than ten years; use a shorter window.")
    return Window(now - timedelta(seconds=seconds), now, text, timedelta(seconds=seconds))


#: An offset whose '+' a URL's query string turned into a space ("…T06:00:00 05:00").
_SPACED_OFFSET = re.compile(r"(T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) (\d{2}:?\d{2})$")


def _instant(text: str) -> datetime:
    # `curl '…?window=2026-11-30T06:00:00+05:00,…'` sends the '+' unencoded, and a query string
    # reads it as a space: the instant is unambiguous, so read the space as the '+' it was.
    text = _SPACED_OFFSET.sub(r"\1+\2", text.strip())
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise AccountingQueryError("window", f"'{text}' is not an RFC 3339 instant (2026-11-01T00:00:00Z).") from None
    if moment.tzinfo is None:
        raise AccountingQueryError("window", f"{no_zone_said(text, moment)}.")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise AccountingQueryError("window", f"'{text}' is outside the years 1 to 9999 in UTC.") from None


def month_window(text: str, now: datetime) -> Window:
    """A calendar month in UTC, "YYYY-MM"; a month still running ends now."""
    try:
        year, month = (int(p) for p in text.strip().split("-"))
        start = datetime(year, month, 1, tzinfo=UTC)
    except (ValueError, TypeError):
        raise AccountingQueryError("month", f"'{text}' is not a month: use YYYY-MM, such as 2026-11.") from None
    if start > now:
        raise AccountingQueryError("month", f"{text} has not started yet.")
    return Window(start, min(next_month(start), now), text)


@dataclass
class ShowbackEntry:
    """One group's figures over the window. GPU-seconds and money are exact decimals."""

    key: str
    name: str
    properties: dict[str, Any]
    allocated_gpu_seconds: Decimal = Decimal(0)
    active_gpu_seconds: Decimal = Decimal(0)
    productive_gpu_seconds: Decimal = Decimal(0)
    lost_gpu_seconds: Decimal = Decimal(0)
    cost_usd: Decimal = Decimal(0)
    lost_cost_usd: Decimal = Decimal(0)
    useful_tokens: float = 0.0
    idle_reserved_gpu_seconds: Decimal | None = None
    idle_reserved_usd: Decimal | None = None
    idle_gpu_seconds: Decimal = Decimal(0)
    #: What the jobs that reported useful tokens cost (the numerator of $ per useful token).
    token_cost_usd: Decimal = Decimal(0)

    def add(self, other: ShowbackEntry) -> None:
        self.allocated_gpu_seconds += other.allocated_gpu_seconds
        self.active_gpu_seconds += other.active_gpu_seconds
        self.productive_gpu_seconds += other.productive_gpu_seconds
        self.lost_gpu_seconds += other.lost_gpu_seconds
        self.cost_usd += other.cost_usd
        self.lost_cost_usd += other.lost_cost_usd
        self.useful_tokens += other.useful_tokens
        self.idle_gpu_seconds += other.idle_gpu_seconds
        self.token_cost_usd += other.token_cost_usd
        if other.idle_reserved_usd is not None:
            self.idle_reserved_usd = (self.idle_reserved_usd or Decimal(0)) + other.idle_reserved_usd
            self.idle_reserved_gpu_seconds = (self.idle_reserved_gpu_seconds or Decimal(0)) + (
                other.idle_reserved_gpu_seconds or Decimal(0)
            )

    @property
    def usd_per_gpu_hour(self) -> Decimal | None:
        return self.cost_usd * _HOUR_S / self.allocated_gpu_seconds if self.allocated_gpu_seconds else None

    @property
    def usd_per_productive_gpu_hour(self) -> Decimal | None:
        return self.cost_usd * _HOUR_S / self.productive_gpu_seconds if self.productive_gpu_seconds else None

    @property
    def usd_per_useful_token(self) -> Decimal | None:
        """What the jobs that reported useful tokens cost, over those tokens (docs/accounting.md,
        "$ per useful token"): the cost of jobs that reported none is not in it, but beside it
        (`cost_without_tokens_usd`)."""
        return self.token_cost_usd / Decimal(repr(self.useful_tokens)) if self.useful_tokens >= 1 else None

    @property
    def cost_without_tokens_usd(self) -> Decimal:
        """The cost that reported no useful tokens: jobs that reported none (and, in TOTAL and
        `__idle__`, the capacity no job held)."""
        return self.cost_usd - self.token_cost_usd

    @property
    def share_without_tokens(self) -> Decimal | None:
        # Most rows are all or nothing (a job, a team of one kind of work): no division for them.
        if not self.cost_usd:
            return None
        if self.token_cost_usd == self.cost_usd:
            return _ZERO
        if not self.token_cost_usd:
            return _ONE
        return self.cost_without_tokens_usd / self.cost_usd


@dataclass
class Showback:
    """Cost and the three tiers per group over one window, OpenCost-allocation shaped.

    `idle` (fleet readers only) is the capacity no job held: capacity − allocated, in GPU-seconds
    and $; with it, Σ entries + idle = what the fleet cost (`capacity_cost_usd`)."""

    window: Window
    start: datetime
    end: datetime
    group_by: str
    entries: list[ShowbackEntry]
    idle: ShowbackEntry | None
    capacity_gpu_seconds: Decimal | None
    capacity_cost_usd: Decimal | None
    rolled_until: datetime | None
    idle_reserved_gpu_seconds_total: Decimal = Decimal(0)
    idle_reserved_usd_total: Decimal = Decimal(0)
    #: Fleet readers: idle guarantees and idle capacity per GPU type (`IdleByGpuType`).
    idle_by_gpu_type: list[Any] = field(default_factory=list)
    #: Fleet readers: GPU time in the window before its GPU type and tier had any price
    #: (`Unpriced`), which the figures count at $0.
    unpriced: list[Any] = field(default_factory=list)

    @cached_property
    def total(self) -> ShowbackEntry:
        """Σ entries (+ `__idle__`'s cost for fleet readers), computed once per report."""
        total = ShowbackEntry(key="TOTAL", name="TOTAL", properties={})
        for entry in self.entries:
            total.add(entry)
        if self.idle is not None:
            total.cost_usd += self.idle.cost_usd
            total.idle_gpu_seconds = self.idle.idle_gpu_seconds
        return total


Segment = tuple[int, datetime, datetime]


def _floor(t: datetime, bucket: int) -> datetime:
    return floor_month(t) if bucket == MONTH else floor_to(t, bucket)


def _ceil(t: datetime, bucket: int) -> datetime:
    if bucket != MONTH:
        return ceil_to(t, bucket)
    month = floor_month(t)
    return month if month == t else next_month(month)


def _segments(start: datetime, end: datetime, now: datetime, levels: Sequence[int]) -> tuple[datetime, datetime, list[Segment]]:
    """[start, end) as rollup rows, coarsest first: whole months (if `levels` has them) from
    month rows, whole days from day rows, whole hours from hour rows, the rest from minute
    rows. Each end is aligned to the finest rows still kept there."""
    horizon, hours_from = raw_horizon(now), hour_horizon(now)

    def align(t: datetime, up: bool) -> datetime:
        bucket = MINUTE if t >= horizon else HOUR if t >= hours_from else DAY
        return ceil_to(t, bucket) if up else floor_to(t, bucket)

    s, e = align(start, False), align(end, True)
    out: list[Segment] = []

    def split(a: datetime, b: datetime, remaining: Sequence[int]) -> None:
        if a >= b:
            return
        level = remaining[0]
        if level == MINUTE:
            out.append((MINUTE, a, b))
            return
        c0, c1 = _ceil(a, level), _floor(b, level)
        if c0 < c1:
            out.append((level, c0, c1))
            split(a, c0, remaining[1:])
            split(c1, b, remaining[1:])
        else:
            split(a, b, remaining[1:])

    split(s, e, levels)
    return s, e, out


#: Public names for pages that read a window the way showback does (frontend/showback_data.py).
segments = _segments


def _bucket_starts(a: datetime, b: datetime, bucket: int) -> list[datetime]:
    if bucket != MONTH:
        return _slots(a, b, bucket)
    out, month = [], floor_month(a)
    while month < b:
        out.append(month)
        month = next_month(month)
    return out


_USAGE_SUMS = {
    "allocated": "allocated_gpu_seconds", "active": "active_gpu_seconds", "productive": "productive_gpu_seconds",
    "lost": "lost_gpu_seconds", "cost": "cost_usd", "lost_cost": "lost_cost_usd", "tokens": "retained_tokens",
    "token_cost": "token_cost_usd",
}


def _sum_segments(model: Any, segments: Sequence[Segment], keys: Sequence[str], sums: dict[str, str],
                  team_ids: Iterable[int] | None) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Σ per key over the segments: one aggregate per segment, joined with UNION ALL (one round
    trip).

    Each segment names its bucket starts one by one (`start = ANY(...)`) rather than as a range:
    the minute rows crowd the recent end of the `start` histogram, so a range over recent hours
    is overestimated a hundredfold and planned as a sequential scan, while a list of starts is
    estimated from the column's distinct count and read through the rollup index."""
    group = list(keys) or ["bucket"]  # no key: one row per segment, merged under ()
    parts = []
    for bucket, a, b in segments:
        qs = model.objects.filter(in_bucket(bucket, a, b))
        if team_ids is not None:
            qs = qs.filter(team_id__in=list(team_ids))
        parts.append(qs.order_by().values(*group).annotate(**{k: Sum(v) for k, v in sums.items()}))
    if not parts:
        return {}
    query = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    width = len(keys)
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for values in _rows(query, [*group, *sums]):
        key = values[:width] if width else ()
        into = merged.get(key)
        if into is None:
            into = merged[key] = dict(zip(keys, key, strict=True))
        for name, value in zip(sums, values[len(group):], strict=True):
            if value is not None:
                into[name] = into.get(name, 0) + value
    return merged


def _rows(query: Any, columns: Sequence[str]) -> Iterable[tuple[Any, ...]]:
    """A `values()` query's rows as tuples in `columns` order (its fields, then its
    annotations). On PostgreSQL, as the driver gives them: Django's per-value converters cost
    ~25 ms on a week by job (8,000 rows), and PostgreSQL's SUM already gives Decimal for
    decimal and bigint columns, float for float ones. Elsewhere (the SQLite demo, whose sums of
    decimals are floats) through Django, which makes them Decimal."""
    if connection.vendor != "postgresql":
        return (tuple(row[c] for c in columns) for row in query)
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _rolled_until() -> datetime | None:
    return AccountingCursor.objects.filter(name=CURSOR_NAME).values_list("rolled_until", flat=True).first()


_UNREAD = object()


def rolled_window(window: Window, rolled: datetime | None | object = _UNREAD) -> Window:
    """A relative window (`30m`, `24h`, `7d`) as showback and the utilization series read it:
    exactly its length, ending on the last whole minute rolled (`rolled`: the cursor's
    rolled_until, read here when not given: one query). "Last 24 hours" from now − 24 h to the
    last whole minute rolled covered 23 h 59 min whenever the rollup was inside a minute behind
    (a 30m window 29 minutes: 3 % short). A window of fixed instants (`today`, a month,
    `start,end`), or one the rollup has not reached yet, is returned as it is."""
    if window.length is None:
        return window
    until = _rolled_until() if rolled is _UNREAD else rolled
    if not isinstance(until, datetime):
        return window
    covered = floor_to(until, MINUTE)
    if covered >= window.end:
        return window
    return Window(covered - window.length, covered, window.label, window.length)


def showback(window: Window, group_by: str, access: Any, now: datetime) -> Showback:
    """Cost and tiers per team, project, job or priority class over `window`.

    `access` is services.access.Access: finance and admins read every team and the fleet's
    `__idle__`; members read their own teams only (and no fleet figures). Whole months and days
    come from the job-less group rows (job grouping: from the jobs' day rows), the partial
    hours and minutes at the ends from the jobs' hour and minute rows."""
    if group_by not in GROUP_BY:
        raise AccountingQueryError("group_by", f"'{group_by}' is not a grouping: use one of {', '.join(GROUP_BY)}.")
    reads_all = bool(access.is_admin or access.is_finance)
    if not reads_all and not access.team_ids:
        raise AccountingQueryError("team", "Only members of a team, finance and admins read showback.")
    rolled = _rolled_until()
    # The report ends on the last whole minute rolled: a minute rolled only in part grows at
    # the next run, so the same start,end read again (the page's CSV link) would cover more.
    covered = floor_to(rolled, MINUTE) if rolled is not None else None
    window = rolled_window(window, rolled)
    if covered is None or covered <= window.start:
        # Nothing of the window rolled whole yet: an empty report, not the minute rolled in part.
        start = end = floor_to(window.start, MINUTE)
        segments, plain = [], []
    else:
        start, end, segments = _segments(window.start, min(window.end, covered), now, (MONTH, DAY, HOUR, MINUTE))
        _, _, plain = _segments(window.start, min(window.end, covered), now, (DAY, HOUR, MINUTE))
    if covered is not None and end > covered:
        # Never before the start: a window starting in the seconds not rolled yet is empty, not
        # negative (it read "minutes": -0.03 with an end before its start).
        end = max(covered, start)
    team_ids = None if reads_all else access.team_ids
    keys = {"team": ["team_id"], "project": ["team_id", "project_id"], "job": ["job_id"],
            "priority_class": ["priority_class_id"]}[group_by]
    if group_by == "job":
        merged = _sum_segments(UsageRollup, plain, keys, _USAGE_SUMS, team_ids)
    else:
        coarse = [seg for seg in segments if seg[0] in (MONTH, DAY)]
        fine = [seg for seg in segments if seg[0] in (HOUR, MINUTE)]
        merged = _sum_segments(GroupRollup, coarse, keys, _USAGE_SUMS, team_ids)
        for key, row in _sum_segments(UsageRollup, fine, keys, _USAGE_SUMS, team_ids).items():
            into = merged.setdefault(key, {k: row[k] for k in keys})
            for name in _USAGE_SUMS:
                into[name] = into.get(name, 0) + row.get(name, 0)
    entries = [_entry(group_by, s) for s in merged.values()]
    idle_by_team: dict[int, tuple[Decimal, Decimal]] = {}
    reserved_by_type: dict[int, tuple[Decimal, Decimal]] = {}
    type_names: dict[int, str] = {}
    for (team_id, gpu_type_id, type_name), row in _sum_segments(
        QuotaRollup, plain, ["team_id", "gpu_type_id", "gpu_type__name"],
        {"gpu_s": "idle_gpu_seconds", "usd": "idle_cost_usd"}, team_ids,
    ).items():
        type_names[gpu_type_id] = type_name
        gpu_s, usd = row.get("gpu_s") or Decimal(0), row.get("usd") or Decimal(0)
        for into, key in ((idle_by_team, team_id), (reserved_by_type, gpu_type_id)):
            was = into.get(key, (Decimal(0), Decimal(0)))
            into[key] = (was[0] + gpu_s, was[1] + usd)
    if group_by == "team":
        seen = {e.properties["team_id"] for e in entries}
        for team_id in set(idle_by_team) - seen:
            entries.append(ShowbackEntry(key=str(team_id), name=str(team_id), properties={"team_id": team_id}))
        for entry in entries:
            gpu_s, usd = idle_by_team.get(entry.properties["team_id"], (Decimal(0), Decimal(0)))
            entry.idle_reserved_gpu_seconds, entry.idle_reserved_usd = gpu_s, usd
    _name_entries(group_by, entries)
    entries.sort(key=lambda e: (-e.cost_usd, e.name))
    idle = capacity = capacity_cost = None
    by_type: list[IdleByGpuType] = []
    unpriced: list[Unpriced] = []
    if reads_all:
        fleet: dict[str, Decimal] = defaultdict(Decimal)
        # Per GPU type and capacity tier (the tiers: for GPU time no rate priced, `_unpriced`).
        per_tier = _sum_segments(FleetRollup, plain, ["gpu_type_id", "gpu_type__name", "capacity_tier"], {
            "capacity": "capacity_gpu_seconds", "capacity_cost": "capacity_cost_usd",
            "allocated": "allocated_gpu_seconds", "cost": "cost_usd"}, None)
        per_type: dict[tuple[int, str], dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        for (gpu_type_id, type_name, _), row in per_tier.items():
            for name in ("capacity", "capacity_cost", "allocated", "cost"):
                fleet[name] += row.get(name) or Decimal(0)
                per_type[(gpu_type_id, type_name)][name] += row.get(name) or Decimal(0)
        capacity = fleet["capacity"]
        capacity_cost = fleet["capacity_cost"]
        idle = ShowbackEntry(key=IDLE, name=IDLE, properties={})
        idle.idle_gpu_seconds = capacity - fleet["allocated"]
        idle.cost_usd = capacity_cost - fleet["cost"]
        type_names.update({key[0]: key[1] for key in per_type})
        by_type = _idle_by_gpu_type({key[0]: row for key, row in per_type.items()}, reserved_by_type, type_names)
        unpriced = _unpriced(per_tier, start, end, now)
    return Showback(
        window=window, start=start, end=end, group_by=group_by, entries=entries, idle=idle,
        capacity_gpu_seconds=capacity, capacity_cost_usd=capacity_cost, rolled_until=rolled,
        idle_reserved_gpu_seconds_total=sum((v[0] for v in idle_by_team.values()), Decimal(0)),
        idle_reserved_usd_total=sum((v[1] for v in idle_by_team.values()), Decimal(0)),
        idle_by_gpu_type=by_type, unpriced=unpriced,
    )


@dataclass(frozen=True)
class Unpriced:
    """GPU time of one GPU type and capacity tier in a window before that pair had any
    `PriceRate`: the rollup counts it at $0 (and logs "usage without a price"), so the report
    says so instead of showing a cheap fleet. `priced_from`: its first rate, None for none."""

    gpu_type: str
    capacity_tier: str
    capacity_gpu_seconds: Decimal
    allocated_gpu_seconds: Decimal
    priced_from: datetime | None


def _unpriced(per_tier: dict[tuple[Any, ...], dict[str, Any]], start: datetime, end: datetime,
              now: datetime) -> list[Unpriced]:
    """The fleet's GPU time in [start, end) before its (GPU type, tier)'s first rate, per pair,
    from the window's fleet sums per (type id, type name, tier). A first rate inside the window
    counts the rows before it (aligned down to the rows kept, so never more than was unpriced)."""
    if not per_tier:
        return []
    firsts = {(t, tier): first for t, tier, first in PriceRate.objects.order_by().values_list(
        "gpu_type_id", "capacity_tier").annotate(first=Min("effective_from")).values_list(
        "gpu_type_id", "capacity_tier", "first")}
    keys = ["gpu_type_id", "gpu_type__name", "capacity_tier"]
    sums = {"capacity": "capacity_gpu_seconds", "allocated": "allocated_gpu_seconds"}
    out = []
    late: dict[tuple[int, str, str], datetime] = {}
    for (gpu_type_id, name, tier), row in per_tier.items():
        first = firsts.get((gpu_type_id, tier))
        if first is None:
            out.append(Unpriced(name, tier, row.get("capacity") or Decimal(0), row.get("allocated") or Decimal(0), None))
        elif first > start:
            late[(gpu_type_id, name, tier)] = first
    for (gpu_type_id, name, tier), first in late.items():
        a, b, before = _segments(start, min(first, end), now, (DAY, HOUR, MINUTE))
        if b > min(first, end):  # aligned up past the first rate: keep only whole rows before it
            a, b, before = _segments(start, floor_to(min(first, end), MINUTE), now, (DAY, HOUR, MINUTE))
        row = _sum_segments(FleetRollup, before, keys, sums, None).get((gpu_type_id, name, tier), {}) if before else {}
        if row.get("capacity") or row.get("allocated"):
            out.append(Unpriced(name, tier, row.get("capacity") or Decimal(0), row.get("allocated") or Decimal(0),
                                first))
    return sorted(out, key=lambda u: (u.gpu_type, u.capacity_tier))


@dataclass(frozen=True)
class IdleByGpuType:
    """Per GPU type, the two readings of capacity no job used: guarantees idle (priced at the
    type's reserved rate: what a guarantee is worth) and the idle capacity (what the idle nodes
    cost, at their own tiers). They differ where the idle nodes are not reserved capacity."""

    gpu_type: str
    reserved_gpu_seconds: Decimal
    reserved_usd: Decimal
    idle_gpu_seconds: Decimal
    idle_usd: Decimal


def _idle_by_gpu_type(fleet: dict[int, dict[str, Any]], reserved: dict[int, tuple[Decimal, Decimal]],
                      names: dict[int, str]) -> list[IdleByGpuType]:
    out = []
    for gpu_type_id in set(fleet) | set(reserved):
        row = fleet.get(gpu_type_id, {})
        gpu_s, usd = reserved.get(gpu_type_id, (Decimal(0), Decimal(0)))
        out.append(IdleByGpuType(
            gpu_type=names.get(gpu_type_id, str(gpu_type_id)), reserved_gpu_seconds=gpu_s, reserved_usd=usd,
            idle_gpu_seconds=(row.get("capacity") or Decimal(0)) - (row.get("allocated") or Decimal(0)),
            idle_usd=(row.get("capacity_cost") or Decimal(0)) - (row.get("cost") or Decimal(0)),
        ))
    return sorted(out, key=lambda t: t.gpu_type)


def _entry(group_by: str, s: dict[str, Any]) -> ShowbackEntry:
    if group_by == "project":
        key = f"{s['team_id']}/{s['project_id'] or ''}"
        props: dict[str, Any] = {"team_id": s["team_id"], "project_id": s["project_id"]}
    else:
        column = f"{group_by}_id"
        key, props = str(s[column]), {column: s[column]}
    return ShowbackEntry(
        key=key, name=key, properties=props, allocated_gpu_seconds=s["allocated"] or Decimal(0),
        active_gpu_seconds=s["active"] or Decimal(0), productive_gpu_seconds=s["productive"] or Decimal(0),
        lost_gpu_seconds=s["lost"] or Decimal(0), cost_usd=s["cost"] or Decimal(0),
        lost_cost_usd=s["lost_cost"] or Decimal(0), useful_tokens=float(s["tokens"] or 0.0),
        token_cost_usd=s.get("token_cost") or Decimal(0),
    )


def _name_entries(group_by: str, entries: list[ShowbackEntry]) -> None:
    """Names as people read them; properties as OpenCost labels them."""
    from controlplane.models import PriorityClass, Project, Team

    team_ids = {e.properties.get("team_id") for e in entries} - {None}
    teams = dict(Team.objects.filter(pk__in=team_ids).values_list("pk", "name")) if team_ids else {}
    if group_by == "team":
        for e in entries:
            e.name = teams.get(e.properties["team_id"], e.key)
            e.properties = {"team_id": e.properties["team_id"], "team": e.name}
    elif group_by == "project":
        ids = {e.properties["project_id"] for e in entries} - {None}
        projects = dict(Project.objects.filter(pk__in=ids).values_list("pk", "name"))
        for e in entries:
            team = teams.get(e.properties["team_id"], "")
            project = projects.get(e.properties["project_id"], UNALLOCATED)
            e.name = f"{team}/{project}"
            e.properties = {"team_id": e.properties["team_id"], "team": team,
                            "project_id": e.properties["project_id"], "project": project}
    elif group_by == "priority_class":
        names = dict(PriorityClass.objects.filter(pk__in=[e.properties["priority_class_id"] for e in entries])
                     .values_list("pk", "name"))
        for e in entries:
            e.name = names.get(e.properties["priority_class_id"], e.key)
            e.properties = {"priority_class_id": e.properties["priority_class_id"], "priority_class": e.name}
    else:
        jobs = _job_names([e.properties["job_id"] for e in entries])
        for e in entries:
            name, team, project = jobs.get(e.properties["job_id"], ("", "", ""))
            e.name = e.key
            e.properties = {"job_id": e.properties["job_id"], "job": name, "team": team, "project": project}


def _job_names(ids: list[int]) -> dict[int, tuple[str, str, str]]:
    """Job, team and project names ("" for a job without a project) for many jobs at once. On
    PostgreSQL the ids travel as one array parameter (`= ANY(%s)`): a seven-thousand-item IN
    list costs more to build than to run."""
    from django.db import connection

    from controlplane.models import Project, Team

    if connection.vendor != "postgresql":
        return {pk: (name, team, project or "") for pk, name, team, project in
                Job.objects.filter(pk__in=ids).values_list("pk", "name", "team__name", "project__name")}
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT j.id, j.name, t.name, p.name FROM "{Job._meta.db_table}" j JOIN "{Team._meta.db_table}" t '
            f'ON t.id = j.team_id LEFT JOIN "{Project._meta.db_table}" p ON p.id = j.project_id '
            "WHERE j.id = ANY(%s)", [ids],
        )
        return {pk: (name, team, project or "") for pk, name, team, project in cursor.fetchall()}


# ------------------------------------------------------------------------------ presentation

CSV_COLUMNS = (
    "gpu_hours_allocated", "gpu_hours_active", "gpu_hours_productive", "cost_usd", "usd_per_gpu_hour",
    "usd_per_useful_token", "idle_reserved_usd", "preemption_waste_usd",
    # Appended (existing consumers read the columns above by position): the rest of what the
    # /showback/ page shows.
    "usd_per_productive_gpu_hour", "useful_tokens", "usd_per_million_tokens", "preemption_lost_gpu_hours",
    "gpu_hours_idle",
    # Beside $ per useful token (which counts only the jobs that reported tokens): the cost that
    # reported none, in cents, and its share of the row's cost.
    "cost_without_tokens_usd", "share_of_cost_without_tokens",
)
_SHARE_Q = Decimal("0.0001")
#: Appended for `group_by=job`: whose job each row is (the JSON's properties carry them too).
JOB_CSV_COLUMNS = ("job_name", "team", "project")
CENT = Decimal("0.01")
_HOURS_Q = Decimal("0.0001")
_RATE_Q = Decimal("0.0001")
_TOKEN_RATE_Q = Decimal("0.000000000001")
_MILLION_TOKENS_RATE_Q = Decimal("0.000001")
_MILLION = Decimal(1_000_000)


def _hours(gpu_seconds: Decimal) -> Decimal:
    return (gpu_seconds / _HOUR_S).quantize(_HOURS_Q)


def _fmt(value: Decimal | None, quantum: Decimal) -> str:
    """Plain fixed-point text with exactly `quantum`'s places ("" for no value): never Decimal's
    scientific `1.24355E-7`, and zero as `0.00` like any other cent figure, never `0` or `-0.00`."""
    if value is None:
        return ""
    rounded = value.quantize(quantum)
    return format(abs(rounded) if rounded == 0 else rounded, "f")


def usd_per_million_tokens(entry: ShowbackEntry, per_token: Decimal | None = None) -> Decimal | None:
    """$ per million useful tokens: the page's and the CSV's figure (exact, unrounded).
    `per_token`: the entry's `usd_per_useful_token` when the caller has it already."""
    per_token = per_token if per_token is not None else entry.usd_per_useful_token
    return None if per_token is None else per_token * _MILLION


def presented_tokens(report: Showback) -> dict[str, int]:
    """Useful tokens per entry (and `TOTAL`) as whole tokens, apportioned like the cents (largest
    remainder, ties to the earlier entry) so the rows add up to TOTAL; `__idle__` has none.
    Tokens are floats (progress is pro-rated over sample intervals): integer arithmetic on their
    floors, the rounded exact sum (math.fsum) as the total."""
    rows = [*report.entries, *([report.idle] if report.idle is not None else [])]
    values = [r.useful_tokens for r in rows]
    whole = [math.floor(v) for v in values]
    units = round(math.fsum(values)) - sum(whole)
    if units > 0:
        for i in sorted(range(len(values)), key=lambda i: (whole[i] - values[i], i))[:units]:
            whole[i] += 1
    out = {r.key: t for r, t in zip(rows, whole, strict=True)}
    out["TOTAL"] = sum(whole)
    return out


def presented_money(report: Showback) -> dict[str, dict[str, Decimal]]:
    """Cents per entry (and `__idle__`, `TOTAL`) for cost, idle reserved and preemption waste,
    apportioned so every column adds up to its TOTAL exactly."""
    rows = [*report.entries, *([report.idle] if report.idle is not None else [])]
    cost = apportion([r.cost_usd for r in rows])
    waste = apportion([r.lost_cost_usd for r in rows])
    reserved = apportion([r.idle_reserved_usd or Decimal(0) for r in rows])
    without = apportion([r.cost_without_tokens_usd for r in rows])
    out = {
        r.key: {"cost_usd": c, "preemption_waste_usd": w, "idle_reserved_usd": i, "cost_without_tokens_usd": n}
        for r, c, w, i, n in zip(rows, cost, waste, reserved, without, strict=True)
    }
    total_reserved = report.idle_reserved_usd_total
    out["TOTAL"] = {
        "cost_usd": sum(cost, Decimal(0)),
        "cost_without_tokens_usd": sum(without, Decimal(0)),
        "preemption_waste_usd": sum(waste, Decimal(0)),
        "idle_reserved_usd": sum(reserved, Decimal(0)) if report.group_by == "team"
        else total_reserved.quantize(CENT),
    }
    return out


def showback_csv(report: Showback) -> str:
    """Finance's CSV: one row per group, `__idle__` for fleet readers, and a final TOTAL row whose
    money and token columns equal the sums of the rows above (money to the cent). It carries
    every figure the /showback/ page shows."""
    import csv
    import io

    money = presented_money(report)
    tokens = presented_tokens(report)
    fleet = report.idle is not None
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    by_job = report.group_by == "job"
    writer.writerow([report.group_by, *CSV_COLUMNS, *(JOB_CSV_COLUMNS if by_job else ())])

    def hours(gpu_seconds: Decimal | None) -> str:
        return _fmt(None if gpu_seconds is None else gpu_seconds / _HOUR_S, _HOURS_Q)

    def row(entry: ShowbackEntry, reserved: Decimal | None, idle_gpu_seconds: Decimal | None) -> list[str]:
        # Fixed places per column: hours 4, cents 2, $/GPU-hour 4, $/token 12, $/1M tokens 6, tokens 0.
        m = money[entry.key]
        per_token = entry.usd_per_useful_token
        return [
            entry.name, hours(entry.allocated_gpu_seconds), hours(entry.active_gpu_seconds),
            hours(entry.productive_gpu_seconds), _fmt(m["cost_usd"], CENT), _fmt(entry.usd_per_gpu_hour, _RATE_Q),
            _fmt(per_token, _TOKEN_RATE_Q), _fmt(reserved, CENT),
            _fmt(m["preemption_waste_usd"], CENT), _fmt(entry.usd_per_productive_gpu_hour, _RATE_Q),
            str(tokens[entry.key]), _fmt(usd_per_million_tokens(entry, per_token), _MILLION_TOKENS_RATE_Q),
            hours(entry.lost_gpu_seconds), hours(idle_gpu_seconds),
            _fmt(m["cost_without_tokens_usd"], CENT), _fmt(entry.share_without_tokens, _SHARE_Q),
            *((str(entry.properties.get("job", "")), str(entry.properties.get("team", "")),
               str(entry.properties.get("project", ""))) if by_job else ()),
        ]

    # Rows in name order; job rows in id order (as text, job 10 came between 1 and 2).
    def order(e: ShowbackEntry) -> tuple[int, int, str]:
        return (0, int(e.name), "") if by_job and e.name.isascii() and e.name.isdigit() else (1, 0, e.name)

    for entry in sorted(report.entries, key=order):
        reserved = money[entry.key]["idle_reserved_usd"] if report.group_by == "team" else None
        writer.writerow(row(entry, reserved, Decimal(0) if fleet else None))
    if report.idle is not None:
        writer.writerow(row(report.idle, None, report.idle.idle_gpu_seconds))
    total = report.total
    writer.writerow(row(total, money["TOTAL"]["idle_reserved_usd"], total.idle_gpu_seconds if fleet else None))
    return buffer.getvalue()


def csv_filename(report: Showback) -> str:
    """The CSV's file name, naming the period it covers: a month by its name (`2026-11`), any
    other window by the instants the report covers, in UTC. The CSV itself carries no dates (its
    first row is the header consumers read by position), so before (2 Dec) a download of the last
    7 days was `showback-team-7d.csv` whenever it was made, and nothing in the file said which
    seven days."""
    label = report.window.label
    if not re.fullmatch(r"\d{4}-\d{2}", label):
        label = f"{report.start:%Y-%m-%dT%H%M%SZ}_{report.end:%Y-%m-%dT%H%M%SZ}"
    return f"showback-{report.group_by}-{label}.csv"


def showback_json(report: Showback) -> dict[str, Any]:
    """The report in OpenCost's allocation shape (`/allocation?window=…&aggregate=…`): `data` is
    a list of allocation sets keyed by name, each allocation with `window`, `gpuHours`, `gpuCost`
    and `totalCost`, plus our tiers; `__idle__` is the unallocated capacity. Money is rounded to
    the cent with the same apportionment as the CSV, so the entries add up to `totals`."""
    money = presented_money(report)
    tokens = presented_tokens(report)
    window = {"start": _iso(report.start), "end": _iso(report.end)}
    minutes = (report.end - report.start).total_seconds() / 60
    allocations: dict[str, Any] = {}
    for entry in report.entries:
        allocations[entry.name] = _allocation(entry, money[entry.key], tokens[entry.key], window, minutes)
    if report.idle is not None:
        idle = report.idle
        allocations[IDLE] = {
            "name": IDLE, "properties": {}, "window": window, "start": window["start"], "end": window["end"],
            "minutes": minutes, "gpuHours": float(_hours(idle.idle_gpu_seconds)),
            "gpuCost": float(money[IDLE]["cost_usd"]), "totalCost": float(money[IDLE]["cost_usd"]),
            "costWithoutTokens": float(money[IDLE]["cost_without_tokens_usd"]),
            "shareOfCostWithoutTokens": _share(idle.cost_without_tokens_usd, idle.cost_usd),
        }
    total = report.total
    totals = _allocation(total, money["TOTAL"], tokens["TOTAL"], window, minutes)
    totals["idleReservedGpuHours"] = float(_hours(report.idle_reserved_gpu_seconds_total))
    if report.capacity_gpu_seconds is not None:
        totals["capacityGpuHours"] = float(_hours(report.capacity_gpu_seconds))
        totals["idleGpuHours"] = float(_hours(total.idle_gpu_seconds))
    extra: dict[str, Any] = {}
    if report.idle is not None:
        # GPU time no rate priced: counted at $0 above (fleet readers; [] when every hour had a price).
        extra["unpriced"] = [{
            "gpuType": u.gpu_type, "capacityTier": u.capacity_tier,
            "capacityGpuHours": float(_hours(u.capacity_gpu_seconds)),
            "allocatedGpuHours": float(_hours(u.allocated_gpu_seconds)),
            "pricedFrom": _iso(u.priced_from) if u.priced_from else None,
        } for u in report.unpriced]
    return {
        "code": 200,
        "window": window,
        "requestedWindow": report.window.label,
        "aggregate": report.group_by,
        "currency": "USD",
        "rolledUntil": _iso(report.rolled_until) if report.rolled_until else None,
        "data": [allocations],
        "totals": totals,
        **extra,
    }


def _number(value: Decimal | None, quantum: Decimal) -> float | None:
    return None if value is None else float(value.quantize(quantum))


def _allocation(entry: ShowbackEntry, money: dict[str, Decimal], tokens: int, window: dict[str, str],
                minutes: float) -> dict[str, Any]:
    number = _number
    per_token = entry.usd_per_useful_token
    share = entry.share_without_tokens
    allocated = entry.allocated_gpu_seconds
    cost = float(money["cost_usd"])
    return {
        "name": entry.name,
        "properties": entry.properties,
        "window": window,
        "start": window["start"],
        "end": window["end"],
        "minutes": minutes,
        "gpuHours": float(_hours(allocated)),
        "gpuHoursActive": float(_hours(entry.active_gpu_seconds)),
        "gpuHoursProductive": float(_hours(entry.productive_gpu_seconds)),
        "gpuEfficiency": _share(entry.active_gpu_seconds, allocated),
        "gpuProductiveEfficiency": _share(entry.productive_gpu_seconds, allocated),
        "gpuCost": cost,
        "totalCost": cost,
        "usdPerGpuHour": number(entry.usd_per_gpu_hour, _RATE_Q),
        "usdPerProductiveGpuHour": number(entry.usd_per_productive_gpu_hour, _RATE_Q),
        "usefulTokens": tokens,
        "usdPerUsefulToken": number(per_token, _TOKEN_RATE_Q),
        "usdPerMillionTokens": number(usd_per_million_tokens(entry, per_token), _MILLION_TOKENS_RATE_Q),
        "costWithoutTokens": float(money["cost_without_tokens_usd"]),
        "shareOfCostWithoutTokens": None if share is None else round(float(share), 6),
        "idleReservedCost": float(money["idle_reserved_usd"]) if entry.idle_reserved_usd is not None
        or entry.key == "TOTAL" else None,
        "preemptionLostGpuHours": float(_hours(entry.lost_gpu_seconds)),
        "preemptionWasteCost": float(money["preemption_waste_usd"]),
    }


def _share(part: Decimal, whole: Decimal) -> float | None:
    return round(float(part / whole), 6) if whole else None


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# ------------------------------------------------------------------ utilization time series


@dataclass(frozen=True)
class UtilizationPoint:
    """Time-averaged GPUs over one bucket: GPU-seconds ÷ the seconds the bucket covers."""

    start: datetime
    seconds: float
    capacity_gpus: float | None
    allocated_gpus: float
    active_gpus: float
    productive_gpus: float


def choose_bucket(start: datetime, end: datetime, now: datetime) -> int:
    """Minutes for up to 6 hours, hours for up to 14 days, days beyond; never a granularity
    whose rows retention has already dropped at `start`."""
    span = (end - start).total_seconds()
    bucket = MINUTE if span <= 6 * 3600 else HOUR if span <= 14 * 86400 else DAY
    if bucket == MINUTE and start < raw_horizon(now):
        bucket = HOUR
    if bucket == HOUR and start < hour_horizon(now):
        bucket = DAY
    return bucket


def utilization_series(
    window: Window, now: datetime, *, team_id: int | None = None, bucket: int | None = None,
    exact_first_bucket: bool = True,
) -> list[UtilizationPoint]:
    """The three tiers over time, for the fleet (with capacity) or one team (without): the
    overview and team charts. Callers check that the reader may see `team_id`.
    ``exact_first_bucket``: average the first bucket of history over the time it was rolled
    (one more query); callers that only take ratios of the tiers can skip it."""
    bucket = bucket or choose_bucket(window.start, window.end, now)
    rolled = _rolled_until()
    if rolled is None:
        return []
    start, end = floor_to(window.start, bucket), min(window.end, rolled)
    if team_id is None:
        qs = FleetRollup.objects.filter(in_bucket(bucket, start, end))
        sums = qs.values("start").annotate(capacity=Sum("capacity_gpu_seconds"), allocated=Sum("allocated_gpu_seconds"),
                                           active=Sum("active_gpu_seconds"), productive=Sum("productive_gpu_seconds"))
    else:
        qs = UsageRollup.objects.filter(in_bucket(bucket, start, end), team_id=team_id)
        sums = qs.values("start").annotate(allocated=Sum("allocated_gpu_seconds"), active=Sum("active_gpu_seconds"),
                                           productive=Sum("productive_gpu_seconds"))
    points = []
    rows = list(sums.order_by("start"))
    began = _first_rolled_within(rows[0]["start"], bucket) if rows and exact_first_bucket else None
    for s in rows:
        covered = min(float(bucket), (rolled - s["start"]).total_seconds())
        if began is not None and s["start"] < began < s["start"] + timedelta(seconds=bucket):
            covered -= (began - s["start"]).total_seconds()  # nothing was rolled before `began`
        if covered <= 0:
            continue
        capacity = s.get("capacity")

        points.append(UtilizationPoint(
            start=s["start"], seconds=covered,
            capacity_gpus=_gpus(capacity, covered) if capacity is not None else None,
            allocated_gpus=_gpus(s["allocated"], covered), active_gpus=_gpus(s["active"], covered),
            productive_gpus=_gpus(s["productive"], covered),
        ))
    return points


def _gpus(gpu_seconds: Any, seconds: float) -> float:
    """GPUs on average over `seconds`. GPU-seconds are exact to the microsecond, so six places
    say all of it, and a partial minute's 159.99999999999997 GPUs reads 160.0."""
    return round(float(gpu_seconds or 0) / seconds, 6)


def _first_rolled_within(start: datetime, bucket: int) -> datetime | None:
    """When the fleet's rollups begin inside the bucket at ``start``, read from the next finer
    rows kept there: the accounting's first run falls mid-bucket on a fresh fleet, and a
    time-average over the whole bucket understated it (87.5 of 128 GPUs of capacity in the
    demo's first hour). Retention drops finer rows only at whole days (raw_horizon,
    hour_horizon), so a bucket either has its finer rows from its start or none (then: None,
    the whole bucket); only while a retention run deletes a day 400 days old in batches may
    that day briefly read short."""
    finer = {HOUR: MINUTE, DAY: HOUR}.get(bucket)
    if finer is None:
        return None
    first: datetime | None = (
        FleetRollup.objects.filter(bucket=finer, start__gte=start, start__lt=start + timedelta(seconds=bucket))
        .order_by("start").values_list("start", flat=True).first()
    )
    return first


def job_cost(job_id: int) -> dict[str, Any]:
    """A job's figures so far (the job page): the tiers in GPU-hours, cost, lost work."""
    where = Q(bucket=DAY)
    sums = UsageRollup.objects.filter(where, job_id=job_id).aggregate(
        allocated=Sum("allocated_gpu_seconds"), active=Sum("active_gpu_seconds"),
        productive=Sum("productive_gpu_seconds"), lost=Sum("lost_gpu_seconds"), cost=Sum("cost_usd"),
        lost_cost=Sum("lost_cost_usd"), tokens=Sum("retained_tokens"),
    )
    return {
        "gpu_hours_allocated": _hours(sums["allocated"] or Decimal(0)),
        "gpu_hours_active": _hours(sums["active"] or Decimal(0)),
        "gpu_hours_productive": _hours(sums["productive"] or Decimal(0)),
        "preemption_lost_gpu_hours": _hours(sums["lost"] or Decimal(0)),
        "cost_usd": (sums["cost"] or Decimal(0)).quantize(CENT),
        "preemption_waste_usd": (sums["lost_cost"] or Decimal(0)).quantize(CENT),
        "useful_tokens": round(sums["tokens"] or 0.0),
        "rolled_until": _rolled_until(),
    }


@dataclass(frozen=True)
class RunCosts:
    """What each run (allocation) of a job has cost, to the cent, and the job's total."""

    #: allocation id → $, rounded cumulatively in bind order so the runs add up to `total_usd`.
    usd: dict[int, Decimal]
    total_usd: Decimal

    def of(self, allocation_id: int) -> Decimal:
        """A run's cost; $0.00 for one that held no GPU."""
        return self.usd.get(allocation_id, Decimal("0.00"))


def run_costs(job_id: int, now: datetime) -> RunCosts:
    """What each run of the job has cost up to `now`, as the rollup charges the job: the same
    spans (`_spans`: each node's GPUs from the bind to the release, a gang member that exited
    early to its exit, `now` while held) priced by the same rule (`Span.held_cost`: the node's
    GPU type and capacity tier at the rate in force at each instant, cut where a rate changes,
    unpriced time free) with the price rates as they stand, a repricing's included. The rollup
    sums the same pieces minute by minute, so once it has caught up the runs' total is what
    showback and the job page (`job_cost`) charge the job, to the cent.

    Cents: each run's is the running total to the cent through it, less the one through the run
    before (in bind order), so the runs add up to the rounded total exactly, each is within a
    cent of its own rounding, and an ended run's cents never move while a later run grows (a
    largest-remainder share would pass a cent between them as the running one's seconds tick).
    Every run of the job is priced, whatever page of them is shown. Three queries (spans, gang
    members' early exits, rates); none for a job that never held a GPU."""
    return _priced_runs(_spans(_EPOCH, now, job_id)[0], now).get(job_id, RunCosts(usd={}, total_usd=Decimal("0.00")))


def jobs_costs(job_ids: Sequence[int], now: datetime) -> dict[int, Decimal]:
    """What each of these jobs has cost up to `now`, to the cent: `run_costs(job).total_usd` for
    each, in the same three queries for all of them (the history CSV's `cost_usd`, a chunk of
    jobs at a time). A job that never held a GPU cost $0.00."""
    if not job_ids:
        return {}
    priced = _priced_runs(_spans(_EPOCH, now, None, job_ids)[0], now)
    return {job_id: priced[job_id].total_usd if job_id in priced else Decimal("0.00") for job_id in job_ids}


def jobs_total_cost(jobs: QuerySet[Job], now: datetime) -> Decimal:
    """What the jobs of `jobs` (any filtered set, of any size) have cost up to `now`, added up:
    Σ `jobs_costs` (each job to the cent, as the history CSV's `cost_usd` cells and its TOTAL
    row say it), to the cent, in one query on PostgreSQL. The same spans as `_spans` reads (each
    allocation's GPUs per node from the bind to the release, a gang member that exited early to
    its exit, `now` while held), priced by the same rule (`PriceBook`: the rate of the node's GPU
    type and capacity tier in force at each instant, cut where a rate changes, time before a
    first rate free), in PostgreSQL's exact numeric: every piece's GPU-µs × $/GPU-hour summed per
    job, the job's sum rounded to the cent half to even (as `_priced_runs` rounds its exact sum),
    the cents summed. SQLite (the demo) prices the jobs `jobs_costs` 1,000 at a time and adds
    them up. Pricing 50,000 jobs the per-job way takes seconds (bench/history_cost.py)."""
    jobs = jobs.order_by()
    if connection.vendor != "postgresql":
        ids = list(jobs.values_list("pk", flat=True))
        return sum((cost for start in range(0, len(ids), 1000)
                    for cost in jobs_costs(ids[start:start + 1000], now).values()), Decimal("0.00"))
    try:
        inner, params = jobs.values_list("pk").query.sql_with_params()
    except EmptyResultSet:  # a filter nothing can match: no job, no query
        return Decimal("0.00")
    sql = _JOBS_TOTAL_COST_SQL.format(
        jobs=inner, allocation=Allocation._meta.db_table, gpu=AllocationGpu._meta.db_table,
        node=Node._meta.db_table, event=Event._meta.db_table, rate=PriceRate._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, now, _EPOCH, EventKind.ALLOCATION_RELEASED, now])
        (cents,) = cursor.fetchone()
    return Decimal(cents or 0).scaleb(-2).quantize(CENT)


#: jobs_total_cost's statement. held: each allocation's GPUs per node (`_spans`' rows); exits:
#: a gang member's early exit per allocation and node; spans: from the bind to the release, the
#: exit or `now`, whichever is first; rates: each rate's interval, to the next rate of its GPU
#: type and tier (`PriceBook.rate_at`: the latest in force, the higher of two from one instant);
#: per_job: Σ GPUs × µs × $/GPU-hour over each span's overlap with each interval, exact (µs are
#: whole, EXTRACT gives numeric), then in cents (÷ 3.6e7: 3.6e9 µs an hour, 100 cents a dollar)
#: rounded half to even by quotient and remainder (no inexact division).
_JOBS_TOTAL_COST_SQL = """
WITH held AS (
    SELECT a.job_id, a.id AS allocation_id, g.node_id, COUNT(*) AS gpus, n.gpu_type_id, n.capacity_tier,
           a.created_at AS bound, a.released_at AS released
    FROM {allocation} a JOIN {gpu} g ON g.allocation_id = a.id JOIN {node} n ON n.id = g.node_id
    WHERE a.job_id IN ({jobs}) AND a.created_at < %s AND (a.released_at IS NULL OR a.released_at > %s)
    GROUP BY a.job_id, a.id, g.node_id, n.gpu_type_id, n.capacity_tier, a.created_at, a.released_at
), exits AS (
    SELECT e.allocation_id, e.node_id, MIN(e.created_at) AS exited FROM {event} e
    WHERE e.kind = %s AND e.reason = 'MemberExited' AND e.node_id IS NOT NULL
      AND e.allocation_id IN (SELECT allocation_id FROM held)
    GROUP BY e.allocation_id, e.node_id
), spans AS (
    SELECT h.job_id, h.gpus, h.gpu_type_id, h.capacity_tier, h.bound,
           LEAST(CASE WHEN x.exited IS NOT NULL AND (h.released IS NULL OR x.exited < h.released)
                      THEN x.exited ELSE h.released END, %s) AS ended
    FROM held h LEFT JOIN exits x ON x.allocation_id = h.allocation_id AND x.node_id = h.node_id
), rates AS (
    SELECT gpu_type_id, capacity_tier, usd_per_gpu_hour AS rate, effective_from AS since,
           LEAD(effective_from) OVER (PARTITION BY gpu_type_id, capacity_tier
                                      ORDER BY effective_from, usd_per_gpu_hour) AS until
    FROM {rate}
), per_job AS (
    SELECT SUM(s.gpus * (EXTRACT(EPOCH FROM LEAST(s.ended, r.until)) - EXTRACT(EPOCH FROM GREATEST(s.bound, r.since)))
               * 1000000 * r.rate) AS exact
    FROM spans s JOIN rates r ON r.gpu_type_id = s.gpu_type_id AND r.capacity_tier = s.capacity_tier
         AND r.since < s.ended AND (r.until IS NULL OR r.until > s.bound)
    WHERE s.ended > s.bound
    GROUP BY s.job_id
)
SELECT SUM(div(exact, 36000000) + CASE WHEN 2 * mod(exact, 36000000) > 36000000 THEN 1
                                       WHEN 2 * mod(exact, 36000000) = 36000000 THEN mod(div(exact, 36000000), 2)
                                       ELSE 0 END)
FROM per_job"""


def _priced_runs(spans: list[Span], now: datetime) -> dict[int, RunCosts]:
    """Per job of `spans`, its runs priced as `run_costs` says (one query for the rates)."""
    prices = price_book({span.gpu_type_id for span in spans}) if spans else PriceBook()
    now_us = to_us(now)
    # GPU-µs × $/GPU-hour, exact: a running sum divided once rounds to the cent as the exact
    # figure does (half to even), as jobs_total_cost rounds it in PostgreSQL.
    exact: dict[int, dict[int, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    bound: dict[int, int] = {}
    for span in spans:
        end_us = now_us if span.end_us is None else min(span.end_us, now_us)
        exact[span.job_id][span.allocation_id] += span.held_gpu_us_cost(prices, span.start_us, end_us) \
            if end_us > span.start_us else Decimal(0)
        bound[span.allocation_id] = span.start_us
    out = {}
    for job_id, runs in exact.items():
        running, shown, usd = Decimal(0), Decimal("0.00"), {}
        for allocation_id in sorted(runs, key=lambda a: (bound[a], a)):
            running += runs[allocation_id]
            through = (running / US_PER_HOUR).quantize(CENT)
            usd[allocation_id], shown = through - shown, through
        out[job_id] = RunCosts(usd=usd, total_usd=shown)
    return out
