"""`qm status JOB` of a job that was preempted and requeued said only `preemptions: 1`: not
why (for which job), not the grace it had, not the work it lost, which the job page's
"Preempted" notice and `qm events` say. It now says the GPU-hours lost over all its preemptions
and the last preemption's notice and outcome, in the events' words."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job
from controlplane.services import transitions
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.slow

WHY = ("Preempted: higher-priority job 99 (production, 1000) needs its 8 H100-80GB GPUs (research, 100). "
       "It has 30 s to checkpoint and stop, then requeues; without a checkpoint in that time it loses about "
       "0.27 GPU-hours (its work since its last checkpoint).")


def _field(out: str, name: str) -> str:
    line = next((line for line in out.splitlines() if line.startswith(f"{name}:")), None)
    assert line is not None, out
    return line.split(":", 1)[1].strip()


def test_status_of_a_requeued_job_says_its_last_preemption_and_the_work_lost(alice_qm) -> None:
    assert alice_qm("submit", "--name", "victim", "--gpus", "8", "--gpu-type", "H100-80GB").code == 0
    run_cycle("test")
    job = Job.objects.get()
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    at = timezone.now()
    Job.objects.filter(pk=job.pk).update(started_at=at - timedelta(minutes=2))  # 8 GPUs × 2 min lost
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                   grace_period_s=30, at=at, actor="scheduler@epoch:1", message=WHY)
    assert transitions.complete_release(allocation.pk, exit_code=None, at=at + timedelta(seconds=20),
                                        actor="agent:h100-0")
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.preemption_count == 1 and job.lost_gpu_seconds > 0

    status = alice_qm("status", str(job.pk))

    assert status.code == 0, status.err
    assert _field(status.out, "preemptions") == f"1, {job.lost_gpu_seconds / 3600:.2f} GPU-hours of work lost"
    notice = _field(status.out, "last preempted")
    assert notice.startswith(f"{at + timedelta(microseconds=500_000):%Y-%m-%d %H:%M:%S} UTC: ")  # to the second
    assert WHY in notice  # why, for whom, the grace period
    assert "Requeued whole after being preempted" in _field(status.out, "requeued")


def test_status_of_a_job_never_preempted_adds_nothing(alice_qm) -> None:
    assert alice_qm("submit", "--name", "calm", "--gpus", "1").code == 0
    status = alice_qm("status", str(Job.objects.get().pk))

    assert _field(status.out, "preemptions") == "0"
    assert "last preempted:" not in status.out and "requeued:" not in status.out


def test_status_of_a_job_stopped_to_resize_says_so_apart_from_its_preemptions(alice_qm) -> None:
    """A resize requeues the job whole but is not a preemption (it does not count against the
    class's preemption budget): `preemptions: 0`, then the requeue and its lost work."""
    assert alice_qm("submit", "--name", "grower", "--gpus", "8", "--gpu-type", "H100-80GB").code == 0
    run_cycle("test")
    job = Job.objects.get()
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    at = timezone.now()
    Job.objects.filter(pk=job.pk).update(started_at=at - timedelta(minutes=2))
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_RESIZED,
                                   grace_period_s=30, at=at, actor="scheduler@epoch:1", message="resize")
    assert transitions.complete_release(allocation.pk, exit_code=None, at=at + timedelta(seconds=20),
                                        actor="agent:h100-0")
    job.refresh_from_db()
    assert (job.preemption_count, job.requeue_count) == (0, 1)

    status = alice_qm("status", str(job.pk))

    assert _field(status.out, "preemptions") == (
        f"0; requeued 1 more time to resize, off a lost node or on request, {job.lost_gpu_seconds / 3600:.2f} GPU-hours of work lost")
    assert "Requeued whole after being stopped to resize" in _field(status.out, "requeued")


def _preempted_after_checkpoint(alice_qm) -> Job:
    """A job of 8 GPUs preempted right after a checkpoint: it loses a second's work."""
    assert alice_qm("submit", "--name", "saved", "--gpus", "8", "--gpu-type", "H100-80GB").code == 0
    run_cycle("test")
    job = Job.objects.get()
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    at = timezone.now()
    Job.objects.filter(pk=job.pk).update(started_at=at - timedelta(minutes=2),
                                         last_checkpoint_at=at + timedelta(seconds=19))  # saved on the signal
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                   grace_period_s=30, at=at, actor="scheduler@epoch:1", message=WHY)
    assert transitions.complete_release(allocation.pk, exit_code=None, at=at + timedelta(seconds=20),
                                        actor="agent:h100-0")
    job.refresh_from_db()
    assert 0 < job.lost_gpu_seconds < 0.005 * 3600
    return job


def test_status_says_a_loss_below_a_hundredth_of_a_gpu_hour_as_such(alice_qm) -> None:
    # Before: "1, 0.00 GPU-hours of work lost" of 8 GPUs x 1 s, where the job page says "< 0.01".
    job = _preempted_after_checkpoint(alice_qm)

    status = alice_qm("status", str(job.pk))

    assert _field(status.out, "preemptions") == "1, less than 0.01 GPU-hours of work lost"


def test_runs_says_a_small_loss_as_such_in_its_column(alice_qm) -> None:
    # Before: the LOST GPU-H column said "0.00" of the second's work the run lost.
    job = _preempted_after_checkpoint(alice_qm)

    runs = alice_qm("runs", str(job.pk))

    assert runs.code == 0
    first_run = next(line for line in runs.out.splitlines() if line.split()[:1] == ["1"])
    assert first_run.rstrip().endswith("< 0.01"), runs.out
