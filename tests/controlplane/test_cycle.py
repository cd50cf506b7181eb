"""The cycle end to end on PostgreSQL: snapshot → engine → fenced commit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import (
    Allocation,
    AllocationGpu,
    Cohort,
    Event,
    GpuType,
    Job,
    Node,
    PriorityClass,
    Quota,
    SchedulerLease,
    Team,
)
from controlplane.services import cycle
from controlplane.services.snapshot import read_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_fleet() -> Team:
    """Six 8-GPU nodes under two leaf switches: 48 GPUs, one team with room for all of them."""
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    for i in range(6):
        Node.objects.create(
            name=f"n{i}", pool="h100", gpu_type=h100, gpu_count=8, cpus=96, memory_gb=1024,
            leaf_switch=f"leaf-{i // 3}", spine="spine-1",
        )
    cohort = Cohort.objects.create(name="all")
    research = PriorityClass.objects.create(name="research", value=500)
    team = Team.objects.create(name="ml", cohort=cohort, default_priority_class=research)
    Quota.objects.create(team=team, gpu_type=h100, nominal_gpus=64)
    return team


def _submit(team: Team, name: str, gpus: int, gpus_per_node: int | None = None, minutes_ago: int = 0) -> Job:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    return Job.objects.create(
        team=team, name=name, priority_class=team.default_priority_class, gpus=gpus, gpus_per_node=gpus_per_node,
        runtime_limit_s=3600, submitted_at=at, state_changed_at=at,
    )


def test_two_32_gpu_gangs_on_48_free_gpus_one_runs_the_other_waits_holding_nothing(small_fleet: Team) -> None:
    first = _submit(small_fleet, "gang-a", 32, 8, minutes_ago=2)
    second = _submit(small_fleet, "gang-b", 32, 8, minutes_ago=1)

    result = cycle.run_cycle("worker-1")

    assert result.led and result.binds == 1
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == JobState.RUNNING
    assert second.state == JobState.PENDING
    assert AllocationGpu.objects.filter(live=True, allocation__job=first).count() == 32
    assert not AllocationGpu.objects.filter(allocation__job=second).exists()
    assert second.pending_code and second.pending_message
    assert Event.objects.filter(job=first, kind=EventKind.JOB_BOUND).exists()


def test_bound_allocation_carries_a_fresh_generation_and_the_leaders_epoch(small_fleet: Team) -> None:
    _submit(small_fleet, "a", 1)
    _submit(small_fleet, "b", 1)
    cycle.run_cycle("worker-1")
    lease = SchedulerLease.objects.get(name="scheduler")
    generations = list(Allocation.objects.order_by("generation").values_list("generation", "epoch"))
    assert [g for g, _ in generations] == [1, 2]
    assert {e for _, e in generations} == {lease.epoch}


def test_a_second_worker_does_not_lead_while_the_lease_is_live(small_fleet: Team) -> None:
    assert cycle.run_cycle("worker-1").led
    _submit(small_fleet, "late", 1)
    result = cycle.run_cycle("worker-2")
    assert not result.led
    assert Job.objects.get(name="late").state == JobState.PENDING


def test_fencing_deposed_leader_commit_changes_nothing(small_fleet: Team) -> None:
    job = _submit(small_fleet, "j", 8, 8)
    now = timezone.now()
    lease = cycle.acquire_lease("old-leader", now)
    assert lease is not None
    context = read_snapshot(now, lease.epoch)
    plan = cycle.engine.schedule(context.snapshot, cycle.scheduler_config())
    assert plan.binds, "the engine should want to bind the job"
    # The old leader stalls past its lease; a new leader takes over with a higher epoch.
    SchedulerLease.objects.filter(name="scheduler").update(expires_at=now - timedelta(seconds=1))
    assert cycle.acquire_lease("new-leader", now) is not None
    with pytest.raises(cycle.Deposed):
        cycle.commit_plan(plan, context, holder="old-leader", epoch=lease.epoch, plan_ms=0.0, started=0.0)
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert not Allocation.objects.exists()


def test_stale_plan_cannot_give_a_gpu_two_live_owners(small_fleet: Team) -> None:
    """Two plans from the same snapshot: the second's bind hits the live-GPU index and is undone whole."""
    _submit(small_fleet, "j1", 8, 8)
    now = timezone.now()
    lease = cycle.acquire_lease("leader", now)
    assert lease is not None
    context = read_snapshot(now, lease.epoch)
    plan = cycle.engine.schedule(context.snapshot, cycle.scheduler_config())
    cycle.commit_plan(plan, context, holder="leader", epoch=lease.epoch, plan_ms=0.0, started=0.0)
    # Requeue the job by hand (as if preempted) but leave its GPUs live: a stale replay of the
    # plan must not bind it again onto the same GPUs.
    Job.objects.update(state=JobState.PENDING)
    result = cycle.commit_plan(plan, context, holder="leader", epoch=lease.epoch, plan_ms=0.0, started=0.0)
    assert result.binds == 0 and result.stale == 1
    assert Allocation.objects.filter(state=AllocationState.ACTIVE).count() == 1


def test_stale_plan_does_not_bind_onto_a_node_that_went_unready_since_the_snapshot(small_fleet: Team) -> None:
    job = _submit(small_fleet, "j1", 8, 8)
    now = timezone.now()
    lease = cycle.acquire_lease("leader", now)
    assert lease is not None
    context = read_snapshot(now, lease.epoch)
    plan = cycle.engine.schedule(context.snapshot, cycle.scheduler_config())
    (bind,) = plan.binds
    Node.objects.filter(name=bind.placements[0].node).update(state="quarantined")
    result = cycle.commit_plan(plan, context, holder="leader", epoch=lease.epoch, plan_ms=0.0, started=0.0)
    assert result.binds == 0 and result.stale == 1
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert not AllocationGpu.objects.filter(live=True).exists()
