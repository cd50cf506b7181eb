"""The accounting's catch-up on the demo fleet: how long `services.accounting.catch_up` takes to
roll `--hours` of history, and a digest of every figure it stored, on PostgreSQL.

    scripts/test-services.sh .venv/bin/python bench/catch_up.py [--hours 10] [--repeat 3]
        [--against REF] [--json]

Each run is a fresh process on a database of its own (bench/plane.py's prepare_database): the
demo fleet (16 nodes, 128 GPUs), vision and language each holding 8 H100 from `--hours` ago
until now, as tests/frontend/page_data.py's `both_teams_ran_for` builds it (the fixture of
tests/frontend/test_showback_cost_chart.py and others), then one timed `catch_up(now)`, all in
a transaction rolled back afterwards. Wall time counts PostgreSQL's work too; the process's CPU
time (Python's side: building, sending and reading rows) is the steadier figure on a shared
machine. The clock (`django.utils.timezone.now`) is fixed, so every
run rolls the same minutes and the digest (SHA-256 over every rollup row, ids replaced by names)
is the same from run to run unless a figure changed.

`--against REF`: the same runs, alternated, with the code of git revision REF (checked out in a
temporary worktree, sharing this database and virtualenv): before and after side by side on one
machine at one time, and whether the digests are equal (exit status 1 when they are not).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plane import REPO, prepare_database  # noqa: E402

NOW = datetime(2026, 11, 29, 14, 37, 30, 250_000, tzinfo=UTC)
DATABASE = "qm_bench_catch_up"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hours", type=float, default=10.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--against", help="a git revision to time alternately with this tree")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)  # a source tree: run once there, print JSON
    return p.parse_args(argv)


def run_once(tree: str, hours: float) -> dict[str, Any]:
    """In this process, from `tree`'s code: the scenario, one timed catch-up, the digest."""
    sys.path.insert(0, tree)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.test import override_settings
    from django.utils import timezone

    clock = [NOW]

    def fixed_now() -> datetime:
        return clock[0]

    timezone.now = fixed_now  # every service reads the clock through it

    from controlplane.demo_fleet import seed_demo_fleet
    from controlplane.services import accounting
    from controlplane.services.cycle import run_cycle
    from controlplane.services.jobs import SubmitRequest, submit

    assert accounting.__file__.startswith(tree), accounting.__file__
    with transaction.atomic():
        with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
            seed_demo_fleet()
        for username, name in (("alice", "v"), ("bob", "l")):
            user = get_user_model().objects.get(username=username)
            submit(user, SubmitRequest(name=name, gpus=8, gpu_types=("H100-80GB",)))
        run_cycle("test", now=NOW - timedelta(hours=hours))
        started, cpu = time.perf_counter(), time.process_time()
        accounting.catch_up(NOW)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        rows, digest = _digest()
        transaction.set_rollback(True)
    return {"seconds": seconds, "cpu_s": cpu, "rows": rows, "digest": digest}


def _digest() -> tuple[dict[str, int], str]:
    """Every row the accounting stores, each id to another table replaced by that row's name."""
    from controlplane.models import (
        FleetRollup,
        GroupRollup,
        JobProgressRate,
        NodeActivityRollup,
        QuotaRollup,
        UsageRollup,
    )

    sha = hashlib.sha256()
    counts = {}
    for model in (UsageRollup, GroupRollup, FleetRollup, QuotaRollup, NodeActivityRollup, JobProgressRate):
        fields = [f for f in model._meta.concrete_fields if f.name != "id"]
        names: list[str] = []
        for f in fields:
            if f.is_relation:
                related = f.related_model
                has_name = any(g.name == "name" for g in related._meta.concrete_fields)
                names.append(f"{f.name}__name" if has_name else f"{f.name}__pk")
            else:
                names.append(f.attname)
        rows = sorted(repr(row) for row in model.objects.values_list(*names))
        counts[model.__name__] = len(rows)
        for row in rows:
            sha.update(row.encode())
    return counts, sha.hexdigest()


def child(tree: str, hours: float) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", tree, "--hours", str(hours)], check=True,
                         capture_output=True, text=True, cwd=tree, env={**os.environ, "PYTHONPATH": tree})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(run_once(args.child, args.hours)))
        return 0
    prepare_database(DATABASE)
    trees = {"this tree": str(REPO)}
    worktree = None
    if args.against:
        worktree = tempfile.mkdtemp(prefix="qm-catch-up-")
        subprocess.run(["git", "worktree", "add", "--detach", worktree, args.against], check=True, cwd=REPO,
                       capture_output=True)
        trees = {args.against: worktree, **trees}
    try:
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for _ in range(args.repeat):
            for name, tree in trees.items():  # alternated: a noisy machine slows both alike
                runs[name].append(child(tree, args.hours))
    finally:
        if worktree:
            subprocess.run(["git", "worktree", "remove", "--force", worktree], cwd=REPO, capture_output=True)
    summary = {
        "hours": args.hours,
        "trees": {
            name: {"median_s": round(statistics.median(r["seconds"] for r in rs), 3),
                   "runs_s": [round(r["seconds"], 3) for r in rs],
                   "median_cpu_s": round(statistics.median(r["cpu_s"] for r in rs), 3), "rows": rs[0]["rows"],
                   "digests": sorted({r["digest"] for r in rs})}
            for name, rs in runs.items()
        },
    }
    digests = {d for t in summary["trees"].values() for d in t["digests"]}
    summary["same_figures"] = len(digests) == 1
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"catch-up of {args.hours:g} h on the demo fleet (2 jobs × 8 H100), {args.repeat} runs each:")
        for name, t in summary["trees"].items():
            print(f"  {name:>12}: median {t['median_s']:.2f} s  (runs {', '.join(f'{s:.2f}' for s in t['runs_s'])}), "
                  f"this process's CPU {t['median_cpu_s']:.2f} s  rows {sum(t['rows'].values()):,}  "
                  f"digest {', '.join(d[:12] for d in t['digests'])}")
        print("  same figures" if summary["same_figures"] else "  FIGURES DIFFER")
    return 0 if summary["same_figures"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
