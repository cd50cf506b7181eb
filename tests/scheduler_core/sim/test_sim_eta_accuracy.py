"""The replay checks the ETAs the engine tells waiting jobs against when they really start.

Each waiting stretch is judged by the first ETA it was told (what a researcher reads when the
job starts to wait). Tiny one-node fleets, every figure worked out by hand."""

from __future__ import annotations

import pytest

from scheduler_core.sim import FleetShape, TraceJob, simulate
from scheduler_core.sim.metrics import eta_figures

HOUR = 3600.0
ONE_NODE = FleetShape(nodes=1, gpus_per_node=8)


def eta_report(jobs: list[TraceJob], horizon_s: float = 3 * HOUR) -> dict[str, float | int | None]:
    report = simulate(jobs, ONE_NODE, horizon_s=horizon_s).as_dict()
    return {key: value for key, value in report.items() if key.startswith("eta_")}


def test_an_eta_from_runtime_limits_is_kept_when_the_job_ahead_ends_early() -> None:
    # a declares 2 h and runs 1 h: b is told t=7200 (a's limit) and starts at 3600
    got = eta_report([TraceJob("a", 0, 8, HOUR, 2 * HOUR, "u"), TraceJob("b", 60, 8, 600, 1200, "u")])
    assert got == {"eta_checked": 1, "eta_missing": 0, "eta_on_time": 1.0, "eta_early_median_min": 60.0,
                   "eta_late_p95_min": 0.0, "eta_late_max_min": 0.0,
                   "eta_median_share_of_wait": pytest.approx((3600 - 60) / (7200 - 60))}  # told at 60


def test_a_later_arrival_of_higher_priority_makes_an_eta_late() -> None:
    # b (priority 0) is told t=3600 when a's limit ends; c (priority 10, like a, so it cannot
    # preempt a) arrives later, goes first at 3600 and runs 30 min: b starts 30 min late
    got = eta_report([
        TraceJob("a", 0, 8, HOUR, HOUR, "u", priority=10),
        TraceJob("b", 60, 8, 600, 600, "u"),
        TraceJob("c", 120, 8, 1800, 1800, "u", priority=10),
    ])
    assert got["eta_checked"] == 2  # b, and c, told 3600 and started then
    assert got["eta_on_time"] == 0.5
    assert got["eta_early_median_min"] == 0.0
    assert got["eta_late_p95_min"] == got["eta_late_max_min"] == 30.0
    # b waited 5340 s of the 3540 told, c 3480 of 3480: the upper of the two
    assert got["eta_median_share_of_wait"] == pytest.approx(5340 / 3540)


def test_a_job_still_waiting_past_its_eta_at_the_horizon_counts_as_late_by_at_least_that() -> None:
    got = eta_report([
        TraceJob("a", 0, 8, HOUR, HOUR, "u", priority=10),
        TraceJob("b", 60, 8, 600, 600, "u"),
        TraceJob("c", 120, 8, 1800, 1800, "u", priority=10),
    ], horizon_s=4000.0)
    assert got["eta_checked"] == 2 and got["eta_on_time"] == 0.5
    assert got["eta_late_max_min"] == pytest.approx(400 / 60)  # told 3600, still waiting at 4000


def test_a_job_told_no_eta_counts_as_missing_not_as_judged() -> None:
    # a declares no runtime limit: the engine cannot say when b starts
    got = eta_report([TraceJob("a", 0, 8, HOUR, None, "u"), TraceJob("b", 60, 8, 600, None, "u")])
    assert got["eta_missing"] == 1
    assert got["eta_checked"] == 0 and got["eta_on_time"] is None and got["eta_late_max_min"] is None


def test_a_job_bound_in_the_cycle_of_its_arrival_is_not_judged() -> None:
    got = eta_report([TraceJob("a", 0, 4, HOUR, None, "u"), TraceJob("b", 60, 4, 600, None, "u")])
    assert got["eta_checked"] == 0 and got["eta_missing"] == 0


def test_eta_figures_count_a_second_late_as_on_time_and_use_the_seed_percentile() -> None:
    figures = eta_figures([-600.0, 0.5, 120.0, 3000.0], missing=2)
    assert figures == {
        "eta_checked": 4, "eta_missing": 2,
        "eta_on_time": 0.5,  # 10 min early, and half a second late (float ETAs, whole-second events)
        "eta_early_median_min": 10.0,  # sorted [~0, 10]: index 1, the seed's index rule
        "eta_late_p95_min": 50.0, "eta_late_max_min": 50.0,  # of [0, 0, 2, 50]
        "eta_median_share_of_wait": None,  # no shares given
    }
    assert eta_figures([], missing=0)["eta_on_time"] is None
    assert eta_figures([0.0, 0.0, 0.0], missing=0, shares=[0.9, 0.2, 0.5])["eta_median_share_of_wait"] == 0.5
