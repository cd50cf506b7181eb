"""`qm requeue JOB... [--hold] [--reason TEXT]` against a live server: the stop, a refusal
requeueing none of the jobs named (test_qm_requeue_checks_every_id_first.py), and `qm status`
saying who asked and why, before and after the requeue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, JobHold, JobState
from controlplane.models import Allocation, AllocationGpu, Job
from controlplane.services import transitions
from tests.controlplane import factories as f


def _running(fleet, index: int = 0) -> tuple[Job, Allocation]:
    now = timezone.now()
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name=f"train-{index}", gpus=1,
                     state=JobState.RUNNING, started_at=now, last_checkpoint_at=now)
    allocation = Allocation.objects.create(job=job, generation=10 + index, epoch=1, created_at=now, started_at=now,
                                           state=AllocationState.ACTIVE)
    AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[1], gpu_index=index, live=True)
    return job, allocation


def test_qm_requeue_refuses_all_for_a_waiting_one_then_stops_the_running_job(alice_qm, fleet) -> None:
    job, allocation = _running(fleet)
    waiting = f.make_job(fleet.ml, submitter=fleet.users["owner"])
    grace = fleet.research.grace_period_s

    refused = alice_qm("requeue", str(job.pk), str(waiting.pk), "--reason", "h100-1 is flaky")

    assert refused.code == 1 and refused.out == ""
    assert (f"error: Job {waiting.pk} is waiting already: only a running or ended job can be requeued."
            in refused.err)
    assert "nothing requeued: the other job named is left as it was" in refused.err
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.ACTIVE

    run = alice_qm("requeue", str(job.pk), "--reason", "h100-1 is flaky")

    assert run.code == 0, run.err
    assert run.out == (f"Job {job.pk} is stopping to be requeued: its processes get {grace} s to exit, then it goes "
                       "back to the queue with the same id, from its last checkpoint.\n")
    allocation.refresh_from_db()
    assert allocation.release_reason == transitions.RELEASE_REQUEUED and allocation.state == AllocationState.RELEASING

    status = alice_qm("status", str(job.pk))
    assert status.code == 0, status.err
    assert "stopping: requeue" in status.out and "Requeued by alice: h100-1 is flaky" in status.out

    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")
    status = alice_qm("status", str(job.pk))
    assert "requeued 1 more time to resize, off a lost node or on request" in status.out
    assert "requeue asked" in status.out and "Requeued by alice: h100-1 is flaky; lost" in status.out
    assert alice_qm("status", str(job.pk), "--json").json()["requeue_count"] == 1


def test_qm_requeue_hold_comes_back_held_and_qm_release_queues_it(alice_qm, fleet) -> None:
    job, allocation = _running(fleet)

    run = alice_qm("requeue", str(job.pk), "--hold", "--json")

    assert run.code == 0, run.err
    assert run.json()["job"]["state_label"] == "stopping: requeue held"
    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")
    assert Job.objects.get(pk=job.pk).hold == JobHold.USER
    released = alice_qm("release", str(job.pk))
    assert released.code == 0, released.err
    assert Job.objects.get(pk=job.pk).hold == JobHold.NONE


def test_qm_requeue_array_requeues_its_running_tasks_in_one_request(alice_qm, fleet) -> None:
    submitted = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-2", "--json")
    assert submitted.code == 0, submitted.err
    array_id, ids = submitted.json()["array_id"], submitted.json()["job_ids"]
    now = timezone.now()
    for index, pk in enumerate(ids[:2]):
        Job.objects.filter(pk=pk).update(state=JobState.RUNNING, started_at=now)
        allocation = Allocation.objects.create(job_id=pk, generation=20 + index, epoch=1, created_at=now,
                                               started_at=now, state=AllocationState.ACTIVE)
        AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[2], gpu_index=index, live=True)

    run = alice_qm("requeue", "--array", array_id, "--reason", "new data")

    assert run.code == 0, run.err
    assert run.out == f"Array {array_id} (sweep, 3 tasks): 2 stopping to be requeued, 1 not running (waiting or ended).\n"
    assert set(Allocation.objects.filter(job_id__in=ids).values_list("release_reason", flat=True)) == {
        transitions.RELEASE_REQUEUED}


def test_qm_history_counts_the_requeue_and_its_lost_work_once_the_job_ends(alice_qm, fleet) -> None:
    job, allocation = _running(fleet)
    Job.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(hours=1),
                                         last_checkpoint_at=timezone.now() - timedelta(minutes=30))
    assert alice_qm("requeue", str(job.pk)).code == 0
    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")
    # It ran again and succeeded (its second run, written as the loop would leave it).
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, exit_code=0, started_at=timezone.now(),
                                         finished_at=timezone.now())

    run = alice_qm("history", "--json")

    assert run.code == 0, run.err
    (ended,) = [j for j in run.json()["jobs"] if j["id"] == job.pk]
    assert ended["requeue_count"] == 1 and ended["preemption_count"] == 0
    assert ended["lost_gpu_hours"] == pytest.approx(0.5, abs=0.01)  # 1 GPU × 30 min since its checkpoint
    table = alice_qm("history")
    assert "GPU-hours of work lost to preemptions and requeues" in table.out
