"""bench/seed_week.py: the seed peer replays a trace faithfully and is measured by our definitions."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from scheduler_core.sim.trace import TraceJob, load_trace

REPO = Path(__file__).resolve().parents[3]


def _load_bench() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("seed_week_bench", REPO / "bench" / "seed_week.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["seed_week_bench"] = module
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
needs_shared = pytest.mark.skipif(not bench.peer_path().is_file(), reason="shared/ (seed peer and traces) not beside the repo")


@needs_shared
def test_seed_peer_on_its_own_week_reports_what_it_reports_unpatched() -> None:
    untouched = bench.load_peer().week("pack")  # the seed program drawing its own week (load 0.85, seed 9)
    replayed = bench.run_seed_peer(load_trace(bench.trace_path(0.85)))
    assert replayed.own == untouched
    assert replayed.metrics["allocated"] == untouched["alloc"]
    assert replayed.metrics["wait_large_p95_min"] == untouched["big"][1]
    assert replayed.metrics["jobs_done"] == untouched["n"]


@needs_shared
def test_generator_draws_the_shared_weeks_and_the_seeds_own_streams() -> None:
    checked = bench.check_generator(bench.peer_path(), [10])
    assert len(checked) == 4 and "seed 10" in checked[-1]


@needs_shared
def test_seed_peer_run_is_measured_by_hand_computed_definitions() -> None:
    # minutes: a, b (32 nodes each) run 0-5; c (all 64 nodes) waits 1-5, runs 5-10; s (1 GPU)
    # waits 2-10, runs 10-13; d (64 nodes) waits 3-13, runs past the 20-minute horizon; e is
    # still queued at the horizon after 5 minutes.
    m = 60
    jobs = [TraceJob("a", 0, 256, 5 * m, 3600, "u"), TraceJob("b", 0, 256, 5 * m, 3600, "u"),
            TraceJob("c", 1 * m, 512, 5 * m, 3600, "u"), TraceJob("s", 2 * m, 1, 3 * m, 3600, "u"),
            TraceJob("d", 3 * m, 512, 20 * m, 3600, "u"), TraceJob("e", 15 * m, 512, 5 * m, 3600, "u")]
    got = bench.run_seed_peer(jobs, horizon_min=20).metrics
    assert (got["jobs_done"], got["jobs_total"]) == (4, 6)
    assert (got["wait_small_mean_min"], got["wait_small_p95_min"]) == (8.0, 8.0)
    assert got["wait_large_mean_min"] == pytest.approx(4 / 3)
    assert got["wait_large_p95_min"] == 4.0
    assert got["wait_mean_min"] == pytest.approx((0 + 0 + 4 + 8 + 10 + 5) / 6)
    assert got["wait_max_min"] == 10.0
    assert got["allocated"] == pytest.approx((512 * 5 + 512 * 5 + 3 + 512 * 7) / (20 * 512))
    assert got["mean_slowdown"] == pytest.approx((1 + 1 + 9 / 5 + 11 / 3) / 4)


def test_seed_peer_refuses_times_off_the_minute_grid() -> None:
    with pytest.raises(bench.PeerError, match="whole minutes"):
        bench.run_seed_peer([TraceJob("a", 30, 1, 600, 3600, "u")], peer=types.ModuleType("unused"))


def test_goals_follow_the_issue_per_load() -> None:
    seed = {"allocated": 0.90, "wait_mean_min": 100.0, "wait_large_p95_min": 300.0, "wait_max_min": 600.0}
    ours = {"allocated": 0.92, "wait_mean_min": 60.0, "wait_large_p95_min": 300.0, "wait_max_min": 900.0}
    at_085 = bench.goals(0.85, ours, seed)
    assert [goal.met for goal in at_085] == [True, True, True]  # no wait-mean goal at 0.85
    at_095 = bench.goals(0.95, ours, seed)
    assert [goal.met for goal in at_095] == [True, False, True, True]  # 60 > 100 / 2
    at_105 = bench.goals(1.05, ours, seed)
    assert not at_105[0].met  # 0.92 < 0.90 + 0.03
    assert not bench.goals(0.85, {**ours, "wait_max_min": 901.0}, seed)[-1].met


def test_markdown_report_lists_every_metric_and_every_missed_goal() -> None:
    metrics = {key: 1.0 for key in bench.METRIC_KEYS}
    ours = {**metrics, "allocated": 0.95, "allocated_upper_bound": 0.99, "offered_load": 1.0,
            "eta_checked": 40, "eta_missing": 2, "eta_on_time": 0.975, "eta_early_median_min": 95.0,
            "eta_late_p95_min": 0.0, "eta_late_max_min": 12.0, "eta_median_share_of_wait": 0.42}
    seed = {**metrics, "allocated": 0.93}
    report = {"weeks": [{"name": "w", "seed": bench.SEED_TRACE_SEED, "load": 1.05, "ours": ours, "seed_scheduler": seed,
                         "goals": [{"goal": "allocated 0.9500 >= seed + 0.03 = 0.9600", "met": False}]}],
              "goals_met": 3, "goals_total": 4}
    text = bench.render_markdown(report)
    assert all(f"| `{key}` |" in text for key in bench.METRIC_KEYS)
    assert "| `allocated` | 0.9500 | 0.9300 | 1.02x |" in text
    assert "allocated 0.9500 >= seed + 0.03 = 0.9600 |" in text
    assert "Goals met: 3 of 4." in text
    assert text.endswith("| w | 40 | 97.5 % | 95 | 42 % | 0 / 12 | 2 |")  # the ETAs told, judged by the starts


@needs_shared
def test_mixed_weeks_are_the_shared_week_or_a_drawn_one_with_teams_and_priorities() -> None:
    shared = bench.mixed_jobs(0.95, 1800.0)
    assert [job.job_id for job in shared] == [job.job_id for job in load_trace(bench.trace_path(0.95))]
    drawn = bench.mixed_jobs(0.95, None, seed=10)
    assert [(job.job_id, job.gpus, job.submit_s) for job in drawn] == [
        (job.job_id, job.gpus, job.submit_s) for job in bench.draw_week(bench.load_peer(), 10, 0.95)]
    assert [(job.job_id, job.gpus) for job in drawn] != [(job.job_id, job.gpus) for job in shared]
    for jobs, checkpoint in ((shared, 1800.0), (drawn, None)):
        assert {job.team for job in jobs} == {"a", "b", "c", "d"}
        assert all(job.team == bench.MIXED_TEAMS[job.user] for job in jobs)
        assert [job.priority for job in jobs[:6]] == [100, 0, 0, 0, 0, 100]
        assert {job.checkpoint_interval_s for job in jobs} == {checkpoint}


def test_a_missing_seed_peer_or_a_bad_setting_is_one_line_and_exit_2(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # before, both ended in a traceback (PeerError, OverrideError) from main()
    monkeypatch.setenv("QM_SHARED_DIR", str(tmp_path))
    assert bench.main(["--no-progress"]) == 2
    assert capsys.readouterr().err == (f"error: seed peer not found at {tmp_path}/peers/seed_gpusched.py; "
                                       f"set QM_SHARED_DIR to the shared/ folder\n")
    assert bench.main(["--set", "warp_speed=9"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown setting 'warp_speed'")


@pytest.mark.parametrize(("flag", "value"), [("--extra-seeds", "-1"), ("--workers", "0")])
def test_a_count_below_its_least_is_refused_naming_the_flag(
        flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    # before, --extra-seeds -1 ran as 0 and --workers 0 as 1, silently
    with pytest.raises(SystemExit) as exited:
        bench.main([flag, value])
    assert exited.value.code == 2
    assert f"argument {flag}:" in capsys.readouterr().err
