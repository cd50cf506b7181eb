"""A maintenance window written while a cycle plans (the engine read the windows before it):
the plan's binds onto the window's nodes are never committed, and a window's write waits for a
cycle's commit in progress, so the jobs that commit bound are named among those it affects.

Found by the concurrency audit (4 Dec): the commit checked a bind's job and its GPUs against
the database, not the nodes' windows, and a window's write did not take the scheduler lease. A
window created (or moved earlier) on a node after the cycle's read, before its commit, let the
plan start a job there that would run into it (a window starting now: a job started on a node
in maintenance), which the engine never does from a snapshot that has the window."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Job, MaintenanceWindow
from controlplane.services import cycle, maintenance
from tests.controlplane import factories as f
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread
from tests.controlplane.loop_fixtures import (
    LoopFleet,
    build_loop_fleet,
    commit_planned,
    make_job,
    plan_binding,
    register_node,
)


def _bound_gpus(job: Job) -> int:
    return AllocationGpu.objects.filter(allocation__job=job, live=True).count()


@pytest.mark.parametrize("starts_in_s", [0, 1800])
def test_a_bind_planned_before_a_window_on_its_node_was_written_is_dropped(fleet: LoopFleet, starts_in_s: int) -> None:
    register_node("gpu-a")
    root = f.make_user("root", superuser=True)
    job = make_job(fleet, gpus=8, runtime_limit_s=3600)
    plan, context, lease = plan_binding(job)

    maintenance.create(root, nodes=["gpu-a"], start_at=timezone.now() + timedelta(seconds=starts_in_s),
                       duration_s=3600, reason="firmware")
    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (0, 1)
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING and _bound_gpus(job) == 0
    cycle.run_cycle("worker-1")  # the next cycle reads the window and explains the wait
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.pending_code == "MaintenanceWindow", job.pending_code


def test_a_window_moved_onto_a_bind_planned_before_drops_it(fleet: LoopFleet) -> None:
    register_node("gpu-a")
    root = f.make_user("root", superuser=True)
    window = maintenance.create(root, nodes=["gpu-a"], start_at=timezone.now() + timedelta(hours=5),
                                duration_s=3600, reason="firmware")
    job = make_job(fleet, gpus=8, runtime_limit_s=3600)
    plan, context, lease = plan_binding(job)  # the job ends before the window as read

    maintenance.change(window.pk, root, {"start_at": timezone.now() + timedelta(minutes=30)})
    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (0, 1) and _bound_gpus(job) == 0


def test_a_window_elsewhere_or_cancelled_leaves_the_bind_alone(fleet: LoopFleet) -> None:
    register_node("gpu-a")
    register_node("gpu-b")
    root = f.make_user("root", superuser=True)
    kept = maintenance.create(root, nodes=["gpu-a", "gpu-b"], start_at=timezone.now() + timedelta(hours=5),
                              duration_s=3600, reason="firmware")
    job = make_job(fleet, gpus=8, runtime_limit_s=3600)
    plan, context, lease = plan_binding(job)

    maintenance.cancel(kept.pk, root)
    maintenance.create(root, nodes=[n for n in ("gpu-a", "gpu-b") if n not in
                                    {p.node for p in plan.binds[0].placements}],
                       start_at=timezone.now(), duration_s=3600, reason="elsewhere")
    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (1, 0) and _bound_gpus(job) == 8


@pytest.fixture
def committed(transactional_db: Any) -> LoopFleet:
    return build_loop_fleet()


def test_race_a_window_written_during_a_cycles_commit_waits_for_it_and_names_its_job(committed: LoopFleet) -> None:
    register_node("gpu-a")
    root = f.make_user("root", superuser=True)
    job = make_job(committed, gpus=8, runtime_limit_s=3600)
    plan, context, lease = plan_binding(job)

    with transaction.atomic():  # the commit's transaction, held open after its bind
        result = commit_planned(plan, context, lease)
        writing, written = in_thread(lambda: maintenance.create(
            root, nodes=["gpu-a"], start_at=timezone.now() + timedelta(seconds=60), duration_s=3600,
            reason="firmware"))
        waited = blocked_on_a_lock(5)
    writing.join(20)

    assert result.binds == 1 and waited
    window = MaintenanceWindow.objects.prefetch_related("nodes").get(pk=written["result"].pk)
    assert [a.job_id for a in maintenance.affected_running_jobs([window])[window.pk]] == [job.pk]
