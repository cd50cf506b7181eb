"""The history CSV of every ended job (`/history.csv` as the admin), this tree against another,
side by side in one run: time, peak RSS, queries and the bytes.

    scripts/test-services.sh .venv/bin/python bench/history_csv.py --against /tmp/base [--jobs 20000 100000] [--runs 3]

`--against` is another checkout of the project (`git worktree add /tmp/base <commit>`), the code
the CSV is compared with. For each `--jobs` figure, builds bench/history_cost.py's fleet and jobs
(their allocations, GPU rows, requeues and gang exits), adds each job's day rollups (its allocated
GPU-seconds per day, node type and tier, so every row has its GPU-hours, as the accounting's
catch-up writes them) and remembers every ended job's cost (`job_costs.remember_ended_job_costs`).
Then, alternated run by run so both see the same load, each tree downloads the whole CSV in a
fresh process of its own (a warm-up download of an empty set first, so modules and the session
are loaded): the time to read the stream to its end (hashed chunk by chunk, never joined), the
process's peak RSS (VmHWM) before the download and after it, and its queries. `--forgetting` also times
each tree with no cost remembered (the rows deleted in a transaction rolled back after the run:
every job priced on the fly). Prints the medians; exits 1 unless both trees wrote the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")


def add_day_rollups() -> int:
    """Each job's allocated GPU-seconds per day of a run's bind, node GPU type and tier, as day
    rollups (the other figures 0): what the history's GPU-hours read."""
    from django.db import connection

    from controlplane.models import Allocation, AllocationGpu, Job, Node, UsageRollup
    from controlplane.models.usage import RollupBucket

    given = {"bucket", "start", "job_id", "team_id", "project_id", "priority_class_id", "gpu_type_id",
             "capacity_tier", "borrowed", "allocated_gpu_seconds"}
    zeros = [f for f in UsageRollup._meta.concrete_fields if not f.primary_key and f.attname not in given]
    columns = ", ".join(f'"{f.column}"' for f in [*(UsageRollup._meta.get_field(n.removesuffix("_id")) for n in
                                                     ["bucket", "start", "job_id", "team_id", "project_id",
                                                      "priority_class_id", "gpu_type_id", "capacity_tier",
                                                      "borrowed", "allocated_gpu_seconds"]), *zeros])
    sql = (f"INSERT INTO {UsageRollup._meta.db_table} ({columns}) "
           f"SELECT {int(RollupBucket.DAY)}, date_trunc('day', a.created_at), j.id, j.team_id, j.project_id, "
           f"j.priority_class_id, n.gpu_type_id, n.capacity_tier, false, "
           f"SUM(EXTRACT(EPOCH FROM a.released_at - a.created_at))"
           + "".join(", 0" for _ in zeros) +
           f" FROM {Allocation._meta.db_table} a JOIN {AllocationGpu._meta.db_table} g ON g.allocation_id = a.id "
           f"JOIN {Node._meta.db_table} n ON n.id = g.node_id JOIN {Job._meta.db_table} j ON j.id = a.job_id "
           "GROUP BY 2, j.id, n.gpu_type_id, n.capacity_tier")
    with connection.cursor() as cursor:
        cursor.execute(sql)
        count = cursor.rowcount
        cursor.execute("ANALYZE")
    return count


def peak_rss_kb() -> int:
    """This process's peak RSS so far (VmHWM). Not getrusage's ru_maxrss: Linux carries that over
    exec from the parent, here the process that built the jobs."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(forgetting: bool) -> None:
    """One download in this process (run with the tree's root first on sys.path): prints JSON."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.test import Client

    import controlplane
    from controlplane.services import job_costs

    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    warm = client.get("/history.csv", {"finished_after": "2100-01-01T00:00"})
    assert warm.status_code == 200
    for _ in warm.streaming_content:
        pass
    queries = 0

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal queries
        queries += 1
        return execute(sql, params, many, context)

    with transaction.atomic():
        if forgetting:
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {job_costs.ENDED_JOB_COSTS}")
        rss_before = peak_rss_kb()
        digest, size, lines = hashlib.sha256(), 0, 0
        with connection.execute_wrapper(count):
            t0 = time.perf_counter()
            response = client.get("/history.csv")
            assert response.status_code == 200
            for chunk in response.streaming_content:
                digest.update(chunk)
                size += len(chunk)
                lines += chunk.count(b"\n")
            ms = (time.perf_counter() - t0) * 1000
        rss_peak = peak_rss_kb()
        transaction.set_rollback(True)
    print(json.dumps({"ms": ms, "rss_before_kb": rss_before, "rss_peak_kb": rss_peak, "queries": queries,
                      "bytes": size, "lines": lines, "sha256": digest.hexdigest(), "code": controlplane.__file__}))


def download(tree: Path, forgetting: bool) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(tree)] + (["--forgetting"] if forgetting else [])
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"].startswith(str(tree)), (result["code"], tree)  # that tree's code ran
    return result


def tree_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every history bench of two trees takes (this one and history_export.py)."""
    parser.add_argument("--against", type=Path, required=True, help="another checkout: the code compared with")
    parser.add_argument("--jobs", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)


def prepare_database(script: str) -> None:
    """Django set up on this tree, on PostgreSQL only, migrated."""
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql":
        raise SystemExit(f"{script} needs PostgreSQL; run it under scripts/test-services.sh")
    call_command("migrate", verbosity=0)


def build_history(count: int, days: int, seed: int) -> tuple[dict[str, Any], int, float]:
    """bench/history_cost.py's jobs, their day rollups and every ended job's cost remembered,
    committed for the children: (what was built, the rollups, seconds it took)."""
    from django.db import connection
    from django.utils import timezone

    from bench import history_cost
    from controlplane.services import job_costs

    t0 = time.perf_counter()
    data = history_cost.build(count, days, seed)
    rollups = add_day_rollups()
    while job_costs.remember_ended_job_costs(timezone.now()):
        pass
    connection.close()  # the children read what is committed
    return data, rollups, time.perf_counter() - t0


def main() -> int:
    if "--child" in sys.argv:
        tree = sys.argv[sys.argv.index("--child") + 1]
        sys.path.insert(0, tree)
        child("--forgetting" in sys.argv)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    tree_arguments(parser)
    parser.add_argument("--forgetting", action="store_true", help="also time the CSV with no cost remembered")
    args = parser.parse_args()
    prepare_database("bench/history_csv.py")
    trees = {"before": args.against.resolve(), "after": REPO}
    ways = [(tree, False) for tree in trees] + ([(tree, True) for tree in trees] if args.forgetting else [])
    ok = True
    for count in args.jobs:
        data, rollups, built_s = build_history(count, args.days, args.seed)
        loads = [os.getloadavg()[0]]
        results: dict[tuple[str, bool], list[dict[str, Any]]] = {way: [] for way in ways}
        for run in range(args.runs):
            order = ways if run % 2 == 0 else ways[::-1]
            for tree, forgetting in order:
                results[(tree, forgetting)].append(download(trees[tree], forgetting))
        loads.append(os.getloadavg()[0])
        print(f"\n{data['jobs']:,} ended jobs over {args.days} days: {data['allocations']:,} allocations, "
              f"{data['gpu_rows']:,} GPU rows, {rollups:,} day rollups (built in {built_s:.0f} s); "
              f"load average {' → '.join(f'{x:.1f}' for x in loads)}; {args.runs} runs each, alternated")
        print(f"{'/history.csv, admin, every job':44s} {'p50 ms':>8s} {'min ms':>8s} {'max ms':>8s} "
              f"{'queries':>8s} {'RSS MiB':>8s} {'peak MiB':>9s} {'MiB':>6s}  sha256")
        digests = set()
        for (tree, forgetting), runs in results.items():
            times = [r["ms"] for r in runs]
            label = f"{tree}, {'nothing remembered' if forgetting else 'remembered'}"
            before = statistics.median(r["rss_before_kb"] for r in runs) / 1024
            peak = max(r["rss_peak_kb"] for r in runs) / 1024
            print(f"{label:44s} {statistics.median(times):8.0f} {min(times):8.0f} {max(times):8.0f} "
                  f"{max(r['queries'] for r in runs):8d} {before:8.1f} {peak:9.1f} {runs[0]['bytes'] / 2**20:6.1f}  "
                  f"{runs[0]['sha256'][:16]}")
            digests |= {r["sha256"] for r in runs}
        same = len(digests) == 1
        ok &= same
        print(f"bytes {'the same' if same else 'DIFFERENT'} ({results[ways[0]][0]['lines']:,} lines)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
