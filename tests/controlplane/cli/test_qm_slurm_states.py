"""`--state` as Slurm's tools take it: `squeue -t PD,R`, `squeue -t RUNNING`, `sacct -s CD,F`,
`scancel -t PD`: comma-separated, in any case, Slurm's codes and words as well as qm's names.
`qm list -t PENDING` and `qm list -t pending,running` were refused by the API ("'pending,running'
is not a valid choice"), `qm sacct -s CD` by argparse, while `qm scancel -t PENDING` worked."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _ids(out: str) -> set[int]:
    """The table's job ids (not sacct's totals line, `2 jobs ended ...`)."""
    return {int(m.group(1)) for m in re.finditer(r"^\s*(\d+)\s+(?!jobs? ended)", out, re.M)}


@pytest.fixture
def jobs(fleet):
    alice, now = fleet.users["owner"], timezone.now()
    return {
        "pending": f.make_job(fleet.ml, name="waits", submitter=alice),
        "running": f.make_job(fleet.ml, name="runs", submitter=alice, state=JobState.RUNNING, started_at=now),
        "succeeded": f.make_job(fleet.ml, name="done", submitter=alice, state=JobState.SUCCEEDED, exit_code=0,
                                started_at=now, finished_at=now),
        "failed": f.make_job(fleet.ml, name="broke", submitter=alice, state=JobState.FAILED, exit_code=1,
                             started_at=now, finished_at=now),
        "timed_out": f.make_job(fleet.ml, name="slow", submitter=alice, state=JobState.TIMED_OUT, exit_code=143,
                                started_at=now, finished_at=now),
    }


@pytest.mark.parametrize(("given", "picked"), [
    (["-t", "PD,R"], {"pending", "running"}),
    (["-t", "pending,running"], {"pending", "running"}),
    (["-t", "RUNNING"], {"running"}),
    (["-t", "PD", "-t", "cd"], {"pending", "succeeded"}),
    (["--state", "F,TO"], {"failed", "timed_out"}),
    (["-t", "Timed-Out"], {"timed_out"}),
])
def test_list_takes_the_states_as_squeue_does(alice_qm, jobs, given, picked) -> None:
    run = alice_qm("squeue", *given)

    assert run.code == 0, run.err
    assert _ids(run.out) == {jobs[state].pk for state in picked}


def test_a_state_neither_names_is_still_refused_with_the_states_there_are(alice_qm, jobs) -> None:
    run = alice_qm("list", "-t", "PD,bogus")

    assert run.code == 1 and run.out == ""
    assert "'bogus' is not a valid choice; choose one of: pending, running" in run.err
    empty = alice_qm("list", "-t", " ")
    assert empty.code == 2 and "argument --state/-t: give a state" in empty.err


def test_sacct_takes_slurm_states_and_refuses_one_no_job_ends_in(alice_qm, jobs) -> None:
    run = alice_qm("sacct", "--since", "1d", "-s", "CD,F")

    assert run.code == 0, run.err
    assert _ids(run.out) == {jobs["succeeded"].pk, jobs["failed"].pk}
    refused = alice_qm("sacct", "-s", "PD")
    assert refused.code == 2 and refused.out == ""
    assert "'pending' is not a way a job ends: give succeeded, failed, cancelled or timed_out" in refused.err


def test_scancel_takes_slurm_codes(alice_qm, jobs) -> None:
    run = alice_qm("scancel", "-t", "PD", "-n", "waits")

    assert run.code == 0, run.err
    jobs["pending"].refresh_from_db()
    assert jobs["pending"].state == JobState.CANCELLED
