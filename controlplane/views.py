"""Views that belong to no API resource: the unauthenticated health check."""

from __future__ import annotations

import structlog
from django.db import DatabaseError
from django.db.models import Count
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from controlplane.api.serializers.scheduling_loop import loop_state
from controlplane.choices import JobState, NodeState
from controlplane.models import Job, Node

log = structlog.get_logger(__name__)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a glance at the queue and the loop, read from the live database (one query
    per table). A database that cannot be read is a 503 in JSON, so a load balancer or a probe
    gets an answer it can parse instead of an HTML error page. A stalled loop does not fail the
    check (the web still serves); it says `loop.stalled` and its last cycle's age to alert on."""
    try:
        return JsonResponse({"status": "ok", **_glance()})
    except DatabaseError as error:
        log.warning("healthz: database unavailable", error=str(error))
        return JsonResponse({"status": "unavailable", "database": f"unreachable: {type(error).__name__}"}, status=503)


def _glance() -> dict[str, object]:
    by_state = dict(
        Job.objects.filter(state__in=[JobState.PENDING, JobState.RUNNING, JobState.PREEMPTING])
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    ready = Node.objects.filter(state=NodeState.READY).count()
    return {
        "jobs": {
            "pending": by_state.get(JobState.PENDING, 0),
            "running": by_state.get(JobState.RUNNING, 0) + by_state.get(JobState.PREEMPTING, 0),
        },
        "nodes": {"ready": ready},
        # Said in words, still 200: the web serves, and a load balancer must not take it out.
        "loop": loop_state(),
    }
