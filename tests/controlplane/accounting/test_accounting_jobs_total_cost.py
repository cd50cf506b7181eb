"""`job_costs.jobs_total_cost`: what a set of jobs cost, added up in one query, is the sum of
what `job_costs.jobs_costs` charges each of them (the history CSV's `cost_usd` cells and TOTAL
row), to the cent: across price changes, gang members that left early, requeued jobs, runs still
held, time before a first rate, odd microseconds and exact half cents."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node
from controlplane.services import job_costs
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 20, 12, 0, 0, 123456, tzinfo=UTC)
_generation = iter(range(1, 1_000_000))


def _run(job: Job, nodes: list[tuple[Node, int]], start: datetime, end: datetime | None,
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


def _member_exited(allocation: Allocation, node: Node, at: datetime) -> None:
    Event.objects.create(created_at=at, kind=EventKind.ALLOCATION_RELEASED, actor=f"agent:{node.name}",
                         reason="MemberExited", job=allocation.job, allocation=allocation, node=node,
                         data={"gpus": 8})


@pytest.fixture
def priced() -> dict[str, Node]:
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


def _job(state: str = JobState.SUCCEEDED) -> Job:
    team = f.make_team()
    return f.make_job(team, state=state, submitted_at=NOW - timedelta(days=10))


def _sum_of_jobs_costs(jobs: list[Job]) -> Decimal:
    return sum(job_costs.jobs_costs([job.pk for job in jobs], NOW).values(), Decimal("0.00"))


def test_the_total_is_the_sum_of_every_jobs_cost_across_every_kind_of_run(priced) -> None:
    n = priced
    jobs = []
    # across both price changes, odd microseconds
    across = _job()
    _run(across, [(n["h1"], 3)], NOW - timedelta(days=4, seconds=13, microseconds=7), NOW - timedelta(hours=5))
    jobs.append(across)
    # requeued: two runs on two GPU types
    requeued = _job()
    _run(requeued, [(n["h2"], 2)], NOW - timedelta(days=2), NOW - timedelta(days=1, hours=20))
    _run(requeued, [(n["a1"], 8), (n["h1"], 1)], NOW - timedelta(days=1, hours=19), NOW - timedelta(hours=1))
    jobs.append(requeued)
    # a gang whose member on h2 left early: that node's GPUs stop costing at its exit
    gang = _job()
    run = _run(gang, [(n["h1"], 8), (n["h2"], 8)], NOW - timedelta(days=2, hours=3), NOW - timedelta(hours=2))
    _member_exited(run, n["h2"], NOW - timedelta(days=1, hours=1, seconds=3))
    jobs.append(gang)
    # before spot's first rate (free) and after; and a node of a tier with no rate (free)
    spot = _job()
    _run(spot, [(n["hs"], 4), (n["a2"], 8)], NOW - timedelta(days=9), NOW - timedelta(days=6, minutes=1))
    jobs.append(spot)
    # still held: priced to NOW; and a job that never ran
    running = _job(JobState.RUNNING)
    _run(running, [(n["a1"], 5)], NOW - timedelta(hours=7, microseconds=333), None)
    jobs.append(running)
    jobs.append(_job(JobState.CANCELLED))
    # bound after NOW: nothing yet, as jobs_costs says
    _run(_job(), [(n["h1"], 1)], NOW + timedelta(minutes=1), NOW + timedelta(minutes=9))

    each = job_costs.jobs_costs([job.pk for job in jobs], NOW)
    assert all(cost > 0 for job, cost in each.items() if job != jobs[-1].pk) and each[jobs[-1].pk] == 0
    # one by one, then all of them (with the job bound later), equal to the cent
    for job in jobs:
        assert job_costs.jobs_total_cost(Job.objects.filter(pk=job.pk), NOW) == each[job.pk], job.name
    everything = Job.objects.all()
    assert job_costs.jobs_total_cost(everything, NOW) == _sum_of_jobs_costs(list(everything))
    # the gang's exit counts: without it the job would cost more
    full = job_costs.jobs_total_cost(Job.objects.filter(pk=gang.pk), NOW)
    Event.objects.filter(reason="MemberExited").delete()
    assert job_costs.jobs_total_cost(Job.objects.filter(pk=gang.pk), NOW) == job_costs.jobs_costs([gang.pk], NOW)[
        gang.pk] > full


def test_a_job_exactly_on_half_a_cent_rounds_half_to_even_both_ways(priced) -> None:
    """$1/GPU-hour: 18 s is $0.005 exactly (→ 0.00), 54 s $0.015 (→ 0.02). Made of pieces whose
    cost is no finite decimal (1 s and 17 s, 1/3600 of a dollar and 17/3600), the job is still
    exactly on the half cent: each job's exact sum is rounded once, in Python and in PostgreSQL."""
    gpu = f.make_gpu_type("L4")
    f.make_price_rate(gpu, "1.0000", "reserved", NOW - timedelta(days=30))
    l1, l2 = (f.make_node(gpu, name, capacity_tier="reserved") for name in ("l1", "l2"))
    t = NOW - timedelta(hours=1)
    down, up, split = _job(), _job(), _job()
    _run(down, [(l1, 1)], t, t + timedelta(seconds=18))
    _run(up, [(l1, 1)], t, t + timedelta(seconds=54))
    _run(split, [(l1, 1)], t, t + timedelta(seconds=1))
    _run(split, [(l2, 1)], t + timedelta(seconds=5), t + timedelta(seconds=22))
    expected = {down.pk: Decimal("0.00"), up.pk: Decimal("0.02"), split.pk: Decimal("0.00")}
    assert job_costs.jobs_costs(list(expected), NOW) == expected
    for pk, cost in expected.items():
        assert job_costs.jobs_total_cost(Job.objects.filter(pk=pk), NOW) == cost
    assert job_costs.jobs_total_cost(Job.objects.filter(pk__in=expected), NOW) == Decimal("0.02")


def test_random_jobs_cost_the_sum_of_their_cents(priced) -> None:
    rng = random.Random(90)
    nodes = list(priced.values())
    jobs = []
    for _ in range(60):
        job = _job()
        start = NOW - timedelta(days=rng.uniform(0, 9), microseconds=rng.randrange(1_000_000))
        for _run_no in range(rng.choice((1, 1, 2))):
            end = start + timedelta(seconds=rng.uniform(1, 3 * 86400), microseconds=rng.randrange(1_000_000))
            held = rng.sample(nodes, rng.choice((1, 2)))
            run = _run(job, [(node, rng.randint(1, 8)) for node in held], start,
                       None if end > NOW and rng.random() < 0.5 else end, live=False)
            if len(held) == 2 and rng.random() < 0.3:
                _member_exited(run, held[1], start + (end - start) / 3)
            start = end + timedelta(seconds=rng.uniform(0, 600))
        jobs.append(job)
    each = job_costs.jobs_costs([job.pk for job in jobs], NOW)
    for job in jobs[:20]:
        assert job_costs.jobs_total_cost(Job.objects.filter(pk=job.pk), NOW) == each[job.pk]
    assert job_costs.jobs_total_cost(Job.objects.all(), NOW) == sum(each.values(), Decimal("0.00"))
    # a filtered set: a team's, as a member's history page asks it
    team_jobs = Job.objects.filter(team__in=[job.team_id for job in jobs[::3]])
    assert job_costs.jobs_total_cost(team_jobs, NOW) == sum((each[pk] for pk in team_jobs.values_list("pk", flat=True)),
                                                            Decimal("0.00"))


def test_one_query_for_3_jobs_or_40_and_none_for_a_set_nothing_matches(priced) -> None:
    def add(count: int) -> None:
        for i in range(count):
            _run(_job(), [(priced["h1"], 1), (priced["a1"], 2)], NOW - timedelta(hours=30 - i / 2),
                 NOW - timedelta(hours=2))

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            total = job_costs.jobs_total_cost(Job.objects.filter(state=JobState.SUCCEEDED), NOW)
        assert total == _sum_of_jobs_costs(list(Job.objects.all())) > 0
        return len(captured)

    add(3)
    three = queries()
    add(37)
    assert three == queries() == 1
    with CaptureQueriesContext(connection) as captured:
        assert job_costs.jobs_total_cost(Job.objects.none(), NOW) == Decimal("0.00")
    assert len(captured) == 0
