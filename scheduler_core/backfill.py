"""Phase 5: runtime limits and the head job's reservation (EASY backfill).

Seed 000: unrestricted backfill starves large jobs; EASY backfilling (Mu'alem and Feitelson,
2001) reserves a start for the head job and backfills only jobs that cannot delay it, which
needs runtime estimates, which enforced runtime limits make honest.

* :func:`enforce_runtime_limits`: a running job at or past ``started_at + runtime_limit_s`` is
  killed. Its GPUs are released when the control loop has fenced it, so this cycle still
  counts them as held, but reservations may count on them from ``now``.
* :func:`plan_reservation`: the first job that is admitted by quota but finds no room gets a
  reservation. Running jobs are removed as what-ifs in order of their expected end (runtime
  limit; ``now`` for killed jobs; ``now`` + grace for terminating ones) until the job's gang
  can be placed; that time and those GPUs (GPU-granular, not whole nodes) are the promise.
  The currently free part of those GPUs is held for the job; a later job may use held GPUs
  only if its own runtime limit ends it before the reservation starts (see
  :func:`may_backfill_into`), or if the head still starts at that time on other GPUs with the
  job running (:func:`starts_on_time`; the reservation then moves to those GPUs). GPUs the
  head does not need are free for anyone. A head its
  quota refuses now may still get the reservation when its own team's jobs release the quota
  by then, or, when they cannot, when its cohort lends it as the other teams' jobs end. Later jobs of the head's team must leave the quota it needs free
  (:mod:`scheduler_core.quota_promises`).

The release timeline that phase 7 estimates every other waiting job's start from is in
:mod:`scheduler_core.release_timeline`; when a team's quota has room again, in
:mod:`scheduler_core.quota_release`.
"""

from __future__ import annotations

from collections.abc import Iterable
from heapq import merge
from operator import itemgetter

from scheduler_core.context import ActiveReservation, CycleContext
from scheduler_core.placement import GrowingRooms, PlacementRequest
from scheduler_core.sentences import span_words
from scheduler_core.state import FLEET, HOLD, JOB, Grant, Holder, Restore
from scheduler_core.types import JobSpec, Kill, RunningJob

RESERVATION_PROBES = 24
"""Placement attempts (at distinct release times) spent looking for the head's start."""


def enforce_runtime_limits(ctx: CycleContext) -> None:
    """Kill every running job that reached its runtime limit (not already terminating)."""
    now = ctx.snapshot.now
    for job_id, job in ctx.running.items():
        limit = job.spec.runtime_limit_s
        if limit is None or job.terminating or now < job.started_at + limit:
            continue
        ctx.killed[job_id] = Kill(
            job_id=job_id,
            message=(
                f"Job {job_id} reached its runtime limit of {span_words(limit)} "
                f"(started {span_words(now - job.started_at)} ago) and is stopped."
            ),
            generation=job.generation,
        )


def expected_end(ctx: CycleContext, job: RunningJob) -> float | None:
    """When a running job will release its GPUs, if the engine can know it."""
    now = ctx.snapshot.now
    if job.spec.id in ctx.killed:
        return now
    if job.terminating:
        pc = ctx.priority.get(job.spec.priority_class)
        return now + (pc.grace_period_s if pc is not None else 0)
    if job.spec.runtime_limit_s is not None:
        return max(now, job.started_at + job.spec.runtime_limit_s)
    return None


def _release_groups(ctx: CycleContext) -> list[tuple[float, list[str]]]:
    """Holders with a known end, grouped by end time, earliest first; within a time, the
    largest holders first (a gang then needs fewer of them)."""
    # Holders' GPUs and ends do not change during the cycle; only new binds add ends. So the
    # groups are rebuilt only when ``ends`` has grown since the last call.
    cached = ctx.release_groups
    if cached is not None and cached[0] == len(ctx.ends):
        return cached[1]
    holdings = ctx.state.holdings
    rows: list[tuple[float, int, str]] = []
    for job_id, end in ctx.ends.items():
        held = holdings.get((JOB, job_id))
        if held:
            gpus = 0
            for g in held:
                gpus += g.mask.bit_count()
            rows.append((end, -gpus, job_id))
    # one sort of every holder, then runs of equal ends: most ends are distinct, and a sort
    # per end time cost more than the rest of the function
    rows.sort()
    groups: list[tuple[float, list[str]]] = []
    last: list[str] = []
    for end, _, job_id in rows:
        if groups and groups[-1][0] == end:
            last.append(job_id)
        else:
            last = [job_id]
            groups.append((end, last))
    ctx.release_groups = (len(ctx.ends), groups)
    return groups


def _start_times(ctx: CycleContext) -> Iterable[tuple[float, list[str]]]:
    """The times a reservation may start at: running jobs' ends (with the jobs that end
    then) and, merged in order, the ends of maintenance windows (with no job)."""
    groups = _release_groups(ctx)
    ends = ctx.calendar.ends
    if not ends:
        return groups
    now = ctx.snapshot.now
    reopen: list[tuple[float, list[str]]] = [(at, []) for at in ends if at > now]
    return merge(groups, reopen, key=itemgetter(0))


def _enough_gpus_at(ctx: CycleContext, classes: tuple[int, ...], gpus: int) -> float:
    """When the GPUs of ``classes`` free (as holders end) first add up to ``gpus``: no start
    can come earlier, so a search that must beat a start at or before it need not run. Counts
    only, nothing is moved."""
    state = ctx.state
    free = state.free_in(FLEET, 0, classes)
    if free >= gpus:
        return ctx.snapshot.now
    wanted = set(classes)
    node_class = state.node_class
    holdings = state.holdings
    for at, job_ids in _release_groups(ctx):
        for job_id in job_ids:
            for g in holdings.get((JOB, job_id), ()):
                if node_class[g.node] in wanted:
                    free += g.mask.bit_count()
        if free >= gpus:
            return at
    return float("inf")


NOMINATED: Holder = (HOLD, "\x00nominated")
"""Holds, inside a reservation search's what-ifs, the GPUs a removed holder frees that are
promised to a nominated job (``CycleContext.nominated``): that job starts on them once their
holders have stopped, so the head is never promised them as well."""


def keep_promised(ctx: CycleContext, freed: Iterable[Grant], keep: dict[int, int],
                  keeper: Holder) -> Restore | None:
    """Take for ``keeper`` the GPUs of ``freed`` (just freed by a what-if removal) that
    ``keep`` (masks per node) promises to someone else, so no search counts them free;
    returns the function that gives them back (``None`` if none were taken)."""
    state = ctx.state
    kept: list[Grant] = []
    for g in freed:
        bits = g.mask & keep.get(g.node, 0) & state.free_mask[g.node]
        if bits:
            piece = Grant(g.node, bits, 0, 0)
            state.take(keeper, piece)
            kept.append(piece)
    if not kept:
        return None

    def give_back() -> None:
        state.release_part(keeper, kept)
    return give_back


def remove_keeping_promises(ctx: CycleContext, holder: Holder, keep: dict[int, int],
                            keeper: Holder) -> Restore:
    """``state.simulate_removal(holder)``, except that the GPUs it frees that ``keep``
    promises to someone else go to ``keeper`` instead of becoming free. The returned function
    undoes both."""
    state = ctx.state
    grants = list(state.holdings.get(holder, ())) if keep else []
    restore = state.simulate_removal(holder)
    give_back = keep_promised(ctx, grants, keep, keeper) if keep else None
    if give_back is None:
        return restore

    def undo() -> None:
        give_back()
        restore()
    return undo


def plan_reservation(ctx: CycleContext, spec: JobSpec, request: PlacementRequest, *,
                     not_before: float | None = None,
                     quota_type: str | None = None,
                     hold_now: bool = True,
                     before: float | None = None) -> ActiveReservation | None:
    """The earliest start (and GPUs) for ``request`` as running jobs end, or ``None``.

    Steps: remove running jobs one by one in order of expected end (what-ifs); after each
    removal, check the placer's index-only conditions and, once they hold, try a placement
    (at most ``RESERVATION_PROBES`` tries); the start is the end of the last job removed, or
    ``not_before`` if later (when the head's quota lifts); undo every removal.
    ``quota_type`` marks a head that is over its quota now (see
    :attr:`ActiveReservation.quota_team`). ``hold_now=False`` only computes it, for a caller
    comparing several (one per GPU type the job accepts) that then holds the one it keeps;
    ``before`` stops the search at that time (a start there would not beat the one in hand)."""
    state = ctx.state
    restores: list[Restore] = []
    found: tuple[float, list[Grant]] | None = None
    probes = 0
    # plausible() fails first of all on too few free GPUs: checked here, that costs one
    # index sum per removal instead of the whole test
    union = ctx.placer.union(request.member_classes)
    gpus = request.demand.gpus
    if before is not None and _enough_gpus_at(ctx, union, gpus) >= before:
        return None
    calendar = ctx.calendar
    rooms = GrowingRooms()  # the removals below only add free GPUs
    try:
        for at, job_ids in _start_times(ctx):
            if before is not None and max(at, not_before or at) >= before:
                break
            if calendar:
                start = at if not_before is None else max(at, not_before)
                request = request._replace(closed=calendar.closed_for_run(start, spec.runtime_limit_s))
            # a window's end removes no job: one probe there
            for job_id in job_ids or (None,):
                if job_id is not None:
                    rooms.freed(g.node for g in state.holdings.get((JOB, job_id), ()))
                    restores.append(remove_keeping_promises(ctx, (JOB, job_id), ctx.nominated,
                                                            NOMINATED))
                if state.free_in(FLEET, 0, union) < gpus or not ctx.placer.plausible(request, rooms):
                    continue
                probes += 1
                grants = ctx.placer.place(request)
                if grants is not None:
                    found = (at, grants)
                    break
                if probes >= RESERVATION_PROBES:
                    break
            if found is not None or probes >= RESERVATION_PROBES:
                break
    finally:
        for restore in reversed(restores):
            restore()
    if found is None:
        return None
    start = float(found[0]) if not_before is None else max(float(found[0]), not_before)
    reservation = ActiveReservation(spec.id, start, tuple(found[1]),
                                    spec.team if quota_type is not None else None, quota_type)
    if hold_now:
        hold(ctx, reservation)
    return reservation


def starts_on_time(ctx: CycleContext, request: PlacementRequest) -> ActiveReservation | None:
    """Can the head still start at its reservation's time with what holds GPUs now? Every
    holder whose expected end is at or before the head's start is removed (what-ifs) and the
    head's gang is placed once; the grants found (or ``None``) are its reservation at the same
    start. Everything is undone; nothing is held."""
    head = ctx.head
    if head is None:
        return None
    restores: list[Restore] = []
    grants: list[Grant] | None = None
    if ctx.calendar:
        request = request._replace(closed=ctx.calendar.closed_for_run(
            head.start_at, ctx.reserved_specs[head.job_id].runtime_limit_s))
    try:
        for at, job_ids in _release_groups(ctx):
            if at > head.start_at:
                break
            for job_id in job_ids:
                restores.append(remove_keeping_promises(ctx, (JOB, job_id), ctx.nominated,
                                                        NOMINATED))
        if ctx.placer.plausible(request):
            grants = ctx.placer.place(request)
    finally:
        for restore in reversed(restores):
            restore()
    if grants is None:
        return None
    return ActiveReservation(head.job_id, head.start_at, tuple(grants))


def hold(ctx: CycleContext, reservation: ActiveReservation) -> None:
    """Hold the currently free part of a reservation's GPUs for its job."""
    state = ctx.state
    holder = (HOLD, reservation.job_id)
    state.release(holder)
    for g in reservation.grants:
        free = g.mask & state.free_mask[g.node]
        if not free:
            continue
        share = free.bit_count() / g.gpus
        state.take(holder, Grant(
            g.node, free,
            max(0, min(int(g.cpus * share), state.free_cpus[g.node])),
            max(0, min(int(g.memory_gb * share), state.free_mem[g.node])),
            g.role,
        ))


def may_backfill_into(ctx: CycleContext, spec: JobSpec) -> bool:
    """May ``spec`` use GPUs held for the head's reservation? Only if its runtime limit ends
    it no later than the reservation's start, so it cannot delay the head."""
    head = ctx.head
    if head is None or spec.runtime_limit_s is None:
        return False
    return ctx.snapshot.now + spec.runtime_limit_s <= head.start_at


def ends_by_head(ctx: CycleContext, spec: JobSpec) -> bool:
    """Does ``spec``'s runtime limit end it no later than the head's reservation starts?"""
    head = ctx.head
    return (head is not None and spec.runtime_limit_s is not None
            and ctx.snapshot.now + spec.runtime_limit_s <= head.start_at)
