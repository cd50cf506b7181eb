"""Fleet figures for the dashboards (issue #3 item 10), counted after the plan's binds.

* ``stranded_gpus`` (seed 000): idle GPUs on partially used ready nodes, while some job that
  needs at least one whole node waits and could use that node; zero when no such job waits.
  The rule is :mod:`scheduler_core.stranded`'s, which the fragmentation API counts by too; the
  cycle reads its node classes and its waiting jobs' gangs into it. Idle includes the GPUs held
  for a waiting job's reservation or nomination: they run nothing, as the fragmentation API,
  the simulator and the seed count them; ``reserved_gpus`` says how many of the idle GPUs are
  so held.
* Idle GPUs on a node inside a maintenance window count as unavailable, like a node that is
  not ready.
* ``largest_free_block_by_pool``: most idle GPUs on one ready node, per pool (held ones
  included, as above).
* ``dominant_share_by_team``: the DRF shares the queue was ordered by.
* ``mean_slowdown`` (seed 001): mean over running jobs of (wait + run so far) / run so far,
  with run time floored at 60 s so a job that just started does not dominate.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from scheduler_core.context import CycleContext
from scheduler_core.job_shape import shape_of
from scheduler_core.state import HOLD, JOB
from scheduler_core.stranded import NodeUse, WaitingJob, WaitingMember, stranded
from scheduler_core.types import FleetFigures, JobSpec

_new_tuple = tuple.__new__


def fleet_figures(ctx: CycleContext, pending_by_reason: dict[str, int],
                  queue: Sequence[JobSpec]) -> FleetFigures:
    """``queue``: the cycle's queue, in order (its waiting jobs strand GPUs)."""
    state = ctx.state
    held_on, other_on, borrowed = _holdings(ctx)
    total = allocated = free = reserved = unavailable = 0
    largest: dict[str, int] = {}
    uses: list[NodeUse[int]] = []
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
        if on_node > 0 and unused > 0:
            # only a partly used node can strand GPUs: the others are not handed to the rule
            uses.append(_new_tuple(NodeUse, (node.pool, node_class[n], on_node, unused, True)))
    now = ctx.snapshot.now
    slowdowns = []
    for j in ctx.running.values():
        ran = max(60.0, now - j.started_at)
        slowdowns.append(((j.started_at - j.spec.submitted_at) + ran) / ran)
    return FleetFigures(
        total_gpus=total,
        allocated_gpus=allocated,
        free_gpus=free,
        stranded_gpus=stranded(uses, {nc.id: nc.gpus for nc in state.classes}, _waiting_jobs(ctx, queue),
                               count_waiting=False).gpus,
        largest_free_block_by_pool=dict(sorted(largest.items())),
        dominant_share_by_team=dict(sorted(ctx.shares.items())),
        pending_by_reason=dict(sorted(pending_by_reason.items())),
        unavailable_gpus=unavailable,
        reserved_gpus=reserved,
        borrowed_gpus=borrowed,
        mean_slowdown=sum(slowdowns) / len(slowdowns) if slowdowns else 0.0,
    )


def _waiting_jobs(ctx: CycleContext, queue: Sequence[JobSpec]) -> Iterator[WaitingJob[int]]:
    """The queue's jobs in line, read lazily (the rule stops reading once every node class that
    could strand GPUs is wanted), one per gang: each member of its smallest gang with the node
    classes it may run on, under every GPU type the job accepts. (Until 7 Dec the cycle took
    admission's ``JobShape.needs_whole``, judged on the job's preferred GPU type alone: a job of
    4 GPUs per node accepting any type, A100 nodes of 8 preferred, stranded nothing beside an
    H100 node of 4 it would fill, while the live figures counted.)"""
    outcomes = ctx.outcomes
    seen: set[int] = set()
    # jobs of one team and gang usually share their outcome: one look at its shape
    seen_outcomes: set[int] = set()
    for spec in queue:
        outcome = outcomes.get(spec.id)
        if outcome is None or not outcome.resolvable or id(outcome) in seen_outcomes:
            continue
        seen_outcomes.add(id(outcome))
        shape = shape_of(ctx, spec)
        # (a shape with no ready node has no gang number: its own stands for it)
        gang = shape.gang if shape.gang >= 0 else -1 - shape.number
        if gang in seen:
            continue
        seen.add(gang)
        members = {(m.gpus, classes) for option in shape.options
                   for m, classes in zip(shape.smallest.members, option.member_classes, strict=True)}
        yield WaitingJob(tuple(WaitingMember(gpus, frozenset(classes)) for gpus, classes in members))


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
