"""Node page benchmark: a busy node's tiers over 6 hours, 24 hours, 7 and 30 days, read sample by
sample (before) and from its hourly activity rows (now), side by side, on PostgreSQL.

    flock /tmp/qm-bench.lock scripts/test-services.sh .venv/bin/python bench/node_page.py \
        [--nodes 4] [--every 10] [--runs 10] [--json]

1. A fresh database (bench/plane.py's prepare_database) gets one priced H100 type, a team and
   `--nodes` nodes of 8 GPUs.
2. Every GPU of every node runs a one-GPU job a day for a week and an hour (a new allocation at
   each day's turn; the last ones still live), its agent reporting every `--every` seconds at
   its own offset, activity drawn per job between 0.2 and 0.9: with 10 s, 483,840 samples on a
   node over the week, ~1.9 million in the table over four nodes. Written with COPY. The jobs'
   hour and day rollup rows (productive = 80 % of active) are what the productive tier reads.
3. The accounting cursor as a run leaves it (rolled to the last minute), and the nodes' hourly
   activity rows folded by `node_activity.fold_node_activity` — the very function the accounting
   run calls — from every sample but the last two minutes' (those arrive after the fold, as
   between two runs: the page reads them from the samples). The fold of the whole backlog and
   of one minute's samples are timed too. ANALYZE.
4. For each window ending now (as the page asks; 30 days is cut to the raw retention's 7 days
   from UTC midnight, in day buckets): `services.node_tiers.node_tiers` for the first
   node, sample by sample (`hourly=False`, the code before) and from the hourly rows, alternated,
   `--runs` times after a warm-up each: median and max ms, queries, and the largest difference
   between the two paths' figures (totals, buckets, GPUs; GPU-seconds). Then the whole page
   (GET /nodes/<name>/?window=…, Django's test client, in process, as admin) with the hourly rows.
Goal: ≤ 300 ms for a week, aimed < 120 ms; exit status 1 when the week's median misses 300 ms or
the two paths disagree by more than 0.01 GPU-second anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plane import machine, prepare_database  # noqa: E402

GOAL_MS = 300.0
AIM_MS = 120.0
TOLERANCE = Decimal("0.01")
GPUS = 8
WINDOWS = (("6 hours", "6h", timedelta(hours=6)), ("24 hours", "24h", timedelta(hours=24)),
           ("7 days", "7d", timedelta(days=7)), ("30 days", "30d", timedelta(days=30)))  # 30: cut to the retention
TIERS = ("capacity", "allocated", "active", "productive")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--every", type=int, default=10, help="seconds between an agent's samples")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true")
    p.add_argument("--profile", action="store_true", help="print where a 7-day read spends its time, per query")
    return p.parse_args(argv)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def copy_samples(rows: list[tuple[Any, ...]]) -> None:
    from django.db import connection

    from controlplane.models import UsageSample

    table = UsageSample._meta.db_table
    cols = "allocation_id, job_id, node_id, started_at, ended_at, gpus, gpu_activity, steps, useful_tokens"
    with connection.cursor() as cursor, cursor.cursor.copy(f'COPY "{table}" ({cols}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row(row)


def build(args: argparse.Namespace, now: Any) -> dict[str, Any]:
    """The fleet, its week of samples (all but the last two minutes') and the jobs' hour rows."""
    from django.contrib.auth import get_user_model

    from controlplane.choices import AllocationState, CapacityTier, JobState
    from controlplane.models import (
        Allocation,
        AllocationGpu,
        GpuType,
        Job,
        Membership,
        Node,
        PriceRate,
        PriorityClass,
        Team,
        UsageRollup,
    )
    from controlplane.services.usage_tiers import floor_to

    rng = random.Random(args.seed)
    users = get_user_model()
    admin = users.objects.create_superuser("admin", password="admin")
    Membership.objects.create(user=admin, team=None, role="admin")
    gpu_type = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    PriceRate.objects.create(gpu_type=gpu_type, capacity_tier=CapacityTier.RESERVED, usd_per_gpu_hour=Decimal("2.5"),
                             effective_from=now - timedelta(days=30))
    pc = PriorityClass.objects.create(name="research", value=500)
    team = Team.objects.create(name="vision", default_priority_class=pc)
    nodes = [Node.objects.create(name=f"h100-{i:02d}", gpu_type=gpu_type, pool="h100", gpu_count=GPUS, cpus=96,
                                 memory_gb=1024, leaf_switch="leaf-1", spine="spine-1",
                                 capacity_tier=CapacityTier.RESERVED) for i in range(args.nodes)]
    start = floor_to(now - timedelta(days=7), 3600) - timedelta(hours=1)
    cut = floor_to(now, 60) - timedelta(minutes=2)  # samples after this arrive after the fold
    early, late, rollups = [], [], []
    generation = 0
    for n in nodes:
        day = start
        while day < now:
            until = day + timedelta(days=1)
            live = until > now
            for g in range(GPUS):
                generation += 1
                job = Job.objects.create(team=team, priority_class=pc, name=f"{n.name}-{generation}", gpus=1,
                                         runtime_limit_s=2 * 86400, state=JobState.RUNNING if live else JobState.SUCCEEDED,
                                         submitted_at=day, state_changed_at=day, started_at=day)
                allocation = Allocation.objects.create(
                    job=job, generation=generation, epoch=1, created_at=day, started_at=day,
                    state=AllocationState.ACTIVE if live else AllocationState.RELEASED,
                    released_at=None if live else until)
                AllocationGpu.objects.create(allocation=allocation, node=n, gpu_index=g, live=live)
                activity = round(rng.uniform(0.2, 0.9), 3)
                end = min(until, now)
                t = day + timedelta(seconds=(g * 1.37) % args.every)  # agents report at their own offsets
                step = timedelta(seconds=args.every)
                while t < end:
                    e = min(t + step, end)
                    (early if e <= cut else late).append(
                        (allocation.pk, job.pk, n.pk, t, e, 1, activity, 10 * args.every, 0))
                    t = e
                hour, days = day, defaultdict(int)
                while hour < end:
                    days[floor_to(hour, 86400)] += 1
                    hour += timedelta(hours=1)
                # an hour row per hour it ran and a day row per UTC day (their sums), as the accounting keeps
                for bucket, at, hours in [*((3600, day + timedelta(hours=h), 1) for h in range(sum(days.values()))),
                                          *((86400, d, n) for d, n in days.items())]:
                    active = Decimal(3600 * hours * activity).quantize(Decimal("0.000001"))
                    rollups.append(UsageRollup(
                        bucket=bucket, start=at, job=job, team=team, priority_class=pc, gpu_type=gpu_type,
                        capacity_tier=CapacityTier.RESERVED, allocated_gpu_seconds=3600 * hours,
                        active_gpu_seconds=active,
                        productive_gpu_seconds=(active * Decimal("0.8")).quantize(Decimal("0.000001")),
                        reported_gpu_seconds=3600 * hours))
            day = until
        log(f"{n.name}: {len(early) + len(late):,} samples so far")
    UsageRollup.objects.bulk_create(rollups, batch_size=5000)
    for chunk in range(0, len(early), 200_000):
        copy_samples(early[chunk:chunk + 200_000])
    return {"nodes": nodes, "late": late, "cut": cut, "start": start, "samples": len(early) + len(late),
            "allocations": generation, "hour_rows": len(rollups)}


def fold(late: list[tuple[Any, ...]], now: Any) -> dict[str, Any]:
    """The cursor as a run leaves it; the backlog folded, then the last two minutes' samples
    arrive (one minute of them folded on its own, timed, then left unfolded for the page)."""
    from django.db import connection, transaction
    from django.db.models import Max

    from controlplane.models import AccountingCursor, NodeActivityRollup, UsageSample
    from controlplane.services.node_activity import fold_node_activity
    from controlplane.services.usage_tiers import floor_to

    top = UsageSample.objects.aggregate(m=Max("id"))["m"]
    cursor, _ = AccountingCursor.objects.get_or_create(name="usage")
    started, runs = time.perf_counter(), 0
    while cursor.last_node_sample_id < top:
        with transaction.atomic():
            fold_node_activity(cursor, top)
        runs += 1
    backlog_ms = (time.perf_counter() - started) * 1000
    rows = NodeActivityRollup.objects.count()
    # one minute's samples of the fleet, folded as a steady run would
    minute = [r for r in late if r[3] < late[0][3] + timedelta(minutes=1)] if late else []
    copy_samples(minute)
    top2 = UsageSample.objects.aggregate(m=Max("id"))["m"]
    started = time.perf_counter()
    with transaction.atomic():
        written = fold_node_activity(cursor, top2)
    minute_ms = (time.perf_counter() - started) * 1000
    taken = set(minute)
    copy_samples([r for r in late if r not in taken])
    cursor.rolled_until, cursor.updated_at = floor_to(now, 60), now
    cursor.save()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"backlog_samples": top, "backlog_runs": runs, "backlog_fold_ms": round(backlog_ms),
            "hourly_rows": rows, "minute_samples": len(minute), "minute_fold_ms": round(minute_ms, 1),
            "minute_rows_written": written, "unfolded_samples": len(late) - len(minute)}


def differences(a: Any, b: Any) -> Decimal:
    """The largest gap between two NodeTiers' figures, in GPU-seconds."""
    gaps = [abs(getattr(a, t) - getattr(b, t)) for t in TIERS]
    gaps += [abs(getattr(x, t) - getattr(y, t)) for x, y in zip(a.buckets, b.buckets, strict=True) for t in TIERS]
    gaps += [abs(getattr(x, t) - getattr(y, t)) for x, y in zip(a.gpus, b.gpus, strict=True) for t in TIERS]
    assert len(a.buckets) == len(b.buckets) and len(a.gpus) == len(b.gpus)
    return max(gaps)


def time_tiers(node: Any, runs: int, now: Any) -> list[dict[str, Any]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from controlplane.services.node_tiers import node_tiers

    out = []
    for label, _, span in WINDOWS:
        times: dict[bool, list[float]] = {False: [], True: []}
        results: dict[bool, Any] = {}
        queries: dict[bool, int] = {}
        for i in range(runs + 1):
            for hourly in (False, True):
                with CaptureQueriesContext(connection) as q:
                    started = time.perf_counter()
                    results[hourly] = node_tiers(node, now - span, now, now, hourly=hourly)
                    ms = (time.perf_counter() - started) * 1000
                queries[hourly] = len(q)
                if i:  # the first is a warm-up
                    times[hourly].append(ms)
        t = results[True]
        out.append({
            "window": label, "bucket_s": t.bucket,
            "samples_median_ms": round(statistics.median(times[False]), 1), "samples_max_ms": round(max(times[False]), 1),
            "hourly_median_ms": round(statistics.median(times[True]), 1), "hourly_max_ms": round(max(times[True]), 1),
            "queries": [queries[False], queries[True]],
            "max_difference_gpu_s": str(differences(results[False], t)),
            "shares": {x: round(t.share(x) or 0, 4) for x in ("allocated", "active", "productive")},
        })
    return out


def time_page(node: Any, runs: int) -> list[dict[str, Any]]:
    """The whole page, as admin: its tiers read sample by sample (the view's node_tiers swapped
    for hourly=False, as before) and from the hourly rows, alternated."""
    from functools import partial

    from django.contrib.auth import get_user_model
    from django.test import Client

    from controlplane.services.node_tiers import node_tiers
    from frontend.views import nodes as view

    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    out = []
    for label, key, _ in WINDOWS:
        times: dict[bool, list[float]] = {False: [], True: []}
        for i in range(runs + 1):
            for hourly in (False, True):
                view.node_tiers = partial(node_tiers, hourly=hourly)  # type: ignore[assignment]
                started = time.perf_counter()
                response = client.get(f"/nodes/{node.name}/?window={key}")
                ms = (time.perf_counter() - started) * 1000
                assert response.status_code == 200, response.status_code
                if i:
                    times[hourly].append(ms)
        view.node_tiers = node_tiers
        out.append({"window": label, **{f"{'hourly' if h else 'samples'}_{k}_ms": round(f(times[h]), 1)
                                         for h in (False, True) for k, f in (("median", statistics.median),
                                                                              ("max", max))}})
    return out


def explain(node: Any, now: Any) -> list[str]:
    """The 7-day hourly read's plan (its grouped samples and rows query), top lines."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from controlplane.services.node_tiers import node_tiers

    with CaptureQueriesContext(connection) as q:
        node_tiers(node, now - timedelta(days=7), now, now)
    [sql] = [x["sql"] for x in q.captured_queries if "UNION ALL" in x["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        return [r[0] for r in cursor.fetchall()]


def profile(node: Any, now: Any) -> None:
    """Each query of a 7-day read with its time, then the Python functions' cumulative times."""
    import cProfile
    import pstats

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from controlplane.services.node_tiers import node_tiers

    for hourly in (False, True):
        with CaptureQueriesContext(connection) as q:
            started = time.perf_counter()
            node_tiers(node, now - timedelta(days=7), now, now, hourly=hourly)
            total = (time.perf_counter() - started) * 1000
        print(f"7 days, hourly={hourly}: {total:.1f} ms, of which queries:")
        for x in q.captured_queries:
            print(f"  {float(x['time']) * 1000:8.1f} ms  {x['sql'][:110]}")
    profiler = cProfile.Profile()
    profiler.enable()
    node_tiers(node, now - timedelta(days=7), now, now)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    before = machine()
    prepare_database("qm_bench_node_page")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    from django.conf import settings
    from django.utils import timezone

    if "testserver" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS.append("testserver")
    now = timezone.now()
    started = time.perf_counter()
    built = build(args, now)
    folded = fold(built.pop("late"), now)
    log(f"built in {time.perf_counter() - started:.0f} s: {built['samples']:,} samples, "
        f"{folded['hourly_rows']:,} hourly rows")
    node = built["nodes"][0]
    tiers = time_tiers(node, args.runs, now)
    page = time_page(node, args.runs)
    plan = explain(node, now)
    if args.profile:
        profile(node, now)
    load1, load5, _ = os.getloadavg()
    summary = {
        "nodes": args.nodes, "samples": built["samples"], "samples_per_node": built["samples"] // args.nodes,
        "every_s": args.every, "allocations": built["allocations"], "job_hour_rows": built["hour_rows"],
        "fold": folded, "tiers": tiers, "page": page, "plan": plan,
        "machine": {**before, "load_avg_1m_after": round(load1, 2), "load_avg_5m_after": round(load5, 2)},
    }
    week = next(t for t in tiers if t["window"] == "7 days")
    met = week["hourly_median_ms"] <= GOAL_MS and all(Decimal(t["max_difference_gpu_s"]) <= TOLERANCE for t in tiers)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        m = summary["machine"]
        print(f"{args.nodes} nodes × {GPUS} GPUs, a sample every {args.every} s: {built['samples']:,} samples "
              f"({summary['samples_per_node']:,} a node), {folded['hourly_rows']:,} hourly rows; "
              f"load average {m['load_avg_1m_before']} → {m['load_avg_1m_after']} on {m['cpus']} CPUs")
        print(f"fold: the backlog ({folded['backlog_samples']:,} samples) {folded['backlog_fold_ms']} ms in "
              f"{folded['backlog_runs']} run(s); one minute ({folded['minute_samples']} samples, "
              f"{folded['minute_rows_written']} rows) {folded['minute_fold_ms']} ms; "
              f"{folded['unfolded_samples']} samples left unfolded for the page")
        print(f"{'window':>9} {'bucket':>6}  {'samples ms (med / max)':>23}  {'hourly ms (med / max)':>22}  "
              f"{'queries':>7}  {'max diff GPU-s':>14}")
        for t in tiers:
            print(f"{t['window']:>9} {t['bucket_s']:>6}  {t['samples_median_ms']:>11} / {t['samples_max_ms']:<9}  "
                  f"{t['hourly_median_ms']:>10} / {t['hourly_max_ms']:<9}  {t['queries'][0]}/{t['queries'][1]:<5}  "
                  f"{t['max_difference_gpu_s']:>14}")
        print("the whole page, as admin (GET /nodes/<name>/?window=…):")
        for p in page:
            print(f"{p['window']:>9}         {p['samples_median_ms']:>11} / {p['samples_max_ms']:<9}  "
                  f"{p['hourly_median_ms']:>10} / {p['hourly_max_ms']:<9}")
        print("7-day read, EXPLAIN ANALYZE:")
        print("\n".join("  " + line for line in plan))
        print(f"goal: 7 days ≤ {GOAL_MS:.0f} ms (aim < {AIM_MS:.0f}): {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
