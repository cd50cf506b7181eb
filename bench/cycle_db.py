"""Cycle time with PostgreSQL in the loop: 10,000 GPUs, 5,000 pending, p50 and p95.

    scripts/test-services.sh .venv/bin/python bench/cycle_db.py [--json] [--cycles 30]

The fleet and queue are the engine benchmark's (`scheduler_core.bench.build_snapshot`:
1,250 nodes × 8 GPUs of two types under 40 leaf switches, 8 teams in two cohorts with quotas,
4 priority classes, 2,000 running jobs, 5,000 pending of the seed's size mix plus 128-GPU gangs),
written into PostgreSQL as rows. Each measured cycle is `services.cycle.run_cycle` whole:
lease, snapshot read, engine, fenced commit (binds, stops, every waiting job's explanation,
fleet sample, usage decay). Between cycles the fleet moves as it would: 1 % of running jobs end
and stopped jobs' agents confirm, so every cycle has work to commit. The first cycle (the whole
queue explained for the first time) is reported apart.

Besides wall time (p50, p95 of the cycle, its snapshot read, engine and commit) it reports what
the machine's load does not blur: this process's CPU time per cycle, and the rows each cycle
wrote per table (PostgreSQL's own counters: updates, of which HOT, and inserts).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plane import machine, prepare_database  # noqa: E402


def load_fleet(gpus: int, pending: int, running: int) -> int:
    """Write the engine benchmark's snapshot into the database. Returns total GPUs."""
    from django.db import transaction
    from django.utils import timezone

    from controlplane.models import (
        Allocation,
        AllocationGpu,
        Cohort,
        GpuType,
        Job,
        Node,
        PriorityClass,
        Quota,
        SchedulerLease,
        Team,
    )
    from scheduler_core.bench import COHORT_OF, build_snapshot

    snapshot = build_snapshot(gpus, pending, running)
    now = timezone.now()

    def at(seconds: float):  # engine time → wall time, keeping "how long ago"
        return now - timedelta(seconds=snapshot.now - seconds)

    with transaction.atomic():
        types = {g.name: GpuType.objects.create(name=g.name, memory_gb=g.memory_gb, relative_throughput=g.throughput)
                 for g in snapshot.gpu_types}
        classes = {p.name: PriorityClass.objects.create(
            name=p.name, value=p.value, preemptible=p.preemptible, may_preempt_lower=p.may_preempt_lower,
            grace_period_s=p.grace_period_s, min_runtime_s=p.min_runtime_s, preemption_budget=p.preemption_budget,
            budget_window_s=p.budget_window_s, max_runtime_limit_s=30 * 86400) for p in snapshot.priority_classes}
        cohorts = {name: Cohort.objects.create(name=name) for name in sorted(set(COHORT_OF.values()))}
        usage = {u.team: u for u in snapshot.team_usage}
        teams = {name: Team.objects.create(name=name, cohort=cohorts[cohort],
                                           decayed_gpu_seconds=usage[name].gpu_seconds if name in usage else 0.0,
                                           usage_as_of=now)
                 for name, cohort in COHORT_OF.items()}
        for q in snapshot.quotas:
            Quota.objects.create(team=teams[q.team], gpu_type=types[q.gpu_type], nominal_gpus=q.nominal_gpus,
                                 borrowing_limit=q.borrowing_limit, lending_limit=q.lending_limit)
        nodes = {n.name: n for n in Node.objects.bulk_create([
            Node(name=n.name, pool=n.pool, gpu_type=types[n.gpu_type], gpu_count=n.gpus, cpus=n.cpus,
                 memory_gb=n.memory_gb, leaf_switch=n.leaf, spine=n.spine, capacity_tier=n.capacity_tier,
                 last_heartbeat_at=now, agent_lease_expires_at=now + timedelta(days=1), simulated=True)
            for n in snapshot.nodes])}

        def job_row(spec, state: str) -> Job:  # type: ignore[no-untyped-def]
            return Job(
                team=teams[spec.team], priority_class=classes[spec.priority_class], name=spec.id,
                workload=spec.workload.value, gpus=spec.gpus, gpus_per_node=spec.gpus_per_node,
                gpu_types=list(spec.gpu_types), min_gpu_memory_gb=spec.min_gpu_memory_gb,
                cpus_per_gpu=spec.cpus_per_gpu, memory_gb_per_gpu=spec.memory_gb_per_gpu,
                topology=spec.topology.value, min_gpus=spec.min_gpus, max_gpus=spec.max_gpus,
                runtime_limit_s=int(spec.runtime_limit_s or 3600),
                checkpoint_interval_s=int(spec.checkpoint_interval_s) if spec.checkpoint_interval_s else None,
                state=state, submitted_at=at(spec.submitted_at), state_changed_at=at(spec.submitted_at),
            )

        running_jobs = Job.objects.bulk_create([job_row(r.spec, "running") for r in snapshot.running], batch_size=2000)
        allocations = Allocation.objects.bulk_create([
            Allocation(job=job, generation=i + 1, epoch=1, created_at=at(r.started_at), started_at=at(r.started_at),
                       borrowed=r.borrowed)
            for i, (job, r) in enumerate(zip(running_jobs, snapshot.running, strict=True))
        ], batch_size=2000)
        AllocationGpu.objects.bulk_create([
            AllocationGpu(allocation=a, node=nodes[p.node], gpu_index=g, live=True)
            for a, r in zip(allocations, snapshot.running, strict=True) for p in r.placements for g in p.gpu_indices
        ], batch_size=5000)
        Job.objects.bulk_create([job_row(spec, "pending") for spec in snapshot.pending], batch_size=2000)
        SchedulerLease.objects.create(name="scheduler", generation_counter=len(allocations))
    return sum(n.gpus for n in snapshot.nodes)


def churn(rng: random.Random, fraction: float) -> int:
    """Some running jobs end, and agents confirm every stop the last cycle signalled."""
    from django.utils import timezone

    from controlplane.models import Allocation
    from controlplane.services import transitions

    now = timezone.now()
    ended = 0
    for pk in Allocation.objects.filter(state="releasing").values_list("pk", flat=True):
        transitions.complete_release(pk, exit_code=-15, at=now, actor="bench")
    active = list(Allocation.objects.filter(state="active").values_list("pk", flat=True))
    for pk in rng.sample(active, int(len(active) * fraction)):
        ended += transitions.complete_release(pk, exit_code=0, at=now, actor="bench")
    return ended


WRITTEN_TABLES = ("controlplane_job", "controlplane_pendingplace", "controlplane_event")


def table_rows() -> dict[str, tuple[int, int, int]]:
    """PostgreSQL's counters of rows updated, HOT-updated and inserted, per table, with this
    backend's pending counts flushed first."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:  # idle in between: the counts are flushed
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT relname, n_tup_upd, n_tup_hot_upd, n_tup_ins FROM pg_stat_user_tables")
        return {name: (upd, hot, ins) for name, upd, hot, ins in cursor.fetchall()}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--pending", type=int, default=5_000)
    parser.add_argument("--running", type=int, default=2_000)
    parser.add_argument("--cycles", type=int, default=30)
    args = parser.parse_args()
    before = machine()
    prepare_database("qm_bench_cycle")

    from django.db import connection

    from controlplane.models import Job
    from controlplane.services import cycle

    total_gpus = load_fleet(args.gpus, args.pending, args.running)
    rng = random.Random(11)
    first = cycle.run_cycle("bench")
    start_rows = table_rows()
    totals: list[float] = []
    plans: list[float] = []
    reads: list[float] = []
    commits: list[float] = []
    cpu: list[float] = []
    binds = stops = 0
    churned: dict[str, tuple[int, int, int]] = {}
    rows_before: dict[str, tuple[int, int, int]] = {}
    for _ in range(args.cycles):
        before_churn = table_rows()
        churn(rng, 0.01)
        after_churn = table_rows()  # what the churn wrote is not the cycle's
        for table, counts in after_churn.items():
            old = churned.get(table, (0, 0, 0))
            churned[table] = tuple(o + a - b for o, a, b in zip(old, counts, before_churn.get(table, counts),
                                                                strict=True))  # type: ignore[assignment]
        started, cpu_started = time.perf_counter(), time.process_time()
        result = cycle.run_cycle("bench")
        totals.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
        plans.append(result.plan_ms)
        reads.append(getattr(result, "read_ms", 0.0))
        commits.append(getattr(result, "commit_ms", 0.0))
        binds += result.binds
        stops += result.stops
    pending_now = Job.objects.filter(state="pending").count()
    rows_before = {table: tuple(s + c for s, c in zip(counts, churned.get(table, (0, 0, 0)), strict=True))
                   for table, counts in start_rows.items()}
    written = {table: {k: round((after - before) / args.cycles, 1) for k, after, before in
                       zip(("updated", "hot_updated", "inserted"), counts, rows_before.get(table, (0, 0, 0)),
                           strict=True)}
               for table, counts in table_rows().items() if table in WRITTEN_TABLES}
    connection.close()
    result = {
        "benchmark": "cycle_time_with_postgresql",
        "gpus": total_gpus, "pending_at_start": args.pending, "running_at_start": args.running,
        "pending_at_end": pending_now,
        "first_cycle_ms": round(first.total_ms, 1), "first_cycle_binds": first.binds, "first_cycle_stops": first.stops,
        "cycles": args.cycles,
        "cycle_ms_p50": round(pct(totals, 0.5), 1), "cycle_ms_p95": round(pct(totals, 0.95), 1),
        "engine_ms_p50": round(pct(plans, 0.5), 1), "engine_ms_p95": round(pct(plans, 0.95), 1),
        "read_ms_p50": round(pct(reads, 0.5), 1), "read_ms_p95": round(pct(reads, 0.95), 1),
        "commit_ms_p50": round(pct(commits, 0.5), 1),
        "cycle_cpu_ms_p50": round(pct(cpu, 0.5), 1),
        "rows_written_per_cycle": written,
        "binds_per_cycle": round(binds / args.cycles, 1), "stops_per_cycle": round(stops / args.cycles, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        **before,
    }
    print(json.dumps(result) if args.json else "\n".join(f"{k:>20}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
