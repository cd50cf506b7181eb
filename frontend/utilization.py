"""The three utilization tiers over a window, for the overview chart, from the accounting
rollups (services/utilization_series.py): capacity, allocated, active and productive GPU-seconds per
bucket, turned here into shares of the capacity."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from controlplane.services import showback, utilization_series
from frontend.figures import ts


def utilization_points(since: datetime, until: datetime, label: str, now: datetime) -> tuple[list[dict[str, Any]], str]:
    """Points {at, until, allocated, active, productive} as fractions of the fleet's GPU capacity over
    each bucket, and a note naming the bucket (and where the fleet's record begins, when it begins
    inside the window's first bucket). Three queries for hour buckets (the cursor, one grouped read,
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
    points = [
        {
            "at": max(began, begins) if i == 0 and began is not None else begins,
            "until": begins + timedelta(seconds=p.seconds),  # the bucket's end, or the rollup's for the newest
            "allocated": p.allocated_gpus / p.capacity_gpus,
            "active": p.active_gpus / p.capacity_gpus,
            "productive": p.productive_gpus / p.capacity_gpus,
        }
        for i, (p, begins) in enumerate((p, p.begins or p.start) for p in series)
        if p.capacity_gpus
    ]
    name = {60: "minute", 3600: "hour", 86400: "day"}.get(bucket, f"{bucket} s")
    note = f" One point per {name}, time-averaged."
    if began is not None:
        # said, so a chart that starts after the window's start does not read as a stretch missing
        note += f" The accounting's record begins at {ts(began)} UTC: nothing was measured before."
    return points, note
