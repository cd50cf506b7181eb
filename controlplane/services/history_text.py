"""How the history says a job's GPUs, in one place: the `/history/` page and its CSV
(`job_history.HistoryRow`) and `qm history`. `qm` imports no Django, and neither does this module."""

from __future__ import annotations

from collections.abc import Sequence


def gpus_held_text(last_run: int | None, asked: int, none: str = "–") -> str:
    """The GPUs a job's latest run held: "8", "8 (asked 4)" for an elastic job that ran on more
    or fewer than it asked, `none` for a job that never held any (the page's "–"; `qm`'s empty
    cell). Until 5 Dec the history said the 4 an elastic job asked beside the GPU-hours of the 8
    it held."""
    if last_run is None:
        return none
    return str(last_run) if last_run == asked else f"{last_run} (asked {asked})"


def ended_waiting_again(started_at: object, last_run_gpus: int | None) -> bool:
    """An ended job that held GPUs once but has no latest run: a requeue cleared its start and it
    ended (was cancelled) before it ran again. Its start and elapsed are none while its GPUs,
    GPU-hours and nodes are its earlier runs'."""
    return started_at is None and last_run_gpus is not None


def ended_waiting_after_requeue(job_ids: Sequence[int]) -> str:
    """The line under the history's table, the page's and `qm history`'s alike, naming the jobs
    of `ended_waiting_again` (empty for none): their rows read "-" for the start and elapsed time
    beside GPUs, GPU-hours and nodes, a run with no start, until 7 Dec unexplained."""
    if not job_ids:
        return ""
    one = len(job_ids) == 1
    return (f"{'Job' if one else 'Jobs'} {', '.join(str(job_id) for job_id in job_ids)} ended waiting to run again "
            f"after a requeue: no run of {'it' if one else 'them'} started since, so no start or elapsed time; the "
            f"GPUs, GPU-hours and nodes shown are of {'its' if one else 'their'} earlier runs.")
