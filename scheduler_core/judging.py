"""How the engine's figures are judged, one rule for the simulator's replays and the real
fleet: the seed's percentile, when an ETA told to a waiting job counts as kept, and a job's
size class (small or large).

The simulator judges every replayed wait (``scheduler_core.sim.metrics``); the control plane
judges the jobs that started on the fleet (``controlplane/services/eta_record.py``). Both
hand this module the same two lists, so "on time" means the same on a replay and on the
job page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ETA_SLACK_S = 1.0
"""A start this close after the ETA a job was told still counts as on time (ETAs are floats,
event times whole seconds)."""


SMALL = "small"
LARGE = "large"
SIZE_CLASSES: tuple[str, str] = (SMALL, LARGE)


def size_class(gpus: int, gpus_per_node: int) -> str:
    """The seed's split of the work by size: ``"small"``, fewer GPUs than a node (it fits beside
    other work on one node), or ``"large"``, a whole node or more (a gang that needs whole nodes
    drained for it). The simulator splits its waits by it (``wait_small_*``, ``wait_large_*``)
    and the control plane its ETA record."""
    return SMALL if gpus < gpus_per_node else LARGE


def p95(sorted_values: Sequence[float]) -> float:
    """The seed's percentile: ``xs[min(n - 1, int(0.95 * n))]`` of an ascending list."""
    if not sorted_values:
        raise ValueError("p95 of an empty list")
    return sorted_values[min(len(sorted_values) - 1, int(0.95 * len(sorted_values)))]


@dataclass(frozen=True, slots=True)
class EtaJudgement:
    """The ETAs told to waits that have ended in a start, judged against those starts.

    ``on_time``: the share started no later than told (within :data:`ETA_SLACK_S`);
    ``median_early_s``: how much sooner than told the median on-time one started;
    ``late_p95_s`` and ``late_max_s``: lateness over all of them (zero for those on time);
    ``median_share_of_wait``: the median of (the wait it had ÷ the wait it was told), both
    from when it was told. Each ``None`` when nothing was judged."""

    judged: int
    on_time: float | None
    median_early_s: float | None
    late_p95_s: float | None
    late_max_s: float | None
    median_share_of_wait: float | None


def judge_etas(errors_s: Sequence[float], shares: Sequence[float] = ()) -> EtaJudgement:
    """``errors_s``: per wait, its start minus the first ETA it was told (negative: early).
    ``shares``: per wait told an ETA after it began, its wait ÷ the wait it was told."""
    late = sorted(error if error > ETA_SLACK_S else 0.0 for error in errors_s)
    early = sorted(-error for error in errors_s if error <= ETA_SLACK_S)
    ordered_shares = sorted(shares)
    return EtaJudgement(
        judged=len(late),
        on_time=len(early) / len(late) if late else None,
        median_early_s=max(0.0, early[len(early) // 2]) if early else None,
        late_p95_s=p95(late) if late else None,
        late_max_s=late[-1] if late else None,
        median_share_of_wait=max(0.0, ordered_shares[len(ordered_shares) // 2])
        if ordered_shares else None,
    )
