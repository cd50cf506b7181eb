"""How the history says a job's GPUs, in one place: the `/history/` page and its CSV
(`job_history.HistoryRow`) and `qm history`. `qm` imports no Django, and neither does this module."""

from __future__ import annotations


def gpus_held_text(last_run: int | None, asked: int, none: str = "–") -> str:
    """The GPUs a job's latest run held: "8", "8 (asked 4)" for an elastic job that ran on more
    or fewer than it asked, `none` for a job that never held any (the page's "–"; `qm`'s empty
    cell). Until 5 Dec the history said the 4 an elastic job asked beside the GPU-hours of the 8
    it held."""
    if last_run is None:
        return none
    return str(last_run) if last_run == asked else f"{last_run} (asked {asked})"
