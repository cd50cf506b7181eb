"""A waiting job's dependencies changed (services/holds.update, PATCH jobs/{id}/) in real
scheduling cycles: the next snapshot carries the new ones (`JobSpec.waits_on`) and none of the
removed ones; a job given a dependency after a cycle's snapshot read it is not bound by that
cycle's plan; a job whose dependencies were removed runs at the next cycle."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import DependencyCondition, JobState
from controlplane.models import Allocation, Job, JobDependency, PendingPlace
from controlplane.services import cycle, holds
from controlplane.services.snapshot import read_snapshot
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, commit_planned, make_job, plan_binding, register_node


@pytest.fixture
def alice(fleet: LoopFleet) -> Any:
    return f.make_user("alice", team=fleet.team)


def waits_on(job: Job) -> tuple[tuple[str, str, str], ...]:
    (spec,) = [s for s in read_snapshot(timezone.now(), epoch=1).snapshot.pending if s.id == str(job.pk)]
    return tuple((w.upstream, w.condition.value, w.upstream_state) for w in spec.waits_on)


def test_the_snapshot_carries_the_new_dependencies_and_not_the_removed_ones(fleet: LoopFleet, alice: Any) -> None:
    first, second = make_job(fleet, name="first"), make_job(fleet, name="second", state=JobState.RUNNING)
    job = make_job(fleet, name="job", submitter=alice)
    JobDependency.objects.create(job=job, upstream=first, condition=DependencyCondition.AFTER_OK)
    assert waits_on(job) == ((str(first.pk), "afterok", "pending"),)

    holds.update(alice, job.pk, {"dependencies": [{"job": second.pk, "condition": "afterany"}]})
    assert waits_on(job) == ((str(second.pk), "afterany", "running"),)

    holds.update(alice, job.pk, {"dependencies": []})
    assert waits_on(job) == ()


def test_a_waiting_job_given_a_dependency_leaves_the_queue_and_waits_through_cycles(
    fleet: LoopFleet, alice: Any,
) -> None:
    register_node("gpu-a")
    blocker = make_job(fleet, gpus=8, name="blocker")  # holds the node: the job waits in the queue
    job = make_job(fleet, gpus=8, name="job", submitter=alice,
                   submitted_at=blocker.submitted_at + timedelta(seconds=1))
    cycle.run_cycle("worker-1")
    assert PendingPlace.objects.filter(job=job).exists()  # a place in the queue
    up = make_job(fleet, name="up", state=JobState.RUNNING)

    holds.update(alice, job.pk, {"dependencies": [{"job": up.pk}]})

    assert not PendingPlace.objects.filter(job=job).exists()  # out of line at once
    cycle.run_cycle("worker-1")
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.pending_code == "WaitingForDependency"
    assert job.pending_message == (f"Waits for job {up.pk} to succeed (now running): until then it is not in the "
                                   "queue and holds nothing.")


def test_a_bind_planned_before_a_dependency_was_added_is_dropped(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")
    up = make_job(fleet, name="up", state=JobState.RUNNING)
    job = make_job(fleet, gpus=4, name="job", submitter=alice)
    plan, context, lease = plan_binding(job)  # read with no dependency: in line, planned to start

    holds.update(alice, job.pk, {"dependencies": [{"job": up.pk}]})
    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (0, 1)
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING and not Allocation.objects.filter(job=job).exists()


def test_a_bind_planned_before_a_dependency_met_already_was_added_still_binds(fleet: LoopFleet, alice: Any) -> None:
    """No false staleness: a dependency recorded met does not hold the plan's bind back."""
    register_node("gpu-a")
    done = make_job(fleet, name="done", state=JobState.SUCCEEDED, exit_code=0)
    job = make_job(fleet, gpus=4, name="job", submitter=alice)
    plan, context, lease = plan_binding(job)

    holds.update(alice, job.pk, {"dependencies": [{"job": done.pk}]})
    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (1, 0)
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING


def test_a_job_whose_dependencies_are_removed_runs_at_the_next_cycle(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")
    up = make_job(fleet, name="up", gpus=1, hold="user")  # held: it never starts, so the job would wait forever
    job = make_job(fleet, gpus=4, name="job", submitter=alice)
    JobDependency.objects.create(job=job, upstream=up, condition=DependencyCondition.AFTER_OK)
    cycle.run_cycle("worker-1")
    assert Job.objects.get(pk=job.pk).pending_code == "WaitingForDependency"

    holds.update(alice, job.pk, {"dependencies": []})
    cycle.run_cycle("worker-1")

    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
