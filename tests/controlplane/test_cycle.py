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


def _row_versions(ids: list[int]) -> dict[int, str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, xmin::text FROM {Job._meta.db_table} WHERE id = ANY(%s)", [ids])
        return dict(cursor.fetchall())


def test_a_cycle_rewrites_only_the_explanations_that_changed(small_fleet: Team) -> None:
    # 48 GPUs: the 8-GPU gangs fill them, the rest wait with a reason, a position and an ETA.
    jobs = [_submit(small_fleet, f"g{i}", 8, 8, minutes_ago=30 - i) for i in range(10)]
    cycle.run_cycle("worker-1")  # binds six and explains the four left, first to fourth
    cycle.run_cycle("worker-1")  # the same again
    waiting = [j.pk for j in jobs if Job.objects.get(pk=j.pk).state == JobState.PENDING]
    assert len(waiting) == 4
    stored = {j.pk: (j.pending_code, j.queue_position) for j in Job.objects.filter(pk__in=waiting)}
    assert all(code and position for code, position in stored.values())
    positions = sorted(p for _, p in stored.values())
    assert positions == [1, 2, 3, 4]
    before = _row_versions(waiting)

    # Nothing moved: the next cycle explains the same way and writes none of those rows.
    cycle.run_cycle("worker-1")
    assert _row_versions(waiting) == before

    # The first waiting job (the head, holding a reservation) is cancelled: the ones behind it
    # move up. The second becomes the head: its reason changed, so its row is rewritten and an
    # Event says so. (The third now has no waiting job ahead but the head, whose GPUs the
    # estimate already counts busy: its sentence no longer says it waits for jobs ahead.) The
    # fourth still waits for GPUs behind the third: only its position, ETA and numbers moved,
    # which live in PendingPlace, so its jobs row is not rewritten.
    first, second, third, fourth = sorted(waiting, key=lambda pk: stored[pk][1])
    Job.objects.filter(pk=first).update(state=JobState.CANCELLED)
    cancelled = _row_versions([first])
    fourth_before = Job.objects.select_related("place").get(pk=fourth)  # its place read now
    events_before = Event.objects.filter(job_id__in=waiting).count()
    cycle.run_cycle("worker-1")
    after = _row_versions(waiting)
    assert after[first] == cancelled[first]  # no longer pending: its explanation is left alone
    assert after[second] != before[second]
    assert after[fourth] == before[fourth]
    assert Event.objects.filter(job_id=second, kind=EventKind.JOB_PENDING).count() >= 1
    assert Event.objects.filter(job_id__in=waiting).count() == events_before + 1
    fourth_now = Job.objects.get(pk=fourth)
    assert (fourth_before.queue_position, fourth_now.queue_position) == (4, 3)
    assert fourth_now.pending_code == fourth_before.pending_code
    assert fourth_now.eta is not None and fourth_now.eta < fourth_before.eta  # one job less ahead
    assert f"t={fourth_now.eta.timestamp():.0f}" in fourth_now.pending_message
    # The cancelled job keeps its last place, as it kept its last explanation.
    assert Job.objects.get(pk=first).queue_position == 1


def test_snapshot_reads_running_jobs_with_their_live_gpus_and_generation(small_fleet: Team) -> None:
    gang = _submit(small_fleet, "gang", 16, 8, minutes_ago=5)
    cycle.run_cycle("worker-1")
    allocation = Allocation.objects.get(job=gang)
    lease = SchedulerLease.objects.get(name="scheduler")
    context = read_snapshot(timezone.now(), lease.epoch)
    (running,) = context.snapshot.running
    assert running.spec.id == str(gang.pk) and running.spec.gpus == 16 and running.spec.team == "ml"
    assert running.generation == allocation.generation and not running.terminating
    assert sum(len(p.gpu_indices) for p in running.placements) == 16
    assert [p.node for p in running.placements] == sorted(p.node for p in running.placements)
    assert context.live_allocations[str(gang.pk)].allocation_id == allocation.pk
    assert context.live_allocations[str(gang.pk)].gpus == 16
