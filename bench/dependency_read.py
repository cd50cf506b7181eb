"""The snapshot's read of what waiting jobs wait on (services/dependencies.waits, the one query
`waiting_rows` runs each cycle), timed now, with any-of dependencies (Slurm's `?`, migration
0025), and as it was before them, alternated run by run on one database.

    scripts/test-services.sh .venv/bin/python bench/dependency_read.py [--ended 20000] [--runs 41]

Builds the fleet docs/api.md measured the read on: 20,000 ended jobs (each with a met
dependency on the one before: the table's history), 1,000 waiting, 500 of
them with two dependencies each on running or waiting jobs (all-of), and with `--any` that many
more any-of jobs of two alternatives (half with one alternative met, which the clause drops).
Prints the p50 and p90 of the read (`waiting_rows`, the statement and its rows to Python) now
and as it was before any-of (its code at commit 5cb1b7a, run on the same data, alternated), how
many jobs wait, and the same two ways for the commit's stale-bind guard (`waiting_among`, a
batch of 40 and of 1,000 binds without a singleton).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ended", type=int, default=20_000)
    parser.add_argument("--waiting", type=int, default=1_000)
    parser.add_argument("--with-deps", type=int, default=500)
    parser.add_argument("--any", type=int, default=0, help="any-of waiting jobs added (two alternatives each)")
    parser.add_argument("--runs", type=int, default=41)
    parser.add_argument("--explain", action="store_true", help="print the statement's EXPLAIN ANALYZE")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from controlplane.choices import JobState
    from controlplane.models import Job, JobDependency
    from controlplane.services import dependencies
    from controlplane.services.dependencies import waiting as waiting_read
    from tests.controlplane import factories as f

    call_command("migrate", verbosity=0)
    now = timezone.now()
    team, pc = f.make_team("bench"), f.make_priority_class("bench")
    user = f.make_user("bench-user", team=team)

    def jobs(n: int, state: str, **kw: object) -> list[Job]:
        return Job.objects.bulk_create([
            Job(team=team, priority_class=pc, submitter=user, name=f"j{i % 50}", gpus=1, runtime_limit_s=3600,
                state=state, submitted_at=now, state_changed_at=now, **kw) for i in range(n)], batch_size=5000)

    ended = jobs(args.ended, JobState.SUCCEEDED)
    # the history a dependency table keeps: each ended job waited, met, on the one before it
    JobDependency.objects.bulk_create([JobDependency(job=b, upstream=a, condition="afterok", satisfied_at=now)
                                       for a, b in zip(ended, ended[1:], strict=False)], batch_size=5000)
    running = jobs(200, JobState.RUNNING)
    waiting = jobs(args.waiting, JobState.PENDING)
    rows = [JobDependency(job=w, upstream=running[(i * 2 + k) % len(running)], condition="afterok")
            for i, w in enumerate(waiting[:args.with_deps]) for k in range(2)]
    if args.any:
        alternatives = jobs(args.any, JobState.PENDING, dependency_mode="any")
        done = jobs(1, JobState.SUCCEEDED)[0]
        for i, w in enumerate(alternatives):
            rows.append(JobDependency(job=w, upstream=running[i % len(running)], condition="afterok"))
            met = i % 2 == 0
            rows.append(JobDependency(job=w, upstream=done if met else running[(i + 1) % len(running)],
                                      condition="afterok", satisfied_at=now if met else None))
    JobDependency.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")

    before_read = _read_before_0025(dependencies)

    after: list[float] = []
    before: list[float] = []
    for run in range(args.runs):
        reads = ((waiting_read.waiting_rows, after), (before_read, before))
        for read, out in reads if run % 2 else reads[::-1]:  # each goes first every other run
            start = time.perf_counter()
            read()
            out.append((time.perf_counter() - start) * 1000)
    waits = dependencies.waits()
    if args.explain:
        connection.force_debug_cursor = True
        waiting_read.waiting_rows()
        sql = connection.queries[-1]["sql"]
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN ANALYZE " + sql)
            print("\n".join(row[0] for row in cursor.fetchall()))

    # the commit's stale-bind guard on a batch of binds (no singleton among them: its short query;
    # no any-of job either, as the bind reads them under its lock)
    old_among = _before_0025(dependencies, "waiting_among")
    batches = {40: [w.pk for w in waiting[:40]], 1000: [w.pk for w in waiting[:1000]]}
    guard: dict[tuple[str, int], list[float]] = {}
    for run in range(args.runs):
        for size, ids in batches.items():
            ways = (("now", dependencies.waiting_among), ("before", old_among))
            for label, among in ways if run % 2 else ways[::-1]:  # each goes first every other run
                start = time.perf_counter()
                among(ids, singletons=[], **({"alternatives": []} if label == "now" else {}))
                guard.setdefault((label, size), []).append((time.perf_counter() - start) * 1000)

    def figures(xs: list[float]) -> str:
        xs = sorted(xs)
        return f"p50 {statistics.median(xs):.2f} ms, p90 {xs[int(len(xs) * 0.9)]:.2f} ms"

    print(f"{len(waits)} jobs wait ({args.with_deps} all-of, {args.any} any-of added); load {os.getloadavg()[0]:.1f}")
    print(f"the read (waiting_rows) now:          {figures(after)}")
    print(f"the read before any-of (5cb1b7a):     {figures(before)}")
    for size in batches:
        print(f"bind guard, {size} binds: now {figures(guard[('now', size)])}; before {figures(guard[('before', size)])}")
    return 0


def _read_before_0025(dependencies: object) -> object:
    """`_waiting_rows` (now dependencies/waiting.waiting_rows) as it was before any-of (commit 5cb1b7a), run
    in today's modules."""
    return _before_0025(dependencies, "_waiting_rows")


def _before_0025(dependencies: object, name: str) -> object:
    """The function `name` as it was before any-of (commit 5cb1b7a), run in today's modules (the
    one module was split into the package services/dependencies/ since: its names are gathered,
    the private ones it called under their names of then)."""
    import subprocess

    from controlplane.services.dependencies import conditions, singletons, waiting

    source = subprocess.run(["git", "-C", str(REPO), "show", "5cb1b7a:controlplane/services/dependencies.py"],
                            check=True, capture_output=True, text=True).stdout
    start = source.index(f"def {name}(")
    end = source.index("\ndef ", start + 1)
    namespace = {**vars(conditions), **vars(singletons), **vars(waiting), **vars(dependencies),
                 "_among": waiting.among_ids, "_singleton_edges": singletons.singleton_edges}
    exec(compile(source[start:end], "<before-0025>", "exec"), namespace)  # noqa: S102 - the bench's own copy
    return namespace[name]


if __name__ == "__main__":
    raise SystemExit(main())
