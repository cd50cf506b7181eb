"""`qm list` shows a held job's POS as `held`, not a place in the queue: a held job is out of
the queue until released. Before, POS read the engine's rank (after every job in line), a number
beside jobs that are in line, while the jobs page showed it held and the job page said "a held job
is not in line". A job waiting for a dependency has no position at all (the engine gives it none):
its POS names the job it waits for, `after 12`."""

from __future__ import annotations

import re

import pytest

from controlplane.choices import JobHold, JobState
from controlplane.models import JobDependency
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_list_says_held_where_a_held_job_would_have_a_position(alice_qm, fleet) -> None:
    first = f.make_job(fleet.ml, name="first", pending_code="QuotaExceeded", queue_position=1)
    held = f.make_job(fleet.ml, name="held", pending_code="Held", queue_position=2, hold=JobHold.USER)

    run = alice_qm("list", "--sort", "queue_position")

    assert run.code == 0, run.err
    assert _pos(run.out, first.pk) == "1", run.out
    assert _pos(run.out, held.pk) == "held", run.out


def _pos(out: str, job_id: int) -> str:
    head = out.splitlines()[0]
    start, end = head.index("POS"), head.index("START")
    line = next(line for line in out.splitlines() if re.match(rf"^\s*{job_id}\s", line))
    return line[start:end].strip()


def test_list_names_the_job_a_dependent_job_waits_for_instead_of_a_position(alice_qm, fleet) -> None:
    first = f.make_job(fleet.ml, name="first", pending_code="QuotaExceeded", queue_position=1)
    done = f.make_job(fleet.ml, name="done", state=JobState.SUCCEEDED)
    running = f.make_job(fleet.ml, name="running", state=JobState.RUNNING)
    also = f.make_job(fleet.ml, name="also", state=JobState.PENDING, pending_code="QuotaExceeded", queue_position=2)
    waits = f.make_job(fleet.ml, name="waits", pending_code="WaitingForDependency", queue_position=None,
                       pending_would_start_if=f"job {running.pk} succeeds and job {also.pk} ends")
    either = f.make_job(fleet.ml, name="either", pending_code="WaitingForDependency", queue_position=None,
                        dependency_mode="any")
    JobDependency.objects.create(job=waits, upstream=done, condition="afterok", satisfied_at=done.submitted_at)
    JobDependency.objects.create(job=waits, upstream=running, condition="afterok")
    JobDependency.objects.create(job=waits, upstream=also, condition="afterany")
    JobDependency.objects.create(job=either, upstream=running, condition="afterok")
    JobDependency.objects.create(job=either, upstream=also, condition="afternotok")

    run = alice_qm("list", "--sort", "queue_position")

    assert run.code == 0, run.err
    assert _pos(run.out, first.pk) == "1", run.out
    # the dependency met (on `done`) is not named: it no longer holds the job back
    assert _pos(run.out, waits.pk) == f"after {running.pk},{also.pk}", run.out
    assert _pos(run.out, either.pk) == f"after {running.pk} or {also.pk}", run.out
    assert ("POS after N: waits for job N (its dependency) and is not in the queue until then; "
            "`qm explain ID` says for what.") in run.out


def test_an_any_of_job_names_only_the_alternatives_still_possible(alice_qm, fleet) -> None:
    # `after 9 or 218 or 219 or 220 …`: a sweep's tasks that had timed out (afterok never to be
    # met) stayed in POS, as wide as the rest of the row; the job waits on job 9 alone.
    running = f.make_job(fleet.ml, name="running", state=JobState.RUNNING)
    timed_out = f.make_job(fleet.ml, name="timed-out", state=JobState.TIMED_OUT)
    succeeded = f.make_job(fleet.ml, name="succeeded", state=JobState.SUCCEEDED)
    either = f.make_job(fleet.ml, name="either", pending_code="WaitingForDependency", queue_position=None,
                        dependency_mode="any")
    JobDependency.objects.create(job=either, upstream=running, condition="afterany")
    JobDependency.objects.create(job=either, upstream=timed_out, condition="afterok")
    JobDependency.objects.create(job=either, upstream=succeeded, condition="afternotok")

    run = alice_qm("list")

    assert run.code == 0, run.err
    assert _pos(run.out, either.pk) == f"after {running.pk}", run.out


def test_pos_drops_an_alternative_exactly_when_the_server_finds_it_never_met() -> None:
    from controlplane.choices import DependencyCondition
    from controlplane.cli.jobs.listing import _NEVER_MEETS
    from controlplane.services.dependencies.conditions import never_met

    for condition in DependencyCondition.values:
        for state in JobState.values:
            assert (state in _NEVER_MEETS.get(condition, ())) == never_met(condition, state), (condition, state)
