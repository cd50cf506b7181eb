"""`qm cancel 48 53 99999`: every id is read before any job is cancelled, and one that names no
job of the caller's (a typo, another team's) or an ended job cancels nothing. The help promised
"Every id is checked first" while only the ids' format was: 48 and 53 were cancelled, then
"No job 99999"."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_a_typo_among_the_ids_cancels_none_and_names_it(alice_qm, fleet) -> None:
    first, second = f.make_job(fleet.ml, name="a"), f.make_job(fleet.ml, name="b")
    missing = second.pk + 1000

    r = alice_qm("cancel", str(first.pk), str(second.pk), str(missing))

    assert r.code == 1
    assert f"No job {missing}, or not yours to see." in r.err
    assert "nothing cancelled" in r.err and "cancelled." not in r.out
    assert set(Job.objects.filter(pk__in=[first.pk, second.pk]).values_list("state", flat=True)) == {JobState.PENDING}


def test_another_teams_job_and_an_ended_one_are_each_named_and_none_is_cancelled(alice_qm, fleet) -> None:
    mine = f.make_job(fleet.ml, name="mine")
    theirs = f.make_job(fleet.vision, name="theirs")
    ended = f.make_job(fleet.ml, name="done", state=JobState.SUCCEEDED)

    r = alice_qm("cancel", str(mine.pk), str(theirs.pk), str(ended.pk))

    assert r.code == 1
    assert f"No job {theirs.pk}, or not yours to see." in r.err
    assert f"Job {ended.pk} has already ended (succeeded)" in r.err
    assert Job.objects.get(pk=mine.pk).state == JobState.PENDING
    assert Job.objects.get(pk=theirs.pk).state == JobState.PENDING


def test_every_id_good_cancels_them_all(alice_qm, fleet) -> None:
    jobs = [f.make_job(fleet.ml, name=f"j{i}") for i in range(3)]

    r = alice_qm("cancel", *(str(job.pk) for job in jobs))

    assert r.code == 0, r.err
    assert all(f"Job {job.pk} cancelled." in r.out for job in jobs)
    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("state", flat=True)) == {JobState.CANCELLED}


def test_a_finance_account_is_told_it_cannot_cancel_not_that_the_jobs_are_missing(qm, fleet) -> None:
    """Finance is shown no job, so the first read finds none: it is told what the API's cancel
    says (finance never acts on jobs), not "No job N", of a job that is there."""
    job = f.make_job(fleet.ml)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("cancel", str(job.pk))

    assert r.code == 1 and "Finance accounts" in r.err and "cannot" in r.err and "No job" not in r.err
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
