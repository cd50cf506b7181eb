"""Phase 6 for one job: look for victims, and nominate the job when they are found.

A job the filter and score phases could not place may start by preemption (seed 004: borrowed
work first, then lower priority, whole gangs, the cheapest lost work). :func:`try_preemption`
asks :func:`~scheduler_core.preemption.preempt_for` for victims on each GPU-type option of the
job; when they are found the job is *nominated*: the victims get their notices (a preemption
with grace period and lost GPU-hours, or a shrink of an elastic job), the GPUs they free are
promised to it as a reservation, and it waits for them to stop. When every candidate is
protected (minimum runtime, preemption budget) the job is told which protection is in the way
and when it lifts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler_core.admission import TypeOption, gpus_by_type, quota_for, quota_for_grants
from scheduler_core.context import CycleContext
from scheduler_core.distinct_nodes import shapes_of
from scheduler_core.gang import Demand
from scheduler_core.job_shape import JobShape
from scheduler_core.maintenance import NO_NODES, run_end
from scheduler_core.outcome import Outcome
from scheduler_core.placement import PlacementRequest
from scheduler_core.plugins.protocols import ScorePlugin
from scheduler_core.preemption import (
    Found,
    Protected,
    nominate,
    preempt_for,
    preemption_notice,
    shrink_notice,
)
from scheduler_core.quota_promises import broken_promise, promise_quota
from scheduler_core.sentences import counted, job_names
from scheduler_core.state import JOB, Grant
from scheduler_core.types import JobSpec, ReasonCode, Reservation
from scheduler_core.victims import budget_lifts_at


@dataclass(frozen=True, slots=True)
class ProtectedWays:
    """A job's ways in by preemption that protected victims (or the cycle's spent budget)
    stand in: each GPU-type option it was searched on, in the order tried, with what stands
    in the way there. A job of several types is explained on each (``cycle``): the
    protection of its first type's victims, told on that type's GPUs alone, read t=4230
    when its other type freed at t=2000."""

    ways: tuple[tuple[TypeOption, Protected], ...]

    @property
    def first(self) -> Protected:
        """What stands in the way of the first option searched (a job over its quota is told
        that one, ``also_by_preemption``)."""
        return self.ways[0][1]


def try_preemption(ctx: CycleContext, spec: JobSpec, shape: JobShape, score: ScorePlugin,
                   mark: float | None) -> bool | ProtectedWays | None:
    """Phase 6: ``True`` when victims were found and the job's preemption is planned; the
    protections that stopped it, per option, when candidates exist but are protected;
    ``None`` otherwise."""
    if not (ctx.config.preemption and ctx.preemption_searches < ctx.config.max_preemption_searches
            and _may_find_victims(ctx, spec)):
        return None
    ctx.preemption_searches += 1
    ways: list[tuple[TypeOption, Protected]] = []
    for option in shape.options:
        result = _preempt(ctx, spec, shape.smallest, option, score)
        if isinstance(result, Found):
            _apply_preemption(ctx, spec, shape.smallest, option, result, shape.needs_whole)
            ctx.timed("preempt", mark)
            return True
        if isinstance(result, Protected):
            ways.append((option, result))
    return ProtectedWays(tuple(ways)) if ways else None


def _may_find_victims(ctx: CycleContext, spec: JobSpec) -> bool:
    """Cheap test: is there any job stopping, borrowed, or of a lower priority class?"""
    if ctx.victim_hint is None:
        lowest = min((ctx.priority_value(j.spec) for j in ctx.running.values()), default=None)
        stopping = any(j.terminating for j in ctx.running.values())
        borrowed = any(j.borrowed for j in ctx.running.values())
        ctx.victim_hint = (lowest, stopping, borrowed)
    lowest, stopping, borrowed = ctx.victim_hint
    if stopping or ctx.killed or borrowed:
        return True
    pc = ctx.priority[spec.priority_class]
    return pc.may_preempt_lower and lowest is not None and lowest < pc.value


def _preempt(ctx: CycleContext, spec: JobSpec, demand: Demand, option: TypeOption,
             score: ScorePlugin) -> Found | Protected | None:
    member_classes = option.member_classes
    closed = NO_NODES
    # it starts once its victims have stopped: its run may begin a grace period late, and
    # still hold its GPUs when a promise of its team (or cohort) starts (quota_promises)
    starts = ctx.snapshot.now + max((pc.grace_period_s for pc in ctx.priority.values()), default=0)
    if ctx.calendar:
        closed = ctx.calendar.closed(ctx.snapshot.now, run_end(starts, spec.runtime_limit_s))
    request = PlacementRequest(demand, member_classes, score, closed=closed)

    def fit() -> list[Grant] | None:
        if option.gpu_type is not None and not quota_for(ctx, spec, option, demand.gpus).admitted:
            return None
        grants = ctx.placer.place(request)
        if grants is None:
            return None
        by_type = gpus_by_type(ctx, [(g.node, g.gpus) for g in grants])
        if option.gpu_type is None and not quota_for_grants(ctx, spec, by_type)[0]:
            return None
        # a preemption whose job its quota would refuse at its start, beside a job promised
        # GPUs before it, would stop its victims for nothing
        broken = broken_promise(ctx, spec, by_type, starts)
        if broken is not None and broken_promise(
                ctx, spec, _less_own_victims(ctx, spec.team, by_type, broken.start_at),
                starts) is not None:
            return None
        return grants

    classes = frozenset(c for cls in member_classes for c in cls)
    return preempt_for(ctx, spec, demand.gpus, option.gpu_type, classes, fit,
                       shapes_of(demand, member_classes))


def _apply_preemption(ctx: CycleContext, spec: JobSpec, demand: Demand, option: TypeOption,
                      found: Found, needs_whole: bool) -> None:
    start = nominate(ctx, spec, found)
    ctx.arrays.started(spec, nominated_from=start)
    shrinks: dict[str, list[Grant]] = {}
    parts = found.parts or tuple(None for _ in found.victims)
    for victim, part in zip(found.victims, parts, strict=True):
        if part is not None:
            shrinks.setdefault(victim.job_id, []).extend(part)
        else:
            ctx.preempted[victim.job_id] = preemption_notice(ctx, spec, demand.gpus, victim)
    for job_id, pieces in sorted(shrinks.items()):
        ctx.resized[job_id] = shrink_notice(ctx, spec, job_id, pieces)
    placements = ctx.state.placements(found.grants)
    ctx.reservations[spec.id] = Reservation(spec.id, start, placements)
    ctx.reserved_specs[spec.id] = spec
    promise_quota(ctx, spec, start, found.grants, released=_team_victims(ctx, spec.team, found))
    if found.victims:
        names = job_names(sorted({v.job_id for v in found.victims}))
        message = (f"Preempting {names} to start on {counted(demand.gpus, 'GPU')}; it starts once they "
                   f"have stopped, by t={start:.0f}.")
        would = "the preempted jobs stop within their grace period"
    elif found.claimed:
        names = job_names(list(found.claimed))
        message = (f"Waits for {names}, already stopping, to release the GPUs it needs, by "
                   f"t={start:.0f}.")
        would = "the stopping jobs release their GPUs"
    else:
        # its GPUs are free: what it waits for is the quota its team's stopping jobs give back
        # (it read "Waits for jobs , already stopping, ...", naming no one)
        message = (f"Waits for its team's stopping jobs to give back the quota it needs, by "
                   f"t={start:.0f}.")
        would = "its team's stopping jobs give their quota back"
    ctx.outcomes[spec.id] = Outcome(
        ReasonCode.WAITING_FOR_PREEMPTION, message, True, would, eta=start, demand=demand,
        classes=ctx.placer.union(option.member_classes),
        needs_whole_node=needs_whole,
    )


def _less_own_victims(ctx: CycleContext, team: str, by_type: dict[str, int],
                      promised_at: float) -> dict[str, int]:
    """``by_type`` less the GPUs of ``team``'s running jobs the victim search has taken off
    the fleet (as what-ifs) that would otherwise still hold them at ``promised_at``: stopping
    them gives that quota back. Stopping and killed jobs, and jobs whose runtime limits end
    them by then, are not counted: a promise already counts their quota as given back."""
    net = dict(by_type)
    holdings = ctx.state.holdings
    for job_id, job in ctx.running.items():
        if job.spec.team != team or job.terminating or job_id in ctx.killed \
                or (JOB, job_id) in holdings or ctx.ends.get(job_id, math.inf) <= promised_at:
            continue
        index_of = ctx.state.index_of
        pieces = [(index_of[p.node], len(p.gpu_indices)) for p in job.placements if p.node in index_of]
        for t, gpus in gpus_by_type(ctx, pieces).items():
            if t in net:
                net[t] -= gpus
    return net


def _team_victims(ctx: CycleContext, team: str, found: Found) -> dict[str, int]:
    """GPUs per type that ``team``'s own victims in ``found`` give back to its quota."""
    pieces: list[tuple[int, int]] = []
    parts = found.parts or tuple(None for _ in found.victims)
    for victim, part in zip(found.victims, parts, strict=True):
        if ctx.running[victim.job_id].spec.team == team:
            grants = part if part is not None else ctx.state.holdings.get((JOB, victim.job_id), ())
            pieces.extend((g.node, g.gpus) for g in grants)
    return gpus_by_type(ctx, pieces)


def also_by_preemption(ctx: CycleContext, spec: JobSpec,
                       protected: bool | ProtectedWays | None) -> None:
    """A job over its quota (waiting for it, or holding the reservation until it lifts) that
    could preempt its way in once its victims' minimum runtime is over says so, and that time
    is its ETA when it comes first: the cycle will then preempt. (Explanation only: the
    decision was taken.)"""
    if not isinstance(protected, ProtectedWays):
        return
    first = protected.first
    lifts = _protection_lifts(ctx, first.victims)
    if lifts is None:
        return
    outcome = ctx.outcomes[spec.id]
    eta = lifts[1] if outcome.eta is None else min(outcome.eta, lifts[1])
    ctx.outcomes[spec.id] = outcome._replace(
        message=f"{outcome.message} It could also start by preemption, but "
                f"{_protected_words(first, lifts)}.",
        eta=eta)


def protected_outcome(ctx: CycleContext, protected: Protected, demand: Demand,
                      member_classes: tuple[tuple[int, ...], ...], needs_whole: bool) -> Outcome:
    """A job that could start by preemption if its candidates were not protected: which
    protection is in the way, and when it lifts (its ETA: the victims would then have
    stopped)."""
    lifts = _protection_lifts(ctx, protected.victims)
    code = _protection_code(ctx, protected)
    return Outcome(
        code, _protected_sentence(protected, lifts),
        True, "the protected jobs pass their minimum runtime, or GPUs free up"
        if code is ReasonCode.MINIMUM_RUNTIME_PROTECTED
        else "the protected jobs pass their minimum runtime or budget window, or GPUs free up",
        eta=None if lifts is None else lifts[1],
        demand=demand, classes=ctx.placer.union(member_classes),
        needs_whole_node=needs_whole, member_classes=member_classes,
    )


def _protection_code(ctx: CycleContext, protected: Protected) -> ReasonCode:
    """``PreemptionBudgetExhausted`` when a budget stands in the way (the cycle's, or one of
    the victims' own); ``MinimumRuntimeProtected`` when only their minimum runtimes do."""
    if not protected.victims:
        return ReasonCode.PREEMPTION_BUDGET_EXHAUSTED  # the cycle's budget is spent
    for job_id in protected.victims:
        job = ctx.running.get(job_id)
        pc = ctx.priority.get(job.spec.priority_class) if job is not None else None
        if pc is None or job is None or job.spec.preemptions_in_window >= pc.preemption_budget:
            return ReasonCode.PREEMPTION_BUDGET_EXHAUSTED
    return ReasonCode.MINIMUM_RUNTIME_PROTECTED


def _protected_sentence(protected: Protected, lifts: tuple[float, float] | None) -> str:
    return f"It could start by preemption, but {_protected_words(protected, lifts)}."


def _protected_words(protected: Protected, lifts: tuple[float, float] | None) -> str:
    """What protects the candidates and when it lifts, said of one job when one is in the way
    (no victims at all means the cycle's budget is spent: "the candidates")."""
    one = len(protected.victims) == 1
    who, them, they = ("the candidate is", "it", "it has") if one else ("the candidates are", "them", "they have")
    when = "" if lifts is None else (
        f"; it may preempt {them} from t={lifts[0]:.0f} and start once {they} stopped, by t={lifts[1]:.0f}")
    return f"{who} protected: {protected.why}{when}"


def _protection_lifts(ctx: CycleContext, victims: tuple[str, ...]) -> tuple[float, float] | None:
    """When the jobs a preemption would take are all past their minimum runtime and back
    under their preemption budget, and when they would have stopped after their grace
    periods; ``None`` when one is over its budget and the snapshot does not say when its
    window lets it go (``JobSpec.preemption_budget_frees_at``), or a victim is unknown.
    (Before the snapshot carried that time, a job whose victim had spent its budget got no
    time at all, and one whose victim was also inside its minimum runtime got the end of the
    minimum runtime alone.)"""
    if not victims:
        return None
    now = ctx.snapshot.now
    free_from, grace = now, 0
    for job_id in victims:
        job = ctx.running.get(job_id)
        pc = ctx.priority.get(job.spec.priority_class) if job is not None else None
        if job is None or pc is None:
            return None
        if now - job.started_at < pc.min_runtime_s:
            free_from = max(free_from, job.started_at + pc.min_runtime_s)
        if job.spec.preemptions_in_window >= pc.preemption_budget:
            lifts = budget_lifts_at(job, pc, now)
            if lifts is None:
                return None
            free_from = max(free_from, lifts)
        grace = max(grace, pc.grace_period_s)
    return free_from, free_from + grace
