"""An ended job's page speaks of it as ended: its cost is "Cost", not "Cost so far"; a job
preempted twice and then succeeded was "Preempted (2 times so far)"; and its empty "Where it
runs" said "While it runs, its GPUs appear here", of a job that runs no more. A job that may
still run keeps its "so far"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job
from controlplane.services import transitions
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db

WHY = "Preempted: team language reclaims its H100-80GB quota for job 99."


def _preempted_twice(submit_as) -> Job:
    job = submit_as("alice", name="twice", gpus=8, gpu_types=("H100-80GB",))
    now = timezone.now()
    for n in range(2):
        run_cycle("test")
        allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
        at = now + timedelta(minutes=n)
        assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                       grace_period_s=30, at=at, actor="scheduler@epoch:1", message=WHY)
        transitions.complete_release(allocation.pk, exit_code=None, at=at + timedelta(seconds=5),
                                     actor="agent:h100-01")
    Job.objects.filter(pk=job.pk).update(preemption_count=2)
    return Job.objects.get(pk=job.pk)


def test_a_job_that_may_run_again_says_so_far(client_for, submit_as):
    job = _preempted_twice(submit_as)
    assert job.state == JobState.PENDING
    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
    assert "Preempted (2 times so far)" in html and "<h3>Cost so far</h3>" in html
    assert "While it runs, its GPUs appear here" in html


def test_an_ended_job_says_its_figures_as_final(client_for, submit_as):
    job = _preempted_twice(submit_as)
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED, finished_at=timezone.now())
    client = client_for("alice")
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Preempted (2 times)</h3>" in html and "so far" not in html
    assert "<h3>Cost</h3>" in html
    assert "While it runs" not in html
    assert "This job has ended and holds no GPUs; where each of its runs ran is under Runs." in html
    live = client.get(f"/ui/jobs/{job.pk}.json").json()
    assert "so far" not in live["html"]["job-status"]
    assert "While it runs" not in str(live["charts"])
