"""Phase 1: order the queue.

The queue-order plugin gives each pending job a key from its priority class, its team's
dominant share (:mod:`scheduler_core.fairshare`) and its age; ties fall to submission time and
then job id, so the order is total and the same snapshot always yields the same order."""

from __future__ import annotations

from scheduler_core.context import CycleContext
from scheduler_core.errors import SnapshotError
from scheduler_core.plugins.protocols import QueueContext
from scheduler_core.types import JobSpec


def order_queue(ctx: CycleContext) -> list[JobSpec]:
    plugin = ctx.plugins.queue_order
    now = ctx.snapshot.now
    seen: set[str] = set()
    keyed: list[tuple[tuple[float, ...], float, str, JobSpec]] = []
    values = {name: pc.value for name, pc in ctx.priority.items()}
    shares = ctx.shares
    sort_key = plugin.sort_key
    # one QueueContext per (priority class, team): it holds nothing job-specific
    qctxs: dict[tuple[str, str], QueueContext] = {}
    for job in ctx.snapshot.pending:
        if job.id in seen:
            raise SnapshotError(f"pending job {job.id!r} appears twice in the snapshot")
        if job.id in ctx.running:
            raise SnapshotError(
                f"job {job.id!r} is both pending and running; a job is in exactly one of them"
            )
        seen.add(job.id)
        qkey = (job.priority_class, job.team)
        qctx = qctxs.get(qkey)
        if qctx is None:
            qctx = qctxs[qkey] = QueueContext(now, values.get(job.priority_class, 0),
                                              shares.get(job.team, 0.0))
        keyed.append((sort_key(job, qctx), job.submitted_at, job.id, job))
    # job ids are unique (checked above), so the comparison never reaches the JobSpec
    keyed.sort()
    return [k[3] for k in keyed]
