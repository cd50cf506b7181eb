"""The command line prints one JSON object with every metric key, or a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_core.sim.metrics import METRIC_KEYS

REPO = Path(__file__).resolve().parents[3]


def sim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scheduler_core.sim", *args], capture_output=True, text=True,
                          cwd=REPO, check=False, timeout=60)


def test_json_output_has_every_metric_key(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,runtime_limit_s,user\na,0,8,3600,7200,u\nb,600,4,1200,3600,u\n")
    done = sim("--trace", str(trace), "--nodes", "1", "--gpus-per-node", "8", "--horizon-min", "120", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(METRIC_KEYS) <= set(report)
    assert (report["jobs_done"], report["jobs_total"]) == (2, 2)
    assert report["wait_small_mean_min"] == 50.0


def test_bad_trace_exits_2_naming_line_and_column(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,runtime_limit_s,user\na,0,eight,3600,7200,u\n")
    done = sim("--trace", str(trace), "--json")
    assert done.returncode == 2
    assert "line 2, column 'gpus'" in done.stderr
    assert done.stdout == ""


def test_unknown_setting_exits_2(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,runtime_limit_s,user\na,0,8,3600,7200,u\n")
    done = sim("--trace", str(trace), "--set", "warp_speed=9")
    assert done.returncode == 2
    assert "unknown setting 'warp_speed'" in done.stderr


def test_a_setting_that_would_never_place_a_job_exits_2(tmp_path: Path) -> None:
    # it ran the whole horizon with no job ever started, and reported the waits as the scheduler's
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,runtime_limit_s,user\na,0,8,3600,7200,u\n")
    done = sim("--trace", str(trace), "--json", "--set", "max_placement_attempts=0")
    assert (done.returncode, done.stdout) == (2, "")
    assert "max_placement_attempts must be >= 1" in done.stderr


HEADER = "job_id,submit_s,gpus,duration_s,runtime_limit_s,user"


@pytest.mark.parametrize(
    ("header", "row", "column", "fragment"),
    [
        ("", "big,60,64,600,1200,u", "gpus", "asks 64 GPUs; the fleet can never give more than 16"),
        (",gpu_type", "h,60,1,600,1200,u,h100", "gpu_type", "no node carries h100"),
    ],
    ids=["more-gpus-than-the-fleet", "gpu-type-not-in-the-fleet"],
)
def test_a_job_the_fleet_can_never_run_is_refused_naming_its_line_and_column(
        tmp_path: Path, header: str, row: str, column: str, fragment: str) -> None:
    # before, the engine rejected it and the replay left it out of jobs_total: exit 0 and
    # figures of a different trace
    ok = "ok,0,1,600,1200,u" + ("," if header else "")
    trace = tmp_path / "t.csv"
    trace.write_text(f"{HEADER}{header}\n{ok}\n{row}\n")
    done = sim("--trace", str(trace), "--nodes", "2", "--gpus-per-node", "8", "--horizon-min", "60", "--json")
    assert done.returncode == 2
    assert done.stdout == ""
    assert f"t.csv, line 3, column '{column}': can never run on this fleet" in done.stderr
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr


def test_a_trace_with_a_header_and_no_jobs_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(f"{HEADER}\n")
    done = sim("--trace", str(trace), "--json")
    assert (done.returncode, done.stdout) == (2, "")
    assert "t.csv: the trace has a header but no jobs" in done.stderr


def test_a_horizon_ending_before_the_first_submission_is_refused_naming_the_flag(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(f"{HEADER}\na,7200,1,600,1200,u\n")
    done = sim("--trace", str(trace), "--horizon-min", "60", "--json")
    assert (done.returncode, done.stdout) == (2, "")
    assert "--horizon-min 60 ends before the trace's first submission (minute 120)" in done.stderr


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--nodes", "0"), ("--gpus-per-node", "-1"), ("--nodes-per-leaf", "0"), ("--leaves-per-spine", "-2"),
     ("--horizon-min", "0"), ("--horizon-min", "nan"), ("--horizon-min", "inf"), ("--gpu-types", "a,a"),
     ("--gpu-types", "a,,b"), ("--nodes", "100000000"), ("--gpus-per-node", "100000")],
)
def test_a_bad_flag_exits_2_naming_the_flag(tmp_path: Path, flag: str, value: str) -> None:
    # before, --horizon-min nan or inf printed NaN figures (not even valid JSON) and exited 0
    trace = tmp_path / "t.csv"
    trace.write_text(f"{HEADER}\na,0,1,600,1200,u\n")
    done = sim("--trace", str(trace), "--json", f"{flag}={value}")
    assert (done.returncode, done.stdout) == (2, "")
    assert f"argument {flag}:" in done.stderr
    assert "Traceback" not in done.stderr
