"""Dominant resource fairness over GPUs, CPUs and memory (seed 001 §8.4.1, table 1).

A team's share of resource r is what it holds now plus its decayed past usage expressed as an
average holding, over the fleet's capacity of r:

    share_r = (held_r + decayed_seconds_r · ln 2 / half_life) / capacity_r

``decayed_seconds · ln 2 / half_life`` is the exponentially weighted average of past holding
(the weights of an exponential decay with that half-life integrate to half_life / ln 2), so
past and present are in the same unit. The dominant share is the largest share_r. Past usage
arrives already decayed to ``TeamUsage.as_of`` and is decayed further to ``Snapshot.now``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from scheduler_core.types import NodeInfo, RunningJob, TeamUsage


def decay(value: float, elapsed_s: float, half_life_s: float) -> float:
    """``value`` after ``elapsed_s`` seconds of exponential decay (never grows)."""
    if elapsed_s <= 0:
        return value
    return value * math.pow(0.5, elapsed_s / half_life_s)


def held_resources(running: Iterable[RunningJob]) -> dict[str, tuple[float, float, float]]:
    """GPUs, CPUs and memory (GB) each team holds now."""
    held: dict[str, tuple[float, float, float]] = {}
    for job in running:
        gpus = 0
        for p in job.placements:
            gpus += len(p.gpu_indices)
        g, c, m = held.get(job.spec.team, (0.0, 0.0, 0.0))
        held[job.spec.team] = (
            g + gpus,
            c + gpus * job.spec.cpus_per_gpu,
            m + gpus * job.spec.memory_gb_per_gpu,
        )
    return held


def dominant_shares(
    now: float,
    nodes: Iterable[NodeInfo],
    running: Iterable[RunningJob],
    usage: Iterable[TeamUsage],
    half_life_s: float,
) -> dict[str, float]:
    """Dominant share per team (teams that hold or used anything), keys sorted."""
    cap_g = cap_c = cap_m = 0.0
    for node in nodes:
        cap_g += node.gpus
        cap_c += node.cpus
        cap_m += node.memory_gb
    held = held_resources(running)
    past: dict[str, tuple[float, float, float]] = {}
    to_average = math.log(2) / half_life_s
    for u in usage:
        elapsed = now - u.as_of
        g, c, m = past.get(u.team, (0.0, 0.0, 0.0))
        past[u.team] = (
            g + decay(u.gpu_seconds, elapsed, half_life_s) * to_average,
            c + decay(u.cpu_seconds, elapsed, half_life_s) * to_average,
            m + decay(u.memory_gb_seconds, elapsed, half_life_s) * to_average,
        )
    shares: dict[str, float] = {}
    for team in sorted(set(held) | set(past)):
        hg, hc, hm = held.get(team, (0.0, 0.0, 0.0))
        pg, pc, pm = past.get(team, (0.0, 0.0, 0.0))
        shares[team] = max(
            (hg + pg) / cap_g if cap_g else 0.0,
            (hc + pc) / cap_c if cap_c else 0.0,
            (hm + pm) / cap_m if cap_m else 0.0,
        )
    return shares


def share_of(shares: Mapping[str, float], team: str) -> float:
    return shares.get(team, 0.0)
