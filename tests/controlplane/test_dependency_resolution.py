"""Dependencies resolved where job states change (services/transitions.py → dependencies.py):
met conditions are marked satisfied with an event, conditions that can no longer be met cancel
the waiting dependent with DependencyNeverSatisfied, down chains of any length; and a job end
with no dependents costs one query more."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import DependencyCondition, EventKind, JobState
from controlplane.models import Allocation, Event, Job, JobDependency
from controlplane.services import jobs as job_service
from controlplane.services import reconcile, transitions
from controlplane.services.dependencies import NEVER_SATISFIED, SATISFIED
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    bind,
    build_loop_fleet,
    make_job,
    register_node,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _bootstrap_secret(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@pytest.fixture
def loop_fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()


def depends(job: Job, upstream: Job, condition: str = DependencyCondition.AFTER_OK) -> JobDependency:
    return JobDependency.objects.create(job=job, upstream=upstream, condition=condition)


def run_and_exit(fleet: LoopFleet, job: Job, exit_code: int) -> Allocation:
    node, _ = register_node(f"n-{job.pk}")
    allocation = bind(job, {node: [0]})
    transitions.complete_release(allocation.pk, exit_code=exit_code, at=timezone.now(), actor="agent")
    return allocation


def state(job: Job) -> str:
    return Job.objects.get(pk=job.pk).state


def test_afterok_is_met_when_the_upstream_succeeds_with_an_event_on_the_dependent(loop_fleet: LoopFleet) -> None:
    up, down = make_job(loop_fleet, name="pre"), make_job(loop_fleet, name="train")
    dep = depends(down, up)

    run_and_exit(loop_fleet, up, 0)

    dep.refresh_from_db()
    assert dep.satisfied_at is not None and state(down) == JobState.PENDING
    event = Event.objects.get(job=down, reason=SATISFIED)
    assert event.kind == EventKind.JOB_UPDATED
    assert event.message == f"Job {up.pk} succeeded: its dependency afterok is met; it waits on no other job now"


def test_an_event_says_how_many_jobs_are_still_waited_on(loop_fleet: LoopFleet) -> None:
    a, b, down = make_job(loop_fleet, name="a"), make_job(loop_fleet, name="b"), make_job(loop_fleet, name="down")
    depends(down, a)
    depends(down, b)

    run_and_exit(loop_fleet, a, 0)

    assert Event.objects.get(job=down, reason=SATISFIED).message.endswith("; it still waits on 1 other job")


def test_afterok_failure_cancels_the_whole_chain_with_the_reason(loop_fleet: LoopFleet) -> None:
    pre, train, evaluate, report = (make_job(loop_fleet, name=n) for n in ("pre", "train", "eval", "report"))
    depends(train, pre)
    depends(evaluate, train)
    depends(report, evaluate, DependencyCondition.AFTER_ANY)  # met by eval's cancel: it may run

    run_and_exit(loop_fleet, pre, 3)

    assert (state(train), state(evaluate)) == (JobState.CANCELLED, JobState.CANCELLED)
    assert state(report) == JobState.PENDING
    train_row = Job.objects.get(pk=train.pk)
    assert train_row.pending_code == NEVER_SATISFIED
    cancelled = Event.objects.get(job=train, kind=EventKind.JOB_CANCELLED)
    assert cancelled.reason == NEVER_SATISFIED
    assert cancelled.message == (f"Job {pre.pk} failed (exit 3): this job was to run only after it succeeded "
                                 "(afterok), so it is cancelled.")
    assert Event.objects.get(job=evaluate, kind=EventKind.JOB_CANCELLED).message.startswith(
        f"Job {train.pk} was cancelled because job {pre.pk} failed (exit 3): this job was to run only after it "
        "succeeded")
    assert Event.objects.filter(job=train, kind=EventKind.JOB_FINISHED, reason="Cancelled").count() == 1
    assert JobDependency.objects.get(job=report).satisfied_at is not None


def test_a_long_chain_is_cancelled_in_one_transition_without_recursion(loop_fleet: LoopFleet) -> None:
    jobs = [make_job(loop_fleet, name=f"step-{i}") for i in range(1200)]  # beyond Python's recursion limit
    JobDependency.objects.bulk_create(
        [JobDependency(job=jobs[i + 1], upstream=jobs[i], condition="afterok") for i in range(len(jobs) - 1)])

    run_and_exit(loop_fleet, jobs[0], 1)

    assert Job.objects.filter(pk__in=[j.pk for j in jobs[1:]], state=JobState.CANCELLED).count() == len(jobs) - 1


def test_afternotok_is_met_by_a_failure(loop_fleet: LoopFleet) -> None:
    up, cleanup = make_job(loop_fleet, name="train"), make_job(loop_fleet, name="cleanup")
    dep = depends(cleanup, up, DependencyCondition.AFTER_NOT_OK)

    run_and_exit(loop_fleet, up, 2)

    dep.refresh_from_db()
    assert dep.satisfied_at is not None and state(cleanup) == JobState.PENDING


def test_afternotok_is_cancelled_by_a_success(loop_fleet: LoopFleet) -> None:
    up, cleanup = make_job(loop_fleet, name="train"), make_job(loop_fleet, name="cleanup")
    depends(cleanup, up, DependencyCondition.AFTER_NOT_OK)

    run_and_exit(loop_fleet, up, 0)

    assert state(cleanup) == JobState.CANCELLED
    assert Event.objects.get(job=cleanup, kind=EventKind.JOB_CANCELLED).message.startswith(
        f"Job {up.pk} succeeded: this job was to run only after it failed (afternotok)")


def test_afterany_is_met_when_the_upstream_is_cancelled_while_waiting(loop_fleet: LoopFleet) -> None:
    up, down = make_job(loop_fleet, name="up"), make_job(loop_fleet, name="down")
    dep = depends(down, up, DependencyCondition.AFTER_ANY)

    assert transitions.cancel_job(up, "user:alice")

    dep.refresh_from_db()
    assert dep.satisfied_at is not None
    assert Event.objects.get(job=down, reason=SATISFIED).message.startswith(f"Job {up.pk} was cancelled:")


def test_cancelling_a_waiting_array_cascades_to_its_dependents(loop_fleet: LoopFleet) -> None:
    tasks = [make_job(loop_fleet, name="task") for _ in range(3)]
    down = make_job(loop_fleet, name="merge")
    for task in tasks:
        depends(down, task)

    job_service.cancel_waiting(Job.objects.filter(pk__in=[t.pk for t in tasks]), "user:alice")

    assert state(down) == JobState.CANCELLED
    assert Event.objects.filter(job=down, kind=EventKind.JOB_CANCELLED).count() == 1


def test_after_is_met_when_the_upstream_starts_and_stays_met_after_a_preemption(loop_fleet: LoopFleet) -> None:
    up, down = make_job(loop_fleet, name="server"), make_job(loop_fleet, name="client")
    dep = depends(down, up, DependencyCondition.AFTER)
    node, _ = register_node("n-after")

    allocation = bind(up, {node: [0]})
    dep.refresh_from_db()
    met_at = dep.satisfied_at
    assert met_at is not None
    assert Event.objects.get(job=down, reason=SATISFIED).message.startswith(f"Job {up.pk} started:")

    with transaction.atomic():
        reconcile.lock_scheduler_lease()
        assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                       grace_period_s=5, at=timezone.now(), actor="test", message="preempted")
    transitions.complete_release(allocation.pk, exit_code=None, at=timezone.now(), actor="agent")

    assert state(up) == JobState.PENDING  # requeued
    dep.refresh_from_db()
    assert dep.satisfied_at == met_at and state(down) == JobState.PENDING


def test_a_batch_of_exits_settles_every_dependent(loop_fleet: LoopFleet) -> None:
    node, _ = register_node("n-batch")
    ups = [make_job(loop_fleet, name=f"u{i}") for i in range(3)]
    downs = [make_job(loop_fleet, name=f"d{i}") for i in range(3)]
    for up, down in zip(ups, downs, strict=True):
        depends(down, up)
    allocations = [bind(up, {node: [i]}) for i, up in enumerate(ups)]
    now = timezone.now()

    transitions.complete_releases([(a.pk, a.generation, code, now) for a, code in zip(allocations, (0, 1, 0),
                                                                                      strict=True)], actor_of={})

    assert [state(d) for d in downs] == [JobState.PENDING, JobState.CANCELLED, JobState.PENDING]


def _dependency_queries(queries: CaptureQueriesContext) -> int:
    return sum(1 for q in queries.captured_queries if JobDependency._meta.db_table in q["sql"])


def test_a_job_end_without_dependents_costs_one_query_of_the_dependencies(loop_fleet: LoopFleet) -> None:
    node, _ = register_node("n-cost")
    alone = bind(make_job(loop_fleet, name="alone"), {node: [0]})
    with CaptureQueriesContext(connection) as queries:
        transitions.complete_release(alone.pk, exit_code=0, at=timezone.now(), actor="agent")
    assert _dependency_queries(queries) == 1

    batch = [bind(make_job(loop_fleet, name=f"b{i}"), {node: [i]}) for i in range(8)]
    with CaptureQueriesContext(connection) as queries:
        transitions.complete_releases([(a.pk, a.generation, 0, timezone.now()) for a in batch], actor_of={})
    assert _dependency_queries(queries) == 1  # one for the whole batch


def test_a_bind_without_after_dependents_costs_one_query_of_the_dependencies(loop_fleet: LoopFleet) -> None:
    node, _ = register_node("n-bind")
    job = make_job(loop_fleet, name="solo")
    with CaptureQueriesContext(connection) as queries:
        bind(job, {node: [0]})
    assert _dependency_queries(queries) == 1


def test_an_upstream_fenced_while_stopping_at_its_limit_times_out_and_cancels_afterok(loop_fleet: LoopFleet) -> None:
    """The fence path: a job stopping at its runtime limit whose node stops answering ends timed
    out there (fence_allocation), and that end settles its dependents too."""
    node, _ = register_node("n-fence")
    up, down, any_end = (make_job(loop_fleet, name=n) for n in ("up", "down", "report"))
    depends(down, up)
    depends(any_end, up, DependencyCondition.AFTER_ANY)
    allocation = bind(up, {node: [0]})
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_RUNTIME_LIMIT,
                                       grace_period_s=5, at=timezone.now(), actor="test", message="limit")
        assert transitions.fence_allocation(allocation.pk, lease=lease, at=timezone.now(), actor="reconcile",
                                            reason="NodeLeaseExpired")

    assert state(up) == JobState.TIMED_OUT
    assert state(down) == JobState.CANCELLED
    assert Event.objects.get(job=down, kind=EventKind.JOB_CANCELLED).message.startswith(f"Job {up.pk} timed out:")
    assert JobDependency.objects.get(job=any_end).satisfied_at is not None
