"""The command line prints one JSON object with every metric key, or a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
