"""`/nodes/`: every node by pool and leaf switch, its state and heartbeat; admins cordon, drain
and uncordon here (through the API's node actions, which call services/nodes.py)."""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from controlplane.choices import NodeState
from controlplane.models import Node
from controlplane.services.access import access_of
from frontend import figures
from frontend.heatmap import fleet_grid

# Which actions an admin is offered in each state (services/nodes.py refuses the rest anyway).
ACTIONS = {
    NodeState.READY: ("cordon", "drain"),
    NodeState.SUSPECT: ("cordon", "drain"),
    NodeState.CORDONED: ("uncordon", "drain"),
    NodeState.DRAINING: ("uncordon", "cordon"),
}


def nodes_payload(request: HttpRequest) -> dict[str, Any]:
    now = timezone.now()
    grid = {row.id: row for row in fleet_grid(request.user)}
    beats = {
        n["id"]: n for n in Node.objects.values("id", "last_heartbeat_at", "agent_lease_expires_at", "simulated")
    }
    is_admin = access_of(request.user).is_admin
    rows = []
    for row in grid.values():
        beat = beats.get(row.id, {})
        last = beat.get("last_heartbeat_at")
        rows.append({
            "node": row,
            "heartbeat_age_s": (now - last).total_seconds() if last else None,
            "lease_expires_at": beat.get("agent_lease_expires_at"),
            "simulated": beat.get("simulated", False),
            "actions": [
                (verb, reverse(f"v1:node-{verb}", args=[row.id])) for verb in ACTIONS.get(NodeState(row.state), ())
            ] if is_admin else [],
        })
    pools = []
    for pool, in_pool in groupby(rows, key=lambda r: r["node"].pool):
        in_pool = list(in_pool)
        leaves = [(leaf, list(members)) for leaf, members in groupby(in_pool, key=lambda r: r["node"].leaf_switch)]
        pools.append({
            "pool": pool, "leaves": leaves,
            "gpus": sum(len(r["node"].slots) for r in in_pool),
            "used": sum(r["node"].used for r in in_pool),
        })
    gpus_by_state: dict[tuple[str, str], int] = defaultdict(int)
    for row in grid.values():
        gpus_by_state[(row.pool, row.state)] += len(row.slots)
    chart = figures.nodes_by_state([{"pool": p, "state": s, "gpus": g} for (p, s), g in sorted(gpus_by_state.items())])
    return {"pools": pools, "charts": [chart], "is_admin": is_admin, "node_count": len(rows)}


@login_required
@require_GET
def nodes(request: HttpRequest) -> HttpResponse:
    payload = nodes_payload(request)
    return render(request, "frontend/nodes.html", {
        **payload, "page": "nodes", "charts": {c.key: c for c in payload["charts"]},
        "live_url": reverse("frontend:nodes-json"), "live_every": 10000,
    })


@login_required
@require_GET
def nodes_json(request: HttpRequest) -> JsonResponse:
    payload = nodes_payload(request)
    return JsonResponse({
        "charts": figures.charts_json(payload["charts"]),
        "html": {"nodes-table": render_to_string("frontend/_nodes_table.html", payload, request=request)},
    })
