"""The history page's total cost over a whole quarter, before and after, side by side in one run.

    scripts/test-services.sh .venv/bin/python bench/history_cost.py [--jobs 20000 50000] [--days 90] [--runs 5]

Builds, for each `--jobs` figure in turn (a fresh fleet each time: the tables emptied first),
bench/pages.py's fleet (256 nodes × 8 GPUs, H100 reserved and on-demand, A100 spot, 12 teams)
with a second price rate for every GPU type and tier from the middle of the window on (a
repricing, so runs are cut where a rate changes), and that many jobs that ended over `--days`
days, every one with what the control plane stores for its cost: its released allocation, its
GPU rows (1 to 64 GPUs, whole nodes from 8 on, as bench/pages.py sizes them; 80 minutes on
average, log-normal), 3 % preempted once (a second run after the first), and a gang member of
one job in ten of 16 GPUs and more that exited early (its `MemberExited` release event: that
node's GPUs stop costing then). Written with COPY, then ANALYZE.

Then remembers every ended job's cost (`job_costs.remember_ended_job_costs`, what
`qm.accounting.remember_job_costs` does every minute) and says how long that took, and times,
alternated run by run so all see the same load, the whole set's cost the three ways the history
page has had it, with its queries counted:

- before: every job priced by `job_costs.jobs_costs`, 1,000 a call, as the CSV prices them,
  and the cents added up (`job_history.history_costs`: the page's total until 2 Dec 2026, for
  sets of at most 5,000 jobs, `PAGE_COST_LIMIT`; none beyond it);
- one query, nothing remembered: `job_costs.jobs_total_cost` with no cost remembered (the
  rows deleted, untimed, in a transaction rolled back after the run): every job priced from
  its GPU rows in PostgreSQL, as it was from 2 to 5 Dec 2026;
- one query, remembered: the same call reading the remembered costs (today's page).

And the page itself as the admin (`/history/`, every ended job), its costs remembered. Prints the
medians; all totals must be the same to the cent (exit status 1 otherwise).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import statistics
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

MEAN_DURATION_S = 80 * 60
PREEMPTED = 0.03
GANG_EXIT = 0.10


def build(count: int, days: int, seed: int) -> dict[str, Any]:
    """A fresh fleet and `count` ended jobs with their allocations, GPU rows and gang exits."""
    from django.db import connection
    from django.utils import timezone

    from bench import pages
    from controlplane.models import Allocation, AllocationGpu, Event, Job, PriceRate

    with connection.cursor() as cursor:  # a fresh set for each size
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'controlplane_%' "
                       "OR tablename LIKE 'auth_user%'")
        # (the job day sums' and the remembered costs' tables are emptied by their own triggers when
        # the rollups and the jobs are; the price generation's one row must stay)
        kept = ("controlplane_job_day_gpu_seconds", "controlplane_ended_job_cost", "controlplane_price_generation")
        tables = [row[0] for row in cursor.fetchall() if row[0] not in kept]
        cursor.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE")
    rng = random.Random(seed)
    now = timezone.now().replace(microsecond=0)
    fleet = pages.build_fleet(now)
    mid = now - timedelta(days=days / 2)
    for rate in list(PriceRate.objects.all()):
        PriceRate.objects.create(gpu_type_id=rate.gpu_type_id, capacity_tier=rate.capacity_tier,
                                 usd_per_gpu_hour=(rate.usd_per_gpu_hour * Decimal("0.9")).quantize(Decimal("0.0001")),
                                 effective_from=mid)
    nodes = {"H100-80GB": [n["id"] for n in fleet["nodes"] if n["pool"] == "h100"],
             "A100-40GB": [n["id"] for n in fleet["nodes"] if n["pool"] == "a100"]}
    jobs, allocations, gpus, events = [], [], [], []
    mu = math.log(MEAN_DURATION_S) - 0.5
    generation = 0
    for pk in range(1, count + 1):
        size = pages.pick(rng, pages.SIZES)
        gpu_type = "H100-80GB" if rng.random() < 0.75 or size > 32 else "A100-40GB"
        duration = min(48 * 3600.0, max(60.0, rng.lognormvariate(mu, 1.0)))
        finished = now - timedelta(seconds=rng.random() * days * 86400)
        started = finished - timedelta(seconds=duration)
        team = fleet["teams"][rng.randrange(12)]
        state = pages.pick(rng, pages.FINISHED)
        preempted = rng.random() < PREEMPTED
        jobs.append({
            "id": pk, "team_id": team["team"].pk, "project_id": rng.choice(team["projects"]).pk,
            "submitter_id": rng.choice(team["members"]).pk, "name": f"job-{pk}",
            "priority_class_id": fleet["classes"]["research"].pk, "workload": "training", "gpus": size,
            "gpus_per_node": 8 if size >= 8 else None, "gpu_types": [gpu_type], "topology": "any",
            "runtime_limit_s": 3 * 86400, "checkpoint_interval_s": 1800, "command": "python train.py", "env": {},
            "roles": [], "state": state, "submitted_at": started - timedelta(seconds=rng.uniform(0, 600)),
            "started_at": started, "finished_at": finished, "state_changed_at": finished,
            "exit_code": 0 if state == "succeeded" else 1 if state == "failed" else None, "steps": 0,
            "useful_tokens": 0, "lost_gpu_seconds": 0.0, "preemption_count": int(preempted),
        })
        runs = [(started, finished)]
        if preempted:
            cut = started + (finished - started) / 2
            runs = [(started - (finished - started) / 2, cut), (cut, finished)]
        for bound, released in runs:
            generation += 1
            allocations.append({"id": generation, "job_id": pk, "generation": generation, "epoch": 1,
                                "state": "released", "created_at": bound, "started_at": bound,
                                "released_at": released, "release_reason": "finished"})
            held = rng.sample(nodes[gpu_type], max(1, size // 8))
            for node_id in held:
                for slot in range(min(size, 8)):
                    gpus.append({"allocation_id": generation, "node_id": node_id, "gpu_index": slot, "live": False})
            if size >= 16 and rng.random() < GANG_EXIT:
                events.append({"created_at": bound + (released - bound) * rng.uniform(0.5, 0.95),
                               "kind": "allocation.released", "actor": "agent", "reason": "MemberExited",
                               "message": "gang member exited", "job_id": pk, "team_id": team["team"].pk,
                               "allocation_id": generation, "node_id": held[-1], "data": {"gpus": 8}})
    pages.copy_rows(Job, jobs)
    pages.copy_rows(Allocation, allocations)
    pages.copy_rows(AllocationGpu, gpus)
    pages.copy_rows(Event, events)
    pages.reset_sequences(Job, Allocation, AllocationGpu, Event)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"jobs": count, "allocations": len(allocations), "gpu_rows": len(gpus), "gang_exits": len(events)}


def timed(work: Any, runs_into: list[float], queries_into: list[int]) -> Any:
    from django.db import connection

    queries: list[str] = []

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        t0 = time.perf_counter()
        result = work()
        runs_into.append((time.perf_counter() - t0) * 1000)
    queries_into.append(len(queries))
    return result


def measure(runs: int) -> tuple[dict[str, Any], bool]:
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.test import Client
    from django.utils import timezone

    from controlplane.models import Job
    from controlplane.services import job_costs, job_history

    now = timezone.now()
    ended = job_history.ended_jobs(Job.objects.all())
    def per_job() -> Decimal:
        """The page's total until 2 Dec 2026 (job_history.history_costs, then removed): the set's
        ids, every job priced by job_costs.jobs_costs 1,000 a call, the cents added up."""
        ids = list(ended.order_by().values_list("pk", flat=True))
        return sum((cost for start in range(0, len(ids), 1000)
                    for cost in job_costs.jobs_costs(ids[start:start + 1000], now).values()), Decimal("0.00"))

    def forgetting(work: Any) -> Any:
        """`work` timed with no cost remembered: the rows deleted, untimed, in a transaction rolled
        back after it."""
        def run(times_into: list[float], queries_into: list[int]) -> Any:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(f"DELETE FROM {job_costs.ENDED_JOB_COSTS}")
                result = timed(work, times_into, queries_into)
                transaction.set_rollback(True)
            return result
        return run

    def remembering(work: Any) -> Any:
        return lambda times_into, queries_into: timed(work, times_into, queries_into)

    t0 = time.perf_counter()
    remembered = 0
    while batch := job_costs.remember_ended_job_costs(now):
        remembered += batch
    remember_s = time.perf_counter() - t0
    idle: list[float] = []  # a run of the task with nothing new to remember: what it costs every minute
    for _ in range(3):
        t1 = time.perf_counter()
        assert job_costs.remember_ended_job_costs(now) == 0
        idle.append((time.perf_counter() - t1) * 1000)
    ways = {
        "before (jobs_costs, 1,000 a call)": forgetting(per_job),
        "one query, nothing remembered": forgetting(lambda: job_costs.jobs_total_cost(ended, now)),
        "one query, ended jobs' costs remembered": remembering(lambda: job_costs.jobs_total_cost(ended, now)),
    }
    times: dict[str, list[float]] = {way: [] for way in ways}
    queries: dict[str, list[int]] = {way: [] for way in ways}
    totals: dict[str, set[Decimal]] = {way: set() for way in ways}
    for work in ways.values():  # warm
        work([], [])
    for _ in range(runs):
        for way, work in ways.items():
            totals[way].add(work(times[way], queries[way]))
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    # the whole set as CSV (every row's cost, 1,000 jobs a chunk), nothing remembered and remembered
    csv_ways = {
        "CSV download, nothing remembered": forgetting(lambda: b"".join(client.get("/history.csv").streaming_content)),
        "CSV download, remembered": remembering(lambda: b"".join(client.get("/history.csv").streaming_content)),
    }
    csv_times: dict[str, list[float]] = {way: [] for way in csv_ways}
    csv_totals: dict[str, set[Decimal]] = {way: set() for way in csv_ways}
    for _ in range(min(runs, 2)):
        for way, work in csv_ways.items():
            body = work(csv_times[way], [])
            csv_totals[way].add(Decimal(body.decode().rstrip("\n").rsplit("\n", 1)[-1].rsplit(",", 1)[-1]))
    page: list[float] = []
    page_queries: list[int] = []
    assert client.get("/history/").status_code == 200
    for _ in range(runs):
        response = timed(lambda: client.get("/history/"), page, page_queries)
        assert response.status_code == 200
    shown = Decimal(re.search(r'data-cost-usd="([\d.]+)"', response.content.decode()).group(1))
    result: dict[str, Any] = {way: {"p50_ms": statistics.median(times[way]), "min_ms": min(times[way]), "max_ms": max(times[way]),
                    "queries": max(queries[way]), "total": sorted(totals[way])} for way in ways}
    for way in csv_ways:
        result[way] = {"p50_ms": statistics.median(csv_times[way]), "min_ms": min(csv_times[way]),
                       "max_ms": max(csv_times[way]), "queries": 0, "total": sorted(csv_totals[way])}
    result["remembered"] = {"jobs": remembered, "seconds": remember_s, "idle_ms": statistics.median(idle)}
    result["page"] = {"p50_ms": statistics.median(page), "min_ms": min(page), "max_ms": max(page),
                      "queries": max(page_queries), "total": [shown]}
    same = len({t for way in ways for t in totals[way]} | {t for way in csv_ways for t in csv_totals[way]}
               | {shown}) == 1
    return result, same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[20_000, 50_000])
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql":
        raise SystemExit("bench/history_cost.py needs PostgreSQL; run it under scripts/test-services.sh")
    call_command("migrate", verbosity=0)
    ok = True
    for count in args.jobs:
        t0 = time.perf_counter()
        data = build(count, args.days, args.seed)
        built_s = time.perf_counter() - t0
        loads = [os.getloadavg()[0]]
        result, same = measure(args.runs)
        loads.append(os.getloadavg()[0])
        ok &= same
        print(f"\n{data['jobs']:,} ended jobs over {args.days} days: {data['allocations']:,} allocations, "
              f"{data['gpu_rows']:,} GPU rows, {data['gang_exits']:,} gang exits (built in {built_s:.0f} s); "
              f"load average {' → '.join(f'{x:.1f}' for x in loads)}; {args.runs} runs each, alternated")
        kept = result.pop("remembered")
        print(f"remembering every ended job's cost (qm.accounting.remember_job_costs' work, once): "
              f"{kept['jobs']:,} jobs in {kept['seconds']:.1f} s; a run with nothing new {kept['idle_ms']:.0f} ms")
        print(f"{'the set total cost':40s} {'p50 ms':>8s} {'min ms':>8s} {'max ms':>8s} {'queries':>8s}  total $")
        for way, r in result.items():
            label = "/history/ page (admin), remembered" if way == "page" else way
            print(f"{label:40s} {r['p50_ms']:8.1f} {r['min_ms']:8.1f} {r['max_ms']:8.1f} {r['queries']:8d}  "
                  f"{', '.join(str(t) for t in r['total'])}")
        print(f"totals {'the same to the cent' if same else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
