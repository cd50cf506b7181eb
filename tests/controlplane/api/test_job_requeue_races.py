"""A requeue is all or nothing, and concurrent requeues (or a requeue racing a cancel) tell the
truth: real transactions on PostgreSQL, threads through the API."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import DatabaseError, connection, connections
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobHold, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, SchedulerLease
from controlplane.services import requeue, transitions
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


def _together(n: int, act: Any) -> list[tuple[int, dict[str, Any]]]:
    answers: list[tuple[int, dict[str, Any]]] = []
    start = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            start.wait()
            r = act(i)
            answers.append((r.status_code, r.json()))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return answers


def test_concurrent_requeues_stop_it_once_and_tell_the_rest_it_is_being_requeued(committed_fleet) -> None:
    job, allocation = _running(committed_fleet)
    client = client_for(committed_fleet, "owner")

    answers = _together(5, lambda i: client.post(f"{J}/jobs/{job.pk}/requeue/", {"reason": f"try {i}"},
                                                 format="json"))

    assert sorted(code for code, _ in answers) == [200, 409, 409, 409, 409], answers
    for code, body in answers:
        if code == 409:
            assert body["detail"] == (f"Job {job.pk} is already stopping to be requeued: it goes back to the queue "
                                      "when its processes exit."), body
    assert Event.objects.filter(job=job, kind=EventKind.JOB_STOPPING).count() == 1
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.RELEASING and allocation.release_reason == transitions.RELEASE_REQUEUED


def test_a_requeue_racing_a_cancel_either_way_ends_cancelled(committed_fleet) -> None:
    """Whichever stops it first, the cancel wins: cancelled outright, or the requeue's stop turned
    into a cancel. Never requeued, never a 500."""
    job, allocation = _running(committed_fleet)
    client = client_for(committed_fleet, "owner")

    answers = _together(2, lambda i: client.post(f"{J}/jobs/{job.pk}/{'requeue' if i == 0 else 'cancel'}/"))

    assert all(code in (200, 409) for code, _ in answers), answers
    assert any(code == 200 for code, _ in answers)
    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.requeue_count == 0, answers


@contextmanager
def _refusing(kind: str) -> Iterator[None]:
    """Make the database refuse to write events of `kind` for a while (a failure halfway)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION qa_refuse_event() RETURNS trigger AS $$ BEGIN "
            f"IF NEW.kind = '{kind}' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; "
            "END $$ LANGUAGE plpgsql"
        )
        cursor.execute("CREATE TRIGGER qa_refuse_event BEFORE INSERT ON controlplane_event "
                       "FOR EACH ROW EXECUTE FUNCTION qa_refuse_event()")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER qa_refuse_event ON controlplane_event")
            cursor.execute("DROP FUNCTION qa_refuse_event()")


def test_a_requeue_that_fails_halfway_leaves_nothing_behind(committed_fleet) -> None:
    job, allocation = _running(committed_fleet)
    with _refusing("job.stopping"), pytest.raises(DatabaseError):  # the stop's notice
        requeue.requeue(committed_fleet.users["owner"], job.pk, hold=True, reason="flaky")

    job.refresh_from_db()
    allocation.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert allocation.state == AllocationState.ACTIVE and allocation.release_reason == ""
    assert allocation.release_deadline is None
    assert not Event.objects.filter(job=job).exists()


def test_settling_a_requeue_that_fails_halfway_leaves_it_stopping(committed_fleet) -> None:
    """The requeue, its hold and their events are written with the release, or none is: a
    failure writing the job.held event leaves the stop as it was, to be confirmed again."""
    job, allocation = _running(committed_fleet)
    requeue.requeue(committed_fleet.users["owner"], job.pk, hold=True, reason="flaky")
    with _refusing("job.held"), pytest.raises(DatabaseError):
        transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")

    job.refresh_from_db()
    allocation.refresh_from_db()
    assert job.state == JobState.PREEMPTING and job.requeue_count == 0 and job.hold == JobHold.NONE
    assert allocation.state == AllocationState.RELEASING
    assert AllocationGpu.objects.filter(allocation=allocation, live=True).count() == 2
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_REQUEUED).exists()
    # Confirmed again, it settles whole.
    assert transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.requeue_count == 1 and job.hold == JobHold.USER
