"""The three utilization tiers over a window, for the overview chart, from the accounting
rollups (services/utilization_series.py): capacity, allocated, active and productive GPU-seconds per
bucket, turned here into shares of the capacity."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from controlplane.services import showback, utilization_series
from frontend.figures import ts

#: A point's tiers where the fleet had no GPU capacity: a gap on the chart (figures._tier_steps).
NO_CAPACITY: dict[str, float | None] = {"allocated": None, "active": None, "productive": None}


def utilization_points(since: datetime, until: datetime, label: str, now: datetime) -> tuple[list[dict[str, Any]], str]:
    """Points {at, until, allocated, active, productive} as fractions of the fleet's GPU capacity over
    each bucket (None over a stretch with no capacity), and a note naming the bucket (and where the
    fleet's record begins, when it begins inside the window's first bucket). Three queries for hour buckets (the cursor, one grouped read,
    where the record begins in the first bucket), two for minutes, four for days."""
    bucket = utilization_series.choose_bucket(since, until, now)
    # shares of the capacity: the first bucket's length cancels out, no need to read it exactly
    series = utilization_series.utilization_series(showback.Window(since, until, label), now, bucket=bucket,
                                                   exact_first_bucket=False)
    # ... but where it begins: a fresh fleet's first hour is drawn from its first rolled minute, not
    # from the hour's start, before anything was measured (one query; two for a day)
    began = utilization_series.record_began_within(series[0].start, bucket) if series else None
    # The first step is drawn from where its part of the window begins: a bucket the window cuts
    # (a 24-hour window from 05:01 reads 05:01-06:00 of the 05:00 hour) was drawn from the hour's
    # start, a stretch outside the window drawn as if measured.
    # A bucket with no capacity (every node retired, deleted or not yet joined: no rollup rows, or
    # rows at zero) has no share of anything: it is a gap (None), not 0 % (an idle fleet) and not
    # left out, which held the step before it across it (an hour with no fleet read as the last
    # hour's utilization, operator walk of 8 Dec).
    points: list[dict[str, Any]] = []
    for i, p in enumerate(series):
        begins = p.begins or p.start
        at = max(began, begins) if i == 0 and began is not None else begins
        if points and points[-1]["until"] < at:  # buckets with no rows between two with some
            points.append({"at": points[-1]["until"], "until": at, **NO_CAPACITY})
        shares = ({tier: getattr(p, f"{tier}_gpus") / p.capacity_gpus for tier in NO_CAPACITY}
                  if p.capacity_gpus else NO_CAPACITY)
        points.append({"at": at, "until": begins + timedelta(seconds=p.seconds), **shares})
    name = {60: "minute", 3600: "hour", 86400: "day"}.get(bucket, f"{bucket} s")
    note = f" One point per {name}, time-averaged."
    if began is not None:
        # said, so a chart that starts after the window's start does not read as a stretch missing
        note += f" The accounting's record begins at {ts(began)} UTC: nothing was measured before."
    return points, note
