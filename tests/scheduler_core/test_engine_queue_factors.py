"""`queue_factors`: the queue as phase 1 orders it, each waiting job with what places it there
(Slurm's sprio): class value, aging points, the team's dominant share, runtime limit. It must
give the very order the cycle uses; held jobs are not in line."""

from __future__ import annotations

import pytest
from engine_builders import make_cluster, make_job, make_running

from scheduler_core import SchedulerConfig, queue_factors
from scheduler_core.fairshare import dominant_shares

HOUR = 3600.0
NOW = 10 * HOUR


def full_node_with(*pending):
    """One 8-GPU node, all held: nothing binds, so the plan's queue positions are the order."""
    return (make_cluster().nodes(1).at(NOW)
            .running(make_running(make_job("r").team("t3").gpus(8).limit(20 * HOUR)).on("n0", *range(8)).started(0))
            .usage("t2", gpu_seconds=8 * 5 * HOUR)
            .pending(*pending))


def jobs():
    return (
        make_job("old-low").priority("low").team("t1").gpus(8).submitted(NOW - 3 * HOUR - 60),  # +3 points
        make_job("high").priority("high").team("t1").gpus(8).submitted(NOW - 60),
        make_job("busy-team").priority("normal").team("t2").gpus(8).submitted(NOW - 120),
        make_job("idle-team").priority("normal").team("t1").gpus(8).submitted(NOW - 60),
        make_job("short").priority("normal").team("t1").gpus(8).limit(600).submitted(NOW - 30),
        make_job("held").priority("high").team("t1").gpus(8).submitted(NOW - 60).held("alice"),
    )


def test_queue_factors_give_the_order_the_cycle_uses_with_the_factors_of_each_place():
    cluster = full_node_with(*jobs())
    factors = queue_factors(cluster.snapshot())
    plan = cluster.plan()
    positions = {p.job_id: p.queue_position for p in plan.pending if p.job_id != "held"}
    assert [f.job_id for f in factors] == sorted(positions, key=positions.__getitem__)
    assert [f.job_id for f in factors] == ["high", "short", "idle-team", "busy-team", "old-low"]
    assert [f.order for f in factors] == [1, 2, 3, 4, 5]

    by_id = {f.job_id: f for f in factors}
    assert (by_id["old-low"].class_value, by_id["old-low"].aging_points, by_id["old-low"].effective_priority) == (10, 3, 13)
    assert (by_id["high"].class_value, by_id["high"].aging_points) == (1000, 0)
    snapshot = cluster.snapshot()
    shares = dominant_shares(NOW, snapshot.nodes, snapshot.running, snapshot.team_usage,
                             SchedulerConfig().fair_share_half_life_s)
    assert by_id["busy-team"].team_share == pytest.approx(shares["t2"]) and shares["t2"] > shares.get("t1", 0.0)
    assert by_id["idle-team"].team_share == shares.get("t1", 0.0)
    assert by_id["short"].runtime_limit_s == 600


def test_held_jobs_are_not_in_line():
    assert "held" not in {f.job_id for f in queue_factors(full_node_with(*jobs()).snapshot())}


def test_under_fifo_the_order_is_submission_and_the_priority_is_the_class_value():
    config = SchedulerConfig(queue_order="fifo")
    factors = queue_factors(full_node_with(*jobs()).snapshot(), config)
    assert [f.job_id for f in factors] == ["old-low", "busy-team", "high", "idle-team", "short"]
    assert all(f.aging_points == 0 and f.effective_priority == f.class_value for f in factors)
