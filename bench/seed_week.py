"""Our engine against the seed's scheduler on the seed's weeks, side by side, with the goals.

    .venv/bin/python bench/seed_week.py [--extra-seeds 5] [--json | --markdown] [--set KEY=VALUE ...]

The documented comparison (``docs/engine.md``) is ``--extra-seeds 5``: the three shared weeks
plus seeds 10 to 14 at each load, 18 weeks and 66 goal checks. That set is fixed
(:data:`DOCUMENTED_EXTRA_SEEDS`) so a policy is judged on weeks chosen before it was tuned,
and every one of them is reported, met or not.

1. The seed's three weeks (``../shared/traces/seed_week_s9_load{085,095,105}.csv``; set
   ``QM_SHARED_DIR`` to find shared/ elsewhere) are replayed through our engine with the
   discrete-event simulator, and through the seed program's own scheduler
   (``../shared/peers/seed_gpusched.py``), which is run as a peer: imported from its path at
   run time, never copied. Its ``week()`` draws jobs from its own RNG, so we hand it a scripted
   RNG that draws exactly the trace's jobs and record every job it creates; after the run we
   check that it created exactly the trace, and that the waits we compute from its jobs equal
   the figures it computes itself, so both sides are measured by one definition.
2. ``--extra-seeds N`` draws N more weeks per load "the same way": the seed's arrival process
   (per minute a geometric number of jobs with mean ``load × NODES × PER / mean GPU-minutes``,
   sizes from the seed's ``SIZES`` table, durations uniform in 60..540 minutes) with RNG seeds
   10, 11, ... (``--first-extra-seed``). The generator reads its constants from the peer and is
   checked against it on every run: with seed 9 it must reproduce the three shared traces
   byte for byte, and at the seed's own load (0.85) it must draw exactly the jobs that the
   peer's ``week()`` draws for each extra seed.
3. ``--mixed`` instead replays the 0.95 week with four teams of unequal demand, two priorities
   and optional checkpoints, and prints the preemptions by reason and the GPU-hours they lose;
   with ``--extra-seeds N`` also the weeks of seeds 10, 11, ... drawn at 0.95 the same way (one
   week's preemption figures move a lot with any decision that changes its course, so a
   preemption rule is judged on several).
4. Goals, on every week: ``allocated`` ≥ the seed's (≥ the seed's + 0.03 at load 1.05);
   ``wait_mean_min`` ≤ half the seed's at loads 0.95 and 1.05; ``wait_large_p95_min`` ≤ the
   seed's; ``wait_max_min`` ≤ 1.5 × the seed's. Exit status 1 when a goal is missed;
   2, with one line saying why, when the seed peer, a shared trace or a ``--set`` is missing or bad.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import sys
import time
import types
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scheduler_core.sim import (  # noqa: E402
    FleetShape,
    JobOutcome,
    TraceError,
    TraceJob,
    load_trace,
    simulate,
    summarize,
    write_trace,
)
from scheduler_core.sim.metrics import METRIC_KEYS  # noqa: E402
from scheduler_core.sim.overrides import OverrideError, config_with  # noqa: E402

SEED_TRACE_SEED = 9
#: The extra weeks of the documented comparison: RNG seeds 10 to 14 at every load.
DOCUMENTED_EXTRA_SEEDS = 5
LOADS: tuple[float, ...] = (0.85, 0.95, 1.05)
#: The users of the shared traces, drawn per job with ``Random(seed * 1000 + load%)``.
USERS: tuple[str, ...] = ("ana", "bo", "chen", "dara", "eli", "fay", "gus", "hana")
#: The seed's placement policy to compare with: the better of its two (see seed 000).
SEED_POLICY = "pack"
#: The largest float below 1.0: an arrival draw that can never fall under the seed's threshold.
_NO_ARRIVAL = 1.0 - 2.0**-53


def shared_dir() -> Path:
    """``$QM_SHARED_DIR``, else ``shared/`` beside the repository (``../shared``)."""
    override = os.environ.get("QM_SHARED_DIR")
    return Path(override) if override else REPO.parent / "shared"


def peer_path() -> Path:
    return shared_dir() / "peers" / "seed_gpusched.py"


def trace_path(load: float) -> Path:
    return shared_dir() / "traces" / f"seed_week_s{SEED_TRACE_SEED}_load{round(load * 100):03d}.csv"


class PeerError(RuntimeError):
    """The seed program did not behave as this harness expects (e.g. it changed upstream)."""


# ---------------------------------------------------------------------------------- the peer


def load_peer(path: Path | None = None) -> Any:
    """A fresh copy of the seed program as a module (each run patches its globals).

    Typed ``Any``: it is a foreign, untyped program whose globals we read and patch."""
    path = path if path is not None else peer_path()
    if not path.is_file():
        raise PeerError(f"seed peer not found at {path}; set QM_SHARED_DIR to the shared/ folder")
    name = f"_seed_gpusched_peer_{id(path)}_{time.perf_counter_ns()}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PeerError(f"cannot import the seed peer from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    for attribute in ("week", "Job", "SIZES", "NODES", "PER", "MINUTES"):
        if not hasattr(module, attribute):
            raise PeerError(f"the seed peer at {path} has no {attribute!r}")
    return module


def _record_jobs(peer: Any) -> list[Any]:
    """Swap the peer's ``Job`` for a subclass that records every job ``week()`` creates."""
    created: list[Any] = []
    base = peer.Job

    class RecordedJob(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            created.append(self)

    peer.Job = RecordedJob
    return created


class _TraceRandom:
    """Stands in for ``random.Random`` inside the peer's ``week()`` and draws a given trace.

    ``week()`` asks, every minute, ``random() < lam/(1+lam)`` for each new arrival, then
    ``random()`` for its size (first cumulative probability of ``SIZES`` that covers it) and
    ``randint(60, 540)`` for its duration in minutes. We answer 0.0 while the trace has a job
    at this minute, the size's cumulative probability, and the job's duration; the largest
    float below 1 ends the minute."""

    def __init__(self, arrivals: Sequence[tuple[int, int, int]], sizes: Sequence[tuple[int, float]]) -> None:
        self.arrivals = deque(arrivals)
        self.minute = 0
        self.expect = "arrival"
        self.current = (0, 0, 0)
        self.cumulative: dict[int, float] = {}
        acc = 0.0
        for size, probability in sizes:
            acc += probability  # the same float additions as the peer's loop
            self.cumulative[size] = acc

    def random(self) -> float:
        if self.expect == "size":
            self.expect = "duration"
            return self.cumulative[self.current[1]]
        if self.expect != "arrival":
            raise PeerError(f"seed peer asked for random() at minute {self.minute}, expected randint() for a duration")
        if self.arrivals and self.arrivals[0][0] == self.minute:
            self.current = self.arrivals.popleft()
            self.expect = "size"
            return 0.0
        self.minute += 1
        return _NO_ARRIVAL

    def randint(self, low: int, high: int) -> int:
        if self.expect != "duration":
            raise PeerError(f"seed peer asked for randint({low}, {high}) at minute {self.minute} out of turn")
        self.expect = "arrival"
        return self.current[2]


@dataclass(frozen=True, slots=True)
class PeerRun:
    """The peer's own figures and ours computed from the jobs it scheduled."""

    metrics: dict[str, float | int | None]
    own: dict[str, Any]


def _whole_minutes(job: TraceJob, column: str, seconds: float) -> int:
    if seconds % 60 != 0:
        raise PeerError(f"job {job.job_id}: the seed peer works in whole minutes, {column} is {seconds} s")
    return int(seconds // 60)


def run_seed_peer(
    jobs: Sequence[TraceJob],
    *,
    nodes: int = 64,
    gpus_per_node: int = 8,
    horizon_min: int = 7 * 24 * 60,
    policy: str = SEED_POLICY,
    peer: Any = None,
) -> PeerRun:
    """Run the seed's scheduler (its ``week()``) on ``jobs`` and measure it like our replay."""
    peer = peer if peer is not None else load_peer()
    arrivals = [
        (_whole_minutes(job, "submit_s", job.submit_s), job.gpus, _whole_minutes(job, "duration_s", job.duration_s))
        for job in jobs
        if job.submit_s < horizon_min * 60
    ]
    arrivals.sort(key=lambda arrival: arrival[0])  # stable: keeps the trace's order within a minute
    sizes = sorted({gpus for _, gpus, _ in arrivals}) or [1]
    peer.SIZES = [(size, 1.0 / len(sizes)) for size in sizes]  # only the size draw reads it now
    peer.NODES, peer.PER, peer.MINUTES = nodes, gpus_per_node, horizon_min
    script = _TraceRandom(arrivals, peer.SIZES)
    peer.random = types.SimpleNamespace(Random=lambda seed: script)
    created = _record_jobs(peer)
    own: dict[str, Any] = peer.week(policy)
    drawn = [(job.arrive, job.size, job.dur) for job in created]
    if drawn != arrivals:
        first = next((i for i, (a, b) in enumerate(zip(drawn, arrivals, strict=False)) if a != b), min(len(drawn), len(arrivals)))
        raise PeerError(
            f"the seed peer created {len(drawn)} jobs, the trace has {len(arrivals)}; first difference at job {first}"
        )
    outcomes: list[JobOutcome] = []
    for job in created:
        started = job.start >= 0
        outcomes.append(
            JobOutcome(
                job_id=str(len(outcomes)),
                gpus=job.size,
                submit_s=job.arrive * 60.0,
                duration_s=job.dur * 60.0,
                wait_s=((job.start if started else horizon_min) - job.arrive) * 60.0,
                end_s=(job.start + job.dur) * 60.0 if started else None,
            )
        )
    horizon_s = horizon_min * 60.0
    total = nodes * gpus_per_node
    metrics = summarize(
        outcomes,
        horizon_s=horizon_s,
        total_gpus=total,
        gpus_per_node=gpus_per_node,
        allocated_gpu_seconds=float(own["alloc"]) * horizon_s * total,
        stranded_gpu_seconds=float(own["frag"]) * horizon_s,
    )
    _check_same_definitions(metrics, own, created, horizon_min, total)
    return PeerRun(metrics=metrics, own=own)


def _check_same_definitions(
    metrics: dict[str, float | int | None], own: dict[str, Any], created: Sequence[Any], horizon_min: int, total: int
) -> None:
    """Our definitions, applied to the peer's jobs, must give the peer's own numbers."""
    pairs: list[tuple[str, Any, Any]] = [("jobs_done", metrics["jobs_done"], own["n"])]
    if metrics["wait_small_mean_min"] is not None:
        pairs += [("wait_small_mean_min", metrics["wait_small_mean_min"], own["small"][0]),
                  ("wait_small_p95_min", metrics["wait_small_p95_min"], own["small"][1])]
    if metrics["wait_large_mean_min"] is not None:
        pairs += [("wait_large_mean_min", metrics["wait_large_mean_min"], own["big"][0]),
                  ("wait_large_p95_min", metrics["wait_large_p95_min"], own["big"][1])]
    busy = sum(job.size * (min(job.start + job.dur, horizon_min) - job.start) for job in created if job.start >= 0)
    pairs.append(("allocated (from job intervals)", busy / (horizon_min * total), own["alloc"]))
    for name, ours, theirs in pairs:
        if not math.isclose(float(ours), float(theirs), rel_tol=1e-12, abs_tol=1e-12):
            raise PeerError(f"{name}: our definition gives {ours}, the seed peer reports {theirs}")


# ----------------------------------------------------------------------- weeks drawn the same way


def draw_week(peer: Any, seed: int, load: float) -> list[TraceJob]:
    """A week of jobs drawn like the seed program's, at ``load`` of its cluster.

    Constants come from the peer (``SIZES``, ``NODES``, ``PER``, ``MINUTES``); runtime limits
    are the true duration rounded up to whole hours plus an hour, and users are drawn from a
    second RNG, as in the shared traces (``../shared/traces/README.md``)."""
    sizes: list[tuple[int, float]] = list(peer.SIZES)
    rng = random.Random(seed)
    users = random.Random(seed * 1000 + round(load * 100))
    mean_gpu_minutes = sum(size * probability for size, probability in sizes) * 300
    rate = load * peer.NODES * peer.PER / mean_gpu_minutes
    threshold = rate / (1 + rate)  # P(one more arrival this minute): geometric count, mean = rate
    jobs: list[TraceJob] = []
    for minute in range(peer.MINUTES):
        while rng.random() < threshold:
            draw, cumulative, size = rng.random(), 0.0, sizes[-1][0]
            for candidate, probability in sizes:
                cumulative += probability
                if draw <= cumulative:
                    size = candidate
                    break
            duration_s = rng.randint(60, 540) * 60
            jobs.append(
                TraceJob(
                    job_id=f"j{len(jobs):05d}",
                    submit_s=minute * 60,
                    gpus=size,
                    duration_s=duration_s,
                    runtime_limit_s=(math.ceil(duration_s / 3600) + 1) * 3600,
                    user=users.choice(USERS),
                )
            )
    return jobs


def check_generator(peer_file: Path, extra_seeds: Sequence[int]) -> list[str]:
    """Prove :func:`draw_week` draws like the seed; returns what was checked."""
    checked: list[str] = []
    peer = load_peer(peer_file)
    for load in LOADS:
        path = trace_path(load)
        if not path.is_file():
            raise PeerError(f"shared trace missing: {path}")
        if write_trace(draw_week(peer, SEED_TRACE_SEED, load)) != path.read_text(encoding="utf-8"):
            raise PeerError(f"draw_week(seed={SEED_TRACE_SEED}, load={load}) does not reproduce {path.name}")
        checked.append(f"seed {SEED_TRACE_SEED} load {load:.2f} reproduces {path.name} byte for byte")
    for seed in extra_seeds:
        fresh = load_peer(peer_file)
        created = _record_jobs(fresh)
        fresh.week(SEED_POLICY, seed)
        theirs = [(job.arrive * 60, job.size, job.dur * 60) for job in created]
        ours = [(int(job.submit_s), job.gpus, int(job.duration_s)) for job in draw_week(fresh, seed, 0.85)]
        if theirs != ours:
            raise PeerError(f"seed {seed}: draw_week at load 0.85 differs from the jobs the seed's week() draws")
        checked.append(f"seed {seed} load 0.85 draws exactly the {len(ours)} jobs of the seed's own week()")
    return checked


# ----------------------------------------------------------------------------- one comparison


@dataclass(frozen=True, slots=True)
class Week:
    name: str
    seed: int
    load: float
    jobs: tuple[TraceJob, ...]


@dataclass(frozen=True, slots=True)
class Goal:
    text: str
    met: bool


def _ours(week: Week, overrides: Sequence[str], progress: bool) -> dict[str, float | int | None]:
    """Our engine on one week (runs in a worker process)."""
    from scheduler_core.sim.progress import ProgressBar

    horizon_s = 7 * 24 * 3600.0
    bar = ProgressBar(sys.stderr, horizon_s, time.perf_counter, label=f"{week.name:>16}", delay_s=2.0, every_s=5.0) if progress else None
    started = time.perf_counter()
    result = simulate(
        week.jobs, FleetShape(), config=config_with(overrides), horizon_s=horizon_s, clock=time.perf_counter, progress=bar
    )
    report = result.as_dict()
    report["wall_seconds"] = time.perf_counter() - started
    return report


def goals(load: float, ours: dict[str, float | int | None], seed: dict[str, float | int | None]) -> list[Goal]:
    def value(metrics: dict[str, float | int | None], key: str) -> float:
        got = metrics[key]
        return math.inf if got is None else float(got)

    out: list[Goal] = []
    margin = 0.03 if round(load * 100) >= 105 else 0.0
    need = value(seed, "allocated") + margin
    bound = ours.get("allocated_upper_bound")
    beyond = ""
    if bound is not None and need > float(bound):
        beyond = f" (beyond reach: no scheduler can exceed {float(bound):.3f} on this week)"
    elif bound is not None and margin and float(bound) > value(seed, "allocated"):
        # How much of the seed's gap to the bound the goal asks for, and how much we close.
        gap = float(bound) - value(seed, "allocated")
        beyond = (f" (bound {float(bound):.4f}: the goal asks to close {margin / gap:.0%} of the seed's gap"
                  f" to it; we close {(value(ours, 'allocated') - value(seed, 'allocated')) / gap:.0%})")
    out.append(Goal(f"allocated {value(ours, 'allocated'):.4f} >= seed{' + 0.03' if margin else ''} = {need:.4f}{beyond}",
                    value(ours, "allocated") >= need))
    if round(load * 100) >= 95:
        half = value(seed, "wait_mean_min") / 2
        out.append(Goal(f"wait_mean_min {value(ours, 'wait_mean_min'):.1f} <= seed/2 = {half:.1f}",
                        value(ours, "wait_mean_min") <= half))
    p95 = value(seed, "wait_large_p95_min")
    out.append(Goal(f"wait_large_p95_min {value(ours, 'wait_large_p95_min'):.0f} <= seed = {p95:.0f}",
                    value(ours, "wait_large_p95_min") <= p95))
    cap = 1.5 * value(seed, "wait_max_min")
    out.append(Goal(f"wait_max_min {value(ours, 'wait_max_min'):.0f} <= 1.5 x seed = {cap:.0f}",
                    value(ours, "wait_max_min") <= cap))
    return out


def _cell(value: float | int | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    if (value == int(value) and abs(value) >= 1) or value == 0:
        return f"{value:.0f}"
    if abs(value) < 1:
        return f"{value:.4f}"  # allocations differ in the 4th decimal at low load
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


def _ratio(ours: float | int | None, seed: float | int | None) -> str:
    if ours is None or seed is None:
        return "-"
    if seed == 0:
        return "=" if ours == 0 else "inf"
    return f"{ours / seed:.2f}x"


def render(week: Week, ours: dict[str, float | int | None], seed: dict[str, float | int | None], met: list[Goal]) -> str:
    lines = [f"{week.name}  (RNG seed {week.seed}, offered load {week.load:.2f}, realized {_cell(ours['offered_load'])})",
             f"  {'metric':<22}{'ours':>10}{'seed':>10}{'ours/seed':>11}"]
    for key in METRIC_KEYS:
        lines.append(f"  {key:<22}{_cell(ours[key]):>10}{_cell(seed[key]):>10}{_ratio(ours[key], seed[key]):>11}")
    lines.append(f"  {'allocated, no-wait':<22}{_cell(ours['no_wait_allocated']):>10}   (every job starts at submission)")
    lines.append(f"  {'allocated, bound':<22}{_cell(ours['allocated_upper_bound']):>10}   (no scheduler can do better)")
    lines.append(f"  engine: {ours['engine_cycles']} cycles, p50 {_cell(ours['engine_ms_p50'])} ms, "
                 f"max {_cell(ours['engine_ms_max'])} ms; replay {_cell(ours['wall_seconds'])} s; "
                 f"preemptions {ours['preemptions']}, kills {ours['jobs_killed']}")
    lines.append(f"  ETAs: {eta_line(ours)}")
    for goal in met:
        lines.append(f"  [{'met ' if goal.met else 'MISS'}] {goal.text}")
    return "\n".join(lines)


def eta_line(ours: dict[str, float | int | None]) -> str:
    """How the first ETA told to each waiting job compared with its start (no goal is set)."""
    if not ours["eta_checked"]:
        return f"none judged ({ours['eta_missing']} waited without one)"
    share = ours.get("eta_median_share_of_wait")
    return (f"{ours['eta_checked']} judged, {_cell(100 * float(ours['eta_on_time'] or 0))} % started by the first ETA "
            f"told (median {_cell(ours['eta_early_median_min'])} min early, after "
            f"{'-' if share is None else f'{100 * float(share):.0f} %'} of the wait told); late p95 "
            f"{_cell(ours['eta_late_p95_min'])}, max {_cell(ours['eta_late_max_min'])} min; {ours['eta_missing']} "
            "waited without one")


def render_markdown(report: dict[str, Any]) -> str:
    """The report as the Markdown tables of ``docs/engine.md`` (Benchmarks)."""
    weeks = report["weeks"]
    shared = [week for week in weeks if week["seed"] == SEED_TRACE_SEED]
    head = "| metric | " + " | ".join(f"{week['load']:.2f} ours | seed | ours/seed" for week in shared) + " |"
    lines = [head, "|---|" + "---:|" * (3 * len(shared))]
    for key in (*METRIC_KEYS, "allocated_upper_bound"):
        cells = []
        for week in shared:
            ours, theirs = week["ours"][key], week["seed_scheduler"].get(key)
            cells += [_cell(ours), _cell(theirs), _ratio(ours, theirs) if theirs is not None else ""]
        lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    lines += ["", "| week | load (realized) | allocated ours / seed / bound | wait_mean_min ours / seed | "
              "wait_large_p95_min ours / seed | wait_max_min ours / seed | goals missed |", "|---|---|---|---|---|---|---|"]
    for week in weeks:
        o, t = week["ours"], week["seed_scheduler"]
        missed = "; ".join(goal["goal"] for goal in week["goals"] if not goal["met"]) or "none"
        lines.append(
            f"| {week['name']} | {week['load']:.2f} ({_cell(o['offered_load'])}) | "
            f"{_cell(o['allocated'])} / {_cell(t['allocated'])} / {_cell(o['allocated_upper_bound'])} | "
            f"{_cell(o['wait_mean_min'])} / {_cell(t['wait_mean_min'])} | "
            f"{_cell(o['wait_large_p95_min'])} / {_cell(t['wait_large_p95_min'])} | "
            f"{_cell(o['wait_max_min'])} / {_cell(t['wait_max_min'])} | {missed} |"
        )
    lines += ["", f"Goals met: {report['goals_met']} of {report['goals_total']}."]
    lines += ["", "| week | ETAs judged | started by the first ETA told | median min early | median share of the "
              "wait told | late p95 / max (min) | waited without an ETA |", "|---|---:|---:|---:|---:|---:|---:|"]
    for week in weeks:
        o = week["ours"]
        on_time = "-" if o["eta_on_time"] is None else f"{100 * float(o['eta_on_time']):.1f} %"
        share = o.get("eta_median_share_of_wait")
        lines.append(f"| {week['name']} | {o['eta_checked']} | {on_time} | {_cell(o['eta_early_median_min'])} | "
                     f"{'-' if share is None else f'{100 * float(share):.0f} %'} | "
                     f"{_cell(o['eta_late_p95_min'])} / {_cell(o['eta_late_max_min'])} | {o['eta_missing']} |")
    return "\n".join(lines)


#: The mixed week's teams: the shared traces' users, grouped so demand is unequal (3:2:1:2).
MIXED_TEAMS = {"ana": "a", "bo": "a", "chen": "a", "dara": "b", "eli": "b", "fay": "c", "gus": "d", "hana": "d"}


def mixed_jobs(load: float, checkpoint_s: float | None, seed: int = SEED_TRACE_SEED) -> list[TraceJob]:
    """The jobs of :func:`mixed_week`: the week of ``seed`` at ``load`` (the shared trace for
    seed 9), each in its user's team of :data:`MIXED_TEAMS`, every fifth at priority 100."""
    import dataclasses

    week = load_trace(trace_path(load)) if seed == SEED_TRACE_SEED else draw_week(load_peer(), seed, load)
    return [
        dataclasses.replace(job, team=MIXED_TEAMS.get(job.user, "a"), priority=100 if i % 5 == 0 else 0,
                            checkpoint_interval_s=checkpoint_s)
        for i, job in enumerate(week)
    ]


def mixed_week(load: float, checkpoint_s: float | None, overrides: Sequence[str],
               seed: int = SEED_TRACE_SEED) -> dict[str, Any]:
    """Preemption on a mixed week: the shared week at ``load`` (or, for another ``seed``, the
    week :func:`draw_week` draws) with four teams of unequal demand (:data:`MIXED_TEAMS`; the
    simulator gives them equal nominal quotas in one cohort with unlimited borrowing, so owners
    reclaim what they lent), every fifth job at priority 100, and a checkpoint every
    ``checkpoint_s`` (``None``: never). Counts preemptions by reason and the GPU-hours they
    lose (the engine's own ``lost_gpu_hours``)."""
    from scheduler_core import schedule as engine_schedule
    from scheduler_core.types import Plan, SchedulerConfig, Snapshot

    name = trace_path(load).stem if seed == SEED_TRACE_SEED else f"s{seed}_load{round(load * 100):03d}"
    jobs = mixed_jobs(load, checkpoint_s, seed)
    reasons: dict[str, int] = {}
    lost = [0.0]

    def counting(snapshot: Snapshot, config: SchedulerConfig) -> Plan:
        plan = engine_schedule(snapshot, config)
        for preemption in plan.preemptions:
            reasons[preemption.reason.value] = reasons.get(preemption.reason.value, 0) + 1
            lost[0] += preemption.lost_gpu_hours
        return plan

    horizon_s = 7 * 24 * 3600.0
    shape = FleetShape()
    result = simulate(jobs, shape, config=config_with(overrides), schedule=counting, horizon_s=horizon_s).as_dict()
    allocated_gpu_hours = float(result["allocated"] or 0.0) * shape.nodes * shape.gpus_per_node * horizon_s / 3600
    return {
        "week": f"mixed {name}", "checkpoint_s": checkpoint_s,
        "preemptions_by_reason": dict(sorted(reasons.items())), "lost_gpu_hours": round(lost[0], 1),
        "allocated_gpu_hours": round(allocated_gpu_hours), "lost_share": round(lost[0] / allocated_gpu_hours, 4),
        "wait_mean_min": result["wait_mean_min"], "wait_max_min": result["wait_max_min"], "jobs_done": result["jobs_done"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--extra-seeds", type=int, default=0,
                        help=f"also draw N more weeks per load (seeds 10, 11, ...); the documented set is {DOCUMENTED_EXTRA_SEEDS}")
    parser.add_argument("--first-extra-seed", type=int, default=SEED_TRACE_SEED + 1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="SchedulerConfig override for our engine")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), help="parallel replays (default 2)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    output.add_argument("--markdown", action="store_true", help="print the Markdown tables for docs/engine.md")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--mixed", action="store_true",
                        help="instead: preemptions and lost GPU-hours on the mixed 0.95 week (teams, priorities), "
                             "without checkpoints and with one every 30 min; --extra-seeds N adds drawn weeks")
    args = parser.parse_args(argv)
    if args.extra_seeds < 0:
        parser.error(f"argument --extra-seeds: expected a number of weeks >= 0, got {args.extra_seeds}")
    if args.workers < 1:
        parser.error(f"argument --workers: expected at least 1, got {args.workers}")
    try:
        config_with(args.set)  # fail fast on a bad override, before any replay
        return _run(args)
    except (PeerError, OverrideError, TraceError) as error:  # a setup problem, said in one line
        print(f"error: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.mixed:
        seeds = [SEED_TRACE_SEED] + [args.first_extra_seed + i for i in range(args.extra_seeds)]
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            futures = [pool.submit(mixed_week, 0.95, checkpoint, tuple(args.set), seed)
                       for seed in seeds for checkpoint in (None, 1800.0)]
            for future in futures:
                print(json.dumps(future.result()))
        return 0

    peer_file = peer_path()
    extra = [args.first_extra_seed + i for i in range(args.extra_seeds)]
    checks = check_generator(peer_file, extra)
    peer = load_peer(peer_file)
    weeks = [Week(trace_path(load).stem, SEED_TRACE_SEED, load, tuple(load_trace(trace_path(load)))) for load in LOADS]
    for seed in extra:
        for load in LOADS:
            weeks.append(Week(f"s{seed}_load{round(load * 100):03d}", seed, load, tuple(draw_week(peer, seed, load))))

    seeds = [run_seed_peer(week.jobs, peer=load_peer(peer_file)).metrics for week in weeks]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = [pool.submit(_ours, week, tuple(args.set), not args.no_progress) for week in weeks]
        ours = [future.result() for future in futures]

    report: dict[str, Any] = {"checks": checks, "overrides": list(args.set), "weeks": []}
    all_met = True
    blocks = []
    for week, mine, theirs in zip(weeks, ours, seeds, strict=True):
        met = goals(week.load, mine, theirs)
        all_met &= all(goal.met for goal in met)
        blocks.append(render(week, mine, theirs, met))
        report["weeks"].append({"name": week.name, "seed": week.seed, "load": week.load, "ours": mine, "seed_scheduler": theirs,
                                "goals": [{"goal": goal.text, "met": goal.met} for goal in met]})
    missed = sum(1 for week in report["weeks"] for goal in week["goals"] if not goal["met"])
    total = sum(len(week["goals"]) for week in report["weeks"])
    report["goals_met"] = total - missed
    report["goals_total"] = total
    if args.json:
        print(json.dumps(report))
    elif args.markdown:
        print(render_markdown(report))
    else:
        print("\n".join(f"check: {line}" for line in checks))
        print(f"seed scheduler: {peer_file} week(policy={SEED_POLICY!r}), run as a peer on the same jobs\n")
        print("\n\n".join(blocks))
        print(f"\ngoals met: {total - missed} of {total}")
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
