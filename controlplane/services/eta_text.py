"""What a waiting job's ETA line says when it has no ETA, in one place: the job page (the
`no_eta` template filter) and `qm explain` / `qm status` (`latest start`). `qm` imports no
Django, and neither does this module.

A job with no ETA has one of four reasons, each said in its own words: it is held (out of the
queue, so no cycle estimates it), it can never run as asked, it waits for a dependency, or the
last cycle could not promise it a start. Until 7 Dec the page and qm said them apart: "none: as
asked, it will never start" on the page, "none: it can never run as asked" in qm; "no estimate
this cycle: the scheduler cannot promise a start for it yet" on the page, "unknown" in qm.

The engine puts a job waiting for a dependency in no line (scheduler_core/eligibility.py: it
cannot start until another job starts or ends), so it has no queue position and no ETA; what
would put it in line is its `would_start_if`, in the engine's words ("job 412 succeeds"). Until
7 Dec the page said "no estimate this cycle: the scheduler cannot promise a start for it yet"
and qm "unknown", as if a cycle had failed to estimate it.
"""

from __future__ import annotations

#: A held job: out of the queue until released, so no cycle estimates it.
HELD = "none while it is held"
#: A job the engine found can never run as asked (waiting with `resolvable` false, or ended
#: `unschedulable`): no wait brings its start.
NEVER = "none: it can never run as asked"
#: A job in line the last cycle gave no ETA (nothing ahead of it declares an end, or no cycle
#: has run since it was submitted).
NOT_ESTIMATED = "no estimate this cycle: the scheduler cannot promise a start for it yet"


def dependency_eta(would_start_if: str) -> str:
    """The ETA of a job waiting for a dependency: none until `would_start_if` ("job 412
    succeeds"), the engine's words for what puts it in line."""
    return f"none until {would_start_if}: it is not in line before then, so no start is estimated"


def no_eta(*, held: bool, resolvable: bool, code: str | None, would_start_if: str) -> str:
    """Why a waiting job has no ETA, as its page and `qm explain` / `qm status` say it: held, can
    never run as asked, waiting for a dependency (until what), or not estimated this cycle."""
    if held:
        return HELD
    if not resolvable:
        return NEVER
    if code == "WaitingForDependency" and would_start_if:
        return dependency_eta(would_start_if)
    return NOT_ESTIMATED
