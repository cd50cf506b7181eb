"""One scheduling cycle: a snapshot in, a plan out.

    # 0. enforce runtime limits      backfill.enforce_runtime_limits
    # 1. order the queue             queue.order_queue, queue.widest_fitting_gangs_first
    #    for each pending job, in order:
    # 1b.  array task limit          array_limit.ArrayTaskCounts (untried past the limit)
    # 2.   admit under quota         admission.*  (validity, capability, quota per GPU type)
    # 3.   filter nodes              placement.Placer + filter plugins + maintenance windows
    # 4.   score                     placement.Placer + score plugins + eq. 2 topology scorer
    # 5.   reserve / backfill        head_reservation (which job, which GPU type), backfill.plan_reservation, may_backfill_into
    # 6.   preempt                   nomination.try_preemption, preemption.preempt_for (victims, reprieve)
    # 5b. grow elastic jobs          elastic.grow_elastic
    # 7. explain what is left        explain.explain, fleet.fleet_figures

Keeping the cycle fast (1,250 nodes x 8 GPUs, 5,000 pending, 2,000 running):

* Candidates come from free-capacity indexes, never from a scan of all nodes.
* Capacity only shrinks during the loop (binds, holds; preempted GPUs are released by the
  control loop after fencing, not in this cycle), so a gang shape that failed once fails for
  the rest of the cycle: identical shapes are skipped (``ctx.failed_shapes``).
* At most ``max_placement_attempts`` full placement searches run per cycle; jobs beyond that
  are still explained from the indexes (quota, capacity counts) without a search.
* Preemption searches and reservation searches are capped per cycle as well.
"""

from __future__ import annotations

import dataclasses
import gc
import math
from collections import Counter
from collections.abc import Callable, Sequence
from operator import attrgetter

from scheduler_core.admission import (
    TypeOption,
    explained_option,
    gpus_by_type,
    option_types,
    quota_for,
    quota_for_grants,
    quota_split,
    split_refusal,
)
from scheduler_core.array_limit import ArrayTaskCounts
from scheduler_core.backfill import (
    enforce_runtime_limits,
    expected_end,
    may_backfill_into,
)
from scheduler_core.context import CycleContext, ShapeKey
from scheduler_core.diagnosis import diagnose, maintenance_outcome, short_of_gpus, type_names
from scheduler_core.elastic import grow_elastic
from scheduler_core.errors import SnapshotError
from scheduler_core.explain import explain
from scheduler_core.fairshare import dominant_shares
from scheduler_core.fleet import fleet_figures
from scheduler_core.gang import (
    Demand,
    demand_for,
)
from scheduler_core.head_reservation import (
    may_move_head,
    may_search,
    move_head,
    rehold,
    reserve_first,
    reserve_over_quota,
    reserve_untried,
    word_maintenance_head,
)
from scheduler_core.job_shape import JobShape, classes_for, new_shape, shape_key, shape_of
from scheduler_core.maintenance import MaintenanceCalendar
from scheduler_core.nomination import ProtectedWays, also_by_preemption, protected_outcome, try_preemption
from scheduler_core.outcome import Outcome
from scheduler_core.over_quota import never_under_quota, over_quota, quota_never, quota_outcome
from scheduler_core.placement import PlacementRequest, Placer
from scheduler_core.plugins.protocols import ScorePlugin
from scheduler_core.plugins.registry import Plugins, build_plugins
from scheduler_core.queue import order_queue, widest_fitting_gangs_first
from scheduler_core.quota import QuotaLedger, QuotaVerdict
from scheduler_core.quota_promises import (
    BrokenPromise,
    PromisedLending,
    PromisedQuota,
    QuotaPromise,
    broken_promise,
    charge_promises,
    last_broken,
    lending_promised,
    quota_promised,
    room_beside_promises,
    start_beside_promises,
)
from scheduler_core.sentences import counted
from scheduler_core.state import FLEET, HOLD, JOB, ClusterState, Grant
from scheduler_core.types import (
    Bind,
    BorrowingChange,
    GpuTypeInfo,
    JobSpec,
    Plan,
    ReasonCode,
    RunningJob,
    SchedulerConfig,
    Snapshot,
)


def schedule(snapshot: Snapshot, config: SchedulerConfig | None = None, *,
             clock: Callable[[], float] | None = None) -> Plan:
    """Decide one cycle for ``snapshot`` under ``config`` (default policy if ``None``).

    ``clock`` (for example ``time.perf_counter``) is only used to fill
    ``Plan.phase_durations``; it never influences a decision. The plan is deterministic:
    the same snapshot and config always give an equal plan.

    Raises :class:`~scheduler_core.errors.ConfigError` for an invalid config and
    :class:`~scheduler_core.errors.SnapshotError` for a self-contradicting snapshot.

    Python's cyclic garbage collector is paused for the cycle: a cycle allocates hundreds of
    thousands of short-lived objects (grants, candidates, explanations) and each collection
    also walks the snapshot. Paused, a cycle of the benchmark's 10,000-GPU fleet is about
    10 % faster. The collector runs again (if it was on) as soon as the cycle returns or
    raises, and frees then whatever reference cycles the cycle left behind.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _schedule(snapshot, config, clock)
    finally:
        if collecting:
            gc.enable()


def _schedule(snapshot: Snapshot, config: SchedulerConfig | None,
              clock: Callable[[], float] | None) -> Plan:
    cfg = config if config is not None else SchedulerConfig()
    plugins = build_plugins(cfg)
    began = clock() if clock is not None else None
    ctx = _context(snapshot, cfg, plugins, clock)
    started = ctx.timed("snapshot", began)

    # 0. enforce runtime limits (backfill's promises rest on them)
    enforce_runtime_limits(ctx)
    for job_id, job in ctx.running.items():
        end = expected_end(ctx, job)
        if end is not None:
            ctx.ends[job_id] = end
        ctx.state.mark_busy(ctx.state.holdings.get((JOB, job_id), ()),
                            end if end is not None else math.inf)
    mark = ctx.timed("limits", started)

    # 1. order the queue (tied gangs that fit now: widest first)
    queue = widest_fitting_gangs_first(ctx, order_queue(ctx))
    mark = ctx.timed("order", mark)

    # 2.-6. admit, filter, score, reserve/backfill, preempt: one job at a time, in order
    arrays = ctx.arrays
    for spec in queue:
        # 1b. an array at its task limit: its other tasks keep their place, untried
        if spec.array_task_limit is not None and arrays.full(spec) and _valid(ctx, spec):
            _settle(ctx, spec, arrays.outcome(spec))
        elif ctx.attempts < cfg.max_placement_attempts or not _settle_untried(ctx, spec):
            _decide(ctx, spec)
    mark = ctx.tick()

    # 5b. elastic jobs grow into what is left
    grow_elastic(ctx)
    word_maintenance_head(ctx)
    _add_reclaim_notes(ctx)
    mark = ctx.timed("reserve_backfill", mark)

    # 7. explain what is left
    pending = explain(ctx, queue)
    by_reason = Counter(map(attrgetter("reason"), pending))
    fleet = fleet_figures(ctx, by_reason, queue)
    ctx.timed("explain", mark)

    return Plan(
        binds=tuple(sorted(ctx.bound.values(), key=lambda b: b.job_id)),
        preemptions=tuple(sorted(ctx.preempted.values(), key=lambda p: p.job_id)),
        resizes=tuple(sorted(ctx.resized.values(), key=lambda r: r.job_id)),
        reservations=tuple(sorted(ctx.reservations.values(), key=lambda r: r.job_id)),
        pending=pending,
        kills=tuple(sorted(ctx.killed.values(), key=lambda k: k.job_id)),
        fleet=fleet,
        epoch=snapshot.epoch,
        phase_durations=dict(sorted(ctx.durations.items())),
        growth_notes=tuple(note for _, note in sorted(ctx.growth_notes.items())),
        borrowing=ctx.borrowing,
    )


# ---------------------------------------------------------------------------- setup

_spec_id = attrgetter("spec.id")


def _check_unique(snapshot: Snapshot) -> None:
    """A GPU type, a priority class and a team's quota of one GPU type are each given once:
    given twice, which one counted depended on the order the snapshot listed them in (the
    plan of the same snapshot, shuffled, could differ), so a snapshot that does so is
    self-contradicting."""
    for kind, names in (
        ("GPU type", [t.name for t in snapshot.gpu_types]),
        ("priority class", [p.name for p in snapshot.priority_classes]),
        ("quota of team and GPU type", [f"{q.team}/{q.gpu_type}" for q in snapshot.quotas]),
    ):
        if len(set(names)) != len(names):
            twice = sorted(n for n, k in Counter(names).items() if k > 1)
            raise SnapshotError(f"{kind} {twice[0]!r} appears twice in the snapshot; each is "
                                f"given once")


def _context(snapshot: Snapshot, cfg: SchedulerConfig, plugins: Plugins,
             clock: Callable[[], float] | None) -> CycleContext:
    _check_unique(snapshot)
    gpu_types: dict[str, GpuTypeInfo] = {t.name: t for t in sorted(snapshot.gpu_types,
                                                                    key=lambda t: t.name)}
    state = ClusterState(snapshot.nodes, gpu_types, indexed=False)
    ledger = QuotaLedger(snapshot.quotas)
    charges: dict[tuple[str, str], int] = {}
    # of which jobs marked borrowed at their bind
    flagged: dict[tuple[str, str], int] = {}
    running: dict[str, RunningJob] = {}
    node_types = [node.gpu_type for node in state.nodes]
    for job in sorted(snapshot.running, key=_spec_id):
        if job.spec.id in running:
            raise SnapshotError(f"running job {job.spec.id!r} appears twice in the snapshot")
        running[job.spec.id] = job
        spec = job.spec
        holder = (JOB, spec.id)
        if spec.roles:
            role_cpu = {r.name: r.cpus_per_gpu or spec.cpus_per_gpu for r in spec.roles}
            role_mem = {r.name: r.memory_gb_per_gpu or spec.memory_gb_per_gpu
                        for r in spec.roles}
            grants = []
            for p in job.placements:
                grants += state.grants_of((p,), role_cpu.get(p.role, spec.cpus_per_gpu),
                                          role_mem.get(p.role, spec.memory_gb_per_gpu), spec.id)
        else:
            grants = state.grants_of(job.placements, spec.cpus_per_gpu, spec.memory_gb_per_gpu,
                                     spec.id)
        state.load(holder, grants)
        for g in grants:
            key = (spec.team, node_types[g.node])
            charges[key] = charges.get(key, 0) + g.mask.bit_count()
            if job.borrowed:
                flagged[key] = flagged.get(key, 0) + g.mask.bit_count()
    state.build_indexes()
    for (team, gpu_type), gpus in sorted(charges.items()):
        ledger.charge(team, gpu_type, gpus)
    borrowing = _borrowing_beyond_a_lowered_quota(running, state, ledger, charges, flagged, node_types)
    shares = dominant_shares(snapshot.now, snapshot.nodes, snapshot.running,
                             snapshot.team_usage, cfg.fair_share_half_life_s)
    return CycleContext(
        snapshot=snapshot,
        config=cfg,
        plugins=plugins,
        state=state,
        ledger=ledger,
        placer=Placer(state, plugins.filters, plugins.topology),
        gpu_types=gpu_types,
        priority={p.name: p for p in sorted(snapshot.priority_classes, key=lambda p: p.name)},
        running=running,
        shares=shares,
        calendar=MaintenanceCalendar(snapshot.maintenance, state.index_of, snapshot.now),
        arrays=ArrayTaskCounts(running.values()),
        clock=clock,
        borrowing=tuple(borrowing),
    )


def _borrowing_beyond_a_lowered_quota(running: dict[str, RunningJob], state: ClusterState,
                                      ledger: QuotaLedger, charges: dict[tuple[str, str], int],
                                      flagged: dict[tuple[str, str], int],
                                      node_types: list[str]) -> list[BorrowingChange]:
    """A team holding more of a GPU type than its (lowered) nominal quota borrows the excess,
    whatever its jobs were marked when they started: from its cohort, or, in none (moved out,
    or its quota lowered), from the teams whose guarantee it holds. Its jobs started last are
    marked borrowed until they cover the excess, so an owner reclaims that capacity as it
    reclaims any borrowed capacity (seed 004: borrowers first).

    A job stays marked borrowed once it is (its team's use falling back under the nominal, or
    the nominal raised, does not clear the mark). Counting borrowing from each cycle's use, as
    Kueue does per queue, moved the reclaims onto fewer jobs: on the four mixed weeks without
    checkpoints it raised the work lost to preemption by 32 % to 88 % and the mean wait by 22 %
    to 66 % (7 Dec, *Preemption on a mixed week* in docs/engine.md).

    Jobs started within the quota of their day are never over it otherwise (each one fitted
    beside every job still running), so this changes nothing until an admin lowers a quota,
    deletes one or moves a team. Returns the jobs it marked borrowed, for the caller to store."""
    changes: list[BorrowingChange] = []
    for key, held in sorted(charges.items()):
        q = ledger.quota.get(key)
        # A team with no quota on a GPU type quotas govern (its quota deleted under it) holds
        # all of it above a nominal of 0.
        if q is None and not ledger.governs(key[1]):
            continue
        nominal = q.nominal_gpus if q is not None else 0
        excess = held - flagged.get(key, 0) - nominal
        if excess <= 0:
            continue
        team, gpu_type = key
        mine = [job for job in running.values() if job.spec.team == team and not job.borrowed]
        # GPUs already stopping go back to the cohort anyway
        excess -= sum(_held_of_type(state, job, gpu_type, node_types) for job in mine if job.terminating)
        for job in sorted((j for j in mine if not j.terminating),
                          key=lambda j: (-j.started_at, j.spec.id)):
            if excess <= 0:
                break
            gpus = _held_of_type(state, job, gpu_type, node_types)
            if gpus:
                running[job.spec.id] = dataclasses.replace(job, borrowed=True)
                excess -= gpus
                changes.append(BorrowingChange(
                    job.spec.id, True,
                    f"team {team} holds {counted(held, gpu_type + ' GPU')}, "
                    f"{held - nominal} above its nominal quota of {nominal}"
                    + ("" if q is not None else " (it has no quota of the type)")))
    return sorted(changes, key=lambda c: c.job_id)


def _held_of_type(state: ClusterState, job: RunningJob, gpu_type: str, node_types: list[str]) -> int:
    return sum(g.mask.bit_count() for g in state.holdings.get((JOB, job.spec.id), [])
               if node_types[g.node] == gpu_type)


# ---------------------------------------------------------------------------- per job


def _settle(ctx: CycleContext, spec: JobSpec, outcome: Outcome) -> None:
    ctx.outcomes[spec.id] = outcome


def _valid(ctx: CycleContext, spec: JobSpec) -> bool:
    """Is the request valid and of a known class? An array's task that is not is explained
    for that (``_admit``), not by its array's task limit: counted in line for a slot, an
    invalid runtime limit of -5 s made the next task's estimated start 5 s in the past."""
    shape = shape_of(ctx, spec)
    return (shape.invalid is None and spec.priority_class in ctx.priority
            and (spec.runtime_limit_s is None or spec.runtime_limit_s > 0)
            and spec.resize_cost_s >= 0)


def _settle_untried(ctx: CycleContext, spec: JobSpec) -> bool:
    """The common case of :func:`_decide` past the last placement attempt, on its own for
    speed (thousands of jobs a cycle): a valid job of a known class whose (team, gang) already
    has an outcome takes it. ``False`` when :func:`_decide` must look at the job."""
    key = shape_key(spec)
    shape: JobShape | None = ctx.shapes.get(key)
    if shape is None:
        shape = new_shape(ctx, spec, key)
    if shape.invalid is not None or spec.priority_class not in ctx.priority \
            or (spec.runtime_limit_s is not None and spec.runtime_limit_s <= 0) \
            or spec.resize_cost_s < 0:
        return False
    known = ctx.untried_outcomes.get((spec.team, shape.gang))
    if known is None:
        return False
    ctx.untried += 1
    ctx.outcomes[spec.id] = known
    return True


def _decide(ctx: CycleContext, spec: JobSpec) -> None:
    """Phases 2 to 6 for one pending job; records a bind or an outcome."""
    mark = ctx.tick()
    shape = shape_of(ctx, spec)
    if not _admit(ctx, spec, shape):
        return
    score = ctx.plugins.score_by_workload[spec.workload]
    mark = ctx.timed("admit", mark)
    if ctx.attempts >= ctx.config.max_placement_attempts:
        _decide_untried(ctx, spec, shape, score, mark)
        return
    misses = _filter_and_score(ctx, spec, shape, score)
    mark = ctx.timed("filter_score", mark)
    if misses is not None:
        _decide_unplaced(ctx, spec, shape, score, misses, mark)


def _admit(ctx: CycleContext, spec: JobSpec, shape: JobShape) -> bool:
    """Phase 2: a valid request, a known class, capable somewhere, a quota that could cover
    it, a ready capable node. Settles the job and returns ``False`` when it goes no further."""
    invalid = shape.invalid
    if invalid is None and spec.runtime_limit_s is not None and spec.runtime_limit_s <= 0:
        invalid = f"runtime_limit_s must be positive when given, got {spec.runtime_limit_s}"
    if invalid is None and spec.resize_cost_s < 0:
        invalid = f"resize_cost_s must be >= 0, got {spec.resize_cost_s}"
    if invalid is not None:
        _settle(ctx, spec, Outcome(ReasonCode.INVALID_REQUEST, f"Invalid request: {invalid}.",
                                   False, "the request is corrected"))
        return False
    if spec.priority_class not in ctx.priority:
        known = ", ".join(sorted(ctx.priority)) or "none"
        _settle(ctx, spec, Outcome(
            ReasonCode.UNKNOWN_PRIORITY_CLASS,
            f"Priority class {spec.priority_class!r} does not exist (known: {known}).",
            False, f"priority class {spec.priority_class!r} is created or the job names a known one",
        ))
        return False
    if ctx.attempts >= ctx.config.max_placement_attempts:
        # Past the last placement attempt nothing binds or holds any more, so a job's answer
        # depends only on its team and its shape's gang (see JobShape.gang): the first such
        # job's outcome serves the rest. Position and ETA are still per job (phase 7).
        known_outcome = ctx.untried_outcomes.get((spec.team, shape.gang))
        if isinstance(known_outcome, Outcome):
            ctx.untried += 1
            _settle(ctx, spec, known_outcome)
            return False
    if shape.never is not None:
        _settle(ctx, spec, Outcome(ReasonCode.CAN_NEVER_RUN, shape.never, False,
                                   "the request changes or the fleet gains capable nodes"))
        return False
    if _quota_never_for_any(ctx, spec, shape):
        return False
    if shape.not_ready is not None:
        # the nodes come first (nothing runs without them), but a job also over its quota
        # says so: a node coming back would not start it
        message, would = f"Waiting: {shape.not_ready}.", "a capable node returns to ready"
        verdicts = [(o, quota_for(ctx, spec, o, shape.smallest.gpus)) for o in shape.options]
        if verdicts and not any(v.admitted for _, v in verdicts):
            words = over_quota(ctx, spec, shape.options, shape.smallest.gpus)
            message += f" It is also over quota{words.lead}: {words.numbers}."
            would += f", and {words.remedy}"
        _settle(ctx, spec, Outcome(ReasonCode.NODE_NOT_READY, message, True, would))
        return False
    return True


def _quota_never_for_any(ctx: CycleContext, spec: JobSpec, shape: JobShape) -> bool:
    """Settles the job as never able to run when no GPU type option's quota could ever cover
    its smallest size."""
    smallest = shape.smallest
    split_refused = 0  # the largest member, when only splitting a mixed option fails
    for o in shape.options:  # all(quota_never(...)), without a generator
        if quota_never(ctx, spec.team, o, smallest.gpus):
            continue
        if o.gpu_type is not None or quota_split(ctx, spec, o, smallest, ever=True) is not None:
            return False
        split_refused = smallest.largest_member
    # A team known to be in no cohort (it has quotas, none in a cohort) borrows from no one, and
    # a borrowing limit on its quota is refused (it would never apply): its remedy is a larger
    # quota or a cohort to borrow from.
    cohorts = [q.cohort for (team, _), q in ctx.ledger.quota.items() if team == spec.team]
    in_no_cohort = bool(cohorts) and all(c is None for c in cohorts)
    _settle(ctx, spec, Outcome(
        ReasonCode.CAN_NEVER_RUN, never_under_quota(ctx, spec, shape.options, smallest.gpus, split_refused),
        False, f"team {spec.team}'s quota grows, or it joins a cohort with GPUs to lend" if in_no_cohort
        else f"team {spec.team}'s quota or borrowing limit grows",
    ))
    return True


def _decide_untried(ctx: CycleContext, spec: JobSpec, shape: JobShape, score: ScorePlugin,
                    mark: float | None) -> None:
    """Phases 3 to 5 past the last placement attempt: explained from the indexes without a
    search; the outcome serves every later job of the same team and gang."""
    ctx.untried += 1
    smallest, options = shape.smallest, shape.options
    verdicts = []
    split_refused = 0
    for shared in options:
        # a mixed-type option as the placement would try it: split within its quotas now
        o = quota_split(ctx, spec, shared, smallest) if shared.gpu_type is None else shared
        if o is None:
            split_refused = smallest.largest_member
            continue
        verdicts.append((o, quota_for(ctx, spec, o, smallest.gpus)))
    outcome = _untried(ctx, spec, smallest, options, verdicts, shape.needs_whole, split_refused)
    if outcome.code is ReasonCode.INSUFFICIENT_GPUS and ctx.head is None:
        reserved = reserve_untried(ctx, spec, smallest, verdicts, score, shape.needs_whole)
        ctx.timed("reserve_backfill", mark)
        if reserved:
            return
    # (its team and gang, which the outcome serves, fix the type explained and the GPUs)
    admitted = [o for o, v in verdicts if v.admitted]
    if admitted:
        outcome = _behind_promises(ctx, spec, admitted[0].gpu_type, outcome, smallest.gpus)
        explained = explained_option(admitted)
        elsewhere = (*(_behind_promises(ctx, spec, o.gpu_type, _untried_on(
            ctx, spec, smallest, o.member_classes, needs_whole=shape.needs_whole),
            smallest.gpus) for o in _other_types(explained, admitted)),
            *_over_quota_types(ctx, spec, shape, explained, admitted))
        if elsewhere:
            outcome = outcome._replace(elsewhere=elsewhere)
    ctx.untried_outcomes[(spec.team, shape.gang)] = outcome
    _settle(ctx, spec, outcome)


class _Misses:
    """Why phases 3-4 placed nothing, for the phases after them: the first quota refusal
    (option, verdict, GPUs), the first option the quota admits at the smallest size, and
    whether the head's reservation (its GPUs, or its team's quota) stood in the way."""

    __slots__ = ("refusal", "admitted_option", "admitted_options", "blocked_by_head", "behind_head",
                 "quota_blocked", "split_refused")

    def __init__(self) -> None:
        self.refusal: tuple[TypeOption, QuotaVerdict, int] | None = None
        self.admitted_option: TypeOption | None = None
        self.admitted_options: list[TypeOption] = []
        self.blocked_by_head = False
        # the admitted options that would fit only on GPUs held for the head
        self.behind_head: list[TypeOption] = []
        # the promise (the head's, a preemptor's) starting this job would take the quota of
        self.quota_blocked: BrokenPromise | None = None
        # the largest member of a gang whose mixed-type option no split fits its quotas now
        self.split_refused = 0


def _filter_and_score(ctx: CycleContext, spec: JobSpec, shape: JobShape,
                      score: ScorePlugin) -> _Misses | None:
    """Phases 3 and 4: place the job, largest size first for elastic jobs, preferred GPU type
    first. Binds it and returns ``None``, or returns why nothing was placed."""
    misses = _Misses()
    smallest = shape.smallest
    for size in shape.sizes:
        demand = smallest if size == shape.sizes[-1] else demand_for(spec, size, shape.node_size)
        for shared in shape.options:
            option = quota_split(ctx, spec, shared, demand) if shared.gpu_type is None else shared
            if option is None:
                # refused by its quotas now, as a one-type option can be
                if demand is smallest:
                    misses.split_refused = demand.largest_member
                    misses.refusal = misses.refusal or split_refusal(ctx, spec, shared, demand)
                continue
            member_classes = (option.member_classes if demand is smallest or option is not shared
                              else classes_for(ctx, demand, option))
            if any(not c for c in member_classes):
                continue
            verdict = quota_for(ctx, spec, option, demand.gpus)
            if not verdict.admitted:
                if misses.refusal is None or demand is smallest:
                    misses.refusal = misses.refusal or (option, verdict, demand.gpus)
                continue
            if demand is smallest:
                if misses.admitted_option is None:
                    misses.admitted_option = option
                misses.admitted_options.append(option)
            grants, behind = _attempt(ctx, spec, demand, member_classes, score)
            if behind and demand is smallest:
                misses.blocked_by_head = True
                misses.behind_head.append(option)
            if grants is None:
                continue
            borrowed = verdict.borrowed
            if option.gpu_type is None:
                any_type = _quota_for_any_type(ctx, spec, grants, member_classes, demand, misses)
                if any_type is None:
                    continue
                borrowed = any_type
            elif not _keeps_promises(ctx, spec, {option.gpu_type: demand.gpus}, misses):
                continue
            _commit(ctx, spec, grants, borrowed)
            rehold(ctx)
            return None
    return misses


def _quota_for_any_type(ctx: CycleContext, spec: JobSpec, grants: list[Grant],
                        member_classes: tuple[tuple[int, ...], ...], demand: Demand,
                        misses: _Misses) -> bool | None:
    """A job that takes any GPU type learns its types only from its grants: check them
    against its quota and the head's. Whether it borrows, or ``None`` (grants dropped) when
    its quota refuses those types or they would delay the head."""
    by_type = gpus_by_type(ctx, [(g.node, g.gpus) for g in grants])
    ok, borrowed, refused_type = quota_for_grants(ctx, spec, by_type)
    if not ok:
        ctx.placer.drop()
        rehold(ctx)
        assert refused_type is not None
        v = ctx.ledger.check(spec.team, refused_type, demand.gpus)
        misses.refusal = misses.refusal or (TypeOption(refused_type, member_classes), v, demand.gpus)
        return None
    if not _keeps_promises(ctx, spec, by_type, misses):
        return None
    return borrowed


def _keeps_promises(ctx: CycleContext, spec: JobSpec, gpus_of_type: dict[str, int],
                    misses: _Misses) -> bool:
    """Placed, would the job leave its team's quota what the jobs promised GPUs later need
    (:mod:`scheduler_core.quota_promises`)? If not, its grants are dropped. Asked once the
    job has found GPUs, so that a job with none is told so, not about the quota."""
    broken = broken_promise(ctx, spec, gpus_of_type)
    if broken is None:
        return True
    ctx.placer.drop()
    rehold(ctx)
    # (told what it waits for at the latest: the promise that has run last)
    misses.quota_blocked = misses.quota_blocked or last_broken(ctx, spec, gpus_of_type)
    return False


def _decide_unplaced(ctx: CycleContext, spec: JobSpec, shape: JobShape, score: ScorePlugin,
                     misses: _Misses, mark: float | None) -> None:
    """Phases 5 and 6 for a job phases 3-4 could not place: wait behind the head's quota,
    preempt, reserve (the head job), or explain. A job that waits rather than reclaim its
    lent quota (cheaper) says so after whatever it waits for."""
    if misses.quota_blocked is not None:
        _settle(ctx, spec, _behind_promised_quota(ctx, spec, shape, misses.quota_blocked))
        return

    # 6. preempt (or wait for jobs already stopping) before reserving
    protected = try_preemption(ctx, spec, shape, score, mark)
    if protected is True:
        return
    mark = ctx.timed("preempt", mark)
    _reserve_or_explain(ctx, spec, shape, score, misses, protected, mark)
    # (not beside a protection's words: those name what it waits for on another GPU type)
    if ctx.reclaim_waits and misses.admitted_option is not None and spec.id not in ctx.bound \
            and spec.id in ctx.outcomes and not isinstance(protected, ProtectedWays):
        ctx.reclaim_explained[spec.id] = misses.admitted_option.gpu_type


def _add_reclaim_notes(ctx: CycleContext) -> None:
    """Tell each owner that waits rather than reclaim its lent quota why, once the cycle's
    reservations are final: a later job may move the head's reservation
    (``head_reservation.move_head``), which words the head's reason afresh. Added when the job
    was decided, the note was lost with every move."""
    for job_id, explained in ctx.reclaim_explained.items():
        note = _reclaim_note(ctx, job_id, explained)
        outcome = ctx.outcomes[job_id]
        if note is not None:
            outcome = outcome._replace(message=f"{outcome.message} {note}")
        if outcome.elsewhere and job_id not in ctx.reservations:
            # each other type it may start on with its own note: phase 7 tells the type
            # with the earliest start (until 7 Dec, told another type, it said nothing)
            outcome = outcome._replace(elsewhere=tuple(
                o._replace(note=ctx.reclaim_waits.get((job_id, _one_type(ctx, o.classes)), ""))
                for o in outcome.elsewhere))
        ctx.outcomes[job_id] = outcome


def _one_type(ctx: CycleContext, classes: tuple[int, ...]) -> str | None:
    """The GPU type of node classes all of one type (``None`` otherwise)."""
    types = {ctx.state.classes[c].gpu_type.name for c in classes}
    return types.pop() if len(types) == 1 else None


def _reclaim_note(ctx: CycleContext, job_id: str, explained: str | None) -> str | None:
    """Why the job did not reclaim its lent quota on the GPU type its reason tells of: its
    reservation's type (the earliest start of its options; where it stands at the cycle's
    end), else the type of the option explained. (The first admitted option's note beside a
    reservation on another type read 'its 8 GPUs until t=11200' under 'Holds a reservation
    ... from t=10600'.)"""
    gpu_type = explained
    reservation = ctx.reservations.get(job_id)
    if reservation is not None:
        nodes, index_of = ctx.state.nodes, ctx.state.index_of
        types = {nodes[index_of[p.node]].gpu_type for p in reservation.placements}
        if len(types) > 1:
            # A reservation across GPU types is a gang's option that mixes them, and such an
            # option weighs no reclaim (preemption._eligible reclaims lent quota per GPU
            # type): no note is true of it.
            return None
        gpu_type = types.pop()
    return ctx.reclaim_waits.get((job_id, gpu_type))


def _reserve_or_explain(ctx: CycleContext, spec: JobSpec, shape: JobShape, score: ScorePlugin,
                        misses: _Misses, protected: ProtectedWays | bool | None, mark: float | None) -> None:
    """Phase 5 for a job no preemption starts: the head's reservation, or why it waits."""
    smallest, options, needs_whole = shape.smallest, shape.options, shape.needs_whole
    if misses.admitted_option is None:
        assert misses.refusal is not None
        if not misses.blocked_by_head and reserve_over_quota(ctx, spec, smallest, options, score,
                                                             needs_whole):
            also_by_preemption(ctx, spec, protected)
            return
        _settle(ctx, spec, quota_outcome(ctx, spec, options, misses.refusal, smallest,
                                          needs_whole, misses.split_refused))
        also_by_preemption(ctx, spec, protected)
        return
    if isinstance(protected, ProtectedWays):
        _settle(ctx, spec, _protected_on_types(ctx, spec, shape, misses, protected))
        return

    # a heterogeneous gang's mixed-type option weighs no promise of quota (room_beside_promises
    # judges one type): its reservation is planned on the GPU types whose quota admits it,
    # when there are any, and mixing them only when the mix offers each member all their
    # classes and every type's quota admits the whole gang beside the promises. (Until 7 Dec
    # never mixing: a gang whose learner and worker took a100 or h100 reserved two a100 nodes
    # from t=3000 and started at t=1000 on an a100 node and an h100 one.)
    typed = [o for o in misses.admitted_options if o.gpu_type is not None]
    reserve_on = typed or misses.admitted_options
    widest = explained_option(misses.admitted_options)
    if typed and widest.gpu_type is None and all(
            room_beside_promises(ctx, spec.team, t, smallest.gpus) for t in option_types(ctx, widest)):
        reserve_on = [*typed, widest]
    # no reservation where its quota admits it now but not beside a job of its team promised
    # GPUs before it (that promise has the quota)
    requests = [PlacementRequest(smallest, option.member_classes, score)
                for option in reserve_on if all(option.member_classes)
                and room_beside_promises(ctx, spec.team, option.gpu_type, smallest.gpus)]
    # (asked before the reservation holds GPUs: would it fit now but for maintenance?)
    maintenance = maintenance_outcome(ctx, spec, requests, needs_whole)
    # 5. reserve: the first job that cannot start gets the EASY reservation
    if not misses.blocked_by_head and may_search(ctx):
        reserved = reserve_first(ctx, spec, requests, needs_whole, maintenance, options, score)
        ctx.timed("reserve_backfill", mark)
        if reserved:
            return
    if maintenance is not None:
        _settle(ctx, spec, maintenance)
        return
    outcome = diagnose(ctx, spec, smallest, widest.member_classes, misses.blocked_by_head, needs_whole)
    outcome = _behind_promises(ctx, spec, misses.admitted_option.gpu_type, outcome, smallest.gpus)
    elsewhere = (*(_behind_promises(ctx, spec, o.gpu_type, diagnose(
        ctx, spec, smallest, o.member_classes, any(o is b for b in misses.behind_head),
        needs_whole), smallest.gpus) for o in _other_types(widest, misses.admitted_options)),
        *_over_quota_types(ctx, spec, shape, widest, misses.admitted_options))
    _settle(ctx, spec, outcome._replace(elsewhere=elsewhere) if elsewhere else outcome)


def _protected_on_types(ctx: CycleContext, spec: JobSpec, shape: JobShape, misses: _Misses,
                        protected: ProtectedWays) -> Outcome:
    """A job whose way in by preemption protected victims stand in, on the option it is
    explained on (``explained_option``). A heterogeneous gang explained on its option mixing
    types is judged on it: the protection its search met mixing types (else the first met),
    lifting when it lifts unless the mixed option's classes, as the cycle tries its members on
    them, free earlier by runtime limits. (Until 7 Dec on its first admitted option's classes:
    learner and worker taking a100 or h100, v protected on a100 until t=4230, an a100 node
    free and the h100 node free at t=2000, it was told t=4230 and started at t=2000.) On
    one-type options, each GPU type it may start on is
    judged as a job of that type alone: the protection of the victims its search met on that
    type's GPUs (when that protection lifts, unless they free earlier by runtime limits),
    else why it found no room there (``diagnose``); the first admitted type's outcome leads,
    the others in ``Outcome.elsewhere`` (with the types over quota, ``_over_quota_types``),
    and phase 7 tells the earliest. Until 7 Dec the first protection met was told on the
    first admitted type's GPUs: v protected on a100 until t=4230 and h100 free at t=2000, it
    was told t=4230 and started at t=2000; and v's protection on h100 was judged by the a100
    GPUs' release times."""
    smallest, needs_whole = shape.smallest, shape.needs_whole
    assert misses.admitted_option is not None
    explained = explained_option(misses.admitted_options)
    ways = protected.ways
    if explained.gpu_type is None:
        # a gang explained mixing types is judged mixing them: the protection its search met
        # there (else the first met), on the classes the cycle tries its members on
        mixing = next((p for w, p in ways if w.gpu_type is None), protected.first)
        return protected_outcome(ctx, mixing, smallest, explained.member_classes, needs_whole)
    if not any(w.gpu_type is not None for w, _ in ways):
        # (a protection met only mixing types: the first, on its first admitted option's classes)
        return protected_outcome(ctx, protected.first, smallest, misses.admitted_option.member_classes,
                                 needs_whole)
    # (its first admitted type leads, as before: its run counts there for the jobs behind it)
    lead = misses.admitted_option
    options = [lead, *(o for o in shape.options if o is not lead and o.gpu_type is not None
                       and all(o.member_classes) and (any(o is a for a in misses.admitted_options)
                                                      or any(o is w for w, _ in ways)))]
    outcomes = []
    for o in options:
        way = next((p for w, p in ways if w is o), None)
        if way is not None:
            outcomes.append(protected_outcome(ctx, way, smallest, o.member_classes, needs_whole))
        else:
            outcomes.append(_behind_promises(ctx, spec, o.gpu_type, diagnose(
                ctx, spec, smallest, o.member_classes, any(o is b for b in misses.behind_head), needs_whole),
                smallest.gpus))
    elsewhere = (*outcomes[1:], *_over_quota_types(ctx, spec, shape, explained, options))
    return outcomes[0]._replace(elsewhere=elsewhere) if elsewhere else outcomes[0]


def _over_quota_types(ctx: CycleContext, spec: JobSpec, shape: JobShape, explained: TypeOption,
                      tried: Sequence[TypeOption]) -> tuple[Outcome, ...]:
    """For a job explained on one-type options (``_other_types``): each other GPU type it
    accepts, with capable classes, that its quota refuses now but could admit, as the
    ``QuotaExceeded`` of a job of that type alone. The cycle tries it again once its quota
    has room, which may come before the types admitted have GPUs: phase 7 estimates when
    (its team's or cohort's jobs' runtime limits, then that type's GPUs) and tells it only
    when it is the earliest; with no time known for its quota, the type tells nothing (no
    start, no "may start first"). Until 7 Dec such a type was left out: a100 admitted and
    busy until t=5000, its team's h100 quota back at t=1000 with an h100 node free, the job
    was told t=5000 and started at t=1000."""
    if explained.gpu_type is None:
        return ()
    smallest = shape.smallest
    found = []
    for o in shape.options:
        if o.gpu_type is None or not all(o.member_classes) or any(o is t for t in tried):
            continue
        verdict = quota_for(ctx, spec, o, smallest.gpus)
        if verdict.admitted or verdict.never:
            continue
        found.append(quota_outcome(ctx, spec, (o,), (o, verdict, smallest.gpus), smallest,
                                   shape.needs_whole))
    return tuple(found)


def _other_types(explained: TypeOption, admitted: Sequence[TypeOption]) -> list[TypeOption]:
    """The options its quota admits besides the one a job that found no room is explained on
    (``explained_option``), each with capable classes: the cycle tries them all, so the job
    starts on whichever has room first (``Outcome.elsewhere``). None when it is explained on
    a heterogeneous gang's option mixing types, which starts no later than any of them. A
    mixed option its quota split (``admission.quota_split``: each member held to one type)
    offers its members less than a one-type option may, and is explained on that one, but
    may still start it first: until 7 Dec it was left out, and a gang of 16 GPUs that two
    h100 nodes never hold, a100 quota 14, was told no start and started at t=3000 mixing
    types."""
    if explained.gpu_type is None or len(admitted) < 2:
        return []
    return [o for o in admitted if o is not explained and all(o.member_classes)]


def _behind_promises(ctx: CycleContext, spec: JobSpec, gpu_type: str | None, outcome: Outcome,
                     gpus: int) -> Outcome:
    """``outcome``, for a job refused a reservation by the quota promised to jobs that start
    before it (``room_beside_promises``), with when that quota is free again for it: what its
    cohort lends, promised to other teams' jobs, or its own team's quota, promised to its
    team's jobs."""
    lending = lending_promised(ctx, spec.team, gpu_type, gpus)
    if lending is not None:
        held = _behind_promised_lending(ctx, spec, gpu_type, outcome, lending)
    else:
        own = quota_promised(ctx, spec.team, gpu_type, gpus)
        if own is None:
            return outcome
        held = _behind_own_promises(ctx, spec, gpu_type, outcome, own)
    # (phase 7 asks whether the promises let it start sooner, once its GPUs are there)
    assert gpu_type is not None  # (both refuse only a typed option)
    return held._replace(promised_gpus=(gpu_type, gpus))


def _behind_own_promises(ctx: CycleContext, spec: JobSpec, gpu_type: str | None,
                         outcome: Outcome, own: PromisedQuota) -> Outcome:
    """A job its team's quota admits alone but not beside what it promises to the team's
    jobs that start before it (the head's reservation, a nominated preemptor) is reserved
    nothing, and is certain of that quota once it has room again. Its ETA from runtime limits
    alone was too early by the promised jobs' run: ml's 'j' (8 GPUs) was told t=10800, when
    n2 frees, while ml's 16 GPUs were promised to 'big' until t=14400. Phase 7 keeps its
    start no later (``Outcome.lending_free_at``), and earlier when the promises let it start
    sooner (it ends before they start, or its team's releases leave them room)."""
    whom = (f"job {own.first.job_id} from t={own.first.start_at:.0f}" if own.of == 1
            else f"{own.of} jobs of its team that start before it")
    held = (f"its team's quota of {gpu_type} GPUs is promised to {whom} "
            f"({counted(own.promised, 'GPU')})")
    released = (f"its team's running jobs have released "
                f"{counted(own.released, f'{gpu_type} GPU')} (by runtime limits)"
                if own.released > 0 else "")
    promise = own.last
    releases = f"team {spec.team}'s running jobs release {counted(own.released, f'{gpu_type} GPU')}"
    room = f"its team's quota of {gpu_type} GPUs, promised to {whom} ({counted(own.promised, 'GPU')}),"
    if promise is None:
        words = f"{held}, and has room for this job beside them only once {released}."
        would = releases
    else:
        by = _run_by(ctx, promise)
        last = (f"job {promise.job_id}" if own.of == 1
                else f"job {promise.job_id} (from t={promise.start_at:.0f})")
        words = (f"{held}, and has room for this job only once {last} has run ({by})"
                 f"{f' and {released}' if released else ''}.")
        would = (f"job {promise.job_id} has run and given back its team's quota"
                 f"{f' and {releases}' if released else ''}")
    return outcome._replace(lending_free_at=own.free_at, lending_words=words,
                            would_start_if=f"{outcome.would_start_if}, and {would}",
                            promised_room=room, lending_would=f", and {would}")


def _run_by(ctx: CycleContext, promise: QuotaPromise) -> str:
    """How a promised job is taken to have run: to its runtime limit, or for the default
    estimate when it declares none."""
    if promise.ends_at is not None:
        return "by its runtime limit"
    return (f"if it runs the {ctx.config.default_runtime_estimate_s / 3600:g} h assumed for a "
            f"job without a runtime limit")


def _behind_promised_lending(ctx: CycleContext, spec: JobSpec, gpu_type: str | None,
                             outcome: Outcome, lending: PromisedLending) -> Outcome:
    """A job that would borrow what its cohort lends, promised to jobs of other teams that
    start before it, is reserved nothing on it (``room_beside_promises``), and is certain of
    it once those jobs have run. Its ETA from runtime limits alone was too early by their
    whole run: a head of team third was told t=12000 while the cohort's 16 lent GPUs were
    promised to two preemptors until t=13630. Phase 7 keeps its start no later, and earlier
    when the promises let it start sooner (``Outcome.lending_free_at``)."""
    promise = lending.last
    cohort = ctx.ledger.cohort_of(spec.team, gpu_type) if gpu_type is not None else None
    by = _run_by(ctx, promise)
    whom = (f"job {promise.job_id} of team {promise.team} from t={promise.start_at:.0f}"
            if lending.of == 1 else f"{lending.of} jobs of other teams that start before it")
    last = (f"job {promise.job_id}" if lending.of == 1
            else f"job {promise.job_id} of team {promise.team} (from t={promise.start_at:.0f})")
    held = f"what cohort {cohort} lends of {gpu_type} GPUs is promised to {whom}"
    would = f", and job {promise.job_id} has run and given back what cohort {cohort} lends"
    return outcome._replace(
        lending_free_at=lending.free_at,
        lending_words=f"{held}, and this job can borrow enough of it only once {last} has run ({by}).",
        would_start_if=f"{outcome.would_start_if}{would}",
        promised_room=f"what cohort {cohort} lends of {gpu_type} GPUs, promised to {whom},",
        lending_would=would)


def _behind_promised_quota(ctx: CycleContext, spec: JobSpec, shape: JobShape,
                           broken: BrokenPromise) -> Outcome:
    """The job fits, but what it would hold of its team's quota, or borrow from its cohort, is
    what a job promised GPUs (the head's reservation, a nominated preemptor) needs when it
    starts. Its quota is free
    again once the promised job has run: by its runtime limit, or, without one, by the default
    estimate the release timeline assumes for such a job's GPUs too; or earlier, when the
    engine's rules beside the promises would start it (``start_beside_promises``: its team's
    or its cohort's jobs release enough by runtime limits once the promised jobs have
    started, jobs preempted for them have stopped). Until 5 Dec 2026 the end of the first
    promise found: small, behind urgent promised ml's 8 from t=10030, was told t=24430 (the
    4 h assumed for urgent) and started at t=10030, when lab lent ml 4 once cv's preempted
    lo0 had stopped; breaking the promises of p1 (600 s) and p2 (2 h), t=10630, when p1 had
    run, and it started at t=17230, when p2 had."""
    if broken.ends_at is not None:
        eta, by = broken.ends_at, "by its runtime limit"
    else:
        estimate = ctx.config.default_runtime_estimate_s
        eta = broken.start_at + estimate
        by = f"if it runs the {estimate / 3600:g} h assumed for a job without a runtime limit"
    when = f"when job {broken.job_id} has run ({by})"
    would = f"job {broken.job_id} has run and given the quota back"
    sooner = None if not broken.gpus else start_beside_promises(
        ctx, spec, broken.gpu_type, broken.gpus, ctx.snapshot.now, eta, {}, {})
    if sooner is not None:
        eta = sooner
        when = "when its quota has room for it beside the jobs promised GPUs (by runtime limits)"
        would = (f"its quota has room for it beside job {broken.job_id} (from t={sooner:.0f}, "
                 f"by runtime limits)")
    clear_by = broken.start_at if broken.clear_by is None else broken.clear_by
    if broken.cohort is None:
        needs = (f"Team {spec.team}'s quota must have room for job {broken.job_id} when it "
                 f"starts at t={broken.start_at:.0f}; this job would still hold "
                 f"{broken.gpu_type} GPUs then")
    else:
        needs = (f"Job {broken.job_id} of team {broken.team} borrows {broken.gpu_type} GPUs "
                 f"from cohort {broken.cohort} when it starts at t={broken.start_at:.0f}; this "
                 f"job would still borrow what the cohort lends then")
    return Outcome(
        ReasonCode.BEHIND_HIGHER_PRIORITY,
        f"{needs}, so starting now would delay it. Estimated start t={eta:.0f}, {when}.",
        True, f"{would}, or the job asks for a runtime limit that ends it by t={clear_by:.0f}",
        eta=eta,
        demand=shape.smallest,
        classes=tuple(sorted({c for o in shape.options for cls in o.member_classes for c in cls})),
        needs_whole_node=shape.needs_whole,
    )


def _attempt(ctx: CycleContext, spec: JobSpec, demand: Demand,
             member_classes: tuple[tuple[int, ...], ...],
             score: ScorePlugin) -> tuple[list[Grant] | None, bool]:
    """One gang placement (phases 3-4), honouring the head's reservation.

    Returns the grants (not yet taken) and whether the gang would fit only on GPUs held for
    the head job. When the grants use held GPUs, the hold stays released until
    :func:`rehold` runs after the commit."""
    state = ctx.state
    union = ctx.placer.union(member_classes)
    closed = ctx.calendar.closed_for_run(ctx.snapshot.now, spec.runtime_limit_s)
    free = state.free_in(FLEET, 0, union) - _free_on(ctx, closed, union)
    head_held = 0
    if ctx.head is not None:
        head_held = sum(g.gpus for g in state.holdings.get((HOLD, ctx.head.job_id), [])
                        if state.node_class[g.node] in union)
    if free + head_held < demand.gpus:
        return None, False
    request = PlacementRequest(demand, member_classes, score, closed=closed)
    key: ShapeKey = (demand, member_classes, score.NAME, False, closed)
    if free >= demand.gpus and key not in ctx.failed_shapes:
        ctx.attempts += 1
        # kept grants are adopted by _commit or dropped by _decide before anything else
        grants = ctx.placer.place(request, keep=True)
        if grants is not None:
            return grants, False
        ctx.failed_shapes[key] = True
    if ctx.head is None or head_held == 0:
        return None, False
    key = (demand, member_classes, score.NAME, True, closed)
    if key in ctx.failed_shapes:
        return None, False
    eligible = may_backfill_into(ctx, spec)
    if key in ctx.behind_head and not eligible and not may_move_head(ctx):
        return None, True
    ctx.attempts += 1
    state.release((HOLD, ctx.head.job_id))
    ctx.head_released = True
    grants = ctx.placer.place(request)
    if grants is None:
        ctx.failed_shapes[key] = True
        rehold(ctx)
        return None, False
    ctx.behind_head.add(key)
    if eligible or move_head(ctx, spec, grants):
        return grants, False
    rehold(ctx)
    return None, True


def _free_on(ctx: CycleContext, nodes: frozenset[int], classes: tuple[int, ...]) -> int:
    """Free GPUs of ``classes`` on ``nodes`` (nodes closed by maintenance: a few at most)."""
    if not nodes:
        return 0
    state = ctx.state
    return sum(state.free_gpus[n] for n in nodes if state.ready[n] and state.node_class[n] in classes)


def _commit(ctx: CycleContext, spec: JobSpec, grants: list[Grant], borrowed: bool) -> None:
    state = ctx.state
    holder = (JOB, spec.id)
    if ctx.placer.kept:
        ctx.placer.adopt(holder)
    else:
        for g in grants:
            state.take(holder, g)
    by_type = gpus_by_type(ctx, [(g.node, g.gpus) for g in grants])
    charge_promises(ctx, spec, by_type)
    for t, n in by_type.items():
        ctx.ledger.charge(spec.team, t, n)
    ctx.bound[spec.id] = Bind(spec.id, state.placements(grants), borrowed)
    ctx.bound_specs[spec.id] = spec
    ctx.arrays.started(spec)
    if spec.runtime_limit_s is not None:
        ctx.ends[spec.id] = ctx.snapshot.now + spec.runtime_limit_s
    state.mark_busy(grants, ctx.ends.get(spec.id, math.inf))


def _untried(ctx: CycleContext, spec: JobSpec, demand: Demand, options: tuple[TypeOption, ...],
             verdicts: list[tuple[TypeOption, QuotaVerdict]], needs_whole: bool,
             split_refused: int) -> Outcome:
    """Explain a job the cycle had no placement attempts left for, from indexes only."""
    admitted = [o for o, v in verdicts if v.admitted]
    if not admitted:
        mixed = next((o for o in options if o.gpu_type is None), None)
        refusal = split_refusal(ctx, spec, mixed, demand) if split_refused and mixed else None
        return quota_outcome(ctx, spec, options, refusal, demand, needs_whole, split_refused)
    return _untried_on(ctx, spec, demand, explained_option(admitted).member_classes, needs_whole)


def _untried_on(ctx: CycleContext, spec: JobSpec, demand: Demand,
                member_classes: tuple[tuple[int, ...], ...], needs_whole: bool) -> Outcome:
    """Why a job the cycle had no placement attempts left for waits on these classes (its
    members', as the cycle would try them)."""
    classes = ctx.placer.union(member_classes)
    free = ctx.state.free_in(FLEET, 0, classes) - _free_on(
        ctx, ctx.calendar.closed_for_run(ctx.snapshot.now, spec.runtime_limit_s), classes)
    if free < demand.gpus:
        kind = type_names(ctx, classes)
        message, would = short_of_gpus(ctx, demand.gpus, free, kind, classes)
        return Outcome(ReasonCode.INSUFFICIENT_GPUS, message, True, would, demand=demand,
                       classes=classes, needs_whole_node=needs_whole, member_classes=member_classes)
    return Outcome(
        ReasonCode.BEHIND_HIGHER_PRIORITY,
        f"Not tried this cycle: the cycle's "
        f"{counted(ctx.config.max_placement_attempts, 'placement attempt')} went to jobs ahead of it "
        f"in the queue.",
        True, "jobs ahead of it start or leave the queue",
        demand=demand, classes=classes, needs_whole_node=needs_whole, member_classes=member_classes,
    )


