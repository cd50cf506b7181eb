"""`/nodes/`: the fleet's nodes by pool and leaf switch, a page of them at a time (PAGE_SIZE, `?page=`,
under the API's node filters: `?pool=`, `?state=`, `?gpu_type=`, ...), their state and heartbeat,
with each pool's figures and the chart for the whole fleet; admins cordon, drain, uncordon and
retire here (through the API's node actions, which call services/nodes.py).
Retired nodes are out of the fleet: listed apart, under the pools, in no pool's figures; an
admin returns one to service from there.
`/nodes/<name>/`: one node — inventory, topology, state, heartbeat and agent lease, the jobs
holding its GPUs (other teams' as their team only), its recent events, and its GPU time over a
window in the three tiers (services/node_tiers.py)."""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from controlplane.choices import CapacityTier, JobState, NodeState
from controlplane.filtersets import NodeFilterSet
from controlplane.models import Event, GpuType, MaintenanceWindow, Node
from controlplane.services import access, job_mentions, maintenance
from controlplane.services.access import access_of
from controlplane.services.fleet_figures import fragmentation_of
from controlplane.services.node_tiers import NodeTiers, node_tiers
from controlplane.services.nodes import cordon_reason
from controlplane.services.stopping import stop_reasons, stopping_label
from frontend import figures, node_rows
from frontend.heatmap import fleet_counts, fleet_grid
from frontend.page_filters import Refusals, filtered
from frontend.page_numbers import page_choice
from frontend.views.live_json import answers_json
from frontend.windows import WINDOWS, window_choice

# Which actions an admin is offered in each state (services/nodes.py refuses the rest anyway).
# Retire is offered where a node runs nothing as a rule (drained into cordoned, or dead); the
# API refuses it while jobs hold GPUs there, saying to drain it first.
ACTIONS = {
    NodeState.READY: ("cordon", "drain"),
    NodeState.SUSPECT: ("cordon", "drain"),
    NodeState.CORDONED: ("uncordon", "drain", "retire"),
    NodeState.DRAINING: ("uncordon", "cordon"),
    NodeState.RETIRED: ("return",),
}
# A node that is away keeps its health state; the operator decides how it returns.
AWAY = (NodeState.QUARANTINED, NodeState.DOWN)


def _away(state: str, unschedulable: bool) -> bool:
    # A silent node an operator had cordoned or drained is suspect and keeps that wish.
    return NodeState(state) in AWAY or (NodeState(state) == NodeState.SUSPECT and unschedulable)


def node_actions(state: str, unschedulable: bool) -> tuple[str, ...]:
    if _away(state, unschedulable):
        wish = ("uncordon",) if unschedulable else ("cordon",)
        return wish + (("retire",) if NodeState(state) in AWAY else ())
    return ACTIONS.get(NodeState(state), ())


def returns_as(state: str, unschedulable: bool) -> str | None:
    """How an away node comes back when its agent is heard again ("cordoned" or "ready")."""
    if not _away(state, unschedulable):
        return None
    return "cordoned" if unschedulable else "ready"


def retired_payload(nodes: list[dict[str, Any]], is_admin: bool) -> dict[str, Any]:
    """The retired ones of `nodes` (rows with their state, name, pool, GPUs and retired_at), newest
    retirement first: out of the fleet, listed apart."""
    retired = sorted((n for n in nodes if n["state"] == NodeState.RETIRED),
                     key=lambda n: (-(n["retired_at"].timestamp() if n["retired_at"] else 0), n["name"]))
    rows = [{**n, "actions": [("return", reverse("v1:node-return", args=[n["id"]]), node_rows.action_question("return", n["name"]))]
             if is_admin else []}
            for n in retired]
    return {"retired": rows, "retired_gpus": sum(n["gpu_count"] for n in rows)}


def maintenance_rows(request: HttpRequest, windows: list[MaintenanceWindow]) -> list[dict[str, Any]]:
    """Windows as the pages list them (their nodes prefetched): state, nodes, times, reason, the
    running jobs that will still hold GPUs when each begins (services/maintenance.py; one
    query for all), the other windows overlapping each on a shared node (one query for all),
    and for admins the cancel action of those not ended."""
    now = timezone.now()
    who = access_of(request.user)
    affected = maintenance.affected_running_jobs(windows, now)
    overlapping = maintenance.overlapping_windows(windows)
    rows = []
    for window in windows:
        state = window.state_at(now)
        jobs = [j.as_seen_by(who) for j in affected.get(window.pk, [])]
        rows.append({
            "window": window, "state": state.value, "nodes": sorted(n.name for n in window.nodes.all()),
            "length": maintenance.span((window.end_at - window.start_at).total_seconds()),
            "affected": jobs,
            "overlaps": overlapping.get(window.pk, []),
            "cancel_url": (reverse("v1:maintenance-window-cancel", args=[window.pk])
                           if who.is_admin and state.value in ("upcoming", "active") else None),
        })
    return rows


def maintenance_payload(request: HttpRequest) -> dict[str, Any]:
    """The Nodes page's maintenance panel: the windows active or upcoming (two queries, a third
    for their running jobs when there is one), and the pools an admin may take out whole."""
    windows = list(maintenance.in_state(MaintenanceWindow.objects.select_related("created_by"),
                                        ("active", "upcoming"), timezone.now()).prefetch_related("nodes"))
    return {"windows": maintenance_rows(request, windows), "is_admin": access_of(request.user).is_admin,
            "windows_url": reverse("v1:maintenance-window-list")}


def in_maintenance(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per node name, the window (of the panel's rows) that concerns it first: the active one,
    else the next to begin; the node's row in the tables says it."""
    first: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["state"] != "active", r["window"].start_at)):
        for name in row["nodes"]:
            first.setdefault(name, row)
    return first


#: Nodes a page lists (the fleet's figures above them are the whole fleet's, whatever the page).
PAGE_SIZE = 100
def listed_nodes(request: HttpRequest) -> tuple[NodeFilterSet, QuerySet[Node] | None, Refusals]:
    """The fleet's nodes under the query's filters (the API's nodes filters: pool, state,
    gpu_type, leaf_switch, ...), or the errors naming each bad parameter. Retired nodes are
    listed apart, never here."""
    filterset, nodes, errors = filtered(request, NodeFilterSet, Node.objects.exclude(state=NodeState.RETIRED))
    return cast(NodeFilterSet, filterset), nodes, errors


def nodes_payload(request: HttpRequest, maintenance_rows: list[dict[str, Any]] | None = None,
                  listed: QuerySet[Node] | None = None) -> dict[str, Any]:
    """A page of the fleet's nodes (`?page=`, PAGE_SIZE of them, those `listed` keeps when given:
    the query's filters), by pool and leaf switch; each pool's figures and the chart the whole
    fleet's; the retired nodes apart. A fixed number of queries whatever the fleet's size: every
    node's counts, marked listed or not (heatmap.fleet_counts: two, no GPU or job row read), the
    page's grid (two), its nodes' heartbeats with the retired nodes (one)."""
    now = timezone.now()
    windows_of = in_maintenance(maintenance_rows or [])
    counts = fleet_counts(listed)
    # Each pool's use and fragmentation by the API's definitions (metrics/fragmentation/, `qm
    # sinfo`, the overview's tiles): the stranded GPUs too, which the page did not say, so the
    # overview's "Stranded GPUs" could not be found on it.
    fragmentation = {p.pool: p for p in fragmentation_of(c.figures for c in counts)}
    listed_ids = [c.id for c in counts if c.listed]  # in the rows' order: by pool, leaf switch, name
    # Per pool, the places of its first and last listed node: the pages that hold it.
    places: dict[str, tuple[int, int]] = {}
    place = 0
    for c in counts:
        if c.listed:
            places[c.pool] = (places.get(c.pool, (place, place))[0], place)
            place += 1
    shown, page_error = page_choice(Paginator(listed_ids, PAGE_SIZE), request.GET.get("page"))
    page_ids = list(shown.object_list)
    grid = {row.id: row for row in fleet_grid(request.user, node_ids=page_ids)} if page_ids else {}
    # The page's nodes' heartbeats and wishes, and the retired ones' rows for their own section (one query).
    beats = {
        n["id"]: n for n in Node.objects.filter(Q(id__in=page_ids) | Q(state=NodeState.RETIRED))
        .annotate(cordon_reason=cordon_reason()).values(
            "id", "last_heartbeat_at", "agent_lease_expires_at", "simulated", "unschedulable", "state", "name",
            "pool", "gpu_count", "gpu_type__name", "retired_at", "cordon_reason")
    }
    is_admin = access_of(request.user).is_admin
    urls = node_rows.action_urls({verb for verbs in ACTIONS.values() for verb in verbs} | {"retire"})
    rows = []
    for row in grid.values():
        beat = beats.get(row.id, {})
        last = beat.get("last_heartbeat_at")
        rows.append({
            "node": row,
            "heartbeat_age_s": (now - last).total_seconds() if last else None,
            "lease_expires_at": beat.get("agent_lease_expires_at"),
            "simulated": beat.get("simulated", False),
            "tier": CapacityTier(row.capacity_tier).label if row.capacity_tier in CapacityTier.values else row.capacity_tier,
            "returns_as": returns_as(row.state, beat.get("unschedulable", False)),
            "maintenance": windows_of.get(row.name),
            # why an operator cordoned or drained it, as given (services/nodes.cordon_reason)
            "cordon_reason": beat.get("cordon_reason"),
            "actions": [
                (verb, f"{urls[verb][0]}{row.id}{urls[verb][1]}")
                for verb in node_actions(row.state, beat.get("unschedulable", False))
            ] if is_admin else [],
        })
    on_page = {pool: list(in_pool) for pool, in_pool in groupby(rows, key=lambda r: r["node"].pool)}
    first_place = (shown.number - 1) * PAGE_SIZE
    pools = []
    for pool in dict.fromkeys(c.pool for c in counts):  # in the rows' order
        figures_of = fragmentation[pool]
        mine = on_page.get(pool, [])
        first, last = places.get(pool, (None, None))
        pools.append({
            "pool": pool,
            # Each leaf switch's rows of this page written in one pass (frontend/node_rows.py), not the template's loop.
            "leaves": [(leaf, node_rows.rows_html(list(members), is_admin))
                       for leaf, members in groupby(mine, key=lambda r: r["node"].leaf_switch)],
            # The whole pool's, whatever the page shows of it: free GPUs of nodes that take work
            # only, the most on one of them, and those stranded while a whole-node job waits.
            "gpus": figures_of.total_gpus,
            "used": figures_of.allocated_gpus,
            "free_ready": figures_of.free_gpus,
            # idle on nodes that take no work (cordoned, draining, in maintenance, agent down):
            # `qm sinfo`'s AWAY, so in use + free + away is the pool's GPUs (the heading said
            # "69 of 88 in use · 3 free" and nothing of the other 16)
            "away": figures_of.unavailable_gpus,
            "largest_free_block": figures_of.largest_free_block,
            "stranded": figures_of.stranded_gpus,
            "waiting_whole_node_jobs": figures_of.waiting_whole_node_jobs,
            # Its listed nodes: how many, how many this page shows, and the pages that hold them.
            "listed": 0 if first is None else last - first + 1,
            "shown": len(mine),
            "pages": None if first is None else (first // PAGE_SIZE + 1, last // PAGE_SIZE + 1),
        })
    gpus_by_state: dict[tuple[str, str], int] = defaultdict(int)
    for count in counts:
        gpus_by_state[(count.pool, figures.IN_MAINTENANCE if count.in_maintenance else count.state)] += count.gpus
    chart = figures.nodes_by_state([{"pool": p, "state": s, "gpus": g} for (p, s), g in sorted(gpus_by_state.items())])
    query = request.GET.copy()
    query.pop("page", None)
    return {"pools": pools, "charts": [chart], "is_admin": is_admin, "node_count": len(counts),
            "nodes_page": shown, "page_error": page_error, "listed_count": len(listed_ids), "first_shown": first_place + 1 if rows else 0,
            "last_shown": first_place + len(rows), "query": query.urlencode(),
            "filtered": any(request.GET.get(name) for name in NodeFilterSet.base_filters),
            **retired_payload(list(beats.values()), is_admin)}


def _filter_context(request: HttpRequest, errors: Refusals) -> dict[str, Any]:
    """The page's filter form: the pools, states and GPU types to choose from, what is chosen."""
    return {
        "filter_errors": errors,
        "chosen": {name: request.GET.get(name, "") for name in ("pool", "gpu_type")},
        # (several at once: the overview's "Nodes not answering" asks for quarantined, down and suspect)
        "chosen_states": request.GET.getlist("state"),
        "states": [(s.value, s.label) for s in NodeState if s != NodeState.RETIRED],
        "gpu_type_names": list(GpuType.objects.order_by("name").values_list("name", flat=True)),
    }


@login_required
@require_GET
def nodes(request: HttpRequest) -> HttpResponse:
    maint = maintenance_payload(request)
    _, listed, errors = listed_nodes(request)
    context: dict[str, Any] = {"page": "nodes", "page_size": PAGE_SIZE, "maintenance": maint,
                               **_filter_context(request, errors)}
    if listed is None:  # 400 as the jobs and history pages answer a refused filter, listing nothing
        pools = Node.objects.exclude(state=NodeState.RETIRED).values_list("pool", flat=True).distinct()
        return render(request, "frontend/nodes.html", {**context, "charts": {}, "pool_names": sorted(pools)},
                      status=400)
    payload = nodes_payload(request, maint["windows"], listed)
    context["pool_names"] = [p["pool"] for p in payload["pools"]]
    # The live update re-reads this page of this list (its filters and `page`), not the first.
    live = reverse("frontend:nodes-json") + (f"?{request.GET.urlencode()}" if request.GET else "")
    return render(request, "frontend/nodes.html", {
        **payload, **context, "charts": {c.key: c for c in payload["charts"]},
        "live_url": live, "live_every": 10000,
    })


@login_required
@answers_json
@require_GET
def nodes_json(request: HttpRequest) -> JsonResponse:
    _, listed, errors = listed_nodes(request)
    if listed is None:
        return JsonResponse({"detail": "; ".join(f"{name}: {' '.join(said)}" for name, said in errors.items()),
                             "errors": errors}, status=400)
    maint = maintenance_payload(request)
    payload = nodes_payload(request, maint["windows"], listed)
    return JsonResponse({
        "charts": figures.charts_json(payload["charts"]),
        "html": {"nodes-table": render_to_string("frontend/_nodes_table.html", payload, request=request),
                 "maintenance-windows": render_to_string("frontend/_maintenance_windows.html",
                                                         {"maintenance": maint}, request=request)},
    })


#: The newest events a node's page lists.
NODE_EVENTS = 50
#: The newest maintenance windows a node's page lists.
NODE_WINDOWS = 10


def _node(name: str) -> Node:
    # A NUL byte names no node (PostgreSQL refuses to compare it at all).
    # with why an operator cordoned or drained it (services/nodes.cordon_reason), in the same query
    node = None if "\x00" in name else Node.objects.select_related("gpu_type").annotate(
        cordon_reason=cordon_reason()).filter(name=name).first()
    if node is None:
        raise Http404(f"No node is named {name!r}.")
    return node


def node_payload(request: HttpRequest, node: Node) -> dict[str, Any]:
    """One node's page, in a fixed number of queries: its row (given), its slots (two), the jobs
    holding them (one) and its newest events (one)."""
    now = timezone.now()
    who = access_of(request.user)
    grid = fleet_grid(request.user, node_ids=[node.pk])
    row = grid[0] if grid else None
    # Slots by holder: a job the reader may read by id and name, another team's job by its team.
    held: dict[int, dict[str, Any]] = {}  # by job id, or by minus the team id for a job not readable
    for index, slot in enumerate(row.slots if row else ()):
        if slot is None:
            continue
        key = slot.job_id if slot.job_id is not None else -slot.team_id
        entry = held.setdefault(key, {"job_id": slot.job_id, "team": slot.team, "slots": []})
        entry["slots"].append(index)
    readable = [k for k in held if k > 0]
    jobs = {
        j["id"]: j for j in access.visible_jobs(request.user).filter(pk__in=readable)
        .values("id", "name", "state", "priority_class__name", "submitter__username", "started_at")
    }
    # A stopping job's badge says why it stops, as on the jobs list (a query only if one is).
    reasons = stop_reasons([j["id"] for j in jobs.values() if j["state"] == JobState.PREEMPTING])
    for j in jobs.values():
        j["state_label"] = stopping_label(reasons.get(j["id"])) if j["state"] == JobState.PREEMPTING else j["state"]
    holders = []
    for entry in sorted(held.values(), key=lambda e: e["slots"][0]):
        entry["job"] = jobs.get(entry["job_id"]) if entry["job_id"] is not None else None
        holders.append(entry)
    # The node's own events (registration, state changes: fleet facts, like its state) for
    # everyone; events of jobs on it only for readers of the job's team.
    events = Event.objects.filter(node=node)
    if not who.is_admin:
        events = events.filter(Q(team__isnull=True) | Q(team_id__in=who.team_ids))
    newest = list(events.order_by("-created_at", "-id").values("created_at", "kind", "reason", "message", "actor")
                  [:NODE_EVENTS])
    job_mentions.prefetch(e["message"] for e in newest)  # their named jobs' teams: one query
    last = node.last_heartbeat_at
    placement = figures.fleet_heatmap(
        grid, key="placement", title=f"GPUs of {node.name}",
        caption="Each GPU slot of this node, coloured by the team holding it; pale slots are free, grey ones sit "
                "on a node that takes no work.",
    )
    return {
        "node": node,
        "row": row,
        "holders": holders,
        "free": row.free if row else node.gpu_count,
        "events": newest,
        "heartbeat_age_s": (now - last).total_seconds() if last else None,
        # A lease in the past has run out (it said "until 23:29:21 UTC (now)" hours later).
        "lease_expired": node.agent_lease_expires_at is not None and node.agent_lease_expires_at <= now,
        "is_admin": who.is_admin,
        "returns_as": returns_as(node.state, node.unschedulable),
        "actions": [(verb, reverse(f"v1:node-{verb}", args=[node.pk]), node_rows.action_question(verb, node.name))
                    for verb in node_actions(node.state, node.unschedulable)] if who.is_admin else [],
        "charts": [placement],
    }


TIERS = ("allocated", "active", "productive")


def tiers_payload(node: Node, tiers: NodeTiers) -> dict[str, Any]:
    """The node's tiers for the page: a row per tier (GPU-hours, share of the node's capacity),
    a row per GPU, and the chart of shares per bucket."""
    points = [
        {"at": b.start, "until": b.end, **{t: float(getattr(b, t) / b.capacity) for t in TIERS}}
        for b in tiers.buckets if b.capacity > 0
    ]
    name = {60: "minute", 3600: "hour", 86400: "day"}.get(tiers.bucket, f"{tiers.bucket} s")
    note = f" One point per {name}, time-averaged."
    if tiers.cut_at_horizon:
        note += f" Per-node figures reach back to {figures.ts(tiers.reaches_back_to)} UTC (the raw samples' retention)."
    return {
        "rows": [{"tier": t, "gpu_hours": tiers.hours(t), "share": tiers.share(t)} for t in TIERS],
        "capacity_gpu_hours": tiers.hours("capacity"),
        "gpus": [
            {"index": g.index, **{t: getattr(g, t) / 3600 for t in TIERS},
             **{f"{t}_share": (getattr(g, t) / g.capacity if g.capacity > 0 else None) for t in TIERS}}
            for g in tiers.gpus
        ],
        "chart": figures.node_utilization_tiers(points, node.name, source_note=note, window_end=tiers.asked_end),
        "figures": tiers,
    }


def node_maintenance(request: HttpRequest, node: Node, is_admin: bool) -> dict[str, Any]:
    """The node page's maintenance windows, newest first: the last NODE_WINDOWS (one query; two
    more, their nodes and running jobs, once it has one). The page and its live JSON both give
    them, so a window cancelled from the page (or changed elsewhere) shows as it now stands."""
    mine = list(MaintenanceWindow.objects.filter(nodes=node).select_related("created_by")
                .prefetch_related("nodes").order_by("-start_at", "-id")[:NODE_WINDOWS])
    return {"windows": maintenance_rows(request, mine), "is_admin": is_admin, "node_page": True}


@login_required
@require_GET
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    node = _node(name)
    payload = node_payload(request, node)
    window, window_error = window_choice(request.GET.get("window"))
    now = timezone.now()
    since, until = window.bounds(now)
    tiers = tiers_payload(node, node_tiers(node, since, until, now))
    charts = {c.key: c for c in [*payload["charts"], tiers["chart"]]}
    return render(request, "frontend/node_detail.html", {
        **payload, "page": "nodes", "charts": charts, "tiers": tiers, "window": window, "windows": WINDOWS,
        "window_error": window_error,
        "maintenance": node_maintenance(request, node, payload["is_admin"]),
        "live_url": reverse("frontend:node-json", args=[node.name]), "live_every": 10000,
    })


@login_required
@answers_json
@require_GET
def node_json(request: HttpRequest, name: str) -> JsonResponse:
    node = _node(name)
    payload = node_payload(request, node)
    windows = {"maintenance": node_maintenance(request, node, payload["is_admin"])}
    return JsonResponse({
        # The node's state, as the job page's JSON gives the job's: an action's notice on the page
        # ("a100-04: ready → cordoned: ...") goes once the node has moved on (qm.js settleActionResult).
        "state": node.state,
        "charts": figures.charts_json(payload["charts"]),
        "html": {"node-status": render_to_string("frontend/_node_status.html", payload, request=request),
                 "node-maintenance-windows": render_to_string("frontend/_maintenance_windows.html", windows,
                                                              request=request)},
    })
