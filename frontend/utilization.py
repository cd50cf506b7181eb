"""The three utilization tiers over a window, for the overview chart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any


def utilization_points(
    since: datetime, until: datetime, samples: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    """Points {at, allocated, active, productive} as fractions of fleet GPUs, and a note on
    where they come from. Allocated is each cycle's allocated share of the fleet."""
    points = [
        {"at": s["at"], "allocated": (s["allocated_gpus"] / s["total_gpus"]) if s["total_gpus"] else None,
         "active": None, "productive": None}
        for s in samples
    ]
    return points, " Allocated from the scheduler's cycles; active and productive come from accounting rollups."
