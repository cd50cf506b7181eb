"""The three utilization tiers over time, for the fleet (with its capacity) or one team: the
overview's and the team pages' charts and GET /api/v1/metrics/utilization/. Read from the
rollups (services/accounting.py writes them) in minute, hour or day buckets (`choose_bucket`),
each averaged over the time it covers; the window is showback's (services/showback.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import DateTimeField, F, Min, Sum, Value

from controlplane.models import FleetRollup, UsageRollup
from controlplane.services.accounting import (
    DAY,
    HOUR,
    MINUTE,
    fleet_began,
    hour_horizon,
    in_bucket,
    raw_horizon,
)
from controlplane.services.showback import Window, rolled_until, segments
from controlplane.services.usage_tiers import ceil_to, floor_to


@dataclass(frozen=True)
class UtilizationPoint:
    """Time-averaged GPUs over one bucket: GPU-seconds ÷ the seconds the bucket covers, from
    `begins` (its start, or where the window or the record begins inside it)."""

    start: datetime
    seconds: float
    capacity_gpus: float | None
    allocated_gpus: float
    active_gpus: float
    productive_gpus: float
    begins: datetime | None = None


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
    ``exact_first_bucket``: average the first bucket of history over the time it covers, from
    the instant the fleet began (`history_began`: two more queries, a few more in the fleet's
    very first bucket); callers that only take ratios of the tiers can skip it.

    Whole buckets are read from their own rows; an hour or a day the window cuts at either end
    from the finer rows inside the window (`showback.segments`, as the cost chart's cut bars),
    and averaged over that part: read whole, 01:00 to 01:16 in hours answered the hour up to
    where the rollup stood, five minutes past the window's end, 86 GPUs where its minutes held
    41 (demo walk, 7 Dec). One grouped read (UNION ALL) whatever the cuts."""
    bucket = bucket or choose_bucket(window.start, window.end, now)
    rolled = rolled_until()
    if rolled is None:
        return []
    end = min(window.end, rolled)
    if end <= window.start:
        return []
    model: Any = FleetRollup if team_id is None else UsageRollup
    parts: list[tuple[datetime, int, datetime, datetime]] = []  # (the bucket's start, level, from, to)
    # what the rows read cover: the window, its ends aligned to the finest rows kept there
    covers_from, covers_to = window.start, end
    if bucket == MINUTE:
        # A minute has no finer rows: a window's part of one is read whole, and so averaged over
        # the whole minute (up to where the rollup stands) at either end. Averaged over the
        # window's part of its last minute, a window ending at 00:42:50 read 207 GPUs of
        # capacity on a 128-GPU fleet (demo walk, 8 Dec).
        covers_from, covers_to = floor_to(window.start, MINUTE), ceil_to(end, MINUTE)
        parts.append((covers_from, MINUTE, covers_from, end))
    else:
        whole_from, whole_to = ceil_to(window.start, bucket), floor_to(end, bucket)
        cut: list[tuple[datetime, datetime, datetime]] = []
        if whole_from > whole_to:
            cut.append((floor_to(window.start, bucket), window.start, end))
        else:
            if window.start < whole_from:
                cut.append((floor_to(window.start, bucket), window.start, whole_from))
            if whole_to < end:
                cut.append((whole_to, whole_to, end))
            if whole_from < whole_to:
                parts.append((whole_from, bucket, whole_from, whole_to))
        finer = (HOUR, MINUTE) if bucket == DAY else (MINUTE,)
        for at, a, b in cut:
            s0, s1, pieces = segments(a, b, now, finer)
            if a == window.start:
                covers_from = s0
            if b == end:
                covers_to = s1
            parts += [(at, level, p0, p1) for level, p0, p1 in pieces]
    sums = []
    for at, level, a, b in parts:
        rows = model.objects.filter(in_bucket(level, a, b))
        if team_id is not None:
            rows = rows.filter(team_id=team_id)
        rows = rows.annotate(bar=F("start") if level == bucket else Value(at, output_field=DateTimeField()))
        totals = {"allocated": Sum("allocated_gpu_seconds"), "active": Sum("active_gpu_seconds"),
                  "productive": Sum("productive_gpu_seconds")}
        if team_id is None:
            totals["capacity"] = Sum("capacity_gpu_seconds")
        sums.append(rows.order_by().values("bar").annotate(**totals))
    merged: dict[datetime, dict[str, Any]] = {}
    for row in sums[0].union(*sums[1:], all=True) if len(sums) > 1 else sums[0]:
        found = {key: value for key, value in row.items() if key != "bar" and value is not None}
        if not found:
            # (a cut bucket's sums group by a constant, which Django leaves out of the GROUP BY:
            # no row there answers one row of nulls, not none)
            continue
        into = merged.setdefault(row["bar"], {})
        for key, value in found.items():
            into[key] = into.get(key, 0) + value
    points = []
    if merged:
        # The fleet's buckets with no rows after its first (every node retired, deleted or gone
        # for a while, up to now included) had no capacity, and a team's held no GPU: said as
        # such, not left out, where a reader's step line held the bucket before across them
        # (operator walk, 8 Dec). Before the first row the record has not begun
        # (`record_began_within`): nothing is said there.
        at, step = min(merged) + timedelta(seconds=bucket), timedelta(seconds=bucket)
        while at < end:
            merged.setdefault(at, {})
            at += step
    bars = sorted(merged)
    began = history_began(bars[0], bucket) if bars and exact_first_bucket else None
    for at in bars:
        s = merged[at]
        since = max(at, covers_from)
        if began is not None and since < began < at + timedelta(seconds=bucket):
            since = began  # nothing was rolled before `began`
        covered = (min(at + timedelta(seconds=bucket), covers_to, rolled) - since).total_seconds()
        if covered <= 0:
            continue
        capacity = s.get("capacity") if team_id is None else None

        points.append(UtilizationPoint(
            start=at, seconds=covered, begins=since,
            capacity_gpus=_gpus(capacity or 0, covered) if team_id is None else None,
            allocated_gpus=_gpus(s.get("allocated"), covered), active_gpus=_gpus(s.get("active"), covered),
            productive_gpus=_gpus(s.get("productive"), covered),
        ))
    return points


def _gpus(gpu_seconds: Any, seconds: float) -> float:
    """GPUs on average over `seconds`. GPU-seconds are exact to the microsecond, so six places
    say all of it, and a partial minute's 159.99999999999997 GPUs reads 160.0."""
    return round(float(gpu_seconds or 0) / seconds, 6)


def history_began(start: datetime, bucket: int) -> datetime | None:
    """When history begins inside the bucket at ``start``, if it does: the first finer row kept
    there (`_first_rolled_within`), and inside the rollups' very first minute the instant the
    fleet's first node joined (`accounting.fleet_began`). On a fresh 128-GPU fleet whose agents
    registered half way through that minute, the minute read 63.8 GPUs of capacity and the hour
    99.4 (demo walk, 5 Dec): averaged from the minute's start, before any node was there."""
    first = start if bucket == MINUTE else _first_rolled_within(start, bucket)
    if first is None:
        return None
    earliest: datetime | None = FleetRollup.objects.filter(bucket=MINUTE).aggregate(t=Min("start"))["t"]
    finer = MINUTE if bucket in (MINUTE, HOUR) else HOUR
    if earliest is not None and first <= earliest < first + timedelta(seconds=finer):
        return fleet_began(earliest) or earliest
    return first


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


def record_began_within(start: datetime, bucket: int) -> datetime | None:
    """Where the rollups' record begins inside the bucket at ``start``, to the minute, when it
    begins after the bucket's start (the first bucket of a fleet's history), else None: the first
    minute row kept there (a day's read through its first hour row). A chart draws its first
    step from here: the overview drew a fresh fleet's first hour from 19:00 though nothing was
    rolled before 19:03 (demo walk, 6 Dec). One query for an hour, two for a day, none for a
    minute; to the second inside the fleet's very first minute is `history_began`'s (more
    queries: an averaging needs it, a chart's start does not)."""
    first = _first_rolled_within(start, bucket)
    if first is not None and bucket == DAY:
        first = _first_rolled_within(first, HOUR) or first
    return first if first is not None and first > start else None
