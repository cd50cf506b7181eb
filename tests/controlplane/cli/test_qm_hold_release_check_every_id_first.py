"""`qm hold 48 53 99999` and `qm release 48 53 99999`: every job named is read before any is
held or released (one `GET jobs/?id=...`, as `qm cancel` reads its jobs), and one that names no
job of the caller's, or a hold or release of a job that is not waiting, or a member's release
of an admin's hold, changes nothing, each bad id named (a release of a waiting job not held is
accepted and changes nothing, as a hold of a held one is). Only the ids' form was checked: 48 and 53 were held,
then "No job 99999"."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobHold, JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _held(team, **fields) -> Job:
    return f.make_job(team, hold=JobHold.USER, held_at=timezone.now(), **fields)


def test_a_hold_with_a_typo_another_teams_job_and_a_running_one_holds_none_naming_each(alice_qm, fleet) -> None:
    first, second = f.make_job(fleet.ml, name="a"), f.make_job(fleet.ml, name="b")
    theirs = f.make_job(fleet.vision, name="theirs")
    running = f.make_job(fleet.ml, name="r", state=JobState.RUNNING, started_at=timezone.now())
    ended = f.make_job(fleet.ml, name="done", state=JobState.SUCCEEDED)
    missing = ended.pk + 1000

    r = alice_qm("hold", str(first.pk), str(theirs.pk), str(second.pk), str(running.pk), str(ended.pk), str(missing))

    assert r.code == 1
    assert f"No job {theirs.pk}, or not yours to see." in r.err
    assert f"No job {missing}, or not yours to see." in r.err
    assert f"Job {running.pk} is running: only a waiting job can be held" in r.err
    assert f"Job {ended.pk} has already ended (succeeded); only a waiting job can be held" in r.err
    assert "nothing held: the other 2 jobs named are left as they were" in r.err
    assert r.out == ""
    assert set(Job.objects.values_list("hold", flat=True)) == {JobHold.NONE}
    assert not Event.objects.filter(kind=EventKind.JOB_HELD).exists()


def test_a_release_naming_another_teams_job_releases_none_naming_it(alice_qm, fleet) -> None:
    held = _held(fleet.ml, name="held")
    waiting = f.make_job(fleet.ml, name="queued")
    theirs = _held(fleet.vision, name="theirs")

    r = alice_qm("release", str(held.pk), str(waiting.pk), str(theirs.pk))

    assert r.code == 1
    assert f"No job {theirs.pk}, or not yours to see." in r.err
    assert "nothing released: the other 2 jobs named are left as they were" in r.err
    assert Job.objects.get(pk=held.pk).hold == JobHold.USER
    assert Job.objects.get(pk=theirs.pk).hold == JobHold.USER


def test_a_release_of_a_waiting_job_not_held_changes_nothing_and_releases_the_others(alice_qm, fleet) -> None:
    """As a hold of a held job is accepted: releasing a set twice does not fail the second time."""
    held = _held(fleet.ml, name="held")
    waiting = f.make_job(fleet.ml, name="queued")

    r = alice_qm("release", str(held.pk), str(waiting.pk))

    assert r.code == 0, r.err
    assert f"Job {waiting.pk} is not held" in r.out
    assert Job.objects.get(pk=held.pk).hold == JobHold.NONE


def test_a_member_releasing_an_admins_hold_among_others_releases_none(alice_qm, fleet) -> None:
    mine = _held(fleet.ml, name="mine")
    by_admin = f.make_job(fleet.ml, name="by-admin", hold=JobHold.ADMIN, held_at=timezone.now())

    r = alice_qm("release", str(mine.pk), str(by_admin.pk))

    assert r.code == 1
    assert f"Job {by_admin.pk} is held by an admin" in r.err and "only an admin may release" in r.err
    assert Job.objects.get(pk=mine.pk).hold == JobHold.USER


def test_every_id_good_holds_them_all_and_a_job_already_held_is_still_accepted(alice_qm, fleet) -> None:
    jobs = [f.make_job(fleet.ml, name=f"j{i}") for i in range(2)]
    already = _held(fleet.ml, name="already")

    r = alice_qm("hold", *(str(job.pk) for job in jobs), str(already.pk))

    assert r.code == 0, r.err
    assert all(f"Job {job.pk} held by alice" in r.out for job in jobs)
    assert f"Job {already.pk} is already held" in r.out
    assert set(Job.objects.values_list("hold", flat=True)) == {JobHold.USER}

    released = alice_qm("release", *(str(job.pk) for job in [*jobs, already]))

    assert released.code == 0, released.err
    assert set(Job.objects.values_list("hold", flat=True)) == {JobHold.NONE}


def test_an_admin_releases_an_admins_hold_among_others(qm, fleet) -> None:
    mine = _held(fleet.ml, name="mine")
    by_admin = f.make_job(fleet.vision, name="by-admin", hold=JobHold.ADMIN, held_at=timezone.now())
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    r = qm("release", str(mine.pk), str(by_admin.pk))

    assert r.code == 0, r.err
    assert set(Job.objects.values_list("hold", flat=True)) == {JobHold.NONE}
