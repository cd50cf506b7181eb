"""`qm sprio` (Slurm's sprio): the waiting jobs you may see in queue order, each with its
priority (class value + aging points), its team's dominant share and its runtime limit."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_sprio_lists_your_waiting_jobs_in_queue_order_with_their_factors(alice_qm, fleet) -> None:
    now = timezone.now()
    old = f.make_job(fleet.ml, fleet.research, name="old", gpus=8, submitted_at=now - timedelta(hours=3, minutes=1))
    urgent = f.make_job(fleet.ml, fleet.production, name="urgent", gpus=8, submitted_at=now)
    f.make_job(fleet.vision, fleet.research, name="theirs", gpus=8, submitted_at=now - timedelta(hours=5))

    run = alice_qm("sprio")

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].startswith("Queue order (priority_fair_share): higher PRIORITY first")
    assert re.match(r"ORDER\s+ID\s+NAME\s+TEAM\s+CLASS\s+PRIORITY\s+= CLASS\s+\+ AGE\s+SHARE\s+LIMIT$", lines[1])
    value = fleet.research.value
    assert re.match(rf"\s*1\s+{urgent.pk}\s+urgent\s+ml\s+{fleet.production.name}\s+{fleet.production.value}\s+"
                    rf"{fleet.production.value}\s+0\s+0\.000\s+1h$", lines[2]), run.out
    # vision's older job waited 5 h: +5 points, ahead of ml's 3 h old one (+3), but not listed
    assert re.match(rf"\s*3\s+{old.pk}\s+old\s+ml\s+research\s+{value + 3}\s+{value}\s+3\s+0\.000\s+1h$", lines[3]), run.out
    assert lines[4] == "3 jobs in line in all; ORDER is the next cycle's."
    assert "theirs" not in run.out


def test_sprio_of_jobs_not_in_line_says_so(alice_qm, fleet) -> None:
    held = f.make_job(fleet.ml, fleet.research, name="held", gpus=8, hold="user")
    run = alice_qm("sprio", str(held.pk))
    assert run.code == 0 and run.out.splitlines()[1] == (
        "None of those jobs is in line (0 jobs in line in all; held jobs and jobs waiting for a dependency are not "
        "in line).")


def test_sprio_refuses_a_job_that_is_not_an_id(alice_qm, fleet) -> None:
    run = alice_qm("sprio", "abc")
    assert run.code != 0 and "'abc' is not a job id" in run.err


def test_explain_says_where_a_job_in_line_stands_and_why(alice_qm, fleet) -> None:
    now = timezone.now()
    f.make_job(fleet.ml, fleet.production, name="urgent", gpus=8, submitted_at=now)
    old = f.make_job(fleet.ml, fleet.research, name="old", gpus=8, submitted_at=now - timedelta(hours=2, minutes=1),
                     pending_code="InsufficientGpus")
    explained = alice_qm("explain", str(old.pk)).out
    assert re.search(rf"^  priority:\s+{fleet.research.value + 2} \(class research {fleet.research.value} \+ 2 for "
                     r"waiting\); team ml's share 0\.000; 2 of 2 in line for the next cycle \(qm sprio\)$",
                     explained, re.M), explained
    held = f.make_job(fleet.ml, fleet.research, name="held", gpus=8, hold="user", pending_code="Held")
    assert "priority:" not in alice_qm("explain", str(held.pk)).out  # not in line


def test_sprio_of_an_unknown_job_or_anothers_is_an_error_naming_it(alice_qm, fleet) -> None:
    """It printed "None of those jobs is in line" and exited 0 for a job that does not exist (a
    typo) or that is not yours to see, as though it merely waited out of line."""
    theirs = f.make_job(fleet.vision, fleet.research, name="theirs", gpus=8)

    unknown = alice_qm("sprio", "999999")
    hidden = alice_qm("sprio", str(theirs.pk))

    assert (unknown.code, unknown.out, unknown.err) == (1, "", "error: No job 999999, or not yours to see.\n")
    assert (hidden.code, hidden.out, hidden.err) == (1, "", f"error: No job {theirs.pk}, or not yours to see.\n")


def test_sprio_lists_the_jobs_in_line_and_says_what_the_others_are(alice_qm, fleet) -> None:
    waiting = f.make_job(fleet.ml, fleet.research, name="waiting", gpus=8)
    running = f.make_job(fleet.ml, fleet.research, name="running", gpus=8, state=JobState.RUNNING,
                         started_at=timezone.now())

    run = alice_qm("sprio", str(waiting.pk), str(running.pk), "999999")

    assert run.code == 1
    lines = run.out.splitlines()
    assert re.match(rf"\s*1\s+{waiting.pk}\s+waiting\s+ml\s+research\s", lines[2]), run.out
    assert lines[3:] == ["1 job in line in all; ORDER is the next cycle's.",
                         f"Job {running.pk} (running) is running; not in line."]
    assert run.err == "error: No job 999999, or not yours to see.\n"
    assert alice_qm("sprio", str(running.pk), "--json").code == 0


def test_sprio_of_a_held_job_says_it_is_held(alice_qm, fleet) -> None:
    held = f.make_job(fleet.ml, fleet.research, name="held", gpus=8, hold="user")

    run = alice_qm("sprio", str(held.pk))

    assert run.code == 0 and run.out.splitlines()[2] == f"Job {held.pk} (held) is pending (held); not in line."
