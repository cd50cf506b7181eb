"""`/`: the fleet at a glance, and `/ui/overview.json`, the same figures for live updates."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from controlplane.choices import NodeState
from controlplane.models import FleetSample, Node, PriorityClass, Team
from controlplane.services.access import access_of
from controlplane.services.fleet_figures import (
    RUNNING_STATES,
    WAITING_STATES,
    fragmentation_of,
    loop_stalled,
    queue_figures,
)
from frontend import figures
from frontend.fleet_series import fleet_series, lost_work_since, since_the_fleet_had_gpus
from frontend.heatmap import fleet_grid
from frontend.templatetags import qm
from frontend.utilization import utilization_points
from frontend.views.live_json import answers_json
from frontend.windows import WINDOWS, Window, window_choice


def start_of_day(now: datetime) -> datetime:
    return timezone.localtime(now, timezone.get_fixed_timezone(0)).replace(hour=0, minute=0, second=0, microsecond=0)


def overview_payload(request: HttpRequest, window: Window, team: str | None, teams: Sequence[str] = ()) -> dict[str, Any]:
    """Everything the overview shows, in a fixed number of queries whatever the fleet's size.
    `teams`: every team's name, whose GPUs the heat map may show (its colour bar's room)."""
    now = timezone.now()
    since, until = window.bounds(now)
    samples = fleet_series(since, until)
    latest = samples[-1] if samples else None
    priority_order = list(PriorityClass.objects.order_by("-value", "name").values_list("name", flat=True))
    tiers, tier_note = utilization_points(since, until, window.key, now)
    grid = fleet_grid(request.user)
    today = lost_work_since(start_of_day(now))
    # A fleet with no node in it may have every node retired (one query, only then).
    retired = 0 if grid else Node.objects.filter(state=NodeState.RETIRED).count()
    heatmap = figures.fleet_heatmap(grid, teams=teams, retired=retired)
    # The tiles count the fleet and the queue now, as the heat map beside them, the Nodes and Jobs
    # pages, `qm sinfo` and the API's metrics/queue/ and metrics/fragmentation/ do (one definition,
    # services/fleet_figures.py): read from the last cycle's sample, they lagged those by up to a
    # sample (5 s; 20 of 40 polls on the demo read another stranded count than the API).
    pools = fragmentation_of(row.figures for row in grid)
    queue = queue_figures(now)
    # A window that ends now shades a loop silent since its last sample up to now.
    live_until = until if until >= now else None
    # The charts of the fleet's GPUs start when it had one; the queue's and the oldest wait's do
    # not: jobs can wait before any node joins.
    with_gpus, gpus_from = since_the_fleet_had_gpus(samples)
    charts = [
        figures.queue_depth(samples, priority_order, team, until=live_until),
        figures.utilization_tiers(tiers, source_note=tier_note, window_end=until),
        figures.from_first_gpu(figures.stranded_gpus(with_gpus, until=live_until), gpus_from),
        figures.from_first_gpu(figures.largest_free_block(with_gpus, sorted({row.pool for row in grid}),
                                                          until=live_until), gpus_from),
        heatmap,
        figures.oldest_feasible_wait(samples, until=live_until),
    ]
    numbers: dict[str, Any] = {
        "as_of": latest["at"] if latest else None,
        "total_gpus": sum(p.total_gpus for p in pools),
        "allocated_gpus": sum(p.allocated_gpus for p in pools),
        # Idle GPUs on nodes that take no work (not ready, or inside a maintenance window now), as
        # `qm sinfo` (AWAY) and metrics/fragmentation/ (unavailable_gpus) count them; the GPUs in
        # service are the rest: held, or free on nodes that take work.
        "away_gpus": sum(p.unavailable_gpus for p in pools),
        "free_gpus": heatmap.notes.get("free_gpus", 0),
        "stranded_gpus": sum(p.stranded_gpus for p in pools),
        "pending_jobs": queue.pending_jobs,
        "running_jobs": queue.running_jobs,
        # Which waiting jobs are feasible is the cycle's finding: as of the last one.
        "oldest_feasible_pending_s": latest["oldest_feasible_pending_s"] if latest else None,
        # ... of the jobs waiting at that cycle: with some waiting and none feasible (held, waiting
        # for another job, never able to run as asked) the tile read "nobody waits" beside them
        "waiting_at_cycle": latest["pending_jobs"] if latest else None,
        "preemptions_today": today["preemptions"],
        "fenced_requeues_today": today["fenced_requeues"],
        "lost_gpu_hours_today": today["lost_gpu_hours"],
        # Nodes whose agent does not answer (suspect, down, quarantined): no new work goes there.
        "silent_nodes": silent_nodes(grid),
        # How long ago the newest cycle sample was taken (a sample is stored every few seconds
        # of a running loop): past loop_stalled_after_s the loop has stopped, and every figure
        # above is that old.
        "as_of_age_s": (now - latest["at"]).total_seconds() if latest else None,
    }
    if latest is None:
        # No cycle in this window: a loop silent for longer than the window is said as such,
        # not "none yet" as on a fleet that never ran (one query, only then); its last cycle's
        # finding is the oldest wait's, which read "nobody waits" beside the jobs waiting.
        newest = FleetSample.objects.filter(at__lte=now).order_by("-at").values(
            "at", "oldest_feasible_pending_s", "pending_jobs").first()
        if newest is not None:
            numbers["as_of"], numbers["as_of_age_s"] = newest["at"], (now - newest["at"]).total_seconds()
            numbers["oldest_feasible_pending_s"] = newest["oldest_feasible_pending_s"]
            numbers["waiting_at_cycle"] = newest["pending_jobs"]
    return {"charts": charts, "numbers": numbers, "text": overview_text(numbers)}


def overview_text(n: dict[str, Any]) -> dict[str, str]:
    """The tiles' words, formatted once here for the page and for its live updates."""
    def count(value: Any) -> str:
        return "–" if value is None else f"{value:,}"

    return {
        "allocated_gpus": count(n["allocated_gpus"]),
        "total_gpus": count(n["total_gpus"]),
        "in_service_gpus": count(n["total_gpus"] - n["away_gpus"]),
        "away_gpus": count(n["away_gpus"]),
        "pending_jobs": count(n["pending_jobs"]),
        "running_jobs": count(n["running_jobs"]),
        "stranded_gpus": count(n["stranded_gpus"]),
        "oldest_feasible_pending_s": qm.duration(n["oldest_feasible_pending_s"])
        if n["oldest_feasible_pending_s"] is not None
        else "none feasible" if n.get("waiting_at_cycle")
        # Which waiting jobs can run is a cycle's finding: before the first, none was judged.
        else "no cycle yet" if n.get("as_of") is None and n["pending_jobs"]
        else "nobody waits",
        "preemptions_today": count(n["preemptions_today"]),
        "fenced_requeues_today": count(n["fenced_requeues_today"]),
        "lost_gpu_hours_today": qm.as_gpu_hours(n["lost_gpu_hours_today"]),
        "silent_nodes": count(sum(c for c, _ in n["silent_nodes"].values())),
        "silent_nodes_said": ", ".join(f"{c} {state} ({g:,} GPU{'s' if g != 1 else ''})" for state, (c, g) in n["silent_nodes"].items())
        # An empty fleet has no agent to answer (every node retired, or none registered yet).
        or ("every node's agent answers" if n["total_gpus"] else "no node in the fleet"),
        "as_of": qm.utc(n["as_of"]) if n["as_of"] else "none yet",
        "loop": loop_warning(n["as_of"], n["as_of_age_s"]),
    }


#: Health states the control loop sets when a node's agent stops answering, worst first: what
#: the "Nodes not answering" tile counts and the Nodes page it links to lists (`?state=` each).
SILENT_STATES = (NodeState.QUARANTINED, NodeState.DOWN, NodeState.SUSPECT)


def silent_nodes(grid: list[Any]) -> dict[str, tuple[int, int]]:
    """Per health state of a node whose agent does not answer (quarantined, down, suspect; worst
    first, only those with a node): how many nodes and GPUs. From the heat map's rows: no query."""
    out: dict[str, tuple[int, int]] = {}
    for state in SILENT_STATES:
        rows = [r for r in grid if r.state == state]
        if rows:
            out[str(state)] = (len(rows), sum(len(r.slots) for r in rows))
    return out


def tile_urls(request: HttpRequest) -> dict[str, str]:
    """The page each tile links to, listing the rows it counts: a tile's number is that page's
    rows. The job tiles count every team's jobs, which only an admin's Jobs page lists: a member's
    lists their team's, finance has none, so theirs link nowhere rather than to other numbers."""
    nodes = reverse("frontend:nodes")
    urls = {"silent_nodes": nodes + "?" + urlencode([("state", str(s)) for s in SILENT_STATES])}
    if access_of(request.user).is_admin:
        jobs = reverse("frontend:jobs")
        urls["pending_jobs"] = jobs + "?" + urlencode([("state", str(s)) for s in WAITING_STATES])
        urls["running_jobs"] = jobs + "?" + urlencode([("state", str(s)) for s in RUNNING_STATES])
    return urls


def loop_warning(as_of: datetime | None, age_s: float | None) -> str:
    """The words the overview shows when the scheduling loop has stopped ("" while it runs)."""
    if as_of is None or age_s is None or not loop_stalled(age_s):
        return ""
    return (f"The scheduling loop has not run for {qm.duration(age_s)} (since {qm.utc(as_of)}): the charts and the "
            "oldest wait are that old, and nothing new is admitted until it is back; the other tiles count now.")


def _filters(request: HttpRequest) -> tuple[Window, list[str], str | None, str, str]:
    """The window asked for, every team's name, the team whose queue is asked for (if any), and
    what is wrong with the window and with the team asked for ("" for nothing: `window_choice`;
    a team no longer or never there is said, and the queue of all teams shown, not dropped
    unsaid under a filter that still read as set)."""
    window, window_error = window_choice(request.GET.get("window"))
    teams = list(Team.objects.order_by("name").values_list("name", flat=True))
    team = (request.GET.get("team") or "").strip() or None
    team_error = ""
    if team is not None and team not in teams:
        team_error = (f"team: no team named '{team[:40]}' (the teams are {', '.join(teams[:20])}"
                      f"{', …' if len(teams) > 20 else ''}); showing the queue of all teams.")
        team = None
    return window, teams, team, window_error, team_error


@login_required
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    window, teams, team, window_error, team_error = _filters(request)
    payload = overview_payload(request, window, team, teams)
    return render(request, "frontend/overview.html", {
        "page": "overview", "window": window, "windows": WINDOWS, "teams": teams, "team": team,
        "window_error": window_error, "team_error": team_error,
        "charts": {c.key: c for c in payload["charts"]}, "text": payload["text"],
        "tile_urls": tile_urls(request),
        "live_url": reverse("frontend:overview-json") + "?" + urlencode({"window": window.key, "team": team or ""}),
    })


@login_required
@answers_json
@require_GET
def overview_json(request: HttpRequest) -> JsonResponse:
    window, teams, team, _, _ = _filters(request)
    payload = overview_payload(request, window, team, teams)
    return JsonResponse({"charts": figures.charts_json(payload["charts"]), "text": payload["text"]})
