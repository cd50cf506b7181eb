"""The docs point at real things: every repository file a doc names in backticks (`services/
cycle.py`, `bench/seed_week.py`, `test_engine_maintenance.py`) exists, and every test it names
(`test_maintenance_window_eta_moves_past_a_window_the_run_would_overlap`) is a test file or a
test function of the suite. A file renamed or a test dropped without its doc fails here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"]
FILE = re.compile(r"`([A-Za-z0-9_./-]+\.(?:py|md|yml|yaml|toml|sh|js|html))(?::[^`]*)?`")
TEST = re.compile(r"`(test_[A-Za-z0-9_]*[A-Za-z0-9])(?:\.py)?(?:::[A-Za-z0-9_]+)?`")
# Named in the docs but not files of the repository: the seed's program, a job's own script, Plotly's bundle
OUTSIDE = {"../shared/peers/seed_gpusched.py", "gpusched.py", "train.py", "plotly/package_data/plotly.min.js"}


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.split()


def test_docs_name_only_files_that_exist() -> None:
    files = _tracked()
    names = {path.rsplit("/", 1)[-1] for path in files}
    missing = []
    for doc in DOCS:
        for path in FILE.findall(doc.read_text()):
            if path in OUTSIDE or path in files or ("/" not in path and path in names):
                continue
            if "/" in path and any(f.endswith("/" + path.lstrip("./")) for f in files):
                continue  # written relative to its package: `services/cycle.py`
            missing.append(f"{doc.name}: {path}")
    assert missing == [], f"docs name files that do not exist: {missing}"


def test_docs_name_only_tests_that_exist() -> None:
    files = [f for f in _tracked() if f.startswith("tests/") and f.endswith(".py")]
    known = {f.rsplit("/", 1)[-1][:-3] for f in files}
    for path in files:
        known.update(re.findall(r"def (test_[A-Za-z0-9_]+)", (ROOT / path).read_text()))
    assert len(known) > 1000  # the suite, not an empty scan
    missing = [f"{doc.name}: {name}" for doc in DOCS for name in TEST.findall(doc.read_text()) if name not in known]
    assert missing == [], f"docs name tests that do not exist: {missing}"
