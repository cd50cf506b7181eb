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

This module writes; the readers of the rollups live apart and import from it, never the other
way: services/showback.py (windows, showback and its CSV and JSON),
services/utilization_series.py (the tiers over time) and services/job_costs.py (what a job and
its runs cost).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import structlog
from django.conf import settings
from django.db import transaction
from django.db.models import Count, DecimalField, F, FloatField, Max, Min, Q, Sum, Value
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
from controlplane.services.node_activity import fold_node_activity
from controlplane.services.nodes import RETIRED_REASON, RETURNED_REASON
from controlplane.services.rollup_rows import insert_rows, upsert_rows
from controlplane.services.usage_tiers import (
    EVICTED,
    FAILED,
    MINUTE_US,
    STEADY_MINUTES,
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
#: A fleet row's cell: its bucket, start, GPU type and capacity tier.
_FLEET_CELL = ("bucket", "start", "gpu_type_id", "capacity_tier")
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


def _bucket_starts(a: datetime, b: datetime, bucket: int) -> list[datetime]:
    if bucket != MONTH:
        return _slots(a, b, bucket)
    out, month = [], floor_month(a)
    while month < b:
        out.append(month)
        month = next_month(month)
    return out


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


def held_spans(start: datetime, end: datetime, job_id: int | None,
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
    # A running job the scheduler came to count as borrowed (or within quota again: its team's
    # quota changed under it) has the flag from that instant on: the span is cut there, so the
    # minutes before keep the flag they had, however often they are derived again.
    flips: dict[int, list[tuple[int, bool]]] = defaultdict(list)
    for allocation_id, at, data in Event.objects.filter(
        kind=EventKind.JOB_BORROWING, allocation_id__in={r["allocation_id"] for r in rows},
    ).order_by("created_at", "id").values_list("allocation_id", "created_at", "data"):
        flips[allocation_id].append((to_us(at), bool(data.get("borrowed"))))
    spans, teams = [], {}
    for r in rows:
        released = r["allocation__released_at"]
        early = member_end.get((r["allocation_id"], r["node_id"]))
        if early is not None and (released is None or early < released):
            released = early
        start_us = to_us(r["allocation__created_at"])
        end_us = to_us(released) if released is not None else None
        changes = [(at, flag) for at, flag in flips.get(r["allocation_id"], ())
                   if start_us < at and (end_us is None or at < end_us)]
        pieces = [(start_us, not changes[0][1] if changes else r["allocation__borrowed"])]
        pieces += changes
        for k, (piece_start, borrowed) in enumerate(pieces):
            spans.append(
                Span(
                    allocation_id=r["allocation_id"], job_id=r["allocation__job_id"], node_id=r["node_id"],
                    gpus=r["gpus"], start_us=piece_start,
                    end_us=pieces[k + 1][0] if k + 1 < len(pieces) else end_us, borrowed=borrowed,
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
    spans, _ = held_spans(start, end, job_id)
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
        rows.append((
            MINUTE, from_us(minute), jid, team_id, project_id, pc_id, gpu_type_id, tier, borrowed,
            cell.allocated, active, productive_of(active, cell.retained_progress(unit or "steps"), rate),
            cell.reported, cell.lost, cell.steps, cell.useful_tokens, cell.retained_steps, cell.retained_tokens,
            cost, cell.lost_cost_usd.quantize(USD_QUANTUM),
            cell.allocated if tokens_job else Decimal(0), cost if tokens_job else Decimal(0),
        ))
    touched.rows_written += insert_rows(UsageRollup, _MINUTE_ROW, rows)
    touched.minutes(start, end, job_id)
    return derivation


#: The columns of a job's minute row, in the order `_derive_and_store` builds them.
_MINUTE_ROW = ("bucket", "start", *_DIMENSIONS, *USAGE_SUM_FIELDS, *TOKEN_SUM_FIELDS)


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


def fleet_began(minute: datetime) -> datetime | None:
    """When the fleet's capacity began inside the minute at `minute` (the first minute of the
    rollups): the first of its nodes to join, when every node in the fleet joined from that
    minute on. None when a node was there before it (the minute's capacity covers all of it) or
    the first node joined after it. Read-only: utilization_series averages the first bucket of
    a fresh fleet from here, not from the start of its minute."""
    spans = _fleet_spans(minute)
    if not spans or any(span.joined_us is None for span in spans):
        return None
    first = min(span.joined_us for span in spans if span.joined_us is not None)
    return from_us(first) if first < to_us(minute) + MINUTE_US else None


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
            rows.append((MINUTE, minute, gpu_type_id, tier, Decimal(held_us).scaleb(-6),
                         cost[(gpu_type_id, tier)].quantize(USD_QUANTUM)))
    # Rows already at zero are left alone: a catch-up's fresh rows are all zero here.
    FleetRollup.objects.filter(in_bucket(MINUTE, start, end)).exclude(**{f: 0 for f in _CAPACITY_FIELDS}).update(
        **{f: 0 for f in _CAPACITY_FIELDS}
    )
    touched.rows_written += upsert_rows(FleetRollup, (*_FLEET_CELL, *_CAPACITY_FIELDS), rows, _FLEET_CELL,
                                        _CAPACITY_FIELDS)


def _store_idle_guarantees(start: datetime, end: datetime, prices: PriceBook, touched: _Touched) -> None:
    """Each team's guarantee per GPU type, minute by minute: used, lent, idle (exact sweep).

    The sweep sees the fleet the capacity rows count (`_fleet_spans`: each node from when it
    joined, until it was deleted or retired, to the microsecond), and a guarantee counts only
    while the fleet has GPUs of its type: with none there is nothing reserved to sit idle. Before
    (2 Dec), guarantees counted from the start of the first minute rolled, before any node had
    registered: the demo's first 20 seconds read 0.52 idle reserved H100 GPU-hours ($1.31) that
    no capacity, and no `__idle__`, had.

    Lent is what the engine charges the lenders (usage_tiers.idle_guarantees, as the live
    "lent" of the teams page, the admin and the API's `lent_gpus`): every GPU a team of a cohort
    holds above its nominal runs on unused guarantees of its cohort's teams. Until 7 Dec the
    sweep let borrowers run first on the fleet's GPUs beyond the guarantees, so a window counted
    less lent, and more idle reserved quota, than the live figure had said minute by minute
    (tests/controlplane/accounting/test_showback_lent_follows_the_engine.py). Minutes rolled
    before then keep the split they were written with (docs/accounting.md)."""
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
    spans, teams = held_spans(start, end, None)
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
            # The fleet decides only which guarantees count (`backed`), never what is lent: a
            # cohort's borrowing is all on its teams' unused guarantees, as the engine charges it.
            for key, cell in idle_guarantees(a, b, backed, piece, prices).items():
                into = cells[key]
                into.nominal_gpu_us += cell.nominal_gpu_us
                into.used_gpu_us += cell.used_gpu_us
                into.borrowed_gpu_us += cell.borrowed_gpu_us
                into.lent_gpu_us += cell.lent_gpu_us
                into.idle_cost_usd += cell.idle_cost_usd
        for (team_id, gpu_type_id), cell in cells.items():
            nominal, used, borrowed, lent, idle = cell.parts()
            if not (nominal or used or borrowed or lent or idle or cell.idle_cost_usd):
                # A guarantee on a type the fleet had no GPUs of: a row would say nothing, sum to
                # nothing, and (one a minute for ever) keep the type and team from deletion.
                continue
            rows.append((MINUTE, minute, team_id, gpu_type_id, nominal, used, borrowed, lent, idle,
                         cell.idle_cost_usd.quantize(USD_QUANTUM)))
    QuotaRollup.objects.filter(in_bucket(MINUTE, start, end)).delete()
    touched.rows_written += insert_rows(QuotaRollup, ("bucket", "start", "team_id", "gpu_type_id", *_QUOTA_FIELDS),
                                        rows)
    touched.quota_hours.update(_slots(start, end, HOUR))


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
        ).values_list("slot", *_DIMENSIONS, *(f"s_{f}" for f in summed))
        rows = [(bucket, *s) for s in sums]
        target.delete()
        insert_rows(UsageRollup, ("bucket", "start", *_DIMENSIONS, *summed), rows)


def floor_month(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month(month: datetime) -> datetime:
    return month.replace(year=month.year + (month.month == 12), month=month.month % 12 + 1)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _resum_groups(days: set[datetime]) -> None:
    """The job-less day rows of the touched days (sums of every job's day rows), then the
    calendar months those days belong to (sums of their day rows)."""
    usage = [*USAGE_SUM_FIELDS, *TOKEN_SUM_FIELDS]
    columns = ("bucket", "start", *_GROUP_DIMENSIONS, *usage)
    for a, b in _runs(days, DAY):
        sums = (
            UsageRollup.objects.filter(in_bucket(DAY, a, b))
            .values("start", *_GROUP_DIMENSIONS).annotate(**{f"s_{f}": Sum(f) for f in usage})
            .values_list("start", *_GROUP_DIMENSIONS, *(f"s_{f}" for f in usage))
        )
        rows = [(DAY, *s) for s in sums]
        GroupRollup.objects.filter(in_bucket(DAY, a, b)).delete()
        insert_rows(GroupRollup, columns, rows)
    for month in sorted({floor_month(d) for d in days}):
        sums = (
            GroupRollup.objects.filter(in_bucket(DAY, month, next_month(month)))
            .values(*_GROUP_DIMENSIONS).annotate(**{f"s_{f}": Sum(f) for f in usage})
            .values_list(*_GROUP_DIMENSIONS, *(f"s_{f}" for f in usage))
        )
        rows = [(MONTH, month, *s) for s in sums]
        GroupRollup.objects.filter(bucket=MONTH, start=month).delete()
        insert_rows(GroupRollup, columns, rows)


def _resum_fleet_usage(bucket: int, start: datetime, end: datetime) -> None:
    """The usage columns of the fleet's `bucket` rows over [start, end): sums of the jobs' rows
    of the same bucket (minutes as they are rolled; hours and days whose finer rows are gone
    after a price correction repriced the jobs' rows in place)."""
    usage = [f for f in USAGE_SUM_FIELDS]
    # Only rows with some usage need zeroing (fresh capacity rows have none): fewer rows rewritten.
    FleetRollup.objects.filter(in_bucket(bucket, start, end)).exclude(**{f: 0 for f in usage}).update(
        **{f: 0 for f in usage}
    )
    sums = (
        UsageRollup.objects.filter(in_bucket(bucket, start, end))
        .values("start", "gpu_type_id", "capacity_tier")
        .annotate(**{f"s_{f}": Sum(f) for f in usage})
        .values_list("start", "gpu_type_id", "capacity_tier", *(f"s_{f}" for f in usage))
    )
    upsert_rows(FleetRollup, (*_FLEET_CELL, *usage), [(bucket, *s) for s in sums], _FLEET_CELL, usage)


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
            .values_list("slot", *keys, *(f"s_{f}" for f in fields))
        )
        rows = [(bucket, *s) for s in sums]
        model.objects.filter(in_bucket(bucket, a, b)).delete()
        insert_rows(model, ("bucket", "start", *keys, *fields), rows)


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
                bucket=_BUCKET_NAMES[bucket], start=iso(at), gpu_type=names.get(gpu_type_id, str(gpu_type_id)),
                gpu_type_id=gpu_type_id, capacity_tier=tier, tables=sorted(tables),
                rate_changes_at=[iso(t) for t in sorted(boundaries)],
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


#: How a part of an event-count key writes the separator and the escape itself.
_COUNT_KEY_ESCAPES = {"%": "%25", "|": "%7C"}
_COUNT_KEY_ESCAPED = re.compile("%25|%7C")


def event_count_key(kind: str, team: str, priority_class: str, reason: str) -> str:
    """The key `AccountingCursor.event_counts` counts a kind of job event under, per team,
    priority class and reason: the four joined with `|`, each writing `%` as `%25` and `|` as
    `%7C`, so a key names one of each (`event_count_labels` reads it back). Slug names and reason
    codes have neither character, so their keys are the plain join they always were. Until 7 Dec
    the plain join of any names: team `a|b` in class `c` and team `a` in class `b|c` (names
    written around the validation) shared one key, read back as team `a`, class `b`."""
    return "|".join("".join(_COUNT_KEY_ESCAPES.get(c, c) for c in part) for part in (kind, team, priority_class, reason))


def event_count_labels(key: str) -> tuple[str, str, str, str]:
    """An `event_count_key`'s kind, team, priority class and reason ("" for a part it lacks)."""
    unescape = {v: k for k, v in _COUNT_KEY_ESCAPES.items()}
    parts = [_COUNT_KEY_ESCAPED.sub(lambda m: unescape[m[0]], part) for part in key.split("|")]
    kind, team, priority_class, reason = (parts + ["", "", "", ""])[:4]
    return kind, team, priority_class, reason


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
        key = event_count_key(r["kind"], r["team__name"] or "", r["job__priority_class__name"] or "", r["reason"] or "")
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
