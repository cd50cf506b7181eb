"""What a waiting job's ETA line says when the engine gives it no ETA because it waits for a
dependency, in one place: the job page (the `dependency_eta` template filter) and `qm explain` /
`qm status` (`latest start`). `qm` imports no Django, and neither does this module.

The engine puts a job waiting for a dependency in no line (scheduler_core/eligibility.py: it
cannot start until another job starts or ends), so it has no queue position and no ETA; what
would put it in line is its `would_start_if`, in the engine's words ("job 412 succeeds"). Until
7 Dec the page said "no estimate this cycle: the scheduler cannot promise a start for it yet"
and qm "unknown", as if a cycle had failed to estimate it.
"""

from __future__ import annotations


def dependency_eta(would_start_if: str) -> str:
    """The ETA of a job waiting for a dependency: none until `would_start_if` ("job 412
    succeeds"), the engine's words for what puts it in line."""
    return f"none until {would_start_if}: it is not in line before then, so no start is estimated"
