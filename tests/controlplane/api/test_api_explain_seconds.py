"""`qm explain` (the API's explanation) of a job that is not waiting said its times cut to the
second below, the job's page rounds them to the nearest: seen on the demo, `qm explain 18` said
"Cancelled at 2026-11-29 23:22:05 UTC" while the job's page said "Cancelled at … 23:22:06 UTC"
(finished at 23:22:05.6). The explanation now says each time as the pages do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, Event
from frontend.templatetags.qm import utc
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"
AT = datetime(2026, 11, 29, 23, 22, 5, 600_000, tzinfo=UTC)  # rounds up to :06


def _page(fleet, job_id: int) -> str:
    client = Client()
    client.force_login(fleet.users["owner"])
    return client.get(f"/jobs/{job_id}/").content.decode()


def test_a_finished_jobs_time_is_the_second_its_page_says(fleet, alice) -> None:
    job = f.make_job(fleet.ml, state=JobState.CANCELLED, started_at=AT - timedelta(minutes=5), finished_at=AT,
                     exit_code=-15)

    reason = alice.get(f"{J}/jobs/{job.pk}/explain/").json()["reason"]

    assert reason == "Cancelled at 2026-11-29 23:22:06 UTC with exit code -15."
    assert f"Cancelled at {utc(AT)} with exit code -15." in _page(fleet, job.pk)


def test_a_running_jobs_start_is_the_second_its_page_says(fleet, alice) -> None:
    job = f.make_job(fleet.ml, state=JobState.RUNNING, started_at=AT)

    reason = alice.get(f"{J}/jobs/{job.pk}/explain/").json()["reason"]

    assert reason == "Running since 2026-11-29 23:22:06 UTC."
    assert f"Running since {utc(AT)}" in _page(fleet, job.pk)


def test_a_stopping_jobs_since_and_deadline_round_to_the_nearest_second(fleet, alice) -> None:
    job = f.make_job(fleet.ml, state=JobState.PREEMPTING, started_at=AT - timedelta(minutes=5),
                     state_changed_at=AT)
    allocation = Allocation.objects.create(job=job, generation=1, epoch=1, created_at=AT - timedelta(minutes=5),
                                           state=AllocationState.RELEASING, release_reason="Cancelled",
                                           release_deadline=AT + timedelta(seconds=30))
    Event.objects.create(kind=EventKind.JOB_CANCELLED, actor="user:alice", reason="Cancelled", job=job,
                         allocation=allocation, team=fleet.ml, message="Cancelled by alice", created_at=AT)

    reason = alice.get(f"{J}/jobs/{job.pk}/explain/").json()["reason"]

    assert reason.startswith("Stopping since 2026-11-29 23:22:06 UTC: Cancelled by alice.")
    assert reason.endswith("Its processes must exit by 2026-11-29 23:22:36 UTC.")
