"""The figures the overview page shows, read from what the control plane stored."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from controlplane.choices import STATE_COLOURS, JobState
from controlplane.models import AllocationGpu, Node
from controlplane.services.access import visible_jobs


def fleet_overview(user: AbstractBaseUser | AnonymousUser) -> dict[str, Any]:
    nodes = list(Node.objects.select_related("gpu_type").order_by("pool", "leaf_switch", "name"))
    holders: dict[tuple[int, int], tuple[int, str]] = {}
    for node_id, gpu_index, job_id, team in AllocationGpu.objects.filter(live=True).values_list(
        "node_id", "gpu_index", "allocation__job_id", "allocation__job__team__name"
    ):
        holders[(node_id, gpu_index)] = (job_id, team)
    pools: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in nodes:
        slots = [holders.get((node.pk, i)) for i in range(node.gpu_count)]
        pools[node.pool].append(
            {
                "node": node,
                "slots": [{"job_id": s[0], "team": s[1]} if s else None for s in slots],
                "free": sum(1 for s in slots if s is None),
                "colour": STATE_COLOURS.get(node.state, "#999"),
            }
        )
    jobs = visible_jobs(user).select_related("team", "priority_class").order_by("-submitted_at")[:50]
    counts = {state: 0 for state in (JobState.PENDING, JobState.RUNNING)}
    for state in counts:
        counts[state] = visible_jobs(user).filter(state=state).count()
    return {"pools": dict(pools), "jobs": jobs, "counts": counts}
