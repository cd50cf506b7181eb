"""`qm requeue` of ended jobs against a live server: one failed job back in the queue, and
`qm requeue --array ID --states failed,timed_out` rerunning a sweep's failed tasks only."""

from __future__ import annotations

from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, AllocationGpu, Job


def test_qm_requeue_puts_a_failed_job_back_in_the_queue_with_the_same_id(alice_qm, fleet) -> None:
    submitted = alice_qm("submit", "--name", "train", "--gpus", "1", "--json")
    assert submitted.code == 0, submitted.err
    pk = submitted.json()["id"]
    Job.objects.filter(pk=pk).update(state=JobState.FAILED, exit_code=7, finished_at=timezone.now())

    run = alice_qm("requeue", str(pk), "--reason", "fixed the loader")

    assert run.code == 0, run.err
    assert run.out == (f"Job {pk} had failed (exit 7) and is back in the queue with the same id; its earlier runs are "
                       "kept.\n")
    job = Job.objects.get(pk=pk)
    assert job.state == JobState.PENDING and job.exit_code is None and job.requeue_count == 1


def test_qm_requeue_array_states_reruns_the_failed_tasks_and_says_the_task_limit(alice_qm, fleet) -> None:
    submitted = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-3%2", "--json")
    assert submitted.code == 0, submitted.err
    array_id, ids = submitted.json()["array_id"], submitted.json()["job_ids"]
    now = timezone.now()
    Job.objects.filter(pk=ids[0]).update(state=JobState.FAILED, exit_code=1, finished_at=now)
    Job.objects.filter(pk=ids[1]).update(state=JobState.TIMED_OUT, finished_at=now)
    Job.objects.filter(pk=ids[2]).update(state=JobState.RUNNING, started_at=now)
    allocation = Allocation.objects.create(job_id=ids[2], generation=90, epoch=1, created_at=now, started_at=now,
                                           state=AllocationState.ACTIVE)
    AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[2], gpu_index=0, live=True)

    assert alice_qm("requeue", str(ids[0]), "--states", "failed").code != 0  # --states is for an array

    run = alice_qm("requeue", "--array", array_id, "--states", "failed,timed_out")

    assert run.code == 0, run.err
    assert run.out == (f"Array {array_id} (sweep, 4 tasks): 2 ended (failed, timed out) back in the queue, 2 not "
                       "failed or timed out. The array runs at most 2 tasks at a time.\n")
    states = dict(Job.objects.filter(pk__in=ids).values_list("pk", "state"))
    assert states == {ids[0]: JobState.PENDING, ids[1]: JobState.PENDING, ids[2]: JobState.RUNNING,
                      ids[3]: JobState.PENDING}
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.ACTIVE
