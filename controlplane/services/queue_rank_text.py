"""What a waiting job's place in the next cycle's priority order says, in one place: the job
page's Priority row (frontend/views/jobs.queue_place) and `qm explain`'s `priority` line. `qm`
imports no Django, and neither does this module.

The order (services/job_priority.py, `qm sprio`) ranks every job in line by priority alone; a
job that can never run as asked (`CanNeverRun`, not `resolvable`) is in it too, but the cycle
places it after every job that can start, which its queue position says. Its rank is what its
priority alone would give it, and the words say so: until 7 Dec `qm explain` said "1 of 2 in
line for the next cycle" of such a job, a second place beside its queue position.
"""

from __future__ import annotations


def rank_in_line(order: int, in_line: int, *, can_run: bool, never_ahead: int = 0) -> str:
    """A waiting job's rank among the `in_line` jobs of the next cycle's order: "2 of 12 in line
    for the next cycle", or of a job that can never run as asked (`can_run` False) the rank its
    priority alone gives it and where the cycle places it instead. A job that can run behind
    `never_ahead` such jobs is placed before them: its rank by priority, and its place among the
    jobs that can start, which its queue position says (until 7 Dec its page and `qm explain` said
    "2 of 2 in line for the next cycle" beside "queue position: 1", one place each)."""
    if can_run and never_ahead:
        those = "the job" if never_ahead == 1 else f"the {never_ahead} jobs"
        return (f"{order} of {in_line} by priority, {_among_those_that_can_start(order, never_ahead)}: {those} ahead "
                f"of it {_placed_after('it' if never_ahead == 1 else 'them')}")
    if can_run:
        return f"{order} of {in_line} in line for the next cycle"
    return (f"{order} of {in_line} by priority alone, but as asked it can never run, so the cycle places it after "
            "every job that can start (its queue position)")


def ranks_in_line_never(ranks: str, in_line: int) -> str:
    """`rank_in_line`'s words of several jobs that can never run as asked (an array's tasks, which
    `qm sprio` says in one footnote): "2–51 of 52 by priority alone, but as asked they can never
    run, ...". `ranks`: their ranks as said ("2–51", "2–20, 24")."""
    return (f"{ranks} of {in_line} by priority alone, but as asked they can never run, so the cycle places them "
            "after every job that can start (their queue positions)")


def _among_those_that_can_start(order: int, never_ahead: int) -> str:
    return f"{order - never_ahead} among the jobs that can start (its queue position)"


def _placed_after(them: str) -> str:
    return f"can never run as asked and the cycle places {them} after every job that can start"


def order_cell(order: int, *, can_run: bool, never_ahead: int) -> int | str:
    """`qm sprio`'s ORDER cell: a job's rank by priority, marked `*` for one that can never run as
    asked (`ranks_in_line_never`'s footnote), or followed by its place among the jobs that can
    start, "7 (5)", for one behind `never_ahead` such jobs (`order_cell_note` says it): its page
    and `qm explain` said 5 where sprio's ORDER said 7 with no mark (the researcher audit, 7 Dec)."""
    if not can_run:
        return f"{order}*"
    return f"{order} ({order - never_ahead})" if never_ahead else order  # a number, as a table aligns one


def order_cell_note() -> str:
    """The footnote of `order_cell`'s "7 (5)", in the words of `rank_in_line`."""
    return (f"ORDER N (M): N by priority, M among the jobs that can start (its queue position): jobs ahead of it "
            f"{_placed_after('them')}.")
