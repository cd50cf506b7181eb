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
from dataclasses import dataclass

from scheduler_core.types import NodeInfo, RunningJob, SchedulerConfig, Snapshot, TeamUsage


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


@dataclass(frozen=True, slots=True)
class FairShare:
    """One team's place in dominant resource fairness, as Slurm's ``sshare`` shows an
    account's: what it holds now and its decayed past usage as an average holding (GPUs, CPUs,
    memory GB), each resource's share of the fleet's capacity, and the dominant one, which
    orders the queue among jobs of equal priority (lower first)."""

    team: str
    held: tuple[float, float, float]
    past: tuple[float, float, float]
    shares: tuple[float, float, float]
    dominant_share: float
    dominant_resource: str
    """``gpus``, ``cpus`` or ``memory``: the resource whose share is the dominant one (the
    first of them on a tie); empty for a team that holds and used nothing."""


RESOURCES = ("gpus", "cpus", "memory")


def fair_shares(
    now: float,
    nodes: Iterable[NodeInfo],
    running: Iterable[RunningJob],
    usage: Iterable[TeamUsage],
    half_life_s: float,
) -> dict[str, FairShare]:
    """Every team that holds or used anything, keys sorted: the parts of its dominant share."""
    capacity = [0.0, 0.0, 0.0]
    for node in nodes:
        capacity[0] += node.gpus
        capacity[1] += node.cpus
        capacity[2] += node.memory_gb
    return fair_shares_of(now, (capacity[0], capacity[1], capacity[2]), held_resources(running), usage,
                          half_life_s)


def fair_shares_of(
    now: float,
    capacity: tuple[float, float, float],
    held: Mapping[str, tuple[float, float, float]],
    usage: Iterable[TeamUsage],
    half_life_s: float,
) -> dict[str, FairShare]:
    """:func:`fair_shares` from the fleet's capacity (GPUs, CPUs, memory GB) and what each team
    holds now (:func:`held_resources`), summed already: for a reader that sums them where they
    are stored instead of reading every node and running job. Whole numbers add up exactly in
    floats (below 2**53), so the sums' order does not change a share."""
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
    found: dict[str, FairShare] = {}
    for team in sorted(set(held) | set(past)):
        now_held = held.get(team, (0.0, 0.0, 0.0))
        used = past.get(team, (0.0, 0.0, 0.0))
        shares = (
            (now_held[0] + used[0]) / capacity[0] if capacity[0] else 0.0,
            (now_held[1] + used[1]) / capacity[1] if capacity[1] else 0.0,
            (now_held[2] + used[2]) / capacity[2] if capacity[2] else 0.0,
        )
        dominant = max(shares)
        found[team] = FairShare(team, now_held, used, shares, dominant,
                                RESOURCES[shares.index(dominant)] if dominant > 0 else "")
    return found


def dominant_shares(
    now: float,
    nodes: Iterable[NodeInfo],
    running: Iterable[RunningJob],
    usage: Iterable[TeamUsage],
    half_life_s: float,
) -> dict[str, float]:
    """Dominant share per team (teams that hold or used anything), keys sorted."""
    return {team: share.dominant_share
            for team, share in fair_shares(now, nodes, running, usage, half_life_s).items()}


def snapshot_fair_shares(snapshot: Snapshot, config: SchedulerConfig | None = None) -> dict[str, FairShare]:
    """:func:`fair_shares` of a snapshot under ``config``'s half-life: the shares a cycle of
    this snapshot orders the queue by."""
    cfg = config if config is not None else SchedulerConfig()
    return fair_shares(snapshot.now, snapshot.nodes, snapshot.running, snapshot.team_usage,
                       cfg.fair_share_half_life_s)


def share_of(shares: Mapping[str, float], team: str) -> float:
    return shares.get(team, 0.0)
