"""Held and changed jobs in real scheduling cycles: a held job is out of line (the smaller job
behind it starts), explained like any other waiting job, and back in line the cycle after its
release; a bind planned before a hold or a shape change never takes effect after it."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections, transaction
from django.utils import timezone

import scheduler_core as engine
from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, SchedulerLease
from controlplane.services import cycle, holds
from controlplane.services.snapshot import read_snapshot, scheduler_config
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import (
    LoopFleet,
    bind,
    build_loop_fleet,
    commit_planned,
    make_job,
    plan_binding,
    register_node,
)


@pytest.fixture
def alice(fleet: LoopFleet) -> Any:
    return f.make_user("alice", team=fleet.team)


def _bound_gpus(job: Job) -> int:
    return AllocationGpu.objects.filter(allocation__job=job, live=True).count()


def test_a_held_job_is_not_bound_while_a_smaller_one_behind_it_is(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")
    big = make_job(fleet, gpus=8, name="big", submitter=alice)
    small = make_job(fleet, gpus=2, name="small", submitted_at=big.submitted_at + timedelta(seconds=1))
    holds.hold(alice, big.pk)

    result = cycle.run_cycle("worker-1")

    assert result.binds == 1
    assert Job.objects.get(pk=small.pk).state == JobState.RUNNING
    big.refresh_from_db()
    assert big.state == JobState.PENDING and _bound_gpus(big) == 0
    # Explained like any waiting job: code, sentence, what would start it, a place after the queue.
    assert big.pending_code == "Held"
    assert big.pending_message == "Held by alice: until it is released it is not in the queue and holds nothing."
    assert big.pending_would_start_if == "it is released"
    assert big.queue_position == 1 and big.eta is None


def test_a_released_job_is_bound_at_the_next_cycle(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")
    job = make_job(fleet, gpus=8, name="later", submitter=alice)
    holds.hold(alice, job.pk)
    cycle.run_cycle("worker-1")
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING

    holds.release(alice, job.pk)
    assert Job.objects.get(pk=job.pk).pending_code == "Released"
    result = cycle.run_cycle("worker-1")

    assert result.binds == 1 and _bound_gpus(job) == 8
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING


def test_an_admins_hold_is_explained_naming_the_admin(fleet: LoopFleet) -> None:
    register_node("gpu-a")
    root = f.make_user("root", superuser=True)
    job = make_job(fleet, gpus=1)
    holds.hold(root, job.pk)

    cycle.run_cycle("worker-1")

    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.pending_code == "Held"
    assert job.pending_message.startswith("Held by admin root: ")


def test_a_bind_planned_before_a_shape_change_is_dropped_and_the_next_cycle_binds_the_new_shape(
    fleet: LoopFleet, alice: Any,
) -> None:
    register_node("gpu-a")
    job = make_job(fleet, gpus=8, name="reshaped", submitter=alice)
    plan, context, lease = plan_binding(job)  # planned with 8 GPUs

    holds.update(alice, job.pk, {"gpus": 2})
    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (0, 1)
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING and not Allocation.objects.filter(job=job).exists()
    assert cycle.run_cycle("worker-1").binds == 1
    assert _bound_gpus(job) == 2  # the shape it asks for now, never the old 8


def test_a_bind_planned_before_a_hold_is_dropped(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")
    job = make_job(fleet, gpus=4, submitter=alice)
    plan, context, lease = plan_binding(job)

    holds.hold(alice, job.pk)
    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (0, 1)
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.hold == "user" and _bound_gpus(job) == 0


def test_an_unchanged_job_still_binds_from_the_same_plan(fleet: LoopFleet, alice: Any) -> None:
    """The guard compares the row with what the snapshot read: a job nobody touched is bound
    from the very plan that the tests above see dropped (no false staleness)."""
    register_node("gpu-a")
    job = make_job(fleet, gpus=4, submitter=alice)
    plan, context, lease = plan_binding(job)

    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (1, 0) and _bound_gpus(job) == 4


# ------------------------------------------------------------ two connections, real row locks


@pytest.fixture
def committed(transactional_db: Any) -> tuple[LoopFleet, Any]:
    fleet = build_loop_fleet()
    return fleet, f.make_user("alice", team=fleet.team)


def test_race_a_change_waiting_on_the_binds_row_lock_finds_the_job_running(committed: tuple[LoopFleet, Any]) -> None:
    fleet, alice = committed
    register_node("gpu-a")
    job = make_job(fleet, gpus=8, submitter=alice)
    plan, context, lease = plan_binding(job)
    committing, answer = threading.Event(), {}

    def change() -> None:
        try:
            assert committing.wait(10)
            started = time.perf_counter()
            try:
                holds.update(alice, job.pk, {"gpus": 2})
                answer["outcome"] = "changed"
            except holds.Refused as refusal:
                answer["outcome"] = (refusal.status, refusal.detail)
            answer["waited"] = time.perf_counter() - started
        finally:
            connections.close_all()

    other = threading.Thread(target=change)
    other.start()
    with transaction.atomic():  # the commit's transaction, held open after its binds
        result = commit_planned(plan, context, lease)
        committing.set()
        time.sleep(1.0)  # the change runs now, and must wait for this row lock
    other.join(20)

    assert result.binds == 1 and _bound_gpus(job) == 8
    assert answer["waited"] >= 0.9, answer
    assert answer["outcome"][0] == 409 and answer["outcome"][1].startswith(f"Job {job.pk} is running: "), answer
    assert Job.objects.get(pk=job.pk).gpus == 8


def test_race_a_bind_waiting_on_the_changes_row_lock_is_dropped(committed: tuple[LoopFleet, Any]) -> None:
    fleet, alice = committed
    register_node("gpu-a")
    job = make_job(fleet, gpus=8, submitter=alice)
    plan, context, lease = plan_binding(job)
    changing, results = threading.Event(), {}

    def commit() -> None:
        try:
            assert changing.wait(10)
            started = time.perf_counter()
            results["result"] = commit_planned(plan, context, lease)
            results["waited"] = time.perf_counter() - started
        finally:
            connections.close_all()

    other = threading.Thread(target=commit)
    other.start()
    with transaction.atomic():  # the change's transaction, held open after its write
        holds.update(alice, job.pk, {"gpus": 2})
        changing.set()
        time.sleep(1.0)  # the commit runs now, and must wait for this row lock
    other.join(20)

    assert results["waited"] >= 0.9, results
    assert (results["result"].binds, results["result"].stale) == (0, 1)
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.gpus == 2 and _bound_gpus(job) == 0
    assert Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).count() == 1


def test_a_long_held_job_is_not_the_queues_oldest_feasible_wait(fleet: LoopFleet, alice: Any) -> None:
    from controlplane.models import FleetSample

    a, _ = register_node("gpu-a")
    register_node("gpu-b")
    now = timezone.now()
    bind(make_job(fleet, gpus=1, name="blocker"), {a: [0]})  # the 16-GPU jobs fit the fleet, not now
    held = make_job(fleet, gpus=16, name="held-a-week", submitter=alice, submitted_at=now - timedelta(days=7))
    make_job(fleet, gpus=16, name="waits", submitted_at=now - timedelta(minutes=10))
    holds.hold(alice, held.pk)

    cycle.run_cycle("worker-1", now=now)

    sample = FleetSample.objects.latest("at")
    assert sample.pending_jobs == 2  # both wait, and both are counted as waiting
    assert 590 <= sample.oldest_feasible_pending_s <= 610  # the queued job's 10 minutes, not the held one's week


def _past_its_limit(fleet: LoopFleet) -> tuple[Job, Allocation]:
    a, _ = register_node("gpu-a")
    job = make_job(fleet, gpus=1, name="long", runtime_limit_s=3600)
    allocation = bind(job, {a: [0]}, at=timezone.now() - timedelta(hours=2))
    return job, allocation


def _kill_planned(job: Job) -> tuple[engine.Plan, Any, SchedulerLease]:
    lease = cycle.acquire_lease("worker-1", timezone.now())
    assert lease is not None
    context = read_snapshot(timezone.now(), lease.epoch)
    plan = engine.schedule(context.snapshot, scheduler_config())
    assert [k.job_id for k in plan.kills] == [str(job.pk)]
    return plan, context, lease


def test_a_runtime_limit_stop_planned_before_an_admin_raised_the_limit_is_dropped(fleet: LoopFleet) -> None:
    root = f.make_user("root", superuser=True)
    job, allocation = _past_its_limit(fleet)
    plan, context, lease = _kill_planned(job)

    holds.update(root, job.pk, {"runtime_limit_s": 4 * 3600})
    result = commit_planned(plan, context, lease)

    assert (result.stops, result.stale) == (0, 1)
    allocation.refresh_from_db()
    assert allocation.state == "active" and Job.objects.get(pk=job.pk).state == JobState.RUNNING
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_TIMED_OUT).exists()
    assert cycle.run_cycle("worker-1").stops == 0  # judged anew: 2 h of its 4 h


def test_a_runtime_limit_stop_of_an_unchanged_job_goes_ahead(fleet: LoopFleet) -> None:
    job, allocation = _past_its_limit(fleet)
    plan, context, lease = _kill_planned(job)

    result = commit_planned(plan, context, lease)

    assert (result.stops, result.stale) == (1, 0)
    assert Event.objects.filter(job=job, kind=EventKind.JOB_TIMED_OUT).exists()
