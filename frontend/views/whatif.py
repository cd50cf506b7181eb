"""`/what-if/`: the last N days of real jobs replayed under the live policy and another one."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from controlplane.services.snapshot import scheduler_config
from frontend import figures, whatif

WAIT_METRICS = (
    ("wait_mean_min", "mean, all jobs"),
    ("wait_small_mean_min", "mean, < 1 node"),
    ("wait_small_p95_min", "p95, < 1 node"),
    ("wait_large_mean_min", "mean, ≥ 1 node"),
    ("wait_large_p95_min", "p95, ≥ 1 node"),
)


def _flag(raw: str | None, default: bool) -> bool:
    if raw is None:
        return default
    return raw.lower() in {"on", "1", "true", "yes"}


def replay_charts(result: whatif.Replay) -> list[figures.Chart]:
    runs = result.runs
    return [
        figures.what_if_bars(
            "wait", "Waits", "How long jobs waited to start under each policy; jobs still waiting at the end "
            "count until then in the overall mean.", "wait (minutes)", WAIT_METRICS, runs, suffix=" min"),
        figures.what_if_bars(
            "allocation", "Allocation", "Share of the fleet's GPU time allocated to jobs over the replay, next to "
            "the load the jobs offered.", "% of fleet GPU-time",
            (("allocated", "allocated"), ("offered_load", "offered load")), runs, scale=100.0, suffix="%"),
        figures.what_if_bars(
            "stranded", "Stranded GPUs", "Mean free GPUs on partly used nodes while a whole-node job waited.",
            "GPUs (time mean)", (("stranded_gpus", "stranded GPUs"),), runs),
        figures.what_if_bars(
            "outcomes", "Jobs and preemptions", "Jobs finished by the end of the replay, jobs still waiting then, "
            "and preemptions.", "jobs",
            (("jobs_done", "finished"), ("jobs_pending_at_horizon", "still waiting"), ("preemptions", "preemptions")),
            runs),
    ]


@login_required
@require_GET
def what_if(request: HttpRequest) -> HttpResponse:
    live = whatif.live_policy(scheduler_config())
    other_placement = "spread" if live.placement == "pack" else "pack"
    placement = request.GET.get("placement") or other_placement
    error = ""
    try:
        days = int(request.GET.get("days") or 7)
    except ValueError:
        days, error = 7, f"days: expected a whole number of days, got {request.GET.get('days')!r}"
    if placement not in whatif.PLACEMENTS:
        error, placement = f"placement: choose pack or spread, got {placement!r}", other_placement
    policy = whatif.Policy(placement=placement, backfill=_flag(request.GET.get("backfill"), live.backfill),
                           preemption=_flag(request.GET.get("preemption"), live.preemption))
    context: dict[str, Any] = {
        "page": "what-if", "live": live, "policy": policy, "days": days, "max_days": whatif.MAX_DAYS,
        "placements": whatif.PLACEMENTS, "max_jobs": whatif.MAX_TRACE_JOBS, "error": error, "result": None,
    }
    if request.GET.get("run") and not error:
        try:
            result = whatif.replay(days, policy)
        except whatif.ReplayRefused as exc:
            context["error"] = str(exc)
        else:
            context["result"] = result
            context["charts"] = replay_charts(result)
    return render(request, "frontend/what_if.html", context)
