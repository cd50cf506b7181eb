"""A preempted job's page says so at the top, in words: while it stops (why, and the deadline
its processes have to checkpoint and exit), and after (when, why, what was lost) — not only as a
count under Progress and a row among its events."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job
from controlplane.services import transitions
from controlplane.services.cycle import run_cycle
from frontend.templatetags.qm import utc

pytestmark = pytest.mark.django_db

# The engine's words (scheduler_core/cycle.py), as the cycle stores them on job.preempting.
WHY = ("Preempted: team language reclaims its H100-80GB quota for job 99. It has 120 s to checkpoint and stop, "
       "then requeues; without a checkpoint in that time it loses about 0.27 GPU-hours (its work since its last "
       "checkpoint).")


def test_a_stopping_job_says_why_and_by_when_then_after_requeue_that_it_was_preempted(client_for, submit_as):
    job = submit_as("alice", name="victim", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    now = timezone.now()
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                   grace_period_s=120, at=now, actor="scheduler@epoch:1", message=WHY)
    client = client_for("alice")
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="preemption-notice"' in html and "Being preempted" in html
    assert WHY in html and utc(now + timedelta(seconds=120)) in html  # why, and the deadline
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]
    assert WHY in live

    transitions.complete_release(allocation.pk, exit_code=None, at=now + timedelta(seconds=30), actor="agent:h100-01")
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="preemption-notice"' in html
    assert f"{utc(now)} — {WHY}" in html
    assert "Requeued whole after being preempted" in html  # what became of it, and the work lost
    assert "It waits in the queue again" in html and ".." not in html


def test_a_job_never_preempted_has_no_notice(client_for, submit_as):
    job = submit_as("alice", name="calm", gpus=8)
    run_cycle("test")
    assert 'id="preemption-notice"' not in client_for("alice").get(f"/jobs/{job.pk}/").content.decode()


def _preempted_losing_seconds(submit_as) -> Job:
    """A job preempted right after a checkpoint: it loses a few GPU-seconds."""
    job = submit_as("alice", name="saved", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(last_checkpoint_at=now + timedelta(seconds=29))  # saved on the signal
    transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                            grace_period_s=120, at=now, actor="scheduler@epoch:1", message=WHY)
    transitions.complete_release(allocation.pk, exit_code=None, at=now + timedelta(seconds=30), actor="agent:h100-01")
    assert 0 < Job.objects.get(pk=job.pk).lost_gpu_seconds < 36
    return job


def test_the_work_lost_below_a_hundredth_of_a_gpu_hour_reads_in_words(client_for, submit_as):
    # Before: "1 time, < 0.01 GPU-hours of work lost", a cell's symbol inside a sentence.
    job = _preempted_losing_seconds(submit_as)
    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
    assert "1 time, less than 0.01 GPU-hours of work lost</dd>" in html


def test_the_runs_table_says_a_small_loss_as_such(client_for, submit_as):
    # Before: the run's Work lost cell said "0.00 GPU-h" of the seconds it lost.
    job = _preempted_losing_seconds(submit_as)
    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
    assert "<td>&lt; 0.01 GPU-h</td>" in html
