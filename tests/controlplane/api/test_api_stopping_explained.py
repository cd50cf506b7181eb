"""What `explain` says of a job that is being stopped: why (the preemption notice, a cancel, its
runtime limit), since when and by when its processes must exit.

Found in the demo: a job preempted at 18:08 explained itself as "Preempting since 17:57:17 UTC."
(its start time), whatever had stopped it, even a user's cancel."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Job, SchedulerLease
from controlplane.services.transitions import RELEASE_PREEMPTED, cancel_job, signal_stop
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _running(fleet, started) -> tuple[Job, Allocation]:
    SchedulerLease.objects.create(epoch=1)
    job = f.make_job(fleet.ml, gpus=2, state=JobState.RUNNING, started_at=started)
    allocation = Allocation.objects.create(job=job, generation=7, epoch=1, created_at=started, started_at=started)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=fleet.nodes[1], gpu_index=i)
                                      for i in range(2))
    return job, allocation


def test_a_preempted_job_explains_the_notice_since_when_and_its_deadline(fleet, alice) -> None:
    started = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    job, allocation = _running(fleet, started)
    at = started + timedelta(hours=1, minutes=30)
    notice = "Preempted: higher-priority job 99 (production, 1000) needs its 2 H100-80GB GPUs"
    assert signal_stop(allocation.pk, allocation.generation, reason=RELEASE_PREEMPTED, grace_period_s=30, at=at,
                       actor="scheduler", message=notice)

    why = alice.get(f"{J}/jobs/{job.pk}/explain/").json()

    assert why["state"] == JobState.PREEMPTING
    assert why["reason"] == (
        f"Stopping since {at:%Y-%m-%d %H:%M:%S} UTC: {notice}. "
        f"Its processes must exit by {at + timedelta(seconds=30):%Y-%m-%d %H:%M:%S} UTC."
    )


def test_a_job_being_cancelled_says_so(fleet, alice) -> None:
    job, _ = _running(fleet, timezone.now() - timedelta(minutes=5))
    cancel_job(Job.objects.get(pk=job.pk), "user:alice")

    why = alice.get(f"{J}/jobs/{job.pk}/explain/").json()

    assert why["state"] == JobState.PREEMPTING
    assert "Cancelled by alice" in why["reason"] and why["reason"].startswith("Stopping since ")


def test_a_running_job_still_says_since_when_it_runs(fleet, alice) -> None:
    started = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    job, _ = _running(fleet, started)

    why = alice.get(f"{J}/jobs/{job.pk}/explain/").json()

    # and where (test_researcher_running_where.py): "… UTC on 2 GPUs of h100-1."
    assert why["reason"].startswith(f"Running since {started:%Y-%m-%d %H:%M:%S} UTC on ")
