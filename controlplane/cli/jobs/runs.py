"""`qm runs JOB` (`sacct --duplicates`): each run of a job, how it ended, where, what it held and
cost, and the work its requeue lost."""

from __future__ import annotations

import argparse
from decimal import Decimal
from typing import Any

from controlplane.cli import arguments, output
from controlplane.cli.client import LARGEST_PAGE, Api
from controlplane.cli.jobs.states import ended_words
from controlplane.services.run_text import HUNDREDTH, rounded_cumulatively, share_said
from scheduler_core.sentences import counted, gpu_hours

#: START is the bind (the job's `started_at`, `qm history`'s START, from which ELAPSED, GPU-H and
#: COST count); AGENTS UP its agents' report of it running. (BOUND and STARTED until 6 Dec: the
#: history's START read the one, and `STARTED` here the other.)
RUNS_COLUMNS = ["RUN", "GENERATION", "START (UTC)", "AGENTS UP", "ENDED", "ELAPSED", "HOW IT ENDED", "REASON", "EXIT",
                "GPUS", "WHERE", "GPU-H", "COST", "QUOTA", "LOST GPU-H"]
#: Left out of the narrow view (a terminal without --wide), which fits 80 columns: when each run
#: started, how long, how it ended (its exit code in the words), what it held and cost.
RUNS_WIDE = ["GENERATION", "AGENTS UP", "ENDED", "REASON", "EXIT", "WHERE", "QUOTA", "LOST GPU-H"]


def _runs_of(api: Api, job_id: int, latest: int | None = None) -> tuple[list[dict[str, Any]], int, float]:
    """The job's runs, oldest first, page by page (1,000 a request): all of them, or its
    `latest` ones; with how many it has and what they all cost (the API's `total_cost_usd`)."""
    runs: list[dict[str, Any]] = []
    want = latest
    params: dict[str, Any] = {"limit": min(LARGEST_PAGE, want or LARGEST_PAGE), "offset": 0}
    page = api.request("GET", f"jobs/{job_id}/runs/", params=params)
    if want is not None and page["count"] > want:  # the latest `want`: from count - want on
        params["offset"] = page["count"] - want
        page = api.request("GET", f"jobs/{job_id}/runs/", params=params)
    while True:
        runs.extend(page["results"])
        if not page["next"] or not page["results"] or (want is not None and len(runs) >= want):
            return (runs if want is None else runs[:want]), page["count"], page["total_cost_usd"]
        params["offset"] += len(page["results"])
        page = api.request("GET", f"jobs/{job_id}/runs/", params=params)


def _quota_cell(run: dict[str, Any]) -> str:
    """`own`, `borrowed` (from its bind), or `own→borrowed`: bound within its team's quota, it came
    to count as borrowed while it ran, as the API's `borrowed_from` says (after its `bound_at`),
    and as the job page's Quota column says it. A server without the field (before 7 Dec): the
    flag alone."""
    if not run["borrowed"]:
        return "own"
    since, bound = output.parse_time(run.get("borrowed_from")), output.parse_time(run["bound_at"])
    return "own→borrowed" if since is not None and bound is not None and since > bound else "borrowed"


def _run_where(run: dict[str, Any]) -> str:
    """ "h100-1×2", a heterogeneous gang's roles named: "a100-0×1(ps),a100-1×2(worker)"."""
    return ",".join(f"{g['node']}×{len(g['gpu_indices'])}" + (f"({g['role']})" if g["role"] else "")
                    for g in run["placement"])


def _run_row(run: dict[str, Any], shown_gpu_hours: Decimal) -> list[Any]:
    if run["ended_at"]:
        ended = output.utc_text(run["ended_at"], suffix="")
    elif run["stop_deadline"]:
        ended = "stopping by " + output.utc_text(run["stop_deadline"], suffix="")
    else:
        ended = "running" if run["started_at"] else "starting"
    generation = str(run["generation"]) + (f" (fenced: {run['fenced_generation']})" if run["fenced_generation"] else "")
    return [
        run["run"], generation, output.utc_text(run["bound_at"], suffix=""),
        output.utc_text(run["started_at"], suffix=""), ended, output.clock(run["elapsed_s"]), run["ended_how"],
        run["reason"], "" if run["exit_code"] is None else run["exit_code"], run["gpus"], _run_where(run),
        gpu_hours(float(share_said(shown_gpu_hours, run["gpu_hours"])), cell=True), f"${run['cost_usd']:,.2f}",
        _quota_cell(run),
        "" if run["lost_gpu_hours"] is None else gpu_hours(run["lost_gpu_hours"], cell=True),
    ]


def _no_runs(api: Api, job_id: int) -> str:
    """Why a job has no runs, by its state, as the job page's Runs panel says it: one still
    waiting has not run yet (it said "never bound to GPUs" of a job in line); an ended one never
    ran."""
    state = api.request("GET", f"jobs/{job_id}/")["state"]
    if state == "pending":
        return (f"Job {job_id} has not run yet: it waits (`qm explain {job_id}` says why); each time it is bound to "
                "GPUs a run is listed here.")
    if state == "unschedulable":
        return f"Job {job_id} has not run yet: it can never run as asked (`qm explain {job_id}` says why)."
    return f"Job {job_id} never ran: it {ended_words(state)} before it was bound to GPUs."


def cmd_runs(api: Api, args: argparse.Namespace) -> int:
    """A job's runs, oldest first, as `sacct --duplicates` lists a requeued job's: one per bind
    (preempted and requeued, stopped to resize, fenced, requeued after it ended, its last run),
    with when each was bound, started and ended, how it ended and why, where, the GPU-hours it
    held, what it cost (as showback charges it), its quota (own, borrowed, or own→borrowed for a
    run that came to count as borrowed while it ran) and the work its requeue lost; then the
    stops' notices, when and why a run came to count as borrowed, and the totals. --limit N:
    its latest N runs."""
    job_id = arguments.job_id(args.job)
    runs, count, total_cost = _runs_of(api, job_id, args.limit)
    if args.json:
        output.emit_json(runs)
        return 0
    if not runs:
        output.note(_no_runs(api, job_id))
        return 0
    # Each run's GPU-hours rounded cumulatively, as the job page's rows are and as the API rounds
    # their cents, so the cells add up to the totals line (until 7 Dec each was rounded on its
    # own: 0.01 and 0.01 above 0.03). From the API's figures, to four places.
    exact_hours = [Decimal(str(run["gpu_hours"])) for run in runs]
    shown = rounded_cumulatively(exact_hours, HUNDREDTH)
    output.table([_run_row(run, share) for run, share in zip(runs, shown, strict=True)],
                 RUNS_COLUMNS, cut=["HOW IT ENDED"], wide=RUNS_WIDE)
    for run in runs:
        if run["notice"]:
            output.note(f"run {run['run']}: {run['notice']}")
        if _quota_cell(run) == "own→borrowed":
            output.note(f"run {run['run']}: from {output.utc_text(run['borrowed_from'])}: {run['borrowed_because']}")
        after = run["requeued_after_end"]
        if after:
            held = " held" if after["held"] else ""
            why = f": {after['reason']}" if after["reason"] else ""
            output.note(f"run {run['run']}: then requeued{held} after it ended, by {after['by'] or 'someone'} "
                                 f"at {output.utc_text(after['at'])}{why}")
    held_said = float(share_said(sum(shown, Decimal("0.00")), sum(exact_hours, Decimal(0))))
    lost = sum(run["lost_gpu_hours"] or 0 for run in runs)
    cost = sum(round(run["cost_usd"] * 100) for run in runs) / 100  # whole cents: they add up exactly
    requeued = sum(1 for run in runs if run["outcome"] == "requeued")
    which = counted(len(runs), "run") if len(runs) == count else \
        f"Latest {len(runs)} of {count} runs ({runs[0]['run']}–{runs[-1]['run']})"
    output.note(f"{which}, {requeued} ended in a requeue; {gpu_hours(held_said)} GPU-hours held, costing ${cost:,.2f}; "
          f"{gpu_hours(lost)} GPU-hours of work lost.")
    if len(runs) < count:
        output.note(f"All {count} runs cost ${total_cost:,.2f}; `qm runs {job_id}` lists them all.")
    return 0
