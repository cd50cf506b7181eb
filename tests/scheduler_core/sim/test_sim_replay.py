"""Replays through the real engine on tiny fleets, with every figure worked out by hand."""

from __future__ import annotations

import pytest

from scheduler_core.sim import FleetShape, Simulator, TraceJob, simulate
from scheduler_core.types import SchedulerConfig

HOUR = 3600.0
ONE_NODE = FleetShape(nodes=1, gpus_per_node=8)


def job(job_id: str, submit: float, gpus: int, duration: float, limit: float | None = None, **extra: object) -> TraceJob:
    return TraceJob(job_id, submit, gpus, duration, limit if limit is not None else duration + HOUR, "u", **extra)  # type: ignore[arg-type]


def test_second_whole_node_job_waits_for_the_first() -> None:
    got = simulate([job("a", 0, 8, HOUR), job("b", 600, 8, 1200)], ONE_NODE, horizon_s=2 * HOUR).metrics
    # b waits 600 -> 3600 (50 min), runs 3600 -> 4800
    assert got["wait_large_mean_min"] == 25.0
    assert got["wait_large_p95_min"] == 50.0
    assert got["wait_max_min"] == 50.0
    assert got["allocated"] == pytest.approx((3600 + 1200) / 7200)
    assert got["stranded_gpus"] == 0.0
    assert got["mean_slowdown"] == pytest.approx((1.0 + (4800 - 600) / 1200) / 2)
    assert (got["jobs_done"], got["jobs_total"]) == (2, 2)
    assert got["wait_small_mean_min"] is None


def test_stranded_gpus_are_free_gpus_on_partial_nodes_while_a_whole_node_job_waits() -> None:
    # s holds 4 of 8 GPUs 0 -> 3600; the whole-node job l waits 60 -> 3600 beside 4 stranded GPUs
    got = simulate([job("s", 0, 4, HOUR), job("l", 60, 8, 600)], ONE_NODE, horizon_s=2 * HOUR).metrics
    assert got["stranded_gpus"] == pytest.approx(4 * 3540 / 7200)
    assert got["allocated"] == pytest.approx((4 * 3600 + 8 * 600) / (8 * 7200))
    assert got["wait_large_mean_min"] == 59.0
    assert got["wait_small_mean_min"] == 0.0


def test_horizon_counts_jobs_still_waiting_and_ignores_later_submissions() -> None:
    trace = [job("a", 0, 8, 2 * HOUR), job("b", 60, 8, 600), job("late", 4000, 1, 60)]
    result = simulate(trace, ONE_NODE, horizon_s=HOUR)
    got = result.metrics
    assert (got["jobs_done"], got["jobs_total"]) == (0, 2)
    assert got["wait_max_min"] == 59.0
    assert got["wait_mean_min"] == 29.5
    assert got["wait_large_mean_min"] is None
    assert got["allocated"] == 1.0
    assert result.extras["jobs_pending_at_horizon"] == 1
    assert result.extras["jobs_running_at_horizon"] == 1


def test_job_past_its_runtime_limit_is_killed_by_the_engine() -> None:
    result = simulate([job("a", 0, 8, 2 * HOUR, limit=HOUR), job("b", 60, 8, 600)], ONE_NODE, horizon_s=3 * HOUR)
    assert result.extras["jobs_killed"] == 1
    # a is stopped at its limit, b runs 3600 -> 4200
    assert result.metrics["allocated"] == pytest.approx((3600 + 600) / (3 * 3600))
    assert result.metrics["wait_large_mean_min"] == pytest.approx((0 + 59) / 2)


def test_preempted_job_requeues_losing_the_work_since_its_last_checkpoint() -> None:
    trace = [
        job("low", 0, 8, HOUR, checkpoint_interval_s=600.0),
        job("high", 1000, 8, 1000, priority=10),
    ]
    sim = Simulator(trace, ONE_NODE, _engine(), SchedulerConfig(), horizon_s=3 * HOUR)
    result = sim.run()
    grace = next(pc.grace_period_s for pc in sim.priority_classes if pc.name == "p0")
    stop = 1000 + grace
    assert result.extras["preemptions"] == 1
    # high runs stop -> stop + 1000; low kept the 600 s it had checkpointed and needs 3000 s more
    assert sim.jobs["high"].end_s == stop + 1000
    assert sim.jobs["low"].end_s == stop + 1000 + 3000
    assert sim.jobs["low"].wait_s == 1000


def test_same_trace_same_numbers() -> None:
    trace = [job(f"j{i}", 37.0 * i, (1, 2, 4, 8, 16)[i % 5], 900 + 113 * i) for i in range(40)]
    shape = FleetShape(nodes=4, gpus_per_node=8, nodes_per_leaf=2)
    first = simulate(trace, shape, horizon_s=24 * HOUR)
    second = simulate(trace, shape, horizon_s=24 * HOUR)
    assert first.metrics == second.metrics
    assert first.metrics["jobs_done"] == 40


def _engine():  # type: ignore[no-untyped-def]
    from scheduler_core import schedule

    return schedule
