"""`qm cancel 43 43` and `qm requeue 40 40`: a job named twice (a list pasted twice, a glob and an
id) is acted on once, as `qm hold 15 15` and `qm release 15 15` already were in effect. Found on the
researcher's walk (7 Dec): `qm cancel 43 43` cancelled job 43, then said "error: Job 43 has already
ended: cancelled" and exited 1, as if what was asked had failed; `qm requeue 40 40` the same
("already stopping to be requeued")."""

from __future__ import annotations

import pytest

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import bind

pytestmark = pytest.mark.slow


def test_a_job_named_twice_is_cancelled_once(alice_qm, fleet) -> None:
    job, other = f.make_job(fleet.ml, name="twice"), f.make_job(fleet.ml, name="once")

    r = alice_qm("cancel", str(job.pk), str(other.pk), str(job.pk))

    assert r.code == 0, r.err
    assert r.err == ""
    assert r.out == f"Job {job.pk} cancelled.\nJob {other.pk} cancelled.\n"
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    assert Event.objects.filter(job=job, kind=EventKind.JOB_CANCELLED).count() == 1


def test_a_running_job_named_twice_is_requeued_once(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, name="train", gpus=1, submitter=fleet.users["owner"])
    bind(job, {fleet.nodes[0]: [0]})

    r = alice_qm("requeue", str(job.pk), str(job.pk), "--json")

    assert r.code == 0, r.err
    assert r.json()["detail"].startswith(f"Job {job.pk} is stopping to be requeued")  # one job's answer, not a list
    assert Event.objects.filter(job=job, kind=EventKind.JOB_STOPPING).count() == 1
