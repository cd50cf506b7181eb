"""Fleet figures for the dashboards (issue #3 item 10), counted after the plan's binds.

* ``stranded_gpus`` (seed 000): idle GPUs on partially used ready nodes, while some job that
  needs at least one whole node waits and could use that node (its GPU type and memory);
  zero when no such job waits. Idle includes the GPUs held for a waiting job's reservation or
  nomination: they run nothing, as the fragmentation API, the simulator and the seed count
  them; ``reserved_gpus`` says how many of the idle GPUs are so held.
* Idle GPUs on a node inside a maintenance window count as unavailable, like a node that is
  not ready.
* ``largest_free_block_by_pool``: most idle GPUs on one ready node, per pool (held ones
  included, as above).
* ``dominant_share_by_team``: the DRF shares the queue was ordered by.
* ``mean_slowdown`` (seed 001): mean over running jobs of (wait + run so far) / run so far,
  with run time floored at 60 s so a job that just started does not dominate.
"""

from __future__ import annotations

from scheduler_core.context import CycleContext
from scheduler_core.state import HOLD, JOB
from scheduler_core.types import FleetFigures


def fleet_figures(ctx: CycleContext, pending_by_reason: dict[str, int],
                  whole_node_classes: frozenset[int]) -> FleetFigures:
    """``whole_node_classes``: the node classes some waiting whole-node job could use."""
    state = ctx.state
    held_on, other_on, borrowed = _holdings(ctx)
    total = allocated = free = reserved = unavailable = stranded = 0
    largest: dict[str, int] = {}
    free_gpus = state.free_gpus
    ready = state.ready
    node_class = state.node_class
    # a node inside a maintenance window takes no work: its idle GPUs are not free
    in_maintenance = ctx.calendar.active_nodes
    for n, node in enumerate(state.nodes):
        # free_gpus counts every holder; running and bound jobs hold what the others do not
        idle = free_gpus[n] + other_on[n]
        on_node = node.gpus - idle - held_on[n]
        total += node.gpus
        allocated += on_node
        if not ready[n] or n in in_maintenance:
            unavailable += idle + held_on[n]
            continue
        reserved += held_on[n]
        free += idle
        # Held GPUs run nothing: the stranded and largest-block figures count every idle GPU,
        # as the fragmentation API reading live allocations does.
        unused = idle + held_on[n]
        if unused > largest.get(node.pool, 0):
            largest[node.pool] = unused
        elif node.pool not in largest:
            largest[node.pool] = 0
        if on_node > 0 and node_class[n] in whole_node_classes:
            stranded += unused
    now = ctx.snapshot.now
    slowdowns = []
    for j in ctx.running.values():
        ran = max(60.0, now - j.started_at)
        slowdowns.append(((j.started_at - j.spec.submitted_at) + ran) / ran)
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


def _holdings(ctx: CycleContext) -> tuple[list[int], list[int], int]:
    """GPUs per node held for reservations and nominations, GPUs per node of any other holder
    that is not a job, and GPUs of borrowed jobs. Jobs' GPUs per node are what is left, so
    only the few holders that are not jobs are walked grant by grant."""
    n_nodes = len(ctx.state.nodes)
    held_on = [0] * n_nodes
    other_on = [0] * n_nodes
    borrowed = 0
    running, bound = ctx.running, ctx.bound
    for (kind, job_id), grants in ctx.state.holdings.items():
        if kind == JOB:
            job = running.get(job_id)
            bind = bound.get(job_id)
            if (job is not None and job.borrowed) or (bind is not None and bind.borrowed):
                borrowed += sum(g.mask.bit_count() for g in grants)
            continue
        into = held_on if kind == HOLD else other_on
        for g in grants:
            into[g.node] += g.mask.bit_count()
    return held_on, other_on, borrowed
