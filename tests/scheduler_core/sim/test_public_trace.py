"""bench/public_trace.py: the Philly sample replayed by our engine and the seed peer on the same jobs."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from scheduler_core.sim.trace import TraceJob

REPO = Path(__file__).resolve().parents[3]


def _load_bench() -> types.ModuleType:
    # public_trace imports seed_week by name, as it does when run as a script from bench/
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("public_trace_bench", REPO / "bench" / "public_trace.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["public_trace_bench"] = module
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
needs_trace = pytest.mark.skipif(not bench.trace_file().is_file() or not bench.peer_path().is_file(),
                                 reason="shared/ (seed peer and public trace) not beside the repo")


def test_times_go_to_whole_minutes_submit_down_duration_up() -> None:
    jobs = [TraceJob("a", 201694, 8, 4472936, 4478400, ""), TraceJob("b", 120, 1, 60, 3600, ""),
            TraceJob("c", 59, 1, 1, 3600, "")]
    got = bench.in_whole_minutes(jobs)
    assert [(j.submit_s, j.duration_s, j.runtime_limit_s) for j in got] == [
        (201660.0, 4472940.0, 4478400), (120.0, 60.0, 3600), (0.0, 60.0, 3600)]


def test_a_limit_below_the_rounded_duration_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="job x: runtime limit 100"):
        bench.in_whole_minutes([TraceJob("x", 0, 1, 90, 100, "")])


def test_horizon_is_the_day_after_the_last_submission() -> None:
    jobs = [TraceJob("a", 0, 1, 60, 3600, ""), TraceJob("b", 86400 * 3 + 5, 1, 60, 3600, "")]
    assert bench.horizon_min_of(jobs) == 5 * 24 * 60


def test_comparisons_are_the_weekly_goals_without_the_overload_margin() -> None:
    seed = {"allocated": 0.80, "wait_mean_min": 100.0, "wait_large_p95_min": 50.0, "wait_max_min": 200.0}
    ours = {"allocated": 0.80, "wait_mean_min": 50.0, "wait_large_p95_min": 50.0, "wait_max_min": 300.0}
    assert [c.met for c in bench.comparisons(ours, seed)] == [True, True, True, True]
    worse = {**ours, "allocated": 0.79, "wait_mean_min": 51.0, "wait_large_p95_min": 51.0, "wait_max_min": 301.0}
    assert [c.met for c in bench.comparisons(worse, seed)] == [False, False, False, False]
    # a side that finished no large job has no p95: it compares as infinitely long
    assert not bench.comparisons({**ours, "wait_large_p95_min": None}, seed)[2].met


@needs_trace
def test_the_fleet_that_fits_the_trace_runs_every_job_on_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--nodes", "32", "--json", "--workers", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["jobs"] == 1494
    (fleet,) = report["fleets"]
    ours, seed = fleet["ours"], fleet["seed_scheduler"]
    assert ours["jobs_total"] == seed["jobs_total"] == 1494
    assert ours["jobs_done"] == seed["jobs_done"] == 1494
    # every GPU-second of the trace is served within the horizon, so both reach the bound
    assert ours["allocated"] == pytest.approx(ours["allocated_upper_bound"])
    assert seed["allocated"] == pytest.approx(ours["allocated_upper_bound"])
    assert ours["jobs_killed"] == 0  # runtime limits cover every duration rounded up
    assert len(fleet["comparisons"]) == 4
