"""The fleet over time, read from FleetSample (one row per scheduling cycle).

Charts never scan a window's samples: a 30-day window holds half a million of them. Instead
the window's first and last sample ids are found through the `at` index, and at most
`MAX_POINTS` samples evenly spaced in id order between them are fetched by primary key. The
scheduler writes samples in time order from one sequence, so evenly spaced ids are evenly
spaced cycles: each point is one cycle's exact figures, not an average. Three queries,
whatever the window.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from django.db.models import Count, FloatField, Q, Sum
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from controlplane.choices import EventKind
from controlplane.models import Event, FleetSample
from controlplane.services.transitions import ASKED_REQUEUES

MAX_POINTS = 288

SAMPLE_FIELDS = (
    "id",
    "at",
    "total_gpus",
    "allocated_gpus",
    "unavailable_gpus",
    "borrowed_gpus",
    "stranded_gpus",
    "reserved_gpus",
    "pending_jobs",
    "running_jobs",
    "pending_by_priority",
    "pending_by_team",
    "pending_by_team_priority",
    "pending_by_reason",
    "largest_free_block_by_pool",
    "dominant_share_by_team",
    "mean_slowdown",
    "oldest_feasible_pending_s",
)

# Requeues that throw work away, and the lost GPU-seconds each records in its event data.
LOST_WORK_KINDS = (EventKind.JOB_PREEMPTED, EventKind.JOB_REQUEUED, EventKind.JOB_RESIZED)


def thinned_ids(first: int, last: int, max_points: int) -> list[int]:
    """At most `max_points` ids from first to last, evenly spaced, both ends included."""
    if last < first:
        return []
    stride = max(1, math.ceil((last - first) / max(1, max_points - 1)))
    ids = list(range(first, last + 1, stride))
    if ids[-1] != last:
        ids.append(last)
    return ids


def fleet_series(since: datetime, until: datetime, *, max_points: int = MAX_POINTS) -> list[dict[str, Any]]:
    """The window's cycle samples, oldest first, thinned to at most `max_points` (+1)."""
    window = FleetSample.objects.filter(at__gte=since, at__lte=until)
    first = window.order_by("at", "id").values_list("id", flat=True).first()
    if first is None:
        return []
    last = window.order_by("-at", "-id").values_list("id", flat=True).first()
    assert last is not None  # the window holds `first`
    ids = thinned_ids(min(first, last), max(first, last), max_points)
    return list(window.filter(id__in=ids).order_by("at", "id").values(*SAMPLE_FIELDS))


def since_the_fleet_had_gpus(samples: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], datetime | None]:
    """The samples from the first whose fleet had a GPU, and that sample's time when earlier ones
    are left out (else None). A loop runs before any agent registers: its samples count no GPU,
    so the charts of the fleet's GPUs drew a stretch of 0 free, 0 stranded and a free block of 0
    in each pool before there was a fleet (the demo's first seconds; a deployment's days before
    its first node). A window whose fleet never had a GPU keeps its samples: the 0 is true, and
    there is no before to leave out."""
    for i, s in enumerate(samples):
        if s["total_gpus"]:
            return samples[i:], (s["at"] if i else None)
    return samples, None


def lost_work_since(since: datetime) -> dict[str, float | int]:
    """Preemptions, fenced requeues and resizes since `since`, and the GPU-hours they threw
    away (each requeue event records the GPU-seconds since the job's last checkpoint); a
    requeue someone asked for counts in the GPU-hours, not as a fenced requeue. One query over
    the (kind, created_at) index."""
    rows = (
        Event.objects.filter(created_at__gte=since, kind__in=[str(k) for k in LOST_WORK_KINDS])
        .values("kind")
        .annotate(n=Count("id"), lost=Sum(Cast(KeyTextTransform("lost_gpu_seconds", "data"), FloatField())),
                  # requeues someone asked for (POST jobs/{id}/requeue/): no node was lost under them
                  asked=Count("id", filter=Q(reason__in=ASKED_REQUEUES)))
        .order_by()
    )
    by_kind = {row["kind"]: row for row in rows}

    def count(kind: EventKind) -> int:
        row = by_kind.get(str(kind), {})
        return int(row.get("n") or 0) - int(row.get("asked") or 0)

    lost_s = sum(float(row["lost"] or 0.0) for row in by_kind.values())
    return {
        "preemptions": count(EventKind.JOB_PREEMPTED),
        "fenced_requeues": count(EventKind.JOB_REQUEUED),
        "resizes": count(EventKind.JOB_RESIZED),
        "lost_gpu_hours": lost_s / 3600.0,
    }
