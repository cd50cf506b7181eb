"""The three utilization tiers over a window, for the overview chart, from the accounting
rollups (services/utilization_series.py): capacity, allocated, active and productive GPU-seconds per
bucket, turned here into shares of the capacity."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from controlplane.services import showback, utilization_series


def utilization_points(since: datetime, until: datetime, label: str, now: datetime) -> tuple[list[dict[str, Any]], str]:
    """Points {at, until, allocated, active, productive} as fractions of the fleet's GPU capacity over
    each bucket, and a note naming the bucket. Two queries (the cursor, one grouped read)."""
    bucket = utilization_series.choose_bucket(since, until, now)
    # shares of the capacity: the first bucket's length cancels out, no need to read it exactly
    series = utilization_series.utilization_series(showback.Window(since, until, label), now, bucket=bucket,
                                                   exact_first_bucket=False)
    points = [
        {
            "at": p.start,
            "until": p.start + timedelta(seconds=p.seconds),  # the bucket's end, or the rollup's for the newest
            "allocated": p.allocated_gpus / p.capacity_gpus,
            "active": p.active_gpus / p.capacity_gpus,
            "productive": p.productive_gpus / p.capacity_gpus,
        }
        for p in series
        if p.capacity_gpus
    ]
    name = {60: "minute", 3600: "hour", 86400: "day"}.get(bucket, f"{bucket} s")
    return points, f" One point per {name}, time-averaged."
