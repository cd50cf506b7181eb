"""`/what-if/`: the last N days of real jobs replayed under the live policy and another one.

The form's Replay is a POST (with its CSRF token) that starts a replay on a thread
(frontend/whatif.py) and redirects to `/what-if/?…&key=…`, a GET that shows it and follows it
through `/ui/what-if.json?key=…`: progress while it runs, the comparison when it is done. A GET
never starts a replay."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods

from controlplane.services import access
from controlplane.services.snapshot import scheduler_config
from controlplane.shared_store import StoreUnreachable
from frontend import figures, whatif
from frontend.replay_worker import Replay
from frontend.views.live_json import answers_json

WAIT_METRICS = (
    ("wait_mean_min", "mean, all jobs"),
    ("wait_small_mean_min", "mean, < 1 node"),
    ("wait_small_p95_min", "p95, < 1 node"),
    ("wait_large_mean_min", "mean, ≥ 1 node"),
    ("wait_large_p95_min", "p95, ≥ 1 node"),
)


#: The words a flag of the form (backfill, preemption) takes; any other is refused, naming it.
FLAG_WORDS = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}


def _flag(name: str, raw: str | None, default: bool, errors: dict[str, str]) -> bool:
    """The flag `raw` says (the live policy's `default` when absent). Until 7 Dec a word other
    than on and its synonyms read as off: a hand-edited `?backfill=of` replayed without backfill
    unsaid, where a bad placement was refused."""
    if raw is None:
        return default
    if raw.lower() not in FLAG_WORDS:
        errors[name] = f"{name}: choose on or off, got {raw[:64]!r}"
        return default
    return FLAG_WORDS[raw.lower()]


def per_team(result: Replay, measure: str) -> tuple[list[tuple[str, str]], list[tuple[str, dict[str, Any]]]]:
    """One run's per-team figure as a run of `what_if_bars`: the teams are its measures."""
    teams = sorted({team for run in result.teams for team in run})
    runs = [(label, {team: figures_of.get(team, {}).get(measure) for team in teams})
            for (label, _), figures_of in zip(result.runs, result.teams, strict=True)]
    return [(team, team) for team in teams], runs


def replay_charts(result: Replay) -> list[figures.Chart]:
    runs = result.runs
    team_waits = per_team(result, "wait_mean_min")
    team_hours = per_team(result, "allocated_gpu_hours")
    return [
        figures.what_if_bars(
            "wait", "Waits", "How long jobs waited to start under each policy; jobs still waiting at the end "
            "count until then in the overall mean.", "wait (minutes)", WAIT_METRICS, runs, suffix=" min"),
        figures.what_if_bars(
            "allocation", "Allocation", "Share of the fleet's GPU time allocated to jobs over the replay, next to "
            "what the same jobs would have held in the window had none waited (work past the window's end, such as "
            "a running job's remaining runtime limit, counts in neither).", "% of fleet GPU-time",
            # Not the simulator's offered_load: it counts each job's whole run, past the window's
            # end too, so a window ending on jobs just started showed several times the GPU time
            # any scheduler could have allocated in it, next to waits of zero.
            (("allocated", "allocated"), ("no_wait_allocated", "if no job waited")), runs, scale=100.0, suffix="%"),
        figures.what_if_bars(
            "stranded", "Stranded GPUs", "Mean free GPUs on partly used nodes while a whole-node job waited.",
            "GPUs (time mean)", (("stranded_gpus", "stranded GPUs"),), runs),
        figures.what_if_bars(
            "outcomes", "Jobs and preemptions", "Jobs finished by the end of the replay, jobs still waiting then, "
            "jobs the policy could never run (a quota table that lets their team hold less than they ask: left out "
            "of the waits, which would otherwise read as shorter for them), and preemptions.", "jobs",
            (("jobs_done", "finished"), ("jobs_pending_at_horizon", "still waiting"),
             ("jobs_never_runnable", "could never run"), ("preemptions", "preemptions")),
            runs),
        figures.what_if_bars(
            "team_waits", "Mean wait per team", "Each team's mean wait to start under each policy (jobs still waiting "
            "at the end count until then): who gains and who pays under another policy or quota table.",
            "wait (minutes)", *team_waits, suffix=" min", x_title="team"),
        figures.what_if_bars(
            "team_gpu_hours", "GPU-hours per team", "GPU-hours each team's jobs held over the replay under each "
            "policy: where another quota table moves the fleet's capacity.", "GPU-hours", *team_hours, x_title="team"),
    ]


def result_context(state: dict[str, Any] | None) -> dict[str, Any]:
    """What the result fragment shows for a replay's status."""
    if state is None:
        return {"state": {"state": "lost"}}
    context: dict[str, Any] = {"state": state}
    if state["state"] == "done":
        context["result"] = state["replay"]
        context["charts"] = replay_charts(state["replay"])
    elif state["state"] == "running":
        context["percent"] = round(100 * float(state.get("progress", 0.0)))
    return context


def quota_rows(cells: list[whatif.QuotaCell], gpu_types: list[str]) -> list[tuple[str, list[whatif.QuotaCell]]]:
    """The quota table's cells as rows per team, columns in `gpu_types` order."""
    by_team: dict[str, list[whatif.QuotaCell]] = {}
    for cell in cells:
        by_team.setdefault(cell.team, []).append(cell)
    order = {name: i for i, name in enumerate(gpu_types)}
    return [(team, sorted(row, key=lambda c: order[c.gpu_type])) for team, row in by_team.items()]


#: The form's own fields, carried from a POST that starts a replay to the GET that shows it.
FORM_FIELDS = ("days", "placement", "backfill", "preemption")


def _form(request: HttpRequest, params: QueryDict) -> tuple[dict[str, Any], whatif.Fleet | None]:
    """The page's context for the form's values in `params` (a GET's or a POST's): the policy
    asked for, and each bad field in `errors`."""
    live = whatif.live_policy(scheduler_config())
    other_placement = "spread" if live.placement == "pack" else "pack"
    placement = params.get("placement") or other_placement
    errors: dict[str, str] = {}
    try:
        days = int(params.get("days") or 7)
    except ValueError:
        days, errors["days"] = 7, f"days: expected a whole number of days, got {params.get('days')!r}"
    if not errors and not 1 <= days <= whatif.MAX_DAYS:
        errors["days"] = f"days: pick 1 to {whatif.MAX_DAYS}, got {days}"
    if placement not in whatif.PLACEMENTS:
        errors["placement"], placement = f"placement: choose pack or spread, got {placement!r}", other_placement
    fleet: whatif.Fleet | None
    try:
        fleet = whatif.real_fleet()
    except whatif.ReplayRefused as exc:
        fleet, cells, quotas, note = None, [], None, ""
        refused = str(exc)
    else:
        refused = ""
        cells, quota_errors = whatif.quota_table(fleet, params)
        errors.update(quota_errors)
        # A member reads and changes their own teams' quotas only, as the API's quotas/ and the
        # teams page let them; the replay keeps every other team's live quota.
        teams = set(access.visible_teams(request.user).values_list("name", flat=True))
        for name in sorted(k for k in params if whatif.is_quota_field(k) and k not in errors):
            team = name.split(":")[1]
            if team not in teams:
                errors[name] = f"{name}: {team[:64]} is not a team of yours: the replay keeps its live quota"
        quotas, note = whatif.quotas_of(fleet, cells)
        cells = [cell for cell in cells if cell.team in teams]
    backfill = _flag("backfill", params.get("backfill"), live.backfill, errors)
    preemption = _flag("preemption", params.get("preemption"), live.preemption, errors)
    policy = whatif.Policy(placement=placement, backfill=backfill, preemption=preemption, quotas=quotas,
                           quota_note=note)
    gpu_types = list(fleet.gpus_by_type) if fleet is not None else []
    return {
        "page": "what-if", "live": live, "policy": policy, "days": days, "max_days": whatif.MAX_DAYS,
        "placements": whatif.PLACEMENTS, "max_jobs": whatif.MAX_TRACE_JOBS, "errors": errors,
        "error": refused, "asked": False, "needs_plotly": True,
        "quota_types": list(fleet.gpus_by_type.items()) if fleet is not None else [],
        "fleet_gpus": fleet.total_gpus if fleet is not None else 0,
        "quota_rows": quota_rows(cells, gpu_types),
    }, fleet


def _show(context: dict[str, Any], key: str) -> None:
    """The replay stored under `key` (running, done, failed, or lost) into the page's context."""
    state = whatif.status(key)
    context.update(result_context(state), asked=True)
    if state is not None and state["state"] in ("running", "busy"):
        context["live_url"] = reverse("frontend:what-if-json") + "?" + urlencode({"key": key})
        context["live_every"] = 2000


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def what_if(request: HttpRequest) -> HttpResponse:
    """GET shows the form (prefilled from its query) and, given `key`, that replay as it stands;
    it never starts one. POST (the form's Replay, with its CSRF token) starts the replay and
    redirects to the GET that follows it: a link or an <img> in a page cannot start replays in
    the name of whoever opens it."""
    params = request.POST if request.method == "POST" else request.GET
    context, fleet = _form(request, params)
    if context["errors"]:  # each bad field named on the page, nothing started
        return render(request, "frontend/what_if.html", context, status=400)
    if request.method != "POST":
        if request.GET.get("key"):
            _show(context, request.GET["key"])
        elif request.GET.get("run"):  # the old link that started a replay: it no longer does
            context["notice"] = "A replay starts from the Replay button only; press it to run this one."
        return render(request, "frontend/what_if.html", context)
    if fleet is None:
        return render(request, "frontend/what_if.html", context, status=409)
    try:
        replay_request = whatif.prepare(context["days"], context["policy"], fleet=fleet)
    except whatif.ReplayRefused as exc:
        context["error"] = str(exc)
        return render(request, "frontend/what_if.html", context, status=409)
    try:
        state, _ = whatif.start(replay_request)
    except StoreUnreachable as exc:  # no lock, no replay: say so rather than start one blind
        context["error"] = (f"The replay did not start: {exc}. The what-if replays keep their lock "
                            "and progress there; try again once Redis is back.")
        return render(request, "frontend/what_if.html", context, status=503)
    if state["state"] == "busy":  # another replay holds the lock: nothing started, said here
        context.update(result_context(state), asked=True)
        return render(request, "frontend/what_if.html", context, status=409)
    query = [(k, v) for k in params if k in FORM_FIELDS or whatif.is_quota_field(k) for v in params.getlist(k)]
    response = HttpResponseRedirect(reverse("frontend:what-if") + "?" + urlencode([*query, ("key", replay_request.key)]))
    response.status_code = 303  # see other: the browser GETs the replay's page
    return response


@login_required
@answers_json
@require_GET
def what_if_json(request: HttpRequest) -> JsonResponse:
    key = request.GET.get("key", "")
    state = whatif.status(key)
    context = result_context(state)
    finished = state is None or state["state"] in ("done", "failed")
    return JsonResponse({
        "html": {"what-if-result": render_to_string("frontend/_what_if_result.html", context, request=request)},
        "stop": finished,
    })
