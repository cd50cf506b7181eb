"""The engine's purity is a lint rule too (scheduler_core/ruff.toml), checked on every run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is a test dependency (pyproject [test]); install it with `make install`")
    return [found]


def test_ruff_bans_framework_imports_in_scheduler_core(tmp_path: Path) -> None:
    probe = ROOT / "scheduler_core" / "_lint_probe_do_not_commit.py"
    probe.write_text("import django\nfrom controlplane import models\n")
    try:
        result = subprocess.run([*_ruff(), "check", "--no-cache", str(probe)], cwd=ROOT, capture_output=True, text=True)
    finally:
        probe.unlink()
    assert result.returncode != 0
    assert "TID251" in result.stdout and "django" in result.stdout and "controlplane" in result.stdout


def test_scheduler_core_passes_its_purity_lint() -> None:
    result = subprocess.run([*_ruff(), "check", "--no-cache", "--select", "TID251", "scheduler_core"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_whole_tree_passes_make_lint() -> None:
    """`make lint`'s rules (pyproject's ruff section) hold everywhere, so a slip shows in CI, not
    in the next person's editor."""
    paths = ["scheduler_core", "controlplane", "frontend", "tests", "bench"]
    result = subprocess.run([*_ruff(), "check", "--no-cache", *paths], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
