"""`make test`'s serial chaos run collects the files the workers found chaos tests in, not the
whole suite again (tests/xdist_isolation.py, scripts/run-tests.sh): the workers' list must hold
every file that marks a test chaos, or that test would run in neither pytest."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.xdist_isolation import SERIAL_FILES_VARIABLE

ROOT = Path(__file__).resolve().parents[1]
CHAOS_MARK = re.compile(r"\bpytest\.mark\.chaos\b")


def test_the_workers_list_every_file_with_a_chaos_test_for_the_serial_run() -> None:
    listing = os.environ.get(SERIAL_FILES_VARIABLE)
    if not listing or not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("only run-tests.sh's workers list the chaos files")
    listed = set(Path(listing).read_text().split())
    marking = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
               if CHAOS_MARK.search(path.read_text())}
    assert marking, "no test file marks a chaos test: has the marker been renamed?"
    assert listed == marking
