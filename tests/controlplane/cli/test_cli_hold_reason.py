"""`qm hold --reason`, `qm submit --hold --hold-reason` and `qm status` saying the reason,
against a live server."""

from __future__ import annotations

import uuid

from controlplane.choices import EventKind, JobHold
from controlplane.models import Event, Job
from tests.controlplane import factories as f


def _submitted(alice_qm, *args: str) -> Job:
    run = alice_qm("submit", "--name", "train", "--gpus", "4", *args, "--json")
    assert run.code == 0, run.err
    return Job.objects.get(pk=run.json()["id"])


def test_qm_hold_with_a_reason_and_qm_status_says_it(alice_qm, fleet) -> None:
    job = _submitted(alice_qm)

    run = alice_qm("hold", str(job.pk), "--reason", "waiting for dataset v3")

    assert run.code == 0, run.err
    assert run.out == (f"Job {job.pk} held by alice (waiting for dataset v3): it is out of the queue and holds "
                       f"nothing until released (qm release {job.pk}).\n")
    job.refresh_from_db()
    assert (job.hold, job.hold_reason) == (JobHold.USER, "waiting for dataset v3")
    assert Event.objects.get(job=job, kind=EventKind.JOB_HELD).data["reason"] == "waiting for dataset v3"

    status = alice_qm("status", str(job.pk))
    assert status.code == 0, status.err
    assert "pending (held)" in status.out
    assert "Held: Held by alice: waiting for dataset v3 — until it is released" in status.out
    assert "hold reason:" in status.out and "waiting for dataset v3\n" in status.out

    alice_qm("release", str(job.pk))
    assert "hold reason" not in alice_qm("status", str(job.pk)).out


def test_qm_hold_a_too_long_reason_is_refused_naming_it_and_holds_nothing(alice_qm, fleet) -> None:
    job = _submitted(alice_qm)

    run = alice_qm("hold", str(job.pk), "--reason", "x" * 201)

    assert run.code == 1
    assert run.err.splitlines() == [f"error: job {job.pk}: Invalid request.",
                                    f"  reason (--reason {'x' * 59}…): at most 200 characters (201 given)"], run.err
    assert Job.objects.get(pk=job.pk).hold == JobHold.NONE


def test_qm_hold_an_array_with_a_reason(alice_qm, fleet) -> None:
    array_id = str(uuid.uuid4())
    tasks = [f.make_job(fleet.ml, name="sweep", array_id=array_id, array_index=i) for i in range(2)]

    run = alice_qm("hold", "--array", array_id, "-r", "quota review")

    assert run.code == 0, run.err
    assert run.out == f"Array {array_id} (sweep, 2 tasks): 2 held.\n"
    assert {Job.objects.get(pk=t.pk).hold_reason for t in tasks} == {"quota review"}


def test_qm_submit_held_with_a_reason(alice_qm, fleet) -> None:
    job = _submitted(alice_qm, "--hold", "--hold-reason", "until the data lands")
    assert (job.hold, job.hold_reason) == (JobHold.USER, "until the data lands")

    run = alice_qm("submit", "--name", "x", "--gpus", "1", "--hold-reason", "no hold")
    assert run.code == 2 and "hold_reason" in run.err and "submitted held" in run.err, run.err
