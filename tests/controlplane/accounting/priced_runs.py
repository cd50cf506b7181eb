"""Jobs with runs priced across price changes, for the tests of what sets of jobs cost
(`job_costs.jobs_total_cost`, the remembered costs of ended jobs): a small priced fleet
(`priced_fleet`, the `priced` fixture of this directory's conftest), jobs and their runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node
from controlplane.services import job_costs
from tests.controlplane import factories as f

NOW = datetime(2026, 11, 20, 12, 0, 0, 123456, tzinfo=UTC)
_generation = iter(range(1, 1_000_000))


def add_run(job: Job, nodes: list[tuple[Node, int]], start: datetime, end: datetime | None,
         live: bool = True) -> Allocation:
    """A run of `job` holding `gpus` GPUs on each node from `start` to `end` (None: still held;
    `live` False: its GPU rows not marked held, so random runs may overlap)."""
    allocation = Allocation.objects.create(
        job=job, generation=next(_generation), epoch=1, created_at=start, started_at=start, released_at=end,
        state=AllocationState.RELEASED if end else AllocationState.ACTIVE)
    AllocationGpu.objects.bulk_create(
        AllocationGpu(allocation=allocation, node=node, gpu_index=i, live=live and end is None)
        for node, gpus in nodes for i in range(gpus))
    return allocation


def add_member_exit(allocation: Allocation, node: Node, at: datetime) -> None:
    Event.objects.create(created_at=at, kind=EventKind.ALLOCATION_RELEASED, actor=f"agent:{node.name}",
                         reason="MemberExited", job=allocation.job, allocation=allocation, node=node,
                         data={"gpus": 8})


def priced_fleet() -> dict[str, Node]:
    """Two GPU types; H100 on-demand repriced twice, spot priced only from a week before NOW."""
    h100, a100 = f.make_gpu_type("H100-80GB"), f.make_gpu_type("A100-40GB", memory_gb=40)
    f.make_price_rate(h100, "4.1000", "on_demand", NOW - timedelta(days=400))
    f.make_price_rate(h100, "3.9037", "on_demand", NOW - timedelta(days=3, microseconds=17))
    f.make_price_rate(h100, "3.1700", "on_demand", NOW - timedelta(days=1, seconds=7))
    f.make_price_rate(h100, "1.9000", "spot", NOW - timedelta(days=7))
    f.make_price_rate(a100, "1.1000", "reserved", NOW - timedelta(days=400))
    return {
        "h1": f.make_node(h100, "h1", capacity_tier="on_demand"),
        "h2": f.make_node(h100, "h2", capacity_tier="on_demand"),
        "hs": f.make_node(h100, "hs", capacity_tier="spot"),
        "a1": f.make_node(a100, "a1", capacity_tier="reserved"),
        "a2": f.make_node(a100, "a2", capacity_tier="on_demand"),  # no rate at all: free, as unpriced
    }


def new_job(state: str = JobState.SUCCEEDED) -> Job:
    team = f.make_team()
    return f.make_job(team, state=state, submitted_at=NOW - timedelta(days=10))


def sum_of_jobs_costs(jobs: list[Job]) -> Decimal:
    return sum(job_costs.jobs_costs([job.pk for job in jobs], NOW).values(), Decimal("0.00"))
