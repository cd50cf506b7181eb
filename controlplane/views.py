"""Views that belong to no API resource: the unauthenticated health check."""

from __future__ import annotations

from django.db.models import Count
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from controlplane.choices import JobState, NodeState
from controlplane.models import Job, Node


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a glance at the queue, read from the live database (one query per table)."""
    by_state = dict(
        Job.objects.filter(state__in=[JobState.PENDING, JobState.RUNNING, JobState.PREEMPTING])
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    ready = Node.objects.filter(state=NodeState.READY).count()
    return JsonResponse(
        {
            "status": "ok",
            "jobs": {
                "pending": by_state.get(JobState.PENDING, 0),
                "running": by_state.get(JobState.RUNNING, 0) + by_state.get(JobState.PREEMPTING, 0),
            },
            "nodes": {"ready": ready},
        }
    )
