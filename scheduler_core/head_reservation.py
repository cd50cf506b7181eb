"""Phase 5 for one job: the head's EASY reservation.

Seed 000: backfilling without a reservation starves large jobs; EASY backfilling (Mu'alem and
Feitelson, 2001) promises the first job that cannot start a start time and the GPUs it will
start on, and lets later jobs start only if they cannot delay it
(:func:`~scheduler_core.backfill.may_backfill_into`). Here: which job becomes the head (the
first one that finds no room; past the placement budget, the first one its quota admits with
too few capable GPUs free; a job its quota refuses now when its own team's jobs release the
quota by then), on which of the GPU types it accepts (the one that frees first), and moving
the reservation to other GPUs when a later job would otherwise delay it but the head still
starts on time elsewhere. How the start and the GPUs are found is
:func:`~scheduler_core.backfill.plan_reservation`.
"""

from __future__ import annotations

from scheduler_core.admission import TypeOption, quota_for
from scheduler_core.backfill import hold, plan_reservation, starts_on_time
from scheduler_core.context import ActiveReservation, CycleContext
from scheduler_core.gang import Demand
from scheduler_core.outcome import Outcome
from scheduler_core.placement import PlacementRequest
from scheduler_core.plugins.protocols import ScorePlugin
from scheduler_core.quota import QuotaVerdict
from scheduler_core.quota_promises import promise_quota, promised_to_team, room_beside_promises
from scheduler_core.quota_release import cohort_release_eta, team_release_eta
from scheduler_core.sentences import counted, verb
from scheduler_core.state import JOB, Grant
from scheduler_core.types import GpuPlacement, JobSpec, ReasonCode, Reservation

MAX_RESERVATION_SEARCHES = 3
"""Jobs that may look for a reservation per cycle (only one can hold it: EASY)."""


def may_search(ctx: CycleContext) -> bool:
    """Is the reservation still to be given this cycle, and may one more job look for it?"""
    return (ctx.config.backfill and ctx.head is None
            and ctx.reservation_searches < MAX_RESERVATION_SEARCHES)


def reserve_first(ctx: CycleContext, spec: JobSpec, requests: list[PlacementRequest],
                  needs_whole: bool, maintenance: Outcome | None,
                  options: tuple[TypeOption, ...] = (), score: ScorePlugin | None = None) -> bool:
    """The first job that cannot start gets the reservation, on the GPU type that frees
    first: of ``requests`` (its quota admits them now), or of its ``options`` its quota
    refuses now but its team's (or cohort's) jobs release by their runtime limits, from when
    both the GPUs and the quota are there (:func:`reserve_over_quota`). A job that only
    maintenance keeps from starting now keeps that reason, with the reservation's start as
    its ETA. Until 7 Dec only the types admitted now were weighed: a job taking a100 or
    h100, its a100 node busy until t=5000 and its team's h100 quota back at t=1000 with an
    h100 node free, held a reservation on a100 from t=5000, was told t=5000 and started at
    t=1000 on h100, no GPUs held for it there."""
    ctx.reservation_searches += 1
    candidates: list[_Candidate] = [(request, None) for request in requests]
    if score is not None and requests:
        candidates += _over_quota_candidates(ctx, spec, requests[0].demand, options, score)
    found = _earliest_reservation(ctx, spec, candidates)
    if found is None:
        return False
    reservation, request, chosen = found
    if chosen is not None:
        _settle_over_quota(ctx, spec, reservation, chosen, request.demand, needs_whole)
        return True
    hold(ctx, reservation)
    _settle_reserved(ctx, spec, reservation, request, needs_whole)
    ctx.head_maintenance = maintenance
    return True


def word_maintenance_head(ctx: CycleContext) -> None:
    """A head that only maintenance keeps from starting now keeps that reason, with its
    reservation's start as its ETA; worded once the cycle's reservations are final: a later
    job may move the reservation (:func:`move_head`), which words the head's reason afresh.
    Worded when the head was reserved, the maintenance was lost with every move (it read
    ``WaitingForReservation``, "when running jobs reach their runtime limits")."""
    maintenance, head = ctx.head_maintenance, ctx.head
    if maintenance is None or head is None:
        return
    gpus = sum(g.gpus for g in head.grants)
    ctx.outcomes[head.job_id] = maintenance._replace(
        message=f"{maintenance.message} It holds a reservation for {counted(gpus, 'GPU')} from "
                f"t={head.start_at:.0f}; smaller jobs may use {verb(gpus, 'it', 'them')} only if they "
                f"end before then.",
        eta=head.start_at)


def reserve_untried(ctx: CycleContext, spec: JobSpec, demand: Demand,
                    verdicts: list[tuple[TypeOption, QuotaVerdict]], score: ScorePlugin,
                    needs_whole: bool) -> bool:
    """Phase 5 past the placement budget: when no job holds the reservation yet, the first job
    its quota admits but that cannot fit (fewer capable GPUs free than it needs, so no search
    is needed to know) still gets it, so a busy cycle of small binds cannot leave the head
    without a promise. Outcomes shared by later untried jobs were computed before the hold,
    so they are dropped."""
    if not may_search(ctx):
        return False
    admitted = [o for o, v in verdicts if v.admitted and all(o.member_classes)
                and room_beside_promises(ctx, spec.team, o.gpu_type, demand.gpus)]
    if not admitted:
        return False
    ctx.reservation_searches += 1
    found = _earliest_reservation(ctx, spec, [(PlacementRequest(demand, o.member_classes, score), None)
                                              for o in admitted])
    if found is None:
        return False
    reservation, request, _ = found
    hold(ctx, reservation)
    ctx.untried_outcomes.clear()  # computed before this hold
    _settle_reserved(ctx, spec, reservation, request, needs_whole)
    return True


def reserve_over_quota(ctx: CycleContext, spec: JobSpec, demand: Demand,
                       options: tuple[TypeOption, ...], score: ScorePlugin,
                       needs_whole: bool) -> bool:
    """Phase 5 for a job its quota refuses now: if its own team's running jobs release enough
    quota by their runtime limits (or, when they cannot, its cohort's jobs lend it as they
    end), it may still be the head, with a reservation from when both
    the GPUs and the quota are there; later jobs of its team then start only if they leave
    that quota free (:mod:`scheduler_core.quota_promises`). Without this a
    team whose quota is full of its own work starves its large jobs behind its small ones."""
    if not may_search(ctx):
        return False
    candidates = _over_quota_candidates(ctx, spec, demand, options, score)
    if not candidates:
        return False
    ctx.reservation_searches += 1
    found = _earliest_reservation(ctx, spec, candidates)
    if found is None:
        return False
    reservation, _, chosen = found
    assert chosen is not None
    _settle_over_quota(ctx, spec, reservation, chosen, demand, needs_whole)
    return True


def _over_quota_candidates(ctx: CycleContext, spec: JobSpec, demand: Demand,
                           options: tuple[TypeOption, ...], score: ScorePlugin) -> list[_Candidate]:
    """The one-type options its quota refuses now whose quota its team's running jobs (or
    else its cohort's) release by their runtime limits, each with when."""
    candidates: list[_Candidate] = []
    for option in options:
        gpu_type = option.gpu_type
        if gpu_type is None or any(not c for c in option.member_classes):
            continue
        verdict = quota_for(ctx, spec, option, demand.gpus)
        if verdict.admitted or verdict.never or not verdict.governed:
            continue
        # the quota must also hold what is promised to the team's jobs ahead of it
        shortage = verdict.shortage(demand.gpus) + promised_to_team(ctx, spec.team, gpu_type)
        lifts_at = team_release_eta(ctx, spec.team, gpu_type, shortage)
        if lifts_at is None and ctx.ledger.cohort_of(spec.team, gpu_type) is not None:
            # Its own jobs' releases are not enough: what its cohort lends as the lenders' jobs end.
            # Without a reservation nothing promised it the quota, and its team's later jobs
            # took it, cycle after cycle.
            lifts_at = cohort_release_eta(ctx, spec.team, gpu_type,
                                          demand.gpus + promised_to_team(ctx, spec.team, gpu_type), {})
        if lifts_at is not None:
            candidates.append((PlacementRequest(demand, option.member_classes, score),
                               (option, verdict, shortage, lifts_at)))
    return candidates


def _settle_over_quota(ctx: CycleContext, spec: JobSpec, reservation: ActiveReservation,
                       chosen: tuple[TypeOption, QuotaVerdict, int, float], demand: Demand,
                       needs_whole: bool) -> None:
    """``spec`` holds the reservation on a GPU type its quota refuses now, from when its
    team's (or cohort's) jobs have released that quota and the GPUs are free."""
    option, verdict, shortage, _ = chosen
    gpu_type = option.gpu_type
    assert gpu_type is not None
    own = team_release_eta(ctx, spec.team, gpu_type, shortage) is not None
    whose = f"team {spec.team}'s" if own else f"the jobs of team {spec.team}'s cohort"
    hold(ctx, reservation)
    placements = _hold_reservation(ctx, spec, reservation)
    promise_quota(ctx, spec, reservation.start_at, reservation.grants)
    ctx.outcomes[spec.id] = Outcome(
        ReasonCode.WAITING_FOR_RESERVATION,
        f"Holds a reservation for {counted(demand.gpus, 'GPU')} on {counted(len({p.node for p in placements}), 'node')} from "
        f"t={reservation.start_at:.0f}, when {whose}{' running jobs' if own else ''} have released "
        f"the {counted(verdict.shortage(demand.gpus), f'{gpu_type} GPU')} its quota lacks now "
        f"({verdict.describe(spec.team, gpu_type, demand.gpus)})"
        f"{_promised_words(shortage - verdict.shortage(demand.gpus))} and "
        f"{verb(demand.gpus, 'the GPU is', 'the GPUs are')} free, by runtime limits; smaller jobs may "
        f"use {verb(demand.gpus, 'that GPU', 'those GPUs')} only if they end before then.",
        True, (f"team {spec.team}'s jobs on its quota" if own else
               f"the jobs of team {spec.team}'s cohort on the quota it needs")
        + " and its reserved GPUs end (at the latest by their runtime limits)",
        eta=reservation.start_at, demand=demand,
        classes=ctx.placer.union(option.member_classes),
        needs_whole_node=needs_whole, quota_type=gpu_type,
    )


def _promised_words(gpus: int) -> str:
    """The GPUs its quota must also hold for jobs of its team promised a start before it."""
    if gpus <= 0:
        return ""
    return f", besides the {counted(gpus, 'GPU')} promised to its team's jobs ahead of it"


_Candidate = tuple[PlacementRequest, tuple[TypeOption, QuotaVerdict, int, float] | None]


def _earliest_reservation(
        ctx: CycleContext, spec: JobSpec, candidates: list[_Candidate],
) -> tuple[ActiveReservation, PlacementRequest, tuple[TypeOption, QuotaVerdict, int, float] | None] | None:
    """The head's reservation on the GPU type that frees first, of the types it accepts (each
    candidate: its request, and for a head over its quota the type's option, verdict,
    shortage and the time that quota lifts); the type it prefers wins a tie. Nothing is held.
    Before, the first type with any reservation was taken: a serving job accepting H100 or
    A100 waited 4 h for H100 while its A100 quota freed in 2 h."""
    best = None
    for request, quota_wait in candidates:
        reservation = plan_reservation(
            ctx, spec, request, hold_now=False,
            not_before=None if quota_wait is None else quota_wait[3],
            quota_type=None if quota_wait is None else quota_wait[0].gpu_type,
            before=None if best is None else best[0].start_at)
        if reservation is not None and (best is None or reservation.start_at < best[0].start_at):
            best = (reservation, request, quota_wait)
    return best


def _settle_reserved(ctx: CycleContext, spec: JobSpec, reservation: ActiveReservation,
                     request: PlacementRequest, needs_whole: bool) -> None:
    """`spec` holds the EASY reservation: it waits for it, with its start as the ETA. (Called
    again with the new GPUs when the reservation moves, see :func:`move_head`.)"""
    demand, member_classes = request.demand, request.member_classes
    placements = _hold_reservation(ctx, spec, reservation)
    promise_quota(ctx, spec, reservation.start_at, reservation.grants)
    ctx.head_request = request
    ctx.head_needs_whole = needs_whole
    gpus = sum(g.gpus for g in reservation.grants)
    ctx.outcomes[spec.id] = Outcome(
        ReasonCode.WAITING_FOR_RESERVATION,
        f"Holds a reservation for {counted(gpus, 'GPU')} on {counted(len({p.node for p in placements}), 'node')} from "
        f"t={reservation.start_at:.0f}, when running jobs reach their runtime limits; "
        f"smaller jobs may use {verb(gpus, 'that GPU', 'those GPUs')} only if they end before then.",
        True, "the jobs on its reserved GPUs end (at the latest by their runtime limits)",
        eta=reservation.start_at, demand=demand,
        classes=ctx.placer.union(member_classes),
        needs_whole_node=needs_whole,
    )


def _hold_reservation(
    ctx: CycleContext, spec: JobSpec, reservation: ActiveReservation
) -> tuple[GpuPlacement, ...]:
    """`spec` becomes the cycle's head: its reserved GPUs are what later jobs must not delay."""
    ctx.head = reservation
    placements = ctx.state.placements(reservation.grants)
    ctx.reservations[spec.id] = Reservation(spec.id, reservation.start_at, placements)
    ctx.reserved_specs[spec.id] = spec
    return placements


def may_move_head(ctx: CycleContext) -> bool:
    """May a later job still try to move the head's reservation (a budget per cycle)?"""
    return (ctx.head is not None and ctx.head_request is not None
            and ctx.reservation_moves < ctx.config.max_reservation_moves)


def move_head(ctx: CycleContext, spec: JobSpec, grants: list[Grant]) -> bool:
    """May ``spec`` start on ``grants`` (which use GPUs held for the head) although its runtime
    limit ends it after the head's start? Yes if, with ``spec`` running, the head still starts
    at the same time on other GPUs (:func:`~scheduler_core.backfill.starts_on_time`): the head
    is not delayed, so EASY's promise holds, and the reservation moves to those GPUs. The
    head's hold is released on entry (see ``cycle._attempt``); the new one is taken by
    :func:`rehold` after ``spec`` commits."""
    head, request = ctx.head, ctx.head_request
    if head is None or request is None or not may_move_head(ctx):
        return False
    ctx.reservation_moves += 1
    state = ctx.state
    probe = (JOB, spec.id)
    for g in grants:
        state.take(probe, g)
    try:
        moved = starts_on_time(ctx, request)
    finally:
        state.release(probe)
    if moved is None:
        return False
    _settle_reserved(ctx, ctx.reserved_specs[head.job_id], moved, request, ctx.head_needs_whole)
    return True


def rehold(ctx: CycleContext) -> None:
    """Hold the head's GPUs again after a placement that released them to try them."""
    if ctx.head_released and ctx.head is not None:
        hold(ctx, ctx.head)
    ctx.head_released = False
