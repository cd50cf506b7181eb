"""`qm requeue 48 53 99999`: every job named is read before any is requeued (one `GET
jobs/?id=...`, as `qm cancel`, `qm hold` and `qm release` read theirs), and one that names no job
of the caller's (missing, or another team's), or one that cannot be requeued as it stands (waiting,
stopping, never able to run, ended but still holding GPUs, ended with a dependency that can never
be met) requeues none, each bad id named with why. Until 7 Dec the running jobs named were stopped
and the others refused one by one after them."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, DependencyCondition, EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, JobDependency
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _running(fleet, index: int, *, state: str = JobState.RUNNING, reason: str = "") -> tuple[Job, Allocation]:
    now = timezone.now()
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name=f"train-{index}", state=state, started_at=now)
    allocation = Allocation.objects.create(
        job=job, generation=50 + index, epoch=1, created_at=now, started_at=now,
        state=AllocationState.RELEASING if reason else AllocationState.ACTIVE, release_reason=reason)
    AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[1], gpu_index=index, live=True)
    return job, allocation


def _untouched(*allocations: Allocation) -> bool:
    return all(Allocation.objects.get(pk=a.pk).state == a.state for a in allocations) and not Event.objects.filter(
        kind__in=[EventKind.JOB_REQUEUED, "job.stopping"]).exists()


def test_a_requeue_naming_a_missing_a_foreign_and_a_waiting_job_requeues_none_naming_each(alice_qm, fleet) -> None:
    running, allocation = _running(fleet, 0)
    failed = f.make_job(fleet.ml, name="failed", state=JobState.FAILED, exit_code=3, finished_at=timezone.now())
    waiting = f.make_job(fleet.ml, name="waiting")
    theirs = f.make_job(fleet.vision, name="theirs", state=JobState.FAILED, finished_at=timezone.now())
    missing = theirs.pk + 1000

    r = alice_qm("requeue", str(running.pk), str(missing), str(failed.pk), str(theirs.pk), str(waiting.pk))

    assert r.code == 1
    assert f"No job {missing}, or not yours to see." in r.err
    assert f"No job {theirs.pk}, or not yours to see." in r.err
    assert f"Job {waiting.pk} is waiting already: only a running or ended job can be requeued." in r.err
    assert "nothing requeued: the other 2 jobs named are left as they were" in r.err
    assert r.out == ""
    assert _untouched(allocation)
    assert Job.objects.get(pk=failed.pk).state == JobState.FAILED
    assert Job.objects.get(pk=running.pk).state == JobState.RUNNING


def test_a_stopping_a_never_runnable_and_a_still_stopping_ended_job_each_refuse_the_lot(alice_qm, fleet) -> None:
    running, allocation = _running(fleet, 0)
    preempted, stopping = _running(fleet, 1, state=JobState.PREEMPTING, reason="Preempted")
    never = f.make_job(fleet.ml, name="never", state=JobState.UNSCHEDULABLE, finished_at=timezone.now())
    ended, holding = _running(fleet, 2, state=JobState.CANCELLED, reason="Cancelled")

    r = alice_qm("requeue", str(running.pk), str(preempted.pk), str(never.pk), str(ended.pk))

    assert r.code == 1
    assert (f"Job {preempted.pk} is already stopping: it is being preempted and goes back to the queue by itself "
            "when its processes exit." in r.err)
    assert f"Job {never.pk} never ran: as asked, this fleet can never run it" in r.err
    assert f"Job {ended.pk} has ended (cancelled) but is still stopping" in r.err
    assert "nothing requeued: the other job named is left as it was" in r.err
    assert _untouched(allocation, stopping, holding)


def test_an_ended_job_whose_dependency_can_never_be_met_refuses_the_lot(alice_qm, fleet) -> None:
    upstream = f.make_job(fleet.ml, name="prep", state=JobState.FAILED, exit_code=1, finished_at=timezone.now())
    ended = f.make_job(fleet.ml, name="train", state=JobState.CANCELLED, finished_at=timezone.now())
    JobDependency.objects.create(job=ended, upstream=upstream, condition=DependencyCondition.AFTER_OK)
    other = f.make_job(fleet.ml, name="eval", state=JobState.SUCCEEDED, exit_code=0, finished_at=timezone.now())

    r = alice_qm("requeue", str(other.pk), str(ended.pk))

    assert r.code == 1
    assert f"Job {ended.pk} cannot be requeued: job {upstream.pk} failed" in r.err
    assert "so afterok on it can never be met; it would wait for ever. Requeue that job first" in r.err
    assert "nothing requeued" in r.err
    assert Job.objects.get(pk=other.pk).state == JobState.SUCCEEDED


def test_every_id_good_requeues_them_all(alice_qm, fleet) -> None:
    running, allocation = _running(fleet, 0)
    failed = f.make_job(fleet.ml, name="failed", state=JobState.FAILED, exit_code=3, finished_at=timezone.now())

    r = alice_qm("requeue", str(running.pk), str(failed.pk))

    assert r.code == 0, r.err
    assert f"Job {running.pk} is stopping to be requeued" in r.out
    assert f"Job {failed.pk} had failed (exit 3) and is back in the queue" in r.out
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.RELEASING
    assert Job.objects.get(pk=failed.pk).state == JobState.PENDING
