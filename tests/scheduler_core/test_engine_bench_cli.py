"""The cycle benchmark's command line (``python -m scheduler_core.bench``): the issue's keys on
stdout as one JSON object, and a bad count refused naming its flag."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scheduler_core.bench", *args], capture_output=True, text=True,
                          cwd=REPO, check=False, timeout=120)


def test_bench_json_carries_the_keys_the_issue_lists() -> None:
    done = bench("--json", "--gpus", "64", "--pending", "20", "--running", "8", "--cycles", "2")
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert {"gpus", "pending", "running", "cycle_ms_p50", "cycle_ms_p95", "peak_rss_mb"} <= set(row)
    assert (row["gpus"], row["pending"], row["cycles"]) == (64, 20, 2)


@pytest.mark.parametrize(("flag", "value"), [("--cycles", "-1"), ("--gpus", "0"), ("--pending", "-3")])
def test_a_negative_count_exits_2_naming_the_flag(flag: str, value: str) -> None:
    # before, --cycles -1 timed no cycle and died on an AssertionError traceback
    done = bench("--json", "--gpus", "64", f"{flag}={value}")
    assert (done.returncode, done.stdout) == (2, "")
    assert f"{flag} must be" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("pair", [("--sweep", "--full"), ("--sweep", "--maintenance"), ("--full", "--maintenance")])
def test_one_scenario_a_run(pair: tuple[str, str]) -> None:
    # before, --sweep --full timed the sweep and no full fleet, and --full --maintenance the windows
    # alone, without a word
    done = bench("--json", *pair)
    assert (done.returncode, done.stdout) == (2, "")
    assert "not allowed with argument" in done.stderr
