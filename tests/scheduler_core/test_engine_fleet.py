"""Rule 10, fleet figures: stranded GPUs (free GPUs on partially used nodes while a job needing
a whole node waits), largest free block per pool, dominant shares, slowdown."""

from __future__ import annotations

import pytest
from engine_builders import make_cluster, make_job, make_running

from scheduler_core import NodeState, SchedulerConfig


def half_used(waiting_gpus: int | None):
    cluster = (
        make_cluster().nodes(3).nodes(1, prefix="gpu-b", pool="b").at(600)
        .running(make_running(make_job("r0").gpus(6)).on("n0", *range(6)).started(0),
                 make_running(make_job("r1").gpus(3)).on("n1", 0, 1, 2).started(0))
    )
    if waiting_gpus is not None:
        cluster.pending(make_job("w").gpus(waiting_gpus).per_node(8))
    return cluster


@pytest.mark.parametrize(
    ("waiting", "stranded"),
    [(None, 0), (2, 0), (24, 7)],
    ids=["nothing-waits-nothing-stranded", "small-job-runs-nothing-stranded",
         "whole-node-gang-waits-partial-free-gpus-are-stranded"],
)
def test_stranded_gpus_count_only_while_a_whole_node_job_waits(waiting, stranded):
    plan = half_used(waiting).plan(SchedulerConfig(backfill=False))
    assert plan.fleet.stranded_gpus == stranded


@pytest.mark.parametrize(
    ("waiting_type", "stranded"),
    [("h100", 2), ("a100", 5), (None, 7)],
    ids=["h100-gang-waits-only-h100-free-gpus-are-stranded", "a100-gang-waits-only-a100-free-gpus",
         "any-type-gang-waits-both"],
)
def test_stranded_gpus_count_only_nodes_the_waiting_whole_node_job_could_use(waiting_type, stranded):
    """Before, the free GPUs of a partly used A100 node counted as stranded while only H100
    whole-node jobs waited, where they could never run (the overview said 10, the
    fragmentation API 6)."""
    job = make_job("big").gpus(16)
    if waiting_type is not None:
        job = job.types(waiting_type)
    plan = (
        make_cluster().nodes(2, prefix="a").nodes(2, gpu_type="h100", prefix="h").at(600)
        .running(make_running(make_job("ra").gpus(3).types("a100")).on("a0", 0, 1, 2).started(0),
                 make_running(make_job("rh").gpus(6).types("h100")).on("h0", *range(6)).started(0),
                 make_running(make_job("rh2").gpus(8).types("h100")).whole("h1").started(0),
                 make_running(make_job("ra2").gpus(8).types("a100")).whole("a1").started(0))
        .pending(job)
        .plan(SchedulerConfig(backfill=False))
    )
    assert plan.fleet.stranded_gpus == stranded


def test_fleet_totals_add_up():
    cluster = half_used(24).nodes(1, prefix="down", state=NodeState.DOWN)
    plan = cluster.plan()
    f = plan.fleet
    assert f.total_gpus == 40
    assert f.allocated_gpus == 9
    assert f.unavailable_gpus == 8
    assert f.allocated_gpus + f.free_gpus + f.reserved_gpus + f.unavailable_gpus == f.total_gpus


def test_largest_free_block_per_pool():
    plan = half_used(None).plan()
    assert plan.fleet.largest_free_block_by_pool == {"b": 8, "main": 8}
    plan = (
        half_used(None).running(make_running(make_job("r2").gpus(8)).whole("n2"))
        .running(make_running(make_job("r3").gpus(1)).on("gpu-b0", 7))
        .plan()
    )
    assert plan.fleet.largest_free_block_by_pool == {"b": 7, "main": 5}


def test_dominant_shares_per_team():
    plan = (
        make_cluster().nodes(2)
        .running(make_running(make_job("a").team("vision").gpus(8)).whole("n0"),
                 make_running(make_job("b").team("speech").gpus(2)).on("n1", 0, 1))
        .plan()
    )
    assert plan.fleet.dominant_share_by_team == {"speech": pytest.approx(2 / 16),
                                                 "vision": pytest.approx(8 / 16)}


def test_mean_slowdown_of_running_jobs():
    # waited 3600 s, ran 3600 s: slowdown 2; waited 0, ran 7200 s: slowdown 1
    plan = (
        make_cluster().nodes(1).at(7200)
        .running(make_running(make_job("a").gpus(4).submitted(0)).on("n0", 0, 1, 2, 3)
                 .started(3600),
                 make_running(make_job("b").gpus(4).submitted(0)).on("n0", 4, 5, 6, 7)
                 .started(0))
        .plan()
    )
    assert plan.fleet.mean_slowdown == pytest.approx(1.5)


def test_an_array_task_at_its_task_limit_waiting_for_whole_nodes_strands_gpus():
    """A task of an array at its task limit keeps its place in the queue: it is in line, as the
    live figures count it. Until 7 Dec its explanation (JobArrayTaskLimit) did not say it needs
    whole nodes, and the cycle counted nothing stranded for it."""
    plan = (
        make_cluster().nodes(2).at(600)
        .running(make_running(make_job("t0").gpus(8).per_node(8).array("arr", 1)).whole("n0").started(0),
                 make_running(make_job("small").gpus(3)).on("n1", 0, 1, 2).started(0))
        .pending(make_job("t1").gpus(8).per_node(8).array("arr", 1))
        .plan(SchedulerConfig(backfill=False))
    )
    assert [p.code.value for p in plan.pending] == ["JobArrayTaskLimit"]
    assert plan.fleet.stranded_gpus == 5
