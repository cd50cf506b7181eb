"""Fleet figures for the dashboards (issue #3 item 10), counted after the plan's binds.

* ``stranded_gpus`` (seed 000): free GPUs on partially used ready nodes, while some job that
  needs at least one whole node waits; zero when no such job waits.
* ``largest_free_block_by_pool``: most free GPUs on one ready node, per pool.
* ``dominant_share_by_team``: the DRF shares the queue was ordered by.
* ``mean_slowdown`` (seed 001): mean over running jobs of (wait + run so far) / run so far,
  with run time floored at 60 s so a job that just started does not dominate.
"""

from __future__ import annotations

from scheduler_core.context import CycleContext
from scheduler_core.state import HOLD, JOB
from scheduler_core.types import FleetFigures


def fleet_figures(ctx: CycleContext, pending_by_reason: dict[str, int],
                  whole_node_job_waits: bool) -> FleetFigures:
    state = ctx.state
    n_nodes = len(state.nodes)
    allocated_on = [0] * n_nodes
    held_on = [0] * n_nodes
    borrowed = 0
    for (kind, job_id), grants in state.holdings.items():
        gpus = 0
        for g in grants:
            if kind == JOB:
                allocated_on[g.node] += g.gpus
            elif kind == HOLD:
                held_on[g.node] += g.gpus
            gpus += g.gpus
        if kind != JOB:
            continue
        running = ctx.running.get(job_id)
        bind = ctx.bound.get(job_id)
        if (running is not None and running.borrowed) or (bind is not None and bind.borrowed):
            borrowed += gpus
    total = allocated = free = reserved = unavailable = stranded = 0
    largest: dict[str, int] = {}
    for n, node in enumerate(state.nodes):
        total += node.gpus
        allocated += allocated_on[n]
        idle = node.gpus - allocated_on[n] - held_on[n]
        if not state.ready[n]:
            unavailable += idle + held_on[n]
            continue
        reserved += held_on[n]
        free += idle
        largest[node.pool] = max(largest.get(node.pool, 0), idle)
        if whole_node_job_waits and allocated_on[n] > 0:
            stranded += idle
    now = ctx.snapshot.now
    slowdowns = [
        ((j.started_at - j.spec.submitted_at) + max(60.0, now - j.started_at))
        / max(60.0, now - j.started_at)
        for j in ctx.running.values()
    ]
    return FleetFigures(
        total_gpus=total,
        allocated_gpus=allocated,
        free_gpus=free,
        stranded_gpus=stranded,
        largest_free_block_by_pool=dict(sorted(largest.items())),
        dominant_share_by_team=dict(sorted(ctx.shares.items())),
        pending_by_reason=dict(sorted(pending_by_reason.items())),
        unavailable_gpus=unavailable,
        reserved_gpus=reserved,
        borrowed_gpus=borrowed,
        mean_slowdown=sum(slowdowns) / len(slowdowns) if slowdowns else 0.0,
    )
