"""`qm sprio`'s queue order (services/job_priority.queue_order) reads only what the engine's order
reads (services/snapshot.read_queue, engine.queue_factors_of): the waiting jobs' few fields and
the shares' two sums. It read a whole cycle's snapshot, every node, live allocation, running job
and GPU row, and built every job's spec: ~125 ms of a ~200-ms request on bench/scale_audit.py's
installation (1,250 nodes, 2,422 running, 5,012 waiting; docs/benchmarks.md). Its answer must be
the whole snapshot's order to the last factor, and what it reads must not grow with the fleet or
the jobs running on it."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

import scheduler_core as engine
from controlplane.choices import AllocationState, DependencyCondition, JobHold, JobState, NodeState
from controlplane.models import GpuType, JobDependency
from controlplane.services.fair_share import fair_shares
from controlplane.services.job_priority import queue_order
from controlplane.services.snapshot import read_snapshot, scheduler_config
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db


def rows_returned(read: Callable[[], Any]) -> list[tuple[str, int]]:
    """Each query `read` ran, with the rows it returned to Python."""
    ran: list[tuple[str, int]] = []

    def count(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        result = execute(sql, params, many, context)
        ran.append((sql, context["cursor"].rowcount))
        return result

    with connection.execute_wrapper(count):
        read()
    return ran


@pytest.fixture
def queue(db: Any) -> dict[str, Any]:
    """Three classes, four teams (three with past usage, decayed to different times), six nodes
    (one retired), four jobs running (CPUs and memory a GPU too, one allocation releasing), and
    80 waiting: user's and admin's holds, dependencies not met (one met), an array's tasks
    submitted together, many jobs submitted at one instant, limits of every length, jobs waiting
    for days (aging)."""
    rng = random.Random(83)
    now = timezone.now()
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    nodes = [f.make_node(h100, name=f"n{k}", gpu_count=8, cpus=96, memory_gb=1024) for k in range(5)]
    f.make_node(h100, name="gone", gpu_count=8, cpus=96, memory_gb=1024, state=NodeState.RETIRED)
    classes = [f.make_priority_class(name, value) for name, value in (("low", 10), ("normal", 100), ("high", 1000))]
    teams = [f.make_team(f"team-{k}", decayed_gpu_seconds=k * 3 * 3600.0, decayed_cpu_seconds=k * 900 * 3600.0,
                         decayed_memory_gb_seconds=k * 5000 * 3600.0, usage_as_of=now - timedelta(minutes=10 * k))
             for k in range(3)] + [f.make_team("team-new")]
    for k, (team, gpus) in enumerate(((teams[0], 4), (teams[1], 8), (teams[3], 2), (teams[0], 2))):
        job = running_job(team, gpus=gpus, started_at=now - timedelta(hours=1), cpus_per_gpu=12 * (k % 2),
                          memory_gb_per_gpu=100 * (k % 3))
        allocation = hold(job, [(nodes[k], gpus)], now - timedelta(hours=1))
        if k == 3:
            allocation.state = AllocationState.RELEASING
            allocation.save(update_fields=["state"])
    root, alice = f.make_user("root", superuser=True), f.make_user("alice", team=teams[0])
    together = now - timedelta(hours=2)
    waiting = []
    for k in range(80):
        kw: dict[str, Any] = {}
        if k % 9 == 4:
            kw = {"hold": JobHold.USER, "held_by": alice}
        elif k % 17 == 8:
            kw = {"hold": JobHold.ADMIN, "held_by": root, "hold_reason": "dataset v3"}
        waiting.append(f.make_job(
            rng.choice(teams), rng.choice(classes), gpus=rng.choice((1, 2, 8)),
            runtime_limit_s=rng.choice((600, 3600, 4 * 3600, 48 * 3600)),
            submitted_at=together if k % 6 == 0 else now - timedelta(hours=rng.random() * 60), **kw))
    for k in range(0, 60, 12):  # waiting on a job still waiting (none of them held)
        JobDependency.objects.create(job=waiting[k + 2], upstream=waiting[k], condition=DependencyCondition.AFTER_ANY)
    ended = f.make_job(teams[1], state=JobState.SUCCEEDED, finished_at=now - timedelta(minutes=5))
    JobDependency.objects.create(job=waiting[70], upstream=ended, condition=DependencyCondition.AFTER_OK,
                              satisfied_at=now - timedelta(minutes=5))
    array = uuid.uuid4()
    for index in range(12):  # ids 9 and 10 among them: numeric order, not text order
        f.make_job(teams[2], classes[1], array_id=array, array_index=index, submitted_at=together,
                   runtime_limit_s=3600)
    return {"now": now, "nodes": nodes, "teams": teams, "h100": h100}


def whole_snapshot_order(now: Any) -> tuple[engine.QueueFactors, ...]:
    """The order as it was read until 6 Dec 2026: a cycle's whole snapshot, the engine's
    queue_factors."""
    return engine.queue_factors(read_snapshot(now, 0).snapshot, scheduler_config())


def test_the_same_jobs_in_the_same_order_with_the_same_factors_as_from_the_whole_snapshot(queue):
    now = queue["now"]

    factors = queue_order(now).factors

    assert factors == whole_snapshot_order(now)
    assert len(factors) == 92 - 9 - 4 - 5  # the holds and the dependencies not met are out of line
    shares = {x.team: x.team_share for x in factors}
    assert len(set(shares.values())) == 4 and shares["team-new"] > 0  # held GPUs and past usage count
    assert len({x.submitted_at for x in factors}) < len(factors)  # ties broken by the engine


def test_it_reads_a_row_a_waiting_job_and_no_more_with_a_bigger_fleet_running_more(queue):
    now = queue["now"]
    queue_order(now)

    before = rows_returned(lambda: queue_order(now))
    for k in range(20):
        node = f.make_node(queue["h100"], name=f"more{k}", gpu_count=8, cpus=96, memory_gb=1024)
        job = running_job(queue["teams"][k % 2], gpus=8, started_at=now, cpus_per_gpu=4)
        hold(job, [(node, 8)], now)
    f.make_job(queue["teams"][1], state=JobState.SUCCEEDED, finished_at=now)
    after = rows_returned(lambda: queue_order(now))

    # the classes, the teams, the fleet's capacity (one row), what each team holds (one row a
    # team), the dependencies not met, the waiting jobs, the holders' names
    assert [rows for _, rows in before] == [3, 4, 1, 3, 5, 92, 2], before
    assert [rows for _, rows in after] == [3, 4, 1, 3, 5, 92, 2], after
    assert queue_order(now).factors == whole_snapshot_order(now)
    assert sum(rows for _, rows in rows_returned(lambda: read_snapshot(now, 0))) > 150  # as it was


def test_sshare_gives_the_whole_snapshots_shares_from_the_same_sums(queue):
    """`qm sshare` (services/fair_share.fair_shares) reads the shares' sums as sprio does: every
    team's share, held resources and past usage equal to the engine's over the whole snapshot,
    and the rows it reads do not grow with the fleet or the jobs running on it."""
    now = queue["now"]

    def from_whole_snapshot() -> dict[str, engine.FairShare]:
        return engine.snapshot_fair_shares(read_snapshot(now, 0).snapshot, scheduler_config())

    def rows_read() -> list[int]:
        return [rows for _, rows in rows_returned(lambda: fair_shares(now))]

    whole = from_whole_snapshot()
    shown = {row["team"]: row for row in fair_shares(now).teams}
    assert set(whole) <= set(shown) and len(whole) == 4
    for team, share in whole.items():
        assert shown[team]["dominant_share"] == share.dominant_share
        assert tuple(shown[team]["shares"].values()) == share.shares
        assert shown[team]["held_now"]["gpus"] == round(share.held[0])
    before = rows_read()
    for k in range(20):
        node = f.make_node(queue["h100"], name=f"more{k}", gpu_count=8, cpus=96, memory_gb=1024)
        hold(running_job(queue["teams"][k % 2], gpus=8, started_at=now, cpus_per_gpu=4), [(node, 8)], now)
    assert rows_read() == before, before
    assert {row["team"]: row["dominant_share"] for row in fair_shares(now).teams if row["team"] in whole} == {
        team: share.dominant_share for team, share in from_whole_snapshot().items()}
