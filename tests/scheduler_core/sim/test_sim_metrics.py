"""Metric definitions, computed by hand: the seed's p95 index, horizon clipping, who counts."""

from __future__ import annotations

import pytest

from scheduler_core.sim.metrics import JobOutcome, TimeIntegral, allocated_upper_bound, p95, summarize

HOUR = 3600.0


def outcome(job_id: str, gpus: int, submit: float, wait: float, end: float | None, duration: float = HOUR) -> JobOutcome:
    return JobOutcome(job_id=job_id, gpus=gpus, submit_s=submit, duration_s=duration, wait_s=wait, end_s=end)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([7.0], 7.0), ([1.0, 2.0], 2.0), ([float(i) for i in range(10)], 9.0), ([float(i) for i in range(40)], 38.0)],
    ids=["one", "two-takes-index-1", "ten-takes-index-9", "forty-takes-index-38"],
)
def test_p95_is_the_seeds_index_rule(values: list[float], expected: float) -> None:
    assert p95(values) == expected


def test_time_integral_clips_at_the_horizon() -> None:
    integral = TimeIntegral(horizon_s=100.0)
    integral.set(10.0, 4.0)   # 4 over [10, 50)
    integral.set(50.0, 2.0)   # 2 over [50, 100), then past the horizon
    integral.set(150.0, 9.0)  # entirely after the horizon
    assert integral.area() == 4 * 40 + 2 * 50


def test_time_integral_refuses_time_going_back() -> None:
    integral = TimeIntegral(horizon_s=100.0)
    integral.set(10.0, 1.0)
    with pytest.raises(ValueError, match="time went back"):
        integral.set(5.0, 1.0)


def test_waits_split_small_and_large_at_one_node() -> None:
    outcomes = [
        outcome("s1", 1, 0, 0.0, 2 * HOUR),
        outcome("s2", 7, 0, 600.0, 3 * HOUR),
        outcome("l1", 8, 0, 1200.0, 4 * HOUR),
        outcome("l2", 16, 0, 3600.0, 5 * HOUR),
    ]
    got = summarize(outcomes, horizon_s=10 * HOUR, total_gpus=16, gpus_per_node=8,
                    allocated_gpu_seconds=0.0, stranded_gpu_seconds=0.0)
    assert got["wait_small_mean_min"] == 5.0 and got["wait_small_p95_min"] == 10.0
    assert got["wait_large_mean_min"] == 40.0 and got["wait_large_p95_min"] == 60.0
    assert got["wait_mean_min"] == (0 + 10 + 20 + 60) / 4
    assert got["jobs_done"] == 4


def test_done_means_ended_strictly_before_the_horizon() -> None:
    outcomes = [outcome("a", 1, 0, 0.0, 10 * HOUR), outcome("b", 1, 0, 60.0, 10 * HOUR - 1)]
    got = summarize(outcomes, horizon_s=10 * HOUR, total_gpus=8, gpus_per_node=8,
                    allocated_gpu_seconds=0.0, stranded_gpu_seconds=0.0)
    assert got["jobs_done"] == 1
    assert got["wait_small_mean_min"] == 1.0


def test_still_waiting_jobs_count_in_mean_and_max_but_not_in_done_stats() -> None:
    outcomes = [outcome("done", 8, 0, 600.0, 2 * HOUR), outcome("stuck", 8, HOUR, 9 * HOUR, None)]
    got = summarize(outcomes, horizon_s=10 * HOUR, total_gpus=8, gpus_per_node=8,
                    allocated_gpu_seconds=0.0, stranded_gpu_seconds=0.0)
    assert got["wait_large_mean_min"] == 10.0
    assert got["wait_max_min"] == 540.0
    assert got["wait_mean_min"] == (10.0 + 540.0) / 2
    assert (got["jobs_done"], got["jobs_total"]) == (1, 2)


def test_jobs_submitted_after_the_horizon_do_not_count() -> None:
    outcomes = [outcome("in", 1, 0, 0.0, HOUR), outcome("late", 1, 11 * HOUR, 0.0, 12 * HOUR)]
    got = summarize(outcomes, horizon_s=10 * HOUR, total_gpus=8, gpus_per_node=8,
                    allocated_gpu_seconds=0.0, stranded_gpu_seconds=0.0)
    assert got["jobs_total"] == 1


def test_statistics_over_no_jobs_are_null_not_zero() -> None:
    got = summarize([outcome("l", 8, 0, 0.0, HOUR)], horizon_s=10 * HOUR, total_gpus=8, gpus_per_node=8,
                    allocated_gpu_seconds=0.0, stranded_gpu_seconds=0.0)
    assert got["wait_small_mean_min"] is None and got["wait_small_p95_min"] is None
    assert got["wait_large_mean_min"] == 0.0


def test_allocated_and_stranded_are_time_averages_and_slowdown_uses_true_duration() -> None:
    got = summarize([outcome("a", 8, 0, 1800.0, 5400.0)], horizon_s=2 * HOUR, total_gpus=16, gpus_per_node=8,
                    allocated_gpu_seconds=8 * HOUR, stranded_gpu_seconds=3 * HOUR)
    assert got["allocated"] == 0.25
    assert got["stranded_gpus"] == 1.5
    assert got["mean_slowdown"] == 1.5


def test_upper_bound_is_the_no_wait_bound_when_capacity_never_binds() -> None:
    jobs = [(0.0, 8, 3600.0), (600.0, 8, 1200.0)]
    # on 16 GPUs both run at once: busy 8*3600 + 8*1200 of 16*7200
    assert allocated_upper_bound(jobs, horizon_s=7200.0, total_gpus=16) == pytest.approx(38400 / 115200)


def test_upper_bound_is_capacity_when_demand_exceeds_it_throughout() -> None:
    jobs = [(0.0, 8, 7200.0), (0.0, 8, 7200.0)]
    assert allocated_upper_bound(jobs, horizon_s=7200.0, total_gpus=8) == 1.0


def test_upper_bound_cuts_where_a_late_burst_overflows() -> None:
    # 8 GPUs idle for the first hour (nothing submitted), then 16 GPUs of demand for an hour:
    # at most 8 GPUs x 1 h of work fits, half of the 2-hour capacity
    jobs = [(3600.0, 8, 3600.0), (3600.0, 8, 3600.0)]
    assert allocated_upper_bound(jobs, horizon_s=7200.0, total_gpus=8) == 0.5
    # jobs past the horizon and the part of a job running past it do not count
    assert allocated_upper_bound([(7200.0, 8, 60.0), (5400.0, 8, 7200.0)], horizon_s=7200.0, total_gpus=8) == 0.25


def test_slowdown_floors_very_short_jobs_at_a_minute() -> None:
    got = summarize([outcome("blip", 1, 0, 590.0, 600.0, duration=10.0)], horizon_s=HOUR, total_gpus=8,
                    gpus_per_node=8, allocated_gpu_seconds=0.0, stranded_gpu_seconds=0.0)
    assert got["mean_slowdown"] == 10.0
