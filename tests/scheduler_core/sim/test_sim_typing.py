"""``mypy --strict`` is clean on the simulator, the cycle benchmark and the seed-week, public-trace and offline-search harnesses."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_simulator_and_benchmarks_are_mypy_strict_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "scheduler_core/sim", "scheduler_core/bench.py", "bench/seed_week.py", "bench/public_trace.py",
         "bench/offline_search.py"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
