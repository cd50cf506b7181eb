"""`qm explain` and `qm status` say one thing of when a job starts that never can, in words:
`qm explain 12` said "latest start: unknown" and `qm status 12` "latest start: -" of a job no
node could ever hold (demo walk), as if a start were still to be estimated. A waiting job with no
estimate yet is said as its page says it in both (it was "unknown", one word for explain and status
alike, not a column a script reads: `qm list`'s START cell stays `-`)."""

from __future__ import annotations

import re

import pytest

from controlplane.choices import JobState
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow

NEVER = "none: it can never run as asked"


def test_a_job_that_can_never_run_has_no_latest_start_in_both(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, pending_code="NoCapableNode", pending_resolvable=False,
                     pending_message="No node has 64 GPUs.")

    explained = alice_qm("explain", str(job.pk)).out
    status = alice_qm("status", str(job.pk)).out

    assert re.search(rf"^  latest start:\s+{NEVER}$", explained, re.M), explained
    assert re.search(rf"^latest start:\s+{NEVER}$", status, re.M), status


def test_a_job_ended_unschedulable_says_so_in_status(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, state=JobState.UNSCHEDULABLE)

    status = alice_qm("status", str(job.pk)).out

    assert re.search(rf"^latest start:\s+{NEVER}$", status, re.M), status


def test_a_waiting_job_not_yet_estimated_says_the_pages_words_in_both(alice_qm, fleet) -> None:
    """Its page says "no estimate this cycle: the scheduler cannot promise a start for it yet";
    qm said "unknown" (the researcher audit, 7 Dec)."""
    job = f.make_job(fleet.ml, pending_code="Priority", queue_position=3)

    explained = alice_qm("explain", str(job.pk)).out
    status = alice_qm("status", str(job.pk)).out

    said = re.escape(NOT_ESTIMATED)
    assert re.search(rf"^  latest start:\s+{said}$", explained, re.M), explained
    assert re.search(rf"^latest start:\s+{said}$", status, re.M), status
    assert "unknown" not in explained + status


NOT_ESTIMATED = "no estimate this cycle: the scheduler cannot promise a start for it yet"


def test_a_job_waiting_for_a_dependency_says_after_what_in_both(alice_qm, fleet) -> None:
    """It has no ETA because the engine puts it in no line until its dependency is met, not
    because a cycle could not estimate it: "unknown" (and the page's "no estimate this cycle")
    read as the scheduler's failure. Both say until what, in the engine's words."""
    job = f.make_job(fleet.ml, pending_code="WaitingForDependency", pending_would_start_if="job 412 succeeds",
                     pending_message="Waits for job 412 to succeed (now running): until then it is not in the "
                                     "queue and holds nothing.")

    explained = alice_qm("explain", str(job.pk)).out
    status = alice_qm("status", str(job.pk)).out

    said = re.escape(DEPENDENCY)
    assert re.search(rf"^  latest start:\s+{said}$", explained, re.M), explained
    assert re.search(rf"^latest start:\s+{said}$", status, re.M), status


DEPENDENCY = "none until job 412 succeeds: it is not in line before then, so no start is estimated"


def test_a_held_job_has_none_while_it_is_held_in_both_as_its_page(alice_qm, fleet) -> None:
    """A held job is out of the queue, so no cycle estimates it: its page says "none while it is
    held". `qm explain` and `qm status` said "unknown" (the researcher audit, 7 Dec), as of a job a
    cycle has yet to estimate."""
    job = f.make_job(fleet.ml, pending_code="Held", hold="user", hold_reason="new data", queue_position=7)

    explained = alice_qm("explain", str(job.pk)).out
    status = alice_qm("status", str(job.pk)).out

    assert re.search(r"^  latest start:\s+none while it is held$", explained, re.M), explained
    assert re.search(r"^latest start:\s+none while it is held$", status, re.M), status
