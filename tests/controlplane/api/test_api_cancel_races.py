"""Cancelling a job is all or nothing, and concurrent cancels tell the truth.

Found in the demo: of four concurrent `POST jobs/{id}/cancel/` on a running job, one stopped it
and three answered "Job … changed state to running meanwhile; nothing was cancelled" while it
was being cancelled: the cancel wrote the allocation, the job and the event in separate
statements, each committed on its own, so the others saw a half-done cancel (and a failure
between them would have left one)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import DatabaseError, connection, connections
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, SchedulerLease
from controlplane.services.transitions import cancel_job
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import build_fleet, client_for

J = "/api/v1"


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Any:
    return build_fleet()


def _running(fleet: Any, gpus: int = 2) -> tuple[Job, Allocation]:
    SchedulerLease.objects.create(epoch=1)
    now = timezone.now()
    job = f.make_job(fleet.ml, gpus=gpus, state=JobState.RUNNING, started_at=now)
    allocation = Allocation.objects.create(job=job, generation=1, epoch=1, created_at=now, started_at=now)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=fleet.nodes[1], gpu_index=i)
                                      for i in range(gpus))
    return job, allocation


def test_concurrent_cancels_of_a_running_job_stop_it_once_and_tell_the_rest_it_is_stopping(committed_fleet) -> None:
    job, allocation = _running(committed_fleet)
    answers: list[tuple[int, dict[str, Any]]] = []
    start = threading.Barrier(6)

    def cancel() -> None:
        client = client_for(committed_fleet, "owner")
        try:
            start.wait()
            r = client.post(f"{J}/jobs/{job.pk}/cancel/")
            answers.append((r.status_code, r.json()))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=cancel) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert sorted(code for code, _ in answers) == [200, 409, 409, 409, 409, 409], answers
    for code, body in answers:
        if code == 409:
            assert body["detail"] == (
                f"Job {job.pk} is already stopping; it will be cancelled when its processes exit."
            ), body
    assert Event.objects.filter(job=job, kind=EventKind.JOB_CANCELLED).count() == 1
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.RELEASING and allocation.release_reason == "Cancelled"
    assert Job.objects.get(pk=job.pk).state == JobState.PREEMPTING


@pytest.mark.parametrize("running", [True, False])
def test_a_cancel_that_fails_halfway_leaves_nothing_behind(committed_fleet, running) -> None:
    if running:
        job, allocation = _running(committed_fleet)
    else:
        job, allocation = f.make_job(committed_fleet.ml), None
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION qa_refuse_cancelled_event() RETURNS trigger AS $$ BEGIN "
            "IF NEW.kind = 'job.cancelled' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; "
            "END $$ LANGUAGE plpgsql"
        )
        cursor.execute(
            "CREATE TRIGGER qa_refuse_cancelled_event BEFORE INSERT ON controlplane_event "
            "FOR EACH ROW EXECUTE FUNCTION qa_refuse_cancelled_event()"
        )
    try:
        with pytest.raises(DatabaseError):
            cancel_job(Job.objects.select_related("priority_class").get(pk=job.pk), "user:alice")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER qa_refuse_cancelled_event ON controlplane_event")
            cursor.execute("DROP FUNCTION qa_refuse_cancelled_event()")

    job.refresh_from_db()
    assert job.state == (JobState.RUNNING if running else JobState.PENDING) and job.finished_at is None
    if allocation is not None:
        allocation.refresh_from_db()
        assert allocation.state == AllocationState.ACTIVE and allocation.release_reason == ""
    assert not Event.objects.filter(job=job).exists()
