"""The cycle's stop orders on PostgreSQL: a plan's runtime-limit kills, preemptions and resizes
reach the allocations as fenced stop signals (state releasing, a deadline from the grace period,
the reason, an event someone can read later), and nothing is released before the agents confirm."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import scheduler_core as engine
from controlplane.choices import AllocationState, EventKind, JobState, WorkloadClass
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
from controlplane.services import cycle, transitions
from controlplane.services.snapshot import read_snapshot

pytestmark = pytest.mark.django_db

GRACE_S = 45


@pytest.fixture
def team() -> Team:
    """Two 8-GPU nodes, one team with room for all 16 GPUs; a low class that may be preempted
    with a 45 s grace and a high class that may preempt it."""
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    for i in range(2):
        Node.objects.create(name=f"n{i}", pool="h100", gpu_type=h100, gpu_count=8, cpus=96, memory_gb=1024,
                            leaf_switch="leaf-0", spine="spine-0")
    low = PriorityClass.objects.create(name="batch", value=100, grace_period_s=GRACE_S, min_runtime_s=0)
    PriorityClass.objects.create(name="prod", value=1000, preemptible=False)
    team = Team.objects.create(name="ml", cohort=Cohort.objects.create(name="all"), default_priority_class=low)
    Quota.objects.create(team=team, gpu_type=h100, nominal_gpus=16)
    return team


def _submit(team: Team, name: str, gpus: int, *, priority: str = "batch", limit_s: int = 3600,
            **shape: object) -> Job:
    at = timezone.now() - timedelta(minutes=1)
    return Job.objects.create(
        team=team, name=name, priority_class=PriorityClass.objects.get(name=priority), gpus=gpus,
        runtime_limit_s=limit_s, submitted_at=at, state_changed_at=at, **shape,
    )


def _start(*jobs_started_minutes_ago: tuple[Job, float]) -> list[Allocation]:
    """Bind the jobs in one cycle, then date their starts back as if their agents had confirmed
    them that long ago."""
    assert cycle.run_cycle("worker-1").binds == len(jobs_started_minutes_ago)
    allocations = []
    for job, minutes in jobs_started_minutes_ago:
        started = timezone.now() - timedelta(minutes=minutes)
        allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
        Allocation.objects.filter(pk=allocation.pk).update(started_at=started)
        Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=started)
        allocations.append(allocation)
    return allocations


def _assert_signalled(allocation: Allocation, reason: str, kind: str, gpus: int) -> Event:
    """Releasing with the reason and a deadline one grace period after the signal's event; the
    old owner still holds its GPUs until its agents confirm or it is fenced."""
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.RELEASING
    assert allocation.release_reason == reason
    assert AllocationGpu.objects.filter(allocation=allocation, live=True).count() == gpus
    assert Job.objects.get(pk=allocation.job_id).state == JobState.PREEMPTING
    event = Event.objects.get(allocation=allocation, kind=kind, reason=reason)
    assert event.data["grace_period_s"] == GRACE_S
    assert event.data["generation"] == allocation.generation
    assert allocation.release_deadline is not None
    assert abs((allocation.release_deadline - event.created_at).total_seconds() - GRACE_S) < 1e-3
    return event


def test_runtime_limit_the_cycle_signals_a_job_past_its_limit_with_its_grace(team: Team) -> None:
    over, within = _start((_submit(team, "over", 8), 61), (_submit(team, "within", 8), 30))

    result = cycle.run_cycle("worker-1")

    assert result.stops == 1 and result.resizes == 0 and result.stale == 0
    _assert_signalled(over, transitions.RELEASE_RUNTIME_LIMIT, EventKind.JOB_TIMED_OUT, gpus=8)
    within.refresh_from_db()
    assert within.state == AllocationState.ACTIVE


def test_preemption_by_a_higher_class_signals_the_whole_gang_with_its_expected_lost_work(team: Team) -> None:
    (victim,) = _start((_submit(team, "sweep", 16, gpus_per_node=8, limit_s=4 * 3600), 90))
    urgent = _submit(team, "urgent", 8, priority="prod")

    result = cycle.run_cycle("worker-1")

    assert result.stops == 1 and result.binds == 0
    event = _assert_signalled(victim, transitions.RELEASE_PREEMPTED, EventKind.JOB_PREEMPTING, gpus=16)
    # No checkpoint: 16 GPUs × 1.5 h since the start are lost (plus any restart cost).
    assert event.data["expected_lost_gpu_hours"] >= 16 * 1.5 - 0.05
    assert event.message
    # The preemptor waits for the victim's GPUs: nothing is bound onto GPUs still owned.
    urgent.refresh_from_db()
    assert urgent.state == JobState.PENDING
    assert not Allocation.objects.filter(job=urgent).exists()

    # A second cycle before the agents confirm signals nothing new and binds nothing.
    again = cycle.run_cycle("worker-1")
    assert again.stops == 0 and again.binds == 0
    assert Event.objects.filter(allocation=victim, kind=EventKind.JOB_PREEMPTING).count() == 1

    # Once the agents confirm the stop, the victim is requeued whole and the next cycle binds
    # the preemptor on the freed GPUs.
    assert transitions.complete_release(victim.pk, exit_code=None, at=timezone.now(), actor="agent")
    assert Job.objects.get(pk=victim.job_id).state == JobState.PENDING
    assert cycle.run_cycle("worker-1").binds >= 1
    assert Job.objects.get(pk=urgent.pk).state != JobState.PENDING


def test_elastic_shrink_the_cycle_resizes_an_elastic_job_before_preempting_it(team: Team) -> None:
    (elastic,) = _start((_submit(team, "elastic", 16, gpus_per_node=8, min_gpus=8, max_gpus=16, limit_s=4 * 3600,
                                 workload=WorkloadClass.TRAINING), 90))
    _submit(team, "urgent", 8, priority="prod")

    result = cycle.run_cycle("worker-1")

    assert result.resizes == 1 and result.stops == 0
    # A resize is no preemption: its notice is a job.stopping (job.preempting before migration 0032).
    event = _assert_signalled(elastic, transitions.RELEASE_RESIZED, EventKind.JOB_STOPPING, gpus=16)
    assert "16" in event.message and "8" in event.message
    assert not Event.objects.filter(allocation=elastic, kind=EventKind.JOB_PREEMPTING).exists()


def test_a_stop_order_for_a_generation_that_moved_on_is_counted_stale_and_changes_nothing(team: Team) -> None:
    (over,) = _start((_submit(team, "over", 8), 61))
    # The allocation was fenced (its node's lease expired) after the snapshot was read: the
    # compare-and-set on (generation, active) refuses the stop.
    lease = SchedulerLease.objects.get(name="scheduler")
    context = read_snapshot(timezone.now(), lease.epoch)
    plan = engine.schedule(context.snapshot)
    assert [k.job_id for k in plan.kills] == [str(over.job_id)]
    Allocation.objects.filter(pk=over.pk).update(state=AllocationState.FENCED)
    result = cycle.commit_plan(plan, context, holder=lease.holder, epoch=lease.epoch, plan_ms=0.0,
                               started=0.0)
    assert result.stale == 1 and result.stops == 0
    assert not Event.objects.filter(allocation=over, kind=EventKind.JOB_TIMED_OUT).exists()
