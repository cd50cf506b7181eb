"""The cycle's bulk bind: many gangs in a handful of queries, each whole or not at all."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job
from controlplane.services import reconcile, transitions
from tests.controlplane.loop_fixtures import LoopFleet, bind, make_job, register_node


def bulk_bind(requests: list[transitions.BindRequest]) -> tuple[int, int]:
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        return transitions.bind_jobs(requests, lease=lease, at=timezone.now(), actor="test", node_names={})


def request(job: Job, *members: tuple[int, list[int]]) -> transitions.BindRequest:
    return transitions.BindRequest(job.pk, [transitions.GpuSet(n, g) for n, g in members], borrowed=False)


def test_a_stale_gang_is_left_out_whole_and_the_rest_of_the_batch_binds(fleet: LoopFleet) -> None:
    a, _ = register_node("gpu-a")
    b, _ = register_node("gpu-b")
    holder = make_job(fleet, name="holder")
    bind(holder, {b: [7]})
    gang = make_job(fleet, gpus=16, gpus_per_node=8, name="gang")
    small = make_job(fleet, gpus=2, name="small")

    bound, stale = bulk_bind([request(gang, (a.pk, list(range(8))), (b.pk, list(range(8)))),
                              request(small, (a.pk, [0, 1]))])

    assert (bound, stale) == (1, 1)
    assert Job.objects.get(pk=gang.pk).state == JobState.PENDING
    assert not Allocation.objects.filter(job=gang).exists()
    assert AllocationGpu.objects.filter(allocation__job=small, live=True).count() == 2


def test_two_binds_of_one_batch_never_share_a_gpu(fleet: LoopFleet) -> None:
    a, _ = register_node("gpu-a")
    first, second = make_job(fleet, name="first"), make_job(fleet, name="second")

    assert bulk_bind([request(first, (a.pk, [3])), request(second, (a.pk, [3]))]) == (1, 1)
    assert AllocationGpu.objects.filter(node=a, gpu_index=3, live=True).count() == 1


def test_a_job_cancelled_before_the_commit_is_not_bound(fleet: LoopFleet) -> None:
    a, _ = register_node("gpu-a")
    job = make_job(fleet)
    transitions.cancel_job(job, "user:alice")

    assert bulk_bind([request(job, (a.pk, [0]))]) == (0, 1)
    assert not AllocationGpu.objects.exists()


def test_each_bound_gang_gets_its_own_increasing_generation_and_an_event(fleet: LoopFleet) -> None:
    a, _ = register_node("gpu-a")
    jobs = [make_job(fleet, name=f"j{i}") for i in range(4)]

    assert bulk_bind([request(j, (a.pk, [i])) for i, j in enumerate(jobs)]) == (4, 0)

    generations = [Allocation.objects.get(job=j).generation for j in jobs]
    assert generations == sorted(generations) and len(set(generations)) == 4
    assert Event.objects.filter(kind="job.bound", job__in=jobs).count() == 4
    assert Job.objects.filter(pk__in=[j.pk for j in jobs], state=JobState.RUNNING).count() == 4


def test_a_batch_of_exits_settles_each_job_by_its_own_reason_and_code(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-a")
    ok, bad, cancelled, preempted = (make_job(fleet, name=n) for n in ("ok", "bad", "cancelled", "preempted"))
    allocations = {j.name: bind(j, {node: [i]}) for i, j in enumerate((ok, bad, cancelled, preempted))}
    transitions.cancel_job(cancelled, "user:alice")
    p = allocations["preempted"]
    transitions.signal_stop(p.pk, p.generation, reason=transitions.RELEASE_PREEMPTED, grace_period_s=5,
                            at=timezone.now(), actor="test", message="make room")
    now = timezone.now()
    codes = {"ok": 0, "bad": 2, "cancelled": -15, "preempted": -15}

    released = transitions.complete_releases(
        [(a.pk, a.generation, codes[name], now) for name, a in allocations.items()], actor_of={}
    )

    assert released == 4
    states = {j.name: Job.objects.get(pk=j.pk) for j in (ok, bad, cancelled, preempted)}
    assert (states["ok"].state, states["ok"].exit_code) == (JobState.SUCCEEDED, 0)
    assert (states["bad"].state, states["bad"].exit_code) == (JobState.FAILED, 2)
    assert states["cancelled"].state == JobState.CANCELLED
    assert states["preempted"].state == JobState.PENDING and states["preempted"].preemption_count == 1
    assert not AllocationGpu.objects.filter(live=True).exists()
    assert Event.objects.filter(kind="allocation.released").count() == 4


def test_a_batch_exit_under_a_stale_generation_changes_nothing(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-a")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})

    assert transitions.complete_releases([(allocation.pk, allocation.generation - 1, 0, timezone.now())],
                                         actor_of={}) == 0
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
