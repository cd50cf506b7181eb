"""A running job its owner cancels is stopping (state `preempting`) for its grace period. Its page
said only "Stopping: its processes were signalled and get a grace period to checkpoint and
exit", not that it was cancelled, by whom or by when (`qm explain` said all three), and still
offered "Cancel job", which could only fail (409: already being cancelled). A job preempted
once, run again and then cancelled said "Being preempted" with the old preemption's words.
The page now says the stop as the API does, and offers no cancel that must fail."""

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


def _running(submit_as) -> Job:
    job = submit_as("alice", name="to-cancel", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    return job


def _cancel(job: Job) -> Allocation:
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    assert transitions.cancel_job(job, "user:alice")
    assert Job.objects.get(pk=job.pk).state == JobState.PREEMPTING
    return Allocation.objects.get(pk=allocation.pk)


def test_a_job_being_cancelled_says_so_by_whom_and_by_when(client_for, submit_as):
    job = _running(submit_as)
    allocation = _cancel(job)

    client = client_for("alice")
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]
    said = client.get(f"/api/v1/jobs/{job.pk}/explain/").json()["reason"]

    for page in (html, live):
        assert "Being cancelled" in page and "Being preempted" not in page
        assert "Cancelled by alice" in page
        assert utc(allocation.release_deadline) in page
        assert said in page  # the same words as `qm explain`
        assert 'id="cancel-job"' not in page  # a second cancel can only be refused


def test_a_job_preempted_before_then_cancelled_is_not_said_to_be_preempted(client_for, submit_as):
    job = _running(submit_as)
    first = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    now = timezone.now()
    assert transitions.signal_stop(first.pk, first.generation, reason=transitions.RELEASE_PREEMPTED, grace_period_s=30,
                                   at=now, actor="scheduler@epoch:1", message="Preempted: for job 99.")
    transitions.complete_release(first.pk, exit_code=None, at=now + timedelta(seconds=5), actor="agent:h100-01")
    run_cycle("test")
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    _cancel(job)

    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert "Being cancelled" in html and "Being preempted" not in html


def test_a_job_being_preempted_may_still_be_cancelled(client_for, submit_as):
    job = _running(submit_as)
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                   grace_period_s=30, at=timezone.now(), actor="scheduler@epoch:1",
                                   message="Preempted: for job 99.")

    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert "Being preempted" in html and 'id="cancel-job"' in html  # the cancel turns the requeue into an end
