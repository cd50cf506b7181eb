"""Quota promised to jobs that start later: the head's reservation, a nominated preemptor.

EASY backfill keeps later jobs off the GPUs promised to the head (seed 000); a team's quota is
one more thing the promise needs. A job promised GPUs at ``start_at`` starts then only if its
team's quota admits it then, so a later job of the same team that would still hold GPUs of a
promised type at that time may start now only within what the quota can spare beside the
promise: what is left of the quota now, plus what the team's own jobs release by then (by
their runtime limits), less what the promised job needs. Jobs of other teams, and jobs that
end before the promise starts, are never held back by it.

A promised job that will borrow at its start is promised its cohort's unused quota too: a
job of another team of the cohort that would still hold GPUs then may start now only if what
it borrows leaves the promised job what it borrows (what the cohort's other members lend then,
by their jobs' runtime limits, less what they borrow). A job within its team's nominal quota
is never held back by another team's promise: quota lent is the owner's to take back.

Until 5 Dec 2026 only a head its quota refused now (waiting for its own team's jobs to end)
was so guarded: a head of 8 GPUs within its team's 8 was reserved a node from t=3600, and a
later job of its team without a runtime limit started at once on 4 other GPUs, so that at
t=3600 the quota refused the head and its reservation slid, cycle after cycle, while its own
team backfilled.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, replace

from scheduler_core.admission import UNLIMITED
from scheduler_core.context import CycleContext
from scheduler_core.quota_release import (
    Cumulative,
    cumulative,
    team_ends,
    team_holders,
    team_release_eta,
    team_released_by,
)
from scheduler_core.state import JOB, Grant
from scheduler_core.types import JobSpec, RunningJob


@dataclass(slots=True)
class QuotaPromise:
    """What the quota of ``team`` must still hold for job ``job_id`` at ``start_at``:
    per governed GPU type, how many more GPUs the team may take this cycle for longer than
    until then (``slack``; charged by :func:`charge_promises`)."""

    job_id: str
    team: str
    start_at: float
    slack: dict[str, int]
    ends_at: float | None
    """When the promised job will have run, by its runtime limit (``None``: it has none)."""
    gpus: dict[str, int]
    """The promised GPUs per governed type."""
    borrows: dict[str, int]
    """Per governed type, the GPUs the promised job borrows from its cohort at its start."""
    cohort_slack: dict[str, int]
    """Per type it borrows, how much more the cohort's other teams may take this cycle of what
    the cohort lends for longer than until then (charged by :func:`charge_promises`)."""
    counted_gone: frozenset[str]
    """Running jobs its cohort slack already counts as stopped by its start (preempted this
    cycle before it was made)."""

    def overlaps(self, start_at: float, ends_at: float | None) -> bool:
        """Does the promised job run at some time between ``start_at`` and ``ends_at``?"""
        return not ((self.ends_at is not None and self.ends_at <= start_at)
                    or (ends_at is not None and ends_at <= self.start_at))


@dataclass(frozen=True, slots=True)
class BrokenPromise:
    """The promise starting a job now would break: whose, when, on which GPU type, and when
    the promised job will have run (by its runtime limit; ``None``: it has none)."""

    job_id: str
    start_at: float
    gpu_type: str
    ends_at: float | None
    cohort: str | None = None
    """The cohort whose unused quota is promised, when the job borrows it; ``None``: its
    team's own quota."""
    team: str = ""
    """The promised job's team."""
    clear_by: float | None = None
    """The earliest start of the promises the job would break (:func:`last_broken`): a job
    ending by then breaks none of them."""
    gpus: int = 0
    """The job's GPUs of ``gpu_type``, when it asks for that type alone (0: several types)."""


def promise_quota(ctx: CycleContext, spec: JobSpec, start_at: float, grants: Iterable[Grant],
                  released: dict[str, int] | None = None) -> None:
    """``spec`` is promised ``grants`` from ``start_at``: record what its team's quota must
    still hold for it then. ``released``: GPUs per type its team gives back by then besides
    its jobs' runtime limits (a preemptor's victims of its own team). Called again when the
    promise moves (the head's reservation moving to other GPUs), it is measured afresh from
    the cycle's state."""
    by_type: dict[str, int] = {}
    nodes = ctx.state.nodes
    for g in grants:
        t = nodes[g.node].gpu_type
        by_type[t] = by_type.get(t, 0) + g.gpus
    slack: dict[str, int] = {}
    borrows: dict[str, int] = {}
    cohort_slack: dict[str, int] = {}
    counted: frozenset[str] = frozenset()
    for t, gpus in by_type.items():
        if ctx.ledger.governs(t):
            verdict = ctx.ledger.check(spec.team, t, UNLIMITED)  # the whole verdict: room too
            given_back = team_released_by(ctx, spec.team, t, start_at)
            if released:
                given_back += released.get(t, 0)
            slack[t] = given_back - verdict.shortage(gpus)
            borrowed = max(0, verdict.used - given_back + gpus - verdict.nominal)
            if borrowed > 0 and verdict.cohort is not None:
                borrows[t] = borrowed
                room, gone = _cohort_room_at(ctx, spec.team, t, start_at)
                cohort_slack[t] = room - borrowed
                counted |= gone
    ctx.quota_promises.pop(spec.id, None)
    if not slack:
        return
    ends_at = None if spec.runtime_limit_s is None else start_at + spec.runtime_limit_s
    promise = QuotaPromise(spec.id, spec.team, start_at, slack, ends_at,
                           {t: by_type[t] for t in slack}, borrows, cohort_slack,
                           counted)
    for other in ctx.quota_promises.values():
        if other.overlaps(start_at, ends_at):
            _share(ctx, promise, other)
    ctx.quota_promises[spec.id] = promise


def _share(ctx: CycleContext, promise: QuotaPromise, other: QuotaPromise) -> None:
    """Two promises running at once each leave the other what it needs: its team's quota
    (same team), or what it borrows from their cohort (teams of one cohort)."""
    if other.team == promise.team:
        for t, gpus in other.gpus.items():
            if t in promise.slack:
                promise.slack[t] -= gpus
        for t, gpus in promise.gpus.items():
            if t in other.slack:
                other.slack[t] -= gpus
        return
    cohort_of = ctx.ledger.cohort_of
    for t in promise.borrows.keys() & other.borrows.keys():
        if cohort_of(promise.team, t) == cohort_of(other.team, t):
            promise.cohort_slack[t] -= other.borrows[t]
            other.cohort_slack[t] -= promise.borrows[t]


def _stopping_early(ctx: CycleContext, at: float, gpu_type: str, cohort: str | None,
                    skip: frozenset[str] = frozenset()) -> dict[str, tuple[int, int, frozenset[str]]]:
    """Per team of ``cohort``, the ``gpu_type`` GPUs of its running jobs that stop by ``at``
    though their runtime limits would hold them past it: preempted this cycle (still charged
    to its quota: the first number) or taken off the fleet as a victim search's what-ifs (no
    longer charged: the second), and the jobs. Jobs in ``skip`` are left out; stopping and
    killed jobs too (their ends count them)."""
    ledger, holdings = ctx.ledger, ctx.state.holdings
    now = ctx.snapshot.now
    found: dict[str, tuple[int, int, frozenset[str]]] = {}
    for job_id, job in ctx.running.items():
        held = (JOB, job_id) in holdings
        if job_id in skip or (held and job_id not in ctx.preempted) or job.terminating \
                or job_id in ctx.killed or ctx.ends.get(job_id, math.inf) <= at:
            continue
        team = job.spec.team
        pc = ctx.priority.get(job.spec.priority_class)
        if (pc is not None and now + pc.grace_period_s > at) \
                or ledger.cohort_of(team, gpu_type) != cohort:
            continue
        gpus = _gpus_of_type(ctx, job, gpu_type)
        if gpus:
            charged, off, jobs = found.get(team, (0, 0, frozenset()))
            found[team] = (charged + gpus, off, jobs | {job_id}) if held \
                else (charged, off + gpus, jobs | {job_id})
    return found


def _gpus_of_type(ctx: CycleContext, job: RunningJob, gpu_type: str) -> int:
    """How many ``gpu_type`` GPUs the running ``job`` holds."""
    nodes, index_of = ctx.state.nodes, ctx.state.index_of
    return sum(len(p.gpu_indices) for p in job.placements
               if p.node in index_of and nodes[index_of[p.node]].gpu_type == gpu_type)


def _cohort_room_at(ctx: CycleContext, team: str, gpu_type: str,
                    at: float) -> tuple[int, frozenset[str]]:
    """What ``team``'s cohort will lend it of ``gpu_type`` at ``at``, its other members'
    jobs having released their GPUs by their runtime limits, or stopped when preempted (none
    started meanwhile); and the preempted jobs so counted."""
    ledger = ctx.ledger
    q = ledger.quota[(team, gpu_type)]
    early = _stopping_early(ctx, at, gpu_type, q.cohort)
    uses = {other.team: ledger.used_by(other.team, gpu_type)
            - team_released_by(ctx, other.team, gpu_type, at)
            - early.get(other.team, (0, 0, frozenset()))[0]
            for other in ledger.cohort_members(q.cohort or "", gpu_type) if other.team != team}
    counted = frozenset(j for _, _, jobs in early.values() for j in jobs)
    return ledger.cohort_room_with(uses, q), counted


def promised_to_team(ctx: CycleContext, team: str, gpu_type: str) -> int:
    """The ``gpu_type`` GPUs promised to ``team``'s jobs this cycle, which its quota must hold
    beside a job it admits later (a head over its quota waits for them as well)."""
    return sum(p.gpus.get(gpu_type, 0) for p in ctx.quota_promises.values() if p.team == team)


def _holds_past(ctx: CycleContext, spec: JobSpec, at: float, starts: float | None = None) -> bool:
    """Would ``spec``, started now (or at ``starts``), still hold its GPUs at ``at`` (by its
    runtime limit)?"""
    start = ctx.snapshot.now if starts is None else starts
    return spec.runtime_limit_s is None or start + spec.runtime_limit_s > at


def broken_promise(ctx: CycleContext, spec: JobSpec, gpus_of_type: dict[str, int],
                   starts: float | None = None) -> BrokenPromise | None:
    """The promise that starting ``spec`` now (or by ``starts``: a preemptor starts once its
    victims have stopped) on these GPUs would break, its team's quota, or what its cohort
    lends, refusing the promised job at its start; ``None`` if none."""
    for promise in ctx.quota_promises.values():
        broken = _breaks(ctx, promise, spec, gpus_of_type, starts)
        if broken is not None:
            return broken
    return None


def last_broken(ctx: CycleContext, spec: JobSpec,
                gpus_of_type: dict[str, int]) -> BrokenPromise | None:
    """Of the promises starting ``spec`` now on these GPUs would break, the one whose job has
    run last (by its runtime limit, or the default estimate), with the earliest start among
    them (``clear_by``). What the job is told it waits for: :func:`broken_promise` answers
    with the first it finds, and a job breaking the promises of p1 (600 s) and p2 (no
    runtime limit) was told it starts once p1 has run, while p2 still held its team's quota."""
    estimate = ctx.config.default_runtime_estimate_s
    found = [b for p in ctx.quota_promises.values()
             if (b := _breaks(ctx, p, spec, gpus_of_type, None)) is not None]
    if not found:
        return None
    last = max(found, key=lambda b: (b.ends_at if b.ends_at is not None
                                     else b.start_at + estimate, b.job_id))
    only = next(iter(gpus_of_type.values())) if len(gpus_of_type) == 1 else 0
    return replace(last, clear_by=min(b.start_at for b in found), gpus=only)


def _breaks(ctx: CycleContext, promise: QuotaPromise, spec: JobSpec,
            gpus_of_type: dict[str, int], starts: float | None) -> BrokenPromise | None:
    """:func:`broken_promise` for one promise."""
    if promise.job_id == spec.id or not _holds_past(ctx, spec, promise.start_at, starts):
        return None
    if promise.team == spec.team:
        for t, gpus in gpus_of_type.items():
            if gpus > 0 and gpus > promise.slack.get(t, gpus):
                return BrokenPromise(promise.job_id, promise.start_at, t, promise.ends_at,
                                     team=promise.team)
        return None
    for t, gpus in gpus_of_type.items():
        if gpus > 0 and t in promise.cohort_slack and _same_cohort(ctx, promise, spec.team, t):
            # a job that borrows is judged by all it takes from what the cohort lends,
            # its team's unused quota it no longer lends too; one within its team's
            # nominal quota never waits for another team's promise
            borrowed, unlent = _room_taken(ctx, spec.team, t, gpus, promise.start_at)
            if borrowed > 0 and borrowed + unlent > promise.cohort_slack[t] \
                    + _given_back_since(ctx, promise, t):
                return BrokenPromise(promise.job_id, promise.start_at, t, promise.ends_at,
                                     cohort=ctx.ledger.cohort_of(spec.team, t),
                                     team=promise.team)
    return None


def _same_cohort(ctx: CycleContext, promise: QuotaPromise, team: str, gpu_type: str) -> bool:
    cohort = ctx.ledger.cohort_of(team, gpu_type)
    return cohort is not None and cohort == ctx.ledger.cohort_of(promise.team, gpu_type)


def _given_back_since(ctx: CycleContext, promise: QuotaPromise, gpu_type: str) -> int:
    """What the cohort lends ``promise``'s job at its start beyond its slack: the GPUs of its
    teams' running jobs that stop by then, preempted since it was made or taken off the fleet
    by the victim search under way, and that their runtime limits would have held then."""
    cohort = ctx.ledger.cohort_of(promise.team, gpu_type)
    given = 0
    for team, (charged, off, _) in _stopping_early(ctx, promise.start_at, gpu_type, cohort,
                                                    promise.counted_gone).items():
        # the room those GPUs would take were the team to hold them again at the start
        used_then = ctx.ledger.used_by(team, gpu_type) - charged \
            - team_released_by(ctx, team, gpu_type, promise.start_at)
        borrowed, unlent = ctx.ledger.room_taken_by(team, gpu_type, used_then, charged + off)
        given += borrowed + unlent
    return given


def _room_taken(ctx: CycleContext, team: str, gpu_type: str, gpus: int,
                at: float) -> tuple[int, int]:
    """What ``gpus`` more for ``team``, held past ``at``, take from what its cohort lends
    then (:meth:`QuotaLedger.room_taken_by`, from the team's use at ``at`` by runtime
    limits)."""
    used_then = ctx.ledger.used_by(team, gpu_type) - team_released_by(ctx, team, gpu_type, at)
    return ctx.ledger.room_taken_by(team, gpu_type, used_then, gpus)


def charge_promises(ctx: CycleContext, spec: JobSpec, gpus_of_type: dict[str, int]) -> None:
    """Record a start (or growth) of ``spec`` that will still hold these GPUs when the
    promises of its team, or of its cohort, start. (Call it before charging the ledger.)"""
    for promise in ctx.quota_promises.values():
        if promise.job_id == spec.id or not _holds_past(ctx, spec, promise.start_at):
            continue
        if promise.team == spec.team:
            for t, gpus in gpus_of_type.items():
                if t in promise.slack:
                    promise.slack[t] -= gpus
            continue
        for t, gpus in gpus_of_type.items():
            if t in promise.cohort_slack and _same_cohort(ctx, promise, spec.team, t):
                borrowed, unlent = _room_taken(ctx, spec.team, t, gpus, promise.start_at)
                promise.cohort_slack[t] -= borrowed + unlent


def room_beside_promises(ctx: CycleContext, team: str, gpu_type: str | None, gpus: int) -> bool:
    """Does ``team``'s quota admit ``gpus`` more ``gpu_type`` GPUs beside what is promised to
    its jobs this cycle, and beside what jobs of other teams of its cohort are promised to
    borrow? Asked before a job of the team is promised GPUs itself (the head's reservation):
    its quota admitting it now, with a job ahead of it promised that quota (or that lending),
    promised the same GPUs of quota twice. (A mixed-type option, ``None``, is not judged.)"""
    if gpu_type is None or not ctx.quota_promises:
        return True
    promised = promised_to_team(ctx, team, gpu_type)
    verdict = ctx.ledger.check(team, gpu_type, gpus + promised)
    if promised and not verdict.admitted:
        return False
    return _lending_wait(ctx, team, gpu_type, verdict.used + gpus + promised - verdict.nominal) is None


@dataclass(frozen=True, slots=True)
class PromisedLending:
    """What its cohort lends, promised to ``of`` jobs of other teams, that a job would borrow:
    free again for it at ``free_at``, once ``last`` has run (by its runtime limit, or the
    default runtime estimate), with those of them that end no later."""

    free_at: float
    last: QuotaPromise
    of: int


def lending_promised(ctx: CycleContext, team: str, gpu_type: str | None,
                     gpus: int) -> PromisedLending | None:
    """Why :func:`room_beside_promises` refuses ``gpus`` more ``gpu_type`` GPUs to ``team``
    when what its cohort lends is promised to other teams' jobs, and when it is free again;
    ``None`` when it does not refuse them for that (its own team's promises are judged by its
    quota: a head over it waits for them, see ``head_reservation.reserve_over_quota``)."""
    if gpu_type is None or not any(p.team != team and p.borrows.get(gpu_type, 0) > 0
                                   for p in ctx.quota_promises.values()):
        return None  # (asked of every job explained without a reservation: the cheap test first)
    promised = promised_to_team(ctx, team, gpu_type)
    verdict = ctx.ledger.check(team, gpu_type, gpus + promised)
    if promised and not verdict.admitted:
        return None
    return _lending_wait(ctx, team, gpu_type, verdict.used + gpus + promised - verdict.nominal)


def _lending_wait(ctx: CycleContext, team: str, gpu_type: str, excess: int) -> PromisedLending | None:
    """``None`` if ``team`` may borrow ``excess`` beside what its cohort lends, now (before
    releases), to jobs of other teams promised GPUs this cycle; else when enough of those
    promised jobs have run (ends first first) to leave it that room."""
    if excess <= 0:
        return None  # its own quota
    estimate = ctx.config.default_runtime_estimate_s
    lenders = sorted((p.ends_at if p.ends_at is not None else p.start_at + estimate, p.job_id, p)
                     for p in ctx.quota_promises.values()
                     if p.team != team and p.borrows.get(gpu_type, 0) > 0
                     and _same_cohort(ctx, p, team, gpu_type))
    lent = sum(p.borrows[gpu_type] for _, _, p in lenders)
    if lent == 0:
        return None
    q = ctx.ledger.quota[(team, gpu_type)]
    room_now = ctx.ledger.cohort_room_with({}, q)

    def fits(lent: int) -> bool:
        room = room_now - lent
        if q.borrowing_limit is not None:
            room = min(room, q.borrowing_limit)
        return excess <= room

    if fits(lent):
        return None
    for freed in lenders:  # free at the latest once the last of them has run
        lent -= freed[2].borrows[gpu_type]
        if fits(lent) or lent == 0:
            break
    return PromisedLending(freed[0], freed[2], len(lenders))


@dataclass(frozen=True, slots=True)
class PromisedQuota:
    """Its team's quota, promised to ``of`` of its jobs (``promised`` GPUs), that a job
    would need: room again for it at ``free_at``, once ``last`` has run (by its runtime limit,
    or the default runtime estimate) with those of them that end no later, and the team's
    running jobs have released ``released`` GPUs (by runtime limits). ``last`` is ``None``
    when those releases leave it room beside all the promised jobs."""

    free_at: float
    last: QuotaPromise | None
    of: int
    promised: int
    released: int
    first: QuotaPromise
    """The promised job that ends first (the only one when ``of`` is 1)."""


def quota_promised(ctx: CycleContext, team: str, gpu_type: str | None,
                   gpus: int) -> PromisedQuota | None:
    """Why :func:`room_beside_promises` refuses ``gpus`` more ``gpu_type`` GPUs to ``team``,
    whose quota admits them alone, when that quota is promised to the team's jobs that start
    before (the head, a nominated preemptor), and when it has room again: the earliest time
    at which, of the promised jobs, those that end first have run (by their runtime limits,
    or the default estimate for one without) and the team's running jobs have released the
    rest of what it lacks (by runtime limits; :func:`team_release_eta`, as
    ``head_reservation.reserve_over_quota`` asks for a head over its quota). ``None`` when
    the promises do not refuse them (its cohort's lending promised to other teams' jobs is
    :func:`lending_promised`)."""
    # asked of every job explained without a reservation: the cheap test first (a plain loop,
    # no generator: 2,575 jobs a cycle in the 10,000-GPU loop benchmark)
    for p in ctx.quota_promises.values():
        if p.team == team and gpu_type in p.gpus:
            break
    else:
        return None
    if gpu_type is None:
        return None
    estimate = ctx.config.default_runtime_estimate_s
    mine = sorted((p.ends_at if p.ends_at is not None else p.start_at + estimate, p.job_id, p)
                  for p in ctx.quota_promises.values()
                  if p.team == team and p.gpus.get(gpu_type, 0) > 0)
    promised = sum(p.gpus[gpu_type] for _, _, p in mine)
    verdict = ctx.ledger.check(team, gpu_type, gpus + promised)
    if verdict.admitted:
        return None
    need = verdict.shortage(gpus + promised)
    ends = _team_ends_now(ctx, team, gpu_type)
    best = team_release_eta(ctx, team, gpu_type, need, ends)
    last: QuotaPromise | None = None
    released = need
    freed = 0
    for end, _, promise in mine:  # ends first first
        if best is not None and end >= best:
            break  # later ends start it no earlier
        freed += promise.gpus[gpu_type]
        at = team_release_eta(ctx, team, gpu_type, need - freed, ends)
        if at is not None and (best is None or max(at, end) < best):
            best, last, released = max(at, end), promise, max(0, need - freed)
        if freed >= need:
            break
    if best is None:  # (never: the quota admits the job alone, so once all have run)
        return None
    return PromisedQuota(best, last, len(mine), promised, released, mine[0][2])


def _team_ends_now(ctx: CycleContext, team: str, gpu_type: str) -> list[tuple[float, int]]:
    """:func:`team_ends`, read again only once the cycle has changed what the team's holders
    hold or when they end: a bind of the team adds a holder, a preemption, a resize or a kill
    adds to its own record. (Asked for each job of a team refused beside its promises: 15
    jobs of one team and type in the 10,000-GPU benchmark's cycle, 0.1 ms each, with nothing
    between; 1.6 ms each in its loop's full fleet.)"""
    seen = (len(team_holders(ctx, team)), len(ctx.preempted), len(ctx.resized), len(ctx.killed))
    key = (team, gpu_type)
    known = ctx.own_promise_ends.get(key)
    if known is not None and known[0] == seen:
        return known[1]
    ends = team_ends(ctx, team, gpu_type)
    ctx.own_promise_ends[key] = (seen, ends)
    return ends


def start_beside_promises(ctx: CycleContext, spec: JobSpec, gpu_type: str, gpus: int,
                          after: float, until: float,
                          releases: dict[tuple[str, str], list[tuple[float, int]]],
                          cums: Cumulative) -> float | None:
    """The earliest start of ``spec`` on ``gpus`` more ``gpu_type`` GPUs, from ``after`` (when
    its GPUs are there) and before ``until`` (when the promises ahead of it have all left it
    room: :func:`lending_promised`, :func:`quota_promised`), at which the engine's own rules
    would let it start beside the jobs promised GPUs this cycle; ``None`` if none does.

    ``until`` holds every promised job from now to its end, which is late (never early) for a
    job that ends before a promised job starts (:func:`broken_promise` never refuses it), or
    whose team's (cohort's) running jobs release enough by that start for both. Steps:

    1. The times at which the answer can change: its cohort's (or its team's) release times by
       runtime limits, and the promised jobs' starts and ends (by runtime limit, or the
       default estimate), between ``after`` and ``until``.
    2. At ``after``, then at each of those times in order, the rules of a cycle then
       (:func:`_starts_at`); the first that admits it. Use only rises when a promised job
       starts, so a start between two such times that is admitted makes the earlier one
       admitted too: no later start is missed.

    Jobs that start meanwhile are not foreseen, as in every ETA."""
    teams = _quota_teams(ctx, spec.team, gpu_type)
    freed = [(team, *cumulative(ctx, team, gpu_type, releases, cums)) for team in teams]
    estimate = ctx.config.default_runtime_estimate_s
    held = [(p.team, p.start_at, p.ends_at if p.ends_at is not None else p.start_at + estimate,
             p.gpus.get(gpu_type, 0)) for p in ctx.quota_promises.values() if p.team in teams]
    # (a job stopping early holds less from its stop until its end, where its release counts)
    held += [(team, stop, end, -gpus) for stop, end, team, gpus in _stops(ctx, gpu_type, teams)]
    times = {x for _, start, end, _ in held for x in (start, end)}
    for _, ends, _ in freed:
        times.update(ends[bisect_right(ends, after):bisect_left(ends, until)])
    for at in (after, *sorted(x for x in times if after < x < until)):
        if _starts_at(ctx, spec, gpu_type, gpus, at, freed, held):
            return at
    return None


def _stops(ctx: CycleContext, gpu_type: str,
           teams: set[str]) -> list[tuple[float, float, str, int]]:
    """(stop, end, team, GPUs of ``gpu_type``) of the jobs of ``teams`` preempted this cycle
    that stop before their runtime limits would end them (``end``, ``inf`` without one):
    still charged to their teams' quotas now, their ends (``ctx.ends``) count them back only
    from then (:func:`_stopping_early`)."""
    found = []
    holdings = ctx.state.holdings
    for job_id in ctx.preempted:
        job = ctx.running.get(job_id)
        if job is None or job.spec.team not in teams or (JOB, job_id) not in holdings \
                or job.terminating or job_id in ctx.killed:
            continue
        pc = ctx.priority.get(job.spec.priority_class)
        stop = ctx.snapshot.now + (pc.grace_period_s if pc is not None else 0.0)
        gpus = _gpus_of_type(ctx, job, gpu_type)
        end = ctx.ends.get(job_id, math.inf)
        if gpus and stop < end:
            found.append((stop, end, job.spec.team, gpus))
    return found


def _quota_teams(ctx: CycleContext, team: str, gpu_type: str) -> set[str]:
    """The teams whose use decides ``team``'s quota on ``gpu_type``: its cohort's, or its own."""
    cohort = ctx.ledger.cohort_of(team, gpu_type)
    if cohort is None:
        return {team}
    return {q.team for q in ctx.ledger.cohort_members(cohort, gpu_type)} | {team}


def _starts_at(ctx: CycleContext, spec: JobSpec, gpu_type: str, gpus: int, at: float,
               freed: list[tuple[str, list[float], list[int]]],
               held: list[tuple[str, float, float, int]]) -> bool:
    """Would a cycle at ``at`` start ``spec`` on ``gpus`` ``gpu_type`` GPUs, as far as the
    quota goes? Its quota then admits it, each team's running jobs having released their GPUs
    by runtime limits and the promised jobs started by then holding theirs until they have
    run; and it breaks none of the promises still to start (their slack, and what their
    cohort lends them, are measured from their starts: the same at ``at`` as now)."""
    uses: dict[str, int] = {}
    for team, ends, total in freed:
        k = bisect_right(ends, at)
        uses[team] = ctx.ledger.used_by(team, gpu_type) - (total[k - 1] if k else 0)
    for team, start, end, promised in held:
        if start <= at < end:
            uses[team] += promised
    if not ctx.ledger.admits_with(uses, spec.team, gpu_type, gpus):
        return False
    return not any(p.start_at > at and _breaks(ctx, p, spec, {gpu_type: gpus}, at) is not None
                   for p in ctx.quota_promises.values())


def ends_before(ctx: CycleContext, spec: JobSpec, gpu_type: str, gpus: int,
                at: float) -> QuotaPromise | None:
    """The promise that ``spec``, started at ``at``, starts before and ends before only by its
    runtime limit: the first to start of those it would break were it to run on (``None``:
    it breaks none, however long it runs)."""
    forever = replace(spec, runtime_limit_s=None)
    starts = sorted((p.start_at, p.job_id, p) for p in ctx.quota_promises.values()
                    if p.start_at > at)
    for _, _, promise in starts:
        if _breaks(ctx, promise, forever, {gpu_type: gpus}, at) is not None:
            return promise
    return None
