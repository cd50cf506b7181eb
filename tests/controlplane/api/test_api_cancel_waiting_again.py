"""A cancel that a preemption and its completion overtake still cancels the job waiting again.

`cancel_job` reads the job, then its allocation, then the stop to requeue it, each statement
its own snapshot (PostgreSQL's READ COMMITTED); until 5 Dec it tried twice and then gave up.
A preemption committing between its first attempt's reads and the stop's completion (the job
requeued, PENDING) between its second's made it answer 409 "changed state meanwhile; nothing was
cancelled. Try again." of a job that was waiting, cancellable at once. Shown here with two
connections in a fixed order: the cancel's connection is held before two of its statements
(Django's execute_wrapper: the statements themselves run on the real database unchanged) while
another connection commits the preemption, then the completion. Now a cancel tries again as
long as the job's state moved under it, and refuses only a state it read twice alike."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, Event
from controlplane.services import transitions
from controlplane.services.transitions import RELEASE_PREEMPTED
from tests.controlplane.api.test_api_cancel_races import _running
from tests.controlplane.fleet_fixture import build_fleet, client_for

J = "/api/v1"


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Any:
    return build_fleet()


def _elsewhere(step: Callable[[], Any]) -> None:
    """Run `step` on another connection (another thread), committed before this returns."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with transaction.atomic():
                step()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            failed.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and not failed, failed


def test_a_job_preempted_and_requeued_during_a_cancel_is_cancelled_waiting(committed_fleet) -> None:
    job, allocation = _running(committed_fleet)
    now = timezone.now()

    def preempt() -> None:
        assert transitions.signal_stop(allocation.pk, allocation.generation, reason=RELEASE_PREEMPTED,
                                       grace_period_s=30, at=now, actor="scheduler",
                                       message="Preempted by job 9 (production)")

    def stop_confirmed() -> None:
        assert transitions.complete_release(allocation.pk, exit_code=None, at=now, actor="agent:h100-1")

    done: list[str] = []

    def hold(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not done and sql.startswith('UPDATE "controlplane_allocation"') and params and "Cancelled" in params:
            # 1st attempt, about to stop the allocation it read active: the scheduler preempts it first
            done.append("preempted")
            _elsewhere(preempt)
        elif (done == ["preempted"] and sql.startswith("SELECT") and '"release_reason" IN' in sql
              and AllocationState.RELEASING.value in (params or ())):
            # 2nd attempt, the job read stopping, about to look for that stop: the agent confirms it
            done.append("requeued")
            _elsewhere(stop_confirmed)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(hold):
        r = client_for(committed_fleet, "owner").post(f"{J}/jobs/{job.pk}/cancel/")

    assert done == ["preempted", "requeued"]  # both landed where they were meant to
    assert r.status_code == 200, r.content
    assert r.json()["detail"] == f"Job {job.pk} cancelled."
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.RELEASED
    kinds = list(Event.objects.filter(job=job).order_by("id").values_list("kind", "message"))
    assert kinds[-3][0] == EventKind.JOB_PREEMPTED.value, kinds  # requeued: the job waited again
    assert kinds[-2:] == [(EventKind.JOB_CANCELLED.value, "Cancelled while waiting"),
                          (EventKind.JOB_FINISHED.value, "Job cancelled")], kinds


def test_a_cancel_refused_for_a_state_that_stays_is_still_refused(committed_fleet) -> None:
    """Trying again only while the job moves: a job that already ended is refused at once."""
    job, allocation = _running(committed_fleet)
    assert transitions.complete_release(allocation.pk, exit_code=0, at=timezone.now(), actor="agent:h100-1")
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert transitions.cancel_job(job, "user:alice") is False
