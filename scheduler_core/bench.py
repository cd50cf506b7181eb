"""Cycle benchmark: full ``schedule()`` cycles on a large synthetic fleet.

    python -m scheduler_core.bench --json            # 10,000 GPUs, 5,000 pending, 2,000 running
    python -m scheduler_core.bench --json --sweep    # 1k / 10k / 50k GPUs, each in its own process
    python -m scheduler_core.bench --json --full     # the default, then the same fleet FULL

The fleet (deterministic, seeded RNG): nodes of 8 GPUs; two GPU types (``a100-40gb`` on the
first 40 % of nodes, ``h100-80gb`` on the rest); three-level topology, 32 nodes per leaf switch
and 8 leaves per spine; 8 teams in two cohorts with nominal quotas per team and type; four
priority classes. Running jobs (about 75 % of the GPUs) are placed first, small jobs best fit
and jobs of 8+ GPUs on whole nodes inside one leaf when they can; then the queue is drawn: the
seed's size mix plus 128-GPU gangs, with type and memory constraints, same-leaf gangs,
elastic jobs and serving replicas. Every cycle runs on a fresh snapshot one second later, so
aging and decay move. Printed: ``gpus, pending, running, cycle_ms_p50, cycle_ms_p95,
peak_rss_mb`` plus what the plans did; p95 is the seed's index rule (``sorted[int(0.95 n)]``).

``--maintenance`` adds the default fleet with maintenance windows on 7.5 % of its nodes
(``scenario: "maintenance"``), one upcoming, one in progress.

``--full`` adds the control loop's steady state (``scenario: "full"``): the same snapshot after
one cycle's plan has been applied (binds become running jobs started at that cycle, preempted
jobs are terminating, resizes take effect), so about 99 % of the GPUs are held and the waiting
jobs' preemption searches walk a full fleet; ``max_placement_attempts`` is the loop's 4,096
(``QM_MAX_PLACEMENTS_PER_CYCLE``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import resource
import subprocess
import sys
import time
from collections.abc import Sequence

from scheduler_core.types import (
    GpuPlacement,
    GpuTypeInfo,
    JobSpec,
    MaintenanceWindow,
    NodeInfo,
    Plan,
    PriorityClassInfo,
    QuotaInfo,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TeamUsage,
    TopologyConstraint,
    WorkloadClass,
)

GPUS_PER_NODE = 8
NODES_PER_LEAF = 32
LEAVES_PER_SPINE = 8
GPU_TYPES = (GpuTypeInfo("a100-40gb", 40, 1.0), GpuTypeInfo("h100-80gb", 80, 2.0))
TEAMS = ("vision", "speech", "nlp", "robotics", "search", "ads", "infra", "research")
COHORT_OF = {team: ("labs" if index < 4 else "product") for index, team in enumerate(TEAMS)}
PRIORITY_CLASSES = (
    PriorityClassInfo("serving", 1000, preemptible=False, grace_period_s=60),
    PriorityClassInfo("interactive", 500, grace_period_s=30, min_runtime_s=600),
    PriorityClassInfo("training", 100, grace_period_s=120, min_runtime_s=1800),
    PriorityClassInfo("batch", 10, grace_period_s=30),
)
RUNNING_SIZES = ((1, 0.40), (2, 0.20), (4, 0.20), (8, 0.15), (16, 0.04), (32, 0.01))
PENDING_SIZES = ((1, 0.30), (2, 0.15), (4, 0.20), (8, 0.15), (16, 0.10), (32, 0.06), (64, 0.03), (128, 0.01))
NOW = 1_000_000.0
HOUR = 3600.0


def _draw(rng: random.Random, table: Sequence[tuple[int, float]]) -> int:
    return rng.choices([size for size, _ in table], weights=[weight for _, weight in table])[0]


def build_nodes(gpus: int) -> tuple[NodeInfo, ...]:
    count = max(1, gpus // GPUS_PER_NODE)
    split = int(count * 0.4)
    nodes = []
    for index in range(count):
        gpu_type = GPU_TYPES[0] if index < split else GPU_TYPES[1]
        leaf = index // NODES_PER_LEAF
        nodes.append(
            NodeInfo(
                name=f"node-{index:05d}",
                pool=gpu_type.name,
                gpu_type=gpu_type.name,
                gpus=GPUS_PER_NODE,
                cpus=128,
                memory_gb=1024,
                leaf=f"leaf-{leaf:04d}",
                spine=f"spine-{leaf // LEAVES_PER_SPINE:03d}",
                failure_domain=f"rack-{index // 4:05d}",
            )
        )
    return tuple(nodes)


def build_quotas(nodes: Sequence[NodeInfo]) -> tuple[QuotaInfo, ...]:
    per_type: dict[str, int] = {}
    for node in nodes:
        per_type[node.gpu_type] = per_type.get(node.gpu_type, 0) + node.gpus
    quotas = []
    for gpu_type, total in sorted(per_type.items()):
        share = total // len(TEAMS)
        for team in TEAMS:
            quotas.append(QuotaInfo(team, gpu_type, share, borrowing_limit=share, lending_limit=None, cohort=COHORT_OF[team]))
    return tuple(quotas)


class _Placer:
    """Places the synthetic running jobs without double-booking (best fit / whole nodes)."""

    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        self.nodes = nodes
        self.free = {node.name: list(range(node.gpus)) for node in nodes}
        self.whole_by_leaf: dict[tuple[str, str], list[str]] = {}
        for node in nodes:
            self.whole_by_leaf.setdefault((node.gpu_type, node.leaf), []).append(node.name)
        self.partial: dict[str, dict[int, list[str]]] = {t.name: {} for t in GPU_TYPES}

    def whole(self, gpu_type: str, count: int) -> tuple[GpuPlacement, ...] | None:
        best: list[str] | None = None
        for (kind, _leaf), names in self.whole_by_leaf.items():
            if kind == gpu_type and len(names) >= count:
                best = names
                break
        if best is None:
            return None
        taken, best[:] = best[:count], best[count:]
        placements = []
        for name in taken:
            placements.append(GpuPlacement(name, tuple(self.free[name])))
            self.free[name] = []
        return tuple(placements)

    def small(self, gpu_type: str, gpus: int) -> tuple[GpuPlacement, ...] | None:
        buckets = self.partial[gpu_type]
        for free in range(gpus, GPUS_PER_NODE):
            if buckets.get(free):
                name = buckets[free].pop()
                return (self._take(name, gpus, gpu_type),)
        for (kind, _leaf), names in self.whole_by_leaf.items():
            if kind == gpu_type and names:
                return (self._take(names.pop(), gpus, gpu_type),)
        return None

    def _take(self, name: str, gpus: int, gpu_type: str) -> GpuPlacement:
        indices, self.free[name] = self.free[name][:gpus], self.free[name][gpus:]
        left = len(self.free[name])
        if left:
            self.partial[gpu_type].setdefault(left, []).append(name)
        return GpuPlacement(name, tuple(indices))


def _job(rng: random.Random, job_id: str, gpus: int, submitted_at: float) -> JobSpec:
    team = rng.choice(TEAMS)
    roll = rng.random()
    priority = "serving" if roll < 0.05 else "interactive" if roll < 0.15 else "training" if roll < 0.7 else "batch"
    workload = {
        "serving": WorkloadClass.SERVING,
        "interactive": WorkloadClass.INTERACTIVE,
        "training": WorkloadClass.TRAINING,
        "batch": WorkloadClass.BATCH,
    }[priority]
    gpu_types: tuple[str, ...] = ()
    memory = 0
    shape = rng.random()
    if shape < 0.2:
        gpu_types = (GPU_TYPES[1].name,)
    elif shape < 0.3:
        memory = 60
    topology = TopologyConstraint.ANY
    if gpus >= 16 and rng.random() < 0.3:
        topology = TopologyConstraint.SAME_LEAF
    min_gpus = max_gpus = None
    per_node: int | None = None
    if workload is WorkloadClass.SERVING:
        per_node = min(gpus, rng.choice((1, 2)))
        gpus = per_node * rng.randint(2, 6)
    elif gpus >= 16 and rng.random() < 0.15:
        min_gpus, max_gpus = gpus // 2, gpus * 2
    return JobSpec(
        id=job_id,
        team=team,
        priority_class=priority,
        gpus=gpus,
        submitted_at=submitted_at,
        workload=workload,
        gpus_per_node=per_node,
        gpu_types=gpu_types,
        min_gpu_memory_gb=memory,
        cpus_per_gpu=rng.choice((4, 8, 12)),
        memory_gb_per_gpu=rng.choice((32, 64, 96)),
        topology=topology,
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        runtime_limit_s=rng.choice((1, 2, 4, 8, 24, 72)) * HOUR,
        checkpoint_interval_s=rng.choice((None, 900.0, 1800.0, 3600.0)),
        user=f"{team}-user{rng.randint(1, 12)}",
        restart_cost_s=rng.choice((60.0, 300.0)),
    )


def build_snapshot(gpus: int, pending: int, running: int, seed: int = 7) -> Snapshot:
    """The synthetic fleet and queue described in the module docstring."""
    rng = random.Random(seed)
    nodes = build_nodes(gpus)
    placer = _Placer(nodes)
    running_jobs: list[RunningJob] = []
    attempts = 0
    while len(running_jobs) < running and attempts < running * 4:
        attempts += 1
        size = _draw(rng, RUNNING_SIZES)
        gpu_type = GPU_TYPES[0].name if rng.random() < 0.4 else GPU_TYPES[1].name
        placements = placer.whole(gpu_type, size // GPUS_PER_NODE) if size >= GPUS_PER_NODE else placer.small(gpu_type, size)
        if placements is None:
            continue
        spec = _job(rng, f"run-{len(running_jobs):06d}", size, NOW - rng.uniform(2 * HOUR, 30 * HOUR))
        spec = dataclasses.replace(spec, gpus=size, gpus_per_node=None, min_gpus=None, max_gpus=None, gpu_types=(gpu_type,),
                                   min_gpu_memory_gb=0, topology=TopologyConstraint.ANY, cpus_per_gpu=4, memory_gb_per_gpu=32)
        started = spec.submitted_at + rng.uniform(0, HOUR)
        # a running job is inside its runtime limit (the loop kills at the limit), with 1 to
        # 24 hours left, so cycles do not spend themselves killing the synthetic fleet
        hours_run = (NOW - started) / HOUR
        spec = dataclasses.replace(spec, runtime_limit_s=math.ceil(hours_run + rng.choice((1, 2, 4, 8, 24))) * HOUR)
        running_jobs.append(
            RunningJob(
                spec=spec,
                placements=placements,
                started_at=started,
                borrowed=rng.random() < 0.15,
                last_checkpoint_at=started + rng.uniform(0, NOW - started) if rng.random() < 0.7 else None,
                generation=rng.randint(1, 4),
            )
        )
    queue = tuple(
        _job(rng, f"job-{index:06d}", _draw(rng, PENDING_SIZES), NOW - rng.uniform(0, 48 * HOUR)) for index in range(pending)
    )
    usage = tuple(TeamUsage(team, gpu_seconds=rng.uniform(1e6, 5e7), as_of=NOW - 60) for team in TEAMS)
    return Snapshot(
        now=NOW,
        nodes=nodes,
        gpu_types=GPU_TYPES,
        priority_classes=PRIORITY_CLASSES,
        quotas=build_quotas(nodes),
        pending=queue,
        running=tuple(running_jobs),
        team_usage=usage,
        epoch=3,
    )


FULL_MAX_PLACEMENT_ATTEMPTS = 4096
"""The control loop's ``QM_MAX_PLACEMENTS_PER_CYCLE``."""


def apply_plan(snapshot: Snapshot, plan: Plan, now: float) -> Snapshot:
    """The snapshot the next cycle sees once ``plan`` is carried out, as the control loop
    carries it out: killed jobs are gone, preempted ones terminating, resizes done, bound jobs
    running since ``snapshot.now``; time moves to ``now``."""
    killed = {kill.job_id for kill in plan.kills}
    preempted = {p.job_id for p in plan.preemptions}
    resized = {r.job_id: r for r in plan.resizes}
    running: list[RunningJob] = []
    for job in snapshot.running:
        if job.spec.id in killed:
            continue
        if job.spec.id in preempted:
            job = dataclasses.replace(job, terminating=True)
        elif job.spec.id in resized:
            change = resized[job.spec.id]
            job = dataclasses.replace(job, placements=change.placements, generation=job.generation + 1)
        running.append(job)
    specs = {spec.id: spec for spec in snapshot.pending}
    for bind in plan.binds:
        running.append(RunningJob(spec=specs[bind.job_id], placements=bind.placements, started_at=snapshot.now,
                                  borrowed=bind.borrowed))
    bound = {bind.job_id for bind in plan.binds}
    pending = tuple(spec for spec in snapshot.pending if spec.id not in bound)
    return dataclasses.replace(snapshot, now=now, running=tuple(running), pending=pending, epoch=snapshot.epoch + 1)


def full_config() -> SchedulerConfig:
    return SchedulerConfig(max_placement_attempts=FULL_MAX_PLACEMENT_ATTEMPTS)


def build_full_snapshot(gpus: int, pending: int, running: int, seed: int = 7) -> Snapshot:
    """The fleet after the loop's first cycle: :func:`build_snapshot` with one plan applied."""
    from scheduler_core import schedule

    base = build_snapshot(gpus, pending, running, seed)
    return apply_plan(base, schedule(base, full_config()), base.now + 60)


def with_maintenance(snapshot: Snapshot) -> Snapshot:
    """The snapshot with maintenance windows on 7.5 % of its nodes, spread over the fleet:
    every 20th node from an hour from now for four hours (jobs whose limits run past that
    hour must go elsewhere), every 40th (offset) inside a window now."""
    nodes = [node.name for node in snapshot.nodes]
    now = snapshot.now
    windows = (
        MaintenanceWindow("upcoming", tuple(nodes[::20]), now + 3600, now + 5 * 3600, "bench"),
        MaintenanceWindow("active", tuple(nodes[7::40]), now - 600, now + 3 * 3600, "bench"),
    )
    return dataclasses.replace(snapshot, maintenance=windows)


def _p(sorted_values: Sequence[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def run(gpus: int, pending: int, running: int, cycles: int, config: SchedulerConfig | None = None,
        full: bool = False, maintenance: bool = False) -> dict[str, object]:
    """Time ``cycles`` full cycles (after one warm-up) and report the figures.

    The engine is given the wall clock so its plan carries per-phase durations; the clock
    never changes a decision. ``cycle_cpu_ms_p50`` is process CPU time, less sensitive than
    wall time to other work on the machine; ``phase_ms_p50`` is the median per phase over up
    to five further cycles run with the engine's phase clock on."""
    from scheduler_core import schedule

    if config is None:
        config = full_config() if full else SchedulerConfig()
    base = build_full_snapshot(gpus, pending, running) if full else build_snapshot(gpus, pending, running)
    if maintenance:
        base = with_maintenance(base)
    schedule(base, config)  # warm-up: imports, plugin construction
    seconds: list[float] = []
    cpu_seconds: list[float] = []
    plan: Plan | None = None
    for cycle in range(cycles):
        snapshot = dataclasses.replace(base, now=base.now + cycle + 1)
        started, cpu_started = time.perf_counter(), time.process_time()
        plan = schedule(snapshot, config)
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(time.process_time() - cpu_started)
    # per-phase durations come from separate cycles: the per-job clock reads cost time too
    phases: dict[str, list[float]] = {}
    for cycle in range(min(5, cycles)):
        snapshot = dataclasses.replace(base, now=base.now + cycles + cycle + 1)
        for phase, spent in schedule(snapshot, config, clock=time.perf_counter).phase_durations.items():
            phases.setdefault(phase, []).append(spent)
    seconds.sort()
    assert plan is not None
    return {
        "scenario": "full" if full else "maintenance" if maintenance else "default",
        "gpus": sum(node.gpus for node in base.nodes),
        "pending": len(base.pending),
        "running": len(base.running),
        "cycle_ms_p50": round(_p(seconds, 0.5) * 1000, 2),
        "cycle_ms_p95": round(_p(seconds, 0.95) * 1000, 2),
        "cycle_cpu_ms_p50": round(_p(sorted(cpu_seconds), 0.5) * 1000, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cycles": cycles,
        "allocated_gpus_before": sum(len(p.gpu_indices) for job in base.running for p in job.placements),
        "max_placement_attempts": config.max_placement_attempts,
        "binds": len(plan.binds),
        "kills": len(plan.kills),
        "preemptions": len(plan.preemptions),
        "resizes": len(plan.resizes),
        "reservations": len(plan.reservations),
        "explained": len(plan.pending),
        "phase_ms_p50": {phase: round(_p(sorted(spent), 0.5) * 1000, 2) for phase, spent in sorted(phases.items())},
    }


SWEEP = ((1_000, 500, 200), (10_000, 5_000, 2_000), (50_000, 25_000, 10_000))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler_core.bench", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print JSON (one object)")
    # one scenario a run: each of these ignored the others silently (--sweep --full timed no full fleet)
    scenario = parser.add_mutually_exclusive_group()
    scenario.add_argument("--sweep", action="store_true", help="1k, 10k and 50k GPUs, each in a fresh process")
    scenario.add_argument("--full", action="store_true",
                          help="also time the full fleet (the loop's steady state, see the module doc)")
    scenario.add_argument("--maintenance", action="store_true",
                          help="also time the default fleet with maintenance windows on 7.5 %% of its nodes")
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--pending", type=int, default=5_000)
    parser.add_argument("--running", type=int, default=2_000)
    parser.add_argument("--cycles", type=int, default=0, help="timed cycles (default: 20, 5 at 50k GPUs and more)")
    args = parser.parse_args(argv)
    for name in ("gpus", "pending", "running", "cycles"):
        if getattr(args, name) < (1 if name == "gpus" else 0):
            parser.error(f"--{name} must be {'positive' if name == 'gpus' else '>= 0'}, got {getattr(args, name)}")
    if args.sweep:
        rows = []
        for gpus, pending, running in SWEEP:
            command = [sys.executable, "-m", "scheduler_core.bench", "--json", f"--gpus={gpus}", f"--pending={pending}",
                       f"--running={running}"] + ([f"--cycles={args.cycles}"] if args.cycles else [])
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return done.returncode
            rows.append(json.loads(done.stdout))
        if args.json:
            print(json.dumps({"sweep": rows}))
        else:
            for row in rows:
                print(_line(row))
        return 0
    cycles = args.cycles or (5 if args.gpus >= 50_000 else 20)
    row = run(args.gpus, args.pending, args.running, cycles)
    if args.maintenance:
        windows = run(args.gpus, args.pending, args.running, cycles, maintenance=True)
        print(json.dumps({"default": row, "maintenance": windows}) if args.json
              else f"{_line(row)}\n{_line(windows)}")
        return 0
    if not args.full:
        print(json.dumps(row) if args.json else _line(row))
        return 0
    full = run(args.gpus, args.pending, args.running, cycles, full=True)
    if args.json:
        print(json.dumps({"default": row, "full": full}))
    else:
        print(_line(row))
        print(_line(full))
    return 0


def _line(row: dict[str, object]) -> str:
    return (f"{row.get('scenario', 'default'):>7}  {row['gpus']:>7} GPUs  {row['pending']:>6} pending  {row['running']:>6} running  "
            f"cycle p50 {row['cycle_ms_p50']} ms  p95 {row['cycle_ms_p95']} ms  peak RSS {row['peak_rss_mb']} MB")


if __name__ == "__main__":
    sys.exit(main())
