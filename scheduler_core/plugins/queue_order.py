"""Queue-order plugins (phase 1).

Seed rule: priority classes first; within a class, fair share by dominant resource share (DRF,
seed 001 table 1) over decayed usage; waiting raises priority so nothing starves."""

from __future__ import annotations

import math

from scheduler_core.errors import ConfigError
from scheduler_core.plugins.protocols import QueueContext, QueueOrderPlugin
from scheduler_core.types import Queued


class PriorityFairShare:
    """Key: effective priority (class value plus ``aging_per_hour`` points per whole hour
    waited, descending), then dominant share (ascending), then the shorter runtime limit (a
    job without one counts as ``default_runtime_s``), then submission time.

    Aging is counted in whole points so jobs of one class that waited about as long still tie
    on priority and are ordered by fair share, not by a few seconds of age. Among jobs that
    still tie (same class, same aging point, same team share) the shortest goes first, which
    lowers the mean wait (shortest job first) while aging bounds how far a long job can be
    overtaken: only by jobs whose wait is within one aging point of its own."""

    NAME = "priority_fair_share"

    def __init__(self, aging_per_hour: float = 1.0, default_runtime_s: float = 4 * 3600.0) -> None:
        if aging_per_hour < 0 or math.isnan(aging_per_hour):
            raise ConfigError(f"aging_per_hour must be >= 0, got {aging_per_hour}")
        self.aging_per_hour = aging_per_hour
        self.default_runtime_s = default_runtime_s

    def effective_priority(self, job: Queued, ctx: QueueContext) -> float:
        waited_h = max(0.0, ctx.now - job.submitted_at) / 3600.0
        return ctx.priority_value + math.floor(self.aging_per_hour * waited_h)

    def sort_key(self, job: Queued, ctx: QueueContext) -> tuple[float, ...]:
        waited_h = (ctx.now - job.submitted_at) / 3600.0
        aged = math.floor(self.aging_per_hour * waited_h) if waited_h > 0 else 0
        limit = job.runtime_limit_s if job.runtime_limit_s is not None else self.default_runtime_s
        return (-(ctx.priority_value + aged), ctx.dominant_share, limit, job.submitted_at)

    def tie_key(self, job: Queued, ctx: QueueContext) -> tuple[float, ...]:
        """Priority with whole aging points, then team share: shortest first and submission
        are tie-breaks."""
        return self.sort_key(job, ctx)[:2]


class PriorityFifo:
    """Priority class (descending, with the same aging), then submission time; no fair share
    and no shortest-first tie-break."""

    NAME = "priority_fifo"

    def __init__(self, aging_per_hour: float = 1.0) -> None:
        self._inner = PriorityFairShare(aging_per_hour)

    def sort_key(self, job: Queued, ctx: QueueContext) -> tuple[float, ...]:
        return (-self._inner.effective_priority(job, ctx), job.submitted_at)

    def tie_key(self, job: Queued, ctx: QueueContext) -> tuple[float, ...]:
        """Its whole key: only jobs submitted at the same instant with the same priority tie."""
        return self.sort_key(job, ctx)

    def effective_priority(self, job: Queued, ctx: QueueContext) -> float:
        return self._inner.effective_priority(job, ctx)


class Fifo:
    """Submission order only."""

    NAME = "fifo"

    def sort_key(self, job: Queued, ctx: QueueContext) -> tuple[float, ...]:
        return (job.submitted_at,)

    def tie_key(self, job: Queued, ctx: QueueContext) -> tuple[float, ...]:
        """Only jobs submitted at the same instant tie."""
        return self.sort_key(job, ctx)

    def effective_priority(self, job: Queued, ctx: QueueContext) -> float:
        return ctx.priority_value  # not used for the order: submission time alone decides


_: QueueOrderPlugin = PriorityFairShare()
_ = PriorityFifo()
_ = Fifo()
