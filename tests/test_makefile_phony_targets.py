"""Every target the Makefile declares phony has a rule: `make bench` and `make install-test`
were declared and had none, so make answered "Nothing to be done" as if they had run."""

from __future__ import annotations

import re
from pathlib import Path

MAKEFILE = (Path(__file__).resolve().parents[1] / "Makefile").read_text()


def test_every_phony_target_has_a_rule() -> None:
    phony = {name for line in re.findall(r"^\.PHONY:(.*)$", MAKEFILE, re.M) for name in line.split()}
    rules = set(re.findall(r"^([A-Za-z][\w-]*):(?!=)", MAKEFILE, re.M))
    assert {"demo", "test"} <= phony
    assert sorted(phony - rules) == [], "phony targets without a rule"


def test_make_bench_runs_the_engines_benchmarks_not_the_bench_directory() -> None:
    # bench/ is a directory: without a phony rule `make bench` answered "Nothing to be done".
    rule = re.search(r"^bench:.*\n((?:\t.*\n)+)", MAKEFILE, re.M)
    assert rule is not None
    assert "scheduler_core.bench" in rule.group(1) and "bench/seed_week.py" in rule.group(1)
