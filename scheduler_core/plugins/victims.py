"""Victim choosers (phase 6): the order in which preemption takes candidates.

Seed rule: preemption costs work, so borrowed work goes first (the owner reclaims what it lent),
then lower priority; among candidates the cheapest victim (GPUs × time since its last
checkpoint, plus restart) goes first; an elastic job shrinks before it is preempted whole."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler_core.plugins.protocols import VictimCandidate, VictimChooser


class LeastLostWork:
    """Tier, then shrinks before whole preemptions, then lowest priority, then least lost
    GPU-hours, then fewest GPUs, then most recently started."""

    NAME = "least_lost_work"

    def order(self, candidates: Sequence[VictimCandidate]) -> list[VictimCandidate]:
        return sorted(
            candidates,
            key=lambda c: (
                c.tier,
                c.shrink_to is None,
                c.priority_value,
                round(c.lost_gpu_hours, 9),
                c.gpus,
                -c.started_at,
                c.job_id,
            ),
        )


class NewestFirst:
    """Kubernetes' default order: tier, lowest priority, then most recently started (it has
    the least to lose if it never checkpoints)."""

    NAME = "newest_first"

    def order(self, candidates: Sequence[VictimCandidate]) -> list[VictimCandidate]:
        return sorted(
            candidates,
            key=lambda c: (c.tier, c.shrink_to is None, c.priority_value, -c.started_at, c.job_id),
        )


_: VictimChooser = LeastLostWork()
_ = NewestFirst()
