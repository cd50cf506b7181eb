"""The what-if replay itself, in a process of its own.

This module imports the simulator and nothing of Django, so a freshly spawned interpreter runs
it without settings or a database: the web process reads the jobs, builds the trace, and hands
it over; the child simulates and sends back its progress and its result through a pipe. A
separate process keeps a replay's minutes of pure-Python work off the web worker's interpreter
lock, so pages served meanwhile stay fast.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.connection import Connection
from typing import Any

from scheduler_core.sim import FleetShape, SimulationError, TraceJob, simulate
from scheduler_core.types import (
    GpuTypeInfo,
    MaintenanceWindow,
    NodeInfo,
    PriorityClassInfo,
    QuotaInfo,
    SchedulerConfig,
)

PROGRESS_EVERY_S = 1.0


@dataclass(frozen=True)
class Replay:
    days: int
    jobs: int
    nodes: int
    gpus: int
    runs: list[tuple[str, dict[str, Any]]]
    seconds: float
    at: datetime
    # Per run (in the order of `runs`), per team: scheduler_core.sim.metrics.team_figures.
    teams: list[dict[str, dict[str, Any]]] = field(default_factory=list)
    # The stretch replayed: from the window's first submission to `at`.
    replayed_from: datetime | None = None
    horizon_s: float | None = None
    # How many maintenance windows the replay kept (see whatif.maintenance_windows).
    maintenance_windows: int = 0
    # How many jobs of the trace were held at some time, and how many wait on others (singletons
    # among them): the replay keeps both as the control plane does (see whatif.hold_spans,
    # whatif.dependencies_of); how many of the held were requeued held (a requeue held stops a
    # job the replay runs then, TraceHold.requeues).
    held_jobs: int = 0
    dependent_jobs: int = 0
    requeued_held_jobs: int = 0
    # How many jobs someone requeued while they ran, not held (TraceJob.requeued_at), and how many
    # runs that ended before their job was requeued are replayed as runs of their own
    # (whatif._requeued_runs).
    requeued_jobs: int = 0
    earlier_runs: int = 0

    @property
    def distinct_jobs(self) -> int:
        """The jobs replayed (`jobs` counts each run a requeued job had before a requeue apart)."""
        return self.jobs - self.earlier_runs


@dataclass(frozen=True)
class Run:
    """One replay of the trace: its label, the engine's settings, the quota table."""

    label: str
    config: SchedulerConfig
    quotas: tuple[QuotaInfo, ...]


@dataclass(frozen=True)
class Work:
    """Everything a replay needs; picklable, so it crosses into the child process."""

    days: int
    trace: Sequence[TraceJob]
    at: datetime
    # The replay starts at the window's first submission, not at its edge: a fleet younger
    # than the window (or idle at its start) would otherwise be measured over days it did not
    # have a job to run, and `allocated` would read 0.01 % for both policies.
    replayed_from: datetime
    nodes: tuple[NodeInfo, ...]
    gpu_types: tuple[GpuTypeInfo, ...]
    priority_classes: tuple[PriorityClassInfo, ...]
    runs: Sequence[Run]
    # The maintenance windows in force over the replayed time (seconds from replayed_from),
    # each announced when it was created (announced_at; None: before replayed_from).
    maintenance: tuple[MaintenanceWindow, ...] = ()
    # How many jobs of `trace` are runs that ended before their job was requeued.
    earlier_runs: int = 0


def run(work: Work, progress: Callable[[float], None] | None = None) -> Replay:
    """Both replays, one after the other; `progress(fraction)` hears how far they are.
    Raises SimulationError when the engine returns a plan that cannot take effect."""
    started = time.perf_counter()
    results = []
    teams = []
    horizon = max(1.0, (work.at - work.replayed_from).total_seconds())
    # The real fleet's parts replace everything the simulator would derive from a shape.
    shape = FleetShape(nodes=len(work.nodes))
    for i, replay_run in enumerate(work.runs):
        def report(simulated_s: float, i: int = i) -> None:
            if progress is not None:
                progress((i + min(1.0, simulated_s / horizon)) / len(work.runs))

        result = simulate(list(work.trace), shape, config=replay_run.config, horizon_s=horizon, progress=report,
                          nodes=work.nodes, gpu_types=work.gpu_types, quotas=replay_run.quotas,
                          priority_classes=work.priority_classes, maintenance=work.maintenance)
        results.append((replay_run.label, result.as_dict()))
        teams.append(result.teams)
    return Replay(days=work.days, jobs=len(work.trace), nodes=len(work.nodes), gpus=sum(n.gpus for n in work.nodes),
                  runs=results, seconds=time.perf_counter() - started, at=work.at, teams=teams,
                  replayed_from=work.replayed_from, horizon_s=horizon,
                  maintenance_windows=len(work.maintenance),
                  held_jobs=sum(1 for job in work.trace if job.holds),
                  requeued_held_jobs=sum(1 for job in work.trace if any(hold.requeues for hold in job.holds)),
                  dependent_jobs=sum(1 for job in work.trace if job.depends_on or job.singleton),
                  requeued_jobs=sum(1 for job in work.trace if job.requeued_at), earlier_runs=work.earlier_runs)


def child(work: Work, conn: Connection) -> None:
    """The child process: run, sending ("progress", fraction) at most once a second, then
    ("done", Replay) or ("failed", sentence)."""
    last = 0.0

    def progress(fraction: float) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY_S:
            last = now
            conn.send(("progress", fraction))

    try:
        conn.send(("done", run(work, progress)))
    except SimulationError as exc:
        conn.send(("failed", f"The simulator stopped: {exc}"))
    except Exception as exc:  # noqa: BLE001 - whatever stopped it, the page must say what
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()
