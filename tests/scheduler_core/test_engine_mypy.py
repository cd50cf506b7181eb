"""``mypy --strict`` is clean on the engine (the simulator and benchmark drivers are excluded:
they are owned and typed separately)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_engine_is_mypy_strict_clean():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--exclude", r"^scheduler_core/(sim/|bench\.py$)", "scheduler_core"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
