"""Builders for accounting tests: allocations held over known intervals and the agents' samples
of them, on top of the shared factories (tests/controlplane/factories.py).

Times are fixed instants (T0 = 2026-11-02 10:00 UTC), never the wall clock: the rollup takes
`now` as an argument.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from controlplane.choices import AllocationState, CapacityTier, JobState
from controlplane.models import (
    Allocation,
    AllocationGpu,
    GpuType,
    Job,
    Node,
    SchedulerLease,
    Team,
    UsageSample,
)
from tests.controlplane import factories as f

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def next_generation() -> int:
    lease, _ = SchedulerLease.objects.get_or_create(name="scheduler")
    lease.generation_counter += 1
    lease.save(update_fields=["generation_counter"])
    return lease.generation_counter


def h100(price: str = "2.5000", tier: str = CapacityTier.RESERVED, since: datetime | None = None) -> GpuType:
    gpu_type = GpuType.objects.filter(name="H100-80GB").first() or f.make_gpu_type("H100-80GB", 80)
    f.make_price_rate(gpu_type, price, tier=tier, effective_from=since or datetime(2026, 1, 1, tzinfo=UTC))
    return gpu_type


def node(gpu_type: GpuType, tier: str = CapacityTier.RESERVED, gpus: int = 8, **kw: Any) -> Node:
    return f.make_node(gpu_type, capacity_tier=tier, gpu_count=gpus, **kw)


def running_job(team: Team, *, gpus: int, started_at: datetime, **kw: Any) -> Job:
    return f.make_job(team, gpus=gpus, state=JobState.RUNNING, started_at=started_at, submitted_at=started_at, **kw)


def hold(job: Job, placement: list[tuple[Node, int]], start: datetime, end: datetime | None = None,
         *, borrowed: bool = False, first_index: int = 0) -> Allocation:
    """An allocation of `job` holding `count` GPUs on each node (indices from `first_index`),
    bound at `start`, released at `end` (None: still held)."""
    allocation = Allocation.objects.create(
        job=job, generation=next_generation(), epoch=1, borrowed=borrowed, created_at=start, started_at=start,
        state=AllocationState.ACTIVE if end is None else AllocationState.RELEASED, released_at=end,
    )
    AllocationGpu.objects.bulk_create([
        AllocationGpu(allocation=allocation, node=n, gpu_index=first_index + i, live=end is None)
        for n, count in placement for i in range(count)
    ])
    return allocation


def report(allocation: Allocation, on: Node, start: datetime, end: datetime, *, every: timedelta = minutes(1),
           activity: float = 0.75, steps_per_s: float = 10.0, tokens_per_s: float = 0.0, gpus: int | None = None) -> int:
    """Samples of one allocation on one node every `every` over [start, end), as an agent sends
    them: activity, and steps/tokens made in each interval. Returns the number of samples."""
    gpus = gpus if gpus is not None else AllocationGpu.objects.filter(allocation=allocation, node=on).count()
    rows, t = [], start
    while t < end:
        e = min(t + every, end)
        seconds = (e - t).total_seconds()
        rows.append(UsageSample(
            allocation=allocation, job_id=allocation.job_id, node=on, started_at=t, ended_at=e, gpus=gpus,
            gpu_activity=activity, steps=round(steps_per_s * seconds), useful_tokens=round(tokens_per_s * seconds),
        ))
        t = e
    UsageSample.objects.bulk_create(rows)
    return len(rows)


def usd(text: str) -> Decimal:
    return Decimal(text)


#: What each team holds in `both_teams_held_one_gpu`: 1.00505 GPU-hours, which rounds to 1.0050
#: (4 places) or 1.01 (2) alone, so two such rows rounded each on its own miss their total.
HELD_1_00505_GPU_HOURS = timedelta(seconds=3618, microseconds=180_000)


def both_teams_held_one_gpu(fleet: Any) -> str:
    """ml and vision each held one H100 for `HELD_1_00505_GPU_HOURS` from two hours ago, rolled
    up; returns the showback window covering it ("start,end")."""
    from django.utils import timezone

    from controlplane.services import accounting

    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    for team, node in ((fleet.ml, fleet.nodes[1]), (fleet.vision, fleet.nodes[2])):
        job = running_job(team, gpus=1, started_at=start, priority_class=fleet.research)
        hold(job, [(node, 1)], start, start + HELD_1_00505_GPU_HOURS)
    accounting.catch_up(now)
    end = start + timedelta(hours=2)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}"
