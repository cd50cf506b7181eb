"""A job's runs, written by the real transitions (bind, signal_stop, complete_release), for the
runs tests of the API, the CLI and the job page: preempted once (its work since the checkpoint
lost), then run again to success. Times are set in the past so every figure is known exactly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from controlplane.models import Allocation, AllocationGpu, Job, Node
from controlplane.services import reconcile, transitions

#: What the preemption notice says (the engine's words name the job it made room for).
NOTICE = "Preempted to make room for job 99 of team vision (production)"


def bind_at(job: Job, placement: Sequence[tuple[Node, Sequence[int], str]], *, at: datetime,
            borrowed: bool = False, started_after_s: float | None = 60) -> Allocation:
    """Bind `job` to exactly these GPUs (node, indices, role) at `at`, as the leader's commit
    does; its agents report it running `started_after_s` later (None: not yet)."""
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        allocation = transitions.bind_job(
            job.pk, [transitions.GpuSet(node_id=node.pk, gpu_indices=list(gpus), role=role)
                     for node, gpus, role in placement],
            lease=lease, borrowed=borrowed, at=at, actor="test",
        )
    assert allocation is not None, "the job was pending"
    if started_after_s is not None:
        Allocation.objects.filter(pk=allocation.pk).update(started_at=at + timedelta(seconds=started_after_s))
        allocation.refresh_from_db()
    return allocation


@dataclass(frozen=True)
class Story:
    t0: datetime
    preempted: Allocation
    succeeded: Allocation


def preempted_then_succeeded(job: Job, first: Node, second: Node, *, now: datetime) -> Story:
    """`job` (pending, 2 GPUs) runs twice:
    1. bound at t0 = now - 5 h on `first` GPUs 0-1, on borrowed quota; started at t0 + 1 min;
       checkpointed at t0 + 1 h; preempted at t0 + 90 min, gone 30 s later: requeued, 2 GPUs ×
       1,830 s = 1.0167 GPU-hours lost; it held 2 × 5,430 s = 3.0167 GPU-hours;
    2. bound at t0 + 2 h on `second` GPUs 2-3; started a minute later; exits 0 at t0 + 4 h:
       succeeded, 4.0 GPU-hours held, 7,200 s elapsed (from its bind)."""
    t0 = now - timedelta(hours=5)
    run1 = bind_at(job, [(first, [0, 1], "")], at=t0, borrowed=True)
    Job.objects.filter(pk=job.pk).update(last_checkpoint_at=t0 + timedelta(hours=1))
    job.refresh_from_db()
    assert transitions.signal_stop(run1.pk, run1.generation, reason=transitions.RELEASE_PREEMPTED, grace_period_s=30,
                                   at=t0 + timedelta(minutes=90), actor="scheduler", message=NOTICE)
    assert transitions.complete_release(run1.pk, exit_code=143, at=t0 + timedelta(minutes=90, seconds=30),
                                        actor="agent:test")
    run2 = bind_at(job, [(second, [2, 3], "")], at=t0 + timedelta(hours=2))
    assert transitions.complete_release(run2.pk, exit_code=0, at=t0 + timedelta(hours=4), actor="agent:test")
    run1.refresh_from_db()
    run2.refresh_from_db()
    return Story(t0, run1, run2)


def idle_nodes(count: int, gpu_type: str | None = None) -> list[Node]:
    """The first `count` ready nodes (of `gpu_type`, when given) on which nothing runs, by name:
    where a story's runs go in a fleet the demo's stream already uses."""
    busy = AllocationGpu.objects.filter(live=True).values("node_id")
    ready = Node.objects.filter(state="ready", **({"gpu_type__name": gpu_type} if gpu_type else {}))
    nodes = list(ready.exclude(pk__in=busy).order_by("name")[:count])
    assert len(nodes) == count, "the demo fleet has idle ready nodes"
    return nodes
