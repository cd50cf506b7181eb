"""Elastic jobs grow into idle capacity when the gain repays the resize (phase 5, after the
queue). Starting at the largest size that fits and shrinking before a whole preemption are
handled where those decisions are made (the cycle's size loop, :mod:`.preemption`).

Seed rule (000 "Shrink instead of kill", Pollux): elastic jobs adapt their GPUs to load.

Growth rule: a running elastic job of ``g`` GPUs with ``R`` seconds left (runtime limit, else
``default_runtime_estimate_s``) that adds ``d`` GPUs finishes its remaining work ``R · d / (g +
d)`` seconds sooner (its work ``g · R`` spread over ``g + d`` GPUs). It grows only if that gain
exceeds its declared ``resize_cost_s``. Growth takes only capacity left after every pending job
was tried, never GPUs held for a reservation or a nomination nor those another job's growth
moves off this cycle (:data:`VACATED`), stays within quota, and happens
only when every pending job got its placement attempt this cycle, and never onto a node whose
maintenance window its remaining run would overlap (nor at all for a job already running
into one). A job below its maximum that does not grow gets a :class:`GrowthNote` saying which
of these held it back (for the smallest step that would repay its resize: the last refused)."""

from __future__ import annotations

from scheduler_core.admission import capable_classes
from scheduler_core.context import CycleContext
from scheduler_core.gang import demand_for, elastic_sizes, is_elastic
from scheduler_core.job_shape import fleet_node_size
from scheduler_core.maintenance import run_end
from scheduler_core.placement import PlacementRequest
from scheduler_core.quota_promises import broken_promise, charge_promises
from scheduler_core.sentences import counted, duration
from scheduler_core.state import HOLD, JOB, Grant, Holder, indices_of
from scheduler_core.types import GpuPlacement, GrowthCode, GrowthNote, Resize, RunningJob


def growth_gain_s(remaining_s: float, gpus: int, added: int) -> float:
    """Seconds saved by running the remaining work on ``gpus + added`` GPUs."""
    if added <= 0 or remaining_s <= 0:
        return 0.0
    return remaining_s * added / (gpus + added)


def _remaining(ctx: CycleContext, job: RunningJob) -> float:
    if job.spec.runtime_limit_s is not None:
        return job.started_at + job.spec.runtime_limit_s - ctx.snapshot.now
    return ctx.config.default_runtime_estimate_s


def resize_cost_s(ctx: CycleContext, job: RunningJob) -> tuple[float, str]:
    """What growing costs the job, in seconds of its run, and how to say it. Where a resize
    restarts the job (``SchedulerConfig.resize_restarts``: the control plane stops it and
    binds it again at the new size), the work since its last checkpoint is lost and its
    restart paid too."""
    spec = job.spec
    if not ctx.config.resize_restarts:
        return spec.resize_cost_s, f"its {duration(spec.resize_cost_s)} resize cost"
    since = job.last_checkpoint_at if job.last_checkpoint_at is not None else job.started_at
    lost = max(0.0, ctx.snapshot.now - since)
    cost = spec.resize_cost_s + spec.restart_cost_s + lost
    # In the sentences' units ("30 min"): "finishes about 3599 s sooner" read as no span a person says.
    return cost, (f"the {duration(cost)} a restart costs it ({duration(lost)} of work since its "
                  f"{'last checkpoint' if job.last_checkpoint_at is not None else 'start'} "
                  f"and {duration(spec.resize_cost_s + spec.restart_cost_s)} to resize)")


VACATED: Holder = (HOLD, "\x00vacated")
"""GPUs a growing job moves off: its old replicas run on them until the control loop has
stopped them for the resize, so no later growth this cycle may take them (a GPU is reused
only after its old owner is fenced). Released when the growth phase ends."""


def grow_elastic(ctx: CycleContext) -> None:
    try:
        _grow_all(ctx)
    finally:
        ctx.state.release(VACATED)


def _grow_all(ctx: CycleContext) -> None:
    state = ctx.state
    jobs = sorted(
        (j for j in ctx.running.values() if is_elastic(j.spec)),
        key=lambda j: (-ctx.priority_value(j.spec), j.started_at, j.spec.id),
    )
    for job in jobs:
        spec = job.spec
        if job.terminating or spec.id in ctx.killed or spec.id in ctx.preempted \
                or spec.id in ctx.resized:
            continue
        holder = (JOB, spec.id)
        held = list(state.holdings.get(holder, []))
        if not held or spec.max_gpus is None:
            continue
        gpus = sum(g.gpus for g in held)
        # the sizes a bind starts it at (its maximum down in replica steps, then its minimum),
        # above what it holds: counting replicas up from what it holds reaches sizes no bind
        # makes when the range is no whole number of replicas (2..5 in pairs: 4, never 5)
        larger = [s for s in elastic_sizes(spec) if s > gpus]
        if not larger:
            continue
        if not ctx.config.elastic_growth:
            _note(ctx, spec.id, GrowthCode.GROWTH_OFF,
                  f"Holds {gpus} of at most {spec.max_gpus} GPUs: elastic growth is off in the "
                  f"scheduler's policy.")
            continue
        if ctx.untried:
            # the waiting jobs come first: growth takes only what is left once each was tried
            _note(ctx, spec.id, GrowthCode.QUEUE_FIRST,
                  f"Holds {gpus} of at most {spec.max_gpus} GPUs: it grows only in a cycle that "
                  f"tried every waiting job first, and this one left "
                  f"{counted(ctx.untried, 'waiting job')} untried (the placement budget).")
            continue
        _grow(ctx, job, held, gpus, larger)


def _grow(ctx: CycleContext, job: RunningJob, held: list[Grant], gpus: int,
          larger: list[int]) -> None:
    """Grow ``job`` to the largest of the sizes ``larger`` (largest first) that repays the
    resize and fits, or say why not."""
    state, spec = ctx.state, job.spec
    holder = (JOB, spec.id)
    remaining = _remaining(ctx, job)
    cost, cost_words = resize_cost_s(ctx, job)
    gpu_type = state.nodes[held[0].node].gpu_type
    closed = ctx.calendar.closed(ctx.snapshot.now, run_end(job.started_at, spec.runtime_limit_s))
    if closed and any(g.node in closed for g in held):
        # it already runs into a maintenance window: growing would add to that
        _note(ctx, spec.id, GrowthCode.MAINTENANCE_WINDOW,
              f"Holds {gpus} of at most {spec.max_gpus} GPUs: its run reaches into a "
              f"maintenance window on its nodes, and it does not grow further into one.")
        return
    why: tuple[GrowthCode, str] | None = None
    for size in larger:
        added = size - gpus
        gain = growth_gain_s(remaining, gpus, added)
        if gain <= cost:
            if why is None:
                why = (GrowthCode.NOT_WORTH_IT,
                       f"{counted(added, 'more GPU')} would finish it only about "
                       f"{duration(gain)} sooner, not more than {cost_words}.")
            break
        if not ctx.ledger.check(spec.team, gpu_type, added).admitted:
            why = (GrowthCode.QUOTA, f"team {spec.team}'s quota has no room for "
                                     f"{counted(added, f'more {gpu_type} GPU')}.")
            continue
        if broken_promise(ctx, spec, {gpu_type: added}) is not None:
            why = (GrowthCode.BEHIND_RESERVATION,
                   f"{counted(added, f'more {gpu_type} GPU')} would take quota that the "
                   f"job holding the reservation needs when it starts.")
            continue
        if not _regrow(ctx, job, gpus + added, gpu_type, closed):
            why = (GrowthCode.NO_ROOM,
                   f"no capable nodes have room for {counted(added, 'more GPU')} in its "
                   f"shape now (GPUs held for a reservation excluded"
                   + (", and those a job growing this cycle moves off, still running it"
                      if ctx.state.holdings.get(VACATED) else "") + ").")
            continue
        charge_promises(ctx, spec, {gpu_type: added})
        ctx.ledger.charge(spec.team, gpu_type, added)
        ctx.resized[spec.id] = Resize(
            job_id=spec.id,
            placements=_placements(ctx, holder),
            from_gpus=gpus,
            to_gpus=gpus + added,
            for_job=None,
            message=(
                f"Grows from {gpus} to {gpus + added} GPUs: finishes about {duration(gain)} "
                f"sooner, more than {cost_words}."
            ),
            generation=job.generation,
        )
        return
    if why is not None:
        _note(ctx, spec.id, why[0], f"Holds {gpus} of at most {spec.max_gpus} GPUs: {why[1]}")


def _note(ctx: CycleContext, job_id: str, code: GrowthCode, message: str) -> None:
    ctx.growth_notes[job_id] = GrowthNote(job_id, code, message)


def _regrow(ctx: CycleContext, job: RunningJob, total: int, gpu_type: str,
            closed: frozenset[int]) -> bool:
    """Give the job ``total`` GPUs of its type in the shape a fresh bind at that size would
    have (:func:`.gang.demand_for`), its own GPUs counted free and its nodes preferred; or
    leave it as it is and say False.

    Adding members to what it holds could build a shape no bind makes (8 GPUs as 4 + 4 on two
    nodes, where a job of a node's GPUs takes a whole node): where a resize restarts the job,
    its next bind could not place that size, started it at the old one, and the next cycle
    grew it again, a restart every cycle."""
    state, spec = ctx.state, job.spec
    holder = (JOB, spec.id)
    held = state.release(holder)
    # whole nodes by the fleet's largest capable node, as a bind counts them: the width of a
    # node it holds made 6 GPUs 4 + 2 on two nodes of a job holding a node of 4
    demand = demand_for(spec, total, fleet_node_size(ctx, spec))
    classes = tuple(
        tuple(c for c in capable_classes(ctx, m) if state.classes[c].gpu_type.name == gpu_type)
        for m in demand.members
    )
    request = PlacementRequest(demand, classes, ctx.plugins.score_by_workload[spec.workload],
                               seed_nodes=tuple(sorted({g.node for g in held})), closed=closed)
    grants = ctx.placer.place(request)
    for g in held if grants is None else grants:
        state.take(holder, g)
    if grants is not None:
        _vacate(ctx, held, grants)
    return grants is not None


def _vacate(ctx: CycleContext, held: list[Grant], grants: list[Grant]) -> None:
    """Hold what the job held before and holds no more under :data:`VACATED`."""
    kept: dict[int, int] = {}
    for g in grants:
        kept[g.node] = kept.get(g.node, 0) | g.mask
    for g in held:
        left = g.mask & ~kept.get(g.node, 0)
        if left:
            share = left.bit_count()
            ctx.state.take(VACATED, Grant(g.node, left, g.cpus * share // g.gpus,
                                          g.memory_gb * share // g.gpus))


def _placements(ctx: CycleContext, holder: tuple[str, str]) -> tuple[GpuPlacement, ...]:
    merged: dict[tuple[str, str], int] = {}
    for g in ctx.state.holdings.get(holder, []):
        key = (ctx.state.nodes[g.node].name, g.role)
        merged[key] = merged.get(key, 0) | g.mask
    return tuple(
        GpuPlacement(node, indices_of(mask), role) for (node, role), mask in sorted(merged.items())
    )
