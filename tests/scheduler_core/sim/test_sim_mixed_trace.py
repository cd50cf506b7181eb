"""Every feature at once (teams sharing a cohort, priorities, checkpoints, elastic jobs, runtime
limits shorter than the work, two GPU types): every plan the engine returns must take effect
(the replay refuses a GPU held twice, a partial gang, a stale generation), and every job must
be accounted for at the horizon."""

from __future__ import annotations

import random

from scheduler_core.sim import FleetShape, Simulator, TraceJob
from scheduler_core.types import SchedulerConfig


def mixed_trace(seed: int, jobs: int) -> list[TraceJob]:
    rng = random.Random(seed)
    out: list[TraceJob] = []
    at = 0.0
    for index in range(jobs):
        at += rng.expovariate(1 / 300)
        gpus = rng.choice((1, 1, 2, 4, 8, 16, 24))
        duration = rng.randint(5, 180) * 60
        limit = duration + rng.choice((0, 1800, 3600)) if rng.random() < 0.9 else duration / 2
        elastic = gpus >= 8 and rng.random() < 0.2
        out.append(TraceJob(
            f"m{index:04d}", round(at), gpus, duration, limit, f"u{rng.randint(1, 5)}",
            team=rng.choice(("a", "b", "c")), priority=rng.choice((0, 0, 0, 10, 100)),
            checkpoint_interval_s=rng.choice((None, 600.0, 1800.0)),
            min_gpus=8 if elastic else None, max_gpus=gpus * 2 if elastic else None,
        ))
    return out


def test_engine_plans_on_a_mixed_trace_always_take_effect() -> None:
    trace = mixed_trace(seed=3, jobs=90)
    sim = Simulator(trace, FleetShape(nodes=6, nodes_per_leaf=3, leaves_per_spine=1, gpu_types=("a100", "h100")),
                    _engine(), SchedulerConfig(), horizon_s=86400.0)
    result = sim.run()
    states = [job.state.value for job in sim.jobs.values()]
    assert len(states) == 90 and "future" not in states
    assert result.metrics["jobs_total"] == 90
    assert result.extras["preemptions"] > 0  # the trace does exercise preemption
    assert result.extras["jobs_killed"] > 0  # and runtime limits
    held = sum(len(p.gpu_indices) for job in sim.active.values() for p in job.placements)
    assert held == sum(job.gpus_held for job in sim.active.values()) == 48 - sum(sim.free.values())


def _engine():  # type: ignore[no-untyped-def]
    from scheduler_core import schedule

    return schedule
