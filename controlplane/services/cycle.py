"""One scheduling cycle: lease → snapshot → engine plan → fenced commit.

Steps:
  1. lead: take or renew the leader lease; its epoch is this cycle's fencing token.
  2. read: one snapshot of the fleet and the queue (no locks held while reading).
  3. plan: `scheduler_core.schedule` decides; nothing here second-guesses it.
  4. commit: in ONE transaction, lock the lease row and check the epoch is still ours; apply
     stops (runtime limits, preemptions), resizes and binds as compare-and-set writes, store
     every waiting job's explanation, a fleet sample and the teams' decayed usage.
A deposed leader (another worker took the lease while we planned) fails the check in step 4 and
its whole commit changes nothing. A plan built on a stale snapshot is caught row by row: a bind
needs the job still pending and every GPU free (the database's unique index on live GPUs), a
stop needs the allocation's generation unchanged.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import structlog
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

import scheduler_core as engine
from controlplane.choices import LIVE_ALLOCATION_STATES, EventKind, JobState
from controlplane.models import Allocation, Event, FleetSample, Job, PendingPlace, SchedulerLease, Team
from controlplane.models.jobs import split_numbers
from controlplane.services import transitions
from controlplane.services.snapshot import (
    BIND_GUARD_COLUMNS,
    SnapshotContext,
    nodes_of_windows_written_since,
    read_snapshot,
    scheduler_config,
)
from scheduler_core.eligibility import in_line

log = structlog.get_logger(__name__)

LEASE_NAME = "scheduler"
# One fleet sample per this many seconds is enough for the charts.
SAMPLE_EVERY_S = 5.0


class Deposed(Exception):
    """Our epoch is no longer current: another scheduler leads now. Nothing was written."""


@dataclass(frozen=True)
class CycleResult:
    led: bool
    epoch: int | None = None
    binds: int = 0
    stops: int = 0
    resizes: int = 0
    pending: int = 0
    stale: int = 0
    plan_ms: float = 0.0
    total_ms: float = 0.0
    read_ms: float = 0.0  # the snapshot read
    commit_ms: float = 0.0  # the fenced commit, from the lease check to the end of the transaction


def acquire_lease(holder: str, now: datetime, ttl_s: float | None = None) -> SchedulerLease | None:
    """Take the lease if it is free or expired (epoch + 1), renew it if ours; None if another
    live holder has it. The row lock serialises contenders; the epoch never goes back."""
    ttl = timedelta(seconds=ttl_s if ttl_s is not None else float(settings.QM["LEADER_LEASE_S"]))
    with transaction.atomic():
        SchedulerLease.objects.get_or_create(name=LEASE_NAME)
        lease = SchedulerLease.objects.select_for_update().get(name=LEASE_NAME)
        if lease.holder == holder and lease.expires_at and lease.expires_at > now:
            lease.expires_at = now + ttl
            lease.renewed_at = now
            lease.save(update_fields=["expires_at", "renewed_at"])
            return lease
        if lease.holder and lease.holder != holder and lease.expires_at and lease.expires_at > now:
            return None
        previous = lease.holder
        lease.holder = holder
        lease.epoch += 1
        lease.expires_at = now + ttl
        lease.renewed_at = now
        lease.save(update_fields=["holder", "epoch", "expires_at", "renewed_at"])
        transitions.record_event(
            "leader.elected", f"scheduler:{holder}", epoch=lease.epoch, at=now, reason="LeaseAcquired",
            message=f"{holder} leads with epoch {lease.epoch}" + (f" (was {previous})" if previous else ""),
        )
        log.info("leader elected", holder=holder, epoch=lease.epoch, previous=previous)
        return lease


def release_lease(holder: str, now: datetime | None = None) -> bool:
    """Give up the lead (a loop worker stopping cleanly), so a standby takes it at its next tick
    instead of waiting out LEADER_LEASE_S. Only the lease's expiry moves: the holder and epoch
    stay, the next leader takes epoch + 1 as after an expiry, and any cycle of ours still in
    flight is refused as deposed then. False when `holder` did not lead."""
    now = now or timezone.now()
    released = SchedulerLease.objects.filter(name=LEASE_NAME, holder=holder, expires_at__gt=now).update(
        expires_at=now)
    if released:
        log.info("leader released the lease", holder=holder)
    return bool(released)


def release_worker_lease(nodename: str, now: datetime | None = None) -> bool:
    """:func:`release_lease` for whichever process of the Celery worker ``nodename`` leads (its
    pool's process with ``-c 1``, the worker itself with ``-P solo``): the worker lost its broker
    (controlplane/broker_consumer.py). False when none of them led."""
    now = now or timezone.now()
    released = SchedulerLease.objects.filter(name=LEASE_NAME, holder__startswith=f"{nodename}/",
                                             expires_at__gt=now).update(expires_at=now)
    if released:
        log.info("leader released the lease", holder=nodename)
    return bool(released)


def locked_lease_if_current(epoch: int, holder: str) -> SchedulerLease:
    """Inside a transaction: lock the lease row and prove we still lead, or raise Deposed."""
    lease = SchedulerLease.objects.select_for_update().get(name=LEASE_NAME)
    if lease.epoch != epoch or lease.holder != holder:
        raise Deposed(f"epoch {epoch} of {holder} is stale; lease is at epoch {lease.epoch} held by {lease.holder}")
    return lease


def run_cycle(holder: str, now: datetime | None = None) -> CycleResult:
    started = time.perf_counter()
    now = now or timezone.now()
    # 1. lead
    lease = acquire_lease(holder, now)
    if lease is None:
        return CycleResult(led=False)
    epoch = lease.epoch
    cycle_log = log.bind(holder=holder, epoch=epoch)
    # 2. read
    read_started = time.perf_counter()
    context = read_snapshot(now, epoch)
    # 3. plan
    plan_started = time.perf_counter()
    read_ms = (plan_started - read_started) * 1000
    plan = engine.schedule(context.snapshot, scheduler_config())
    plan_ms = (time.perf_counter() - plan_started) * 1000
    # 4. commit
    try:
        result = commit_plan(plan, context, holder=holder, epoch=epoch, plan_ms=plan_ms, started=started,
                             read_ms=read_ms)
    except Deposed as deposed:
        cycle_log.warning("cycle discarded: deposed", detail=str(deposed))
        return CycleResult(led=False, epoch=epoch, plan_ms=plan_ms)
    if result.binds or result.stops or result.stale:
        cycle_log.info("cycle committed", binds=result.binds, stops=result.stops, resizes=result.resizes,
                       pending=result.pending, stale=result.stale, plan_ms=round(plan_ms, 1),
                       total_ms=round(result.total_ms, 1))
    return result


@dataclass(frozen=True)
class _StopOrder:
    """One running generation the plan stops, with the release reason and grace it gets."""

    job_id: str
    generation: int
    reason: str
    grace_period_s: float
    message: str
    lost_gpu_hours: float | None = None


def _stop_orders(plan: engine.Plan, context: SnapshotContext) -> list[_StopOrder]:
    """The plan's stops in the order they are signalled: runtime limits, preemptions, resizes.
    An elastic job changes size by stopping its current generation with reason Resized; it is
    requeued and the next cycle binds it at the size that fits."""
    grace = context.grace_by_job
    return [
        *(_StopOrder(k.job_id, k.generation, transitions.RELEASE_RUNTIME_LIMIT, grace.get(k.job_id, 30), k.message)
          for k in plan.kills),
        *(_StopOrder(p.job_id, p.generation, transitions.RELEASE_PREEMPTED, p.grace_period_s, p.message,
                     p.lost_gpu_hours)
          for p in plan.preemptions),
        *(_StopOrder(r.job_id, r.generation, transitions.RELEASE_RESIZED, grace.get(r.job_id, 30),
                     r.message or f"Resized from {r.from_gpus} to {r.to_gpus} GPUs")
          for r in plan.resizes),
    ]


def commit_plan(
    plan: engine.Plan, context: SnapshotContext, *, holder: str, epoch: int, plan_ms: float, started: float,
    read_ms: float = 0.0,
) -> CycleResult:
    now = context.read_at
    commit_started = time.perf_counter()
    actor = f"scheduler@epoch:{epoch}"
    binds = stops = resizes = stale = 0
    with transaction.atomic():
        lease = locked_lease_if_current(epoch, holder)
        orders = _stop_orders(plan, context)
        # The stops' allocation rows first, in id order, as a report of several exits takes them
        # (transitions.complete_releases): in the plan's order (kills by job id as text, then
        # preemptions, then resizes) a commit and an agent's report of two of those jobs' exits
        # each held one and waited for the other, and PostgreSQL aborted one of them.
        stopping = sorted({context.live_allocations[o.job_id].allocation_id for o in orders
                           if o.job_id in context.live_allocations})
        if stopping:
            list(Allocation.objects.select_for_update(no_key=True).filter(pk__in=stopping).order_by("pk")
                 .values_list("pk", flat=True))
        for order in orders:
            live = context.live_allocations.get(order.job_id)
            if live is None:
                continue  # nothing of it runs any more: nothing to stop
            if order.reason == transitions.RELEASE_RUNTIME_LIMIT and _limit_changed(order.job_id, live.allocation_id,
                                                                                   context):
                stale += 1  # its limit changed since the read (PATCH jobs/{id}/): the next cycle judges it anew
                continue
            ok = transitions.signal_stop(
                live.allocation_id, order.generation or live.generation, reason=order.reason,
                grace_period_s=order.grace_period_s, at=now, actor=actor, message=order.message, epoch=epoch,
                lost_gpu_hours=order.lost_gpu_hours,
            )
            if not ok:
                stale += 1
            elif order.reason == transitions.RELEASE_RESIZED:
                resizes += 1
            else:
                stops += 1
        # All binds in a handful of queries (transitions.bind_jobs): a bind whose GPU already
        # has a live owner, or whose job is no longer pending, means our snapshot was stale;
        # that gang is left out whole and the next cycle sees the truth.
        requests = [
            transitions.BindRequest(
                job_id=int(bind.job_id),
                gpus=[transitions.GpuSet(node_id=context.node_ids[p.node], gpu_indices=p.gpu_indices, role=p.role)
                      for p in bind.placements],
                borrowed=bind.borrowed,
                as_read=context.as_read.get(bind.job_id),
            )
            for bind in plan.binds
        ]
        # A bind onto a node given a maintenance window since the read was planned without it:
        # left out, as stale (the next cycle plans with the window).
        if requests:
            windowed = nodes_of_windows_written_since(context)
            planned = len(requests)
            requests = [r for r in requests if not any(g.node_id in windowed for g in r.gpus)]
            stale += planned - len(requests)
        # A job held or changed (PATCH) since the read is left out too: its row no longer reads
        # as the snapshot read it (snapshot.BIND_GUARD_COLUMNS), see transitions.bind_jobs.
        # ... and so is one onto a node whose inventory changed since (an admin's PATCH, its agent
        # registering fewer GPUs: those take the lease row first, so they committed before this).
        bound, not_bound = transitions.bind_jobs(
            requests, lease=lease, at=now, actor=actor, node_names={v: k for k, v in context.node_ids.items()},
            guard_columns=BIND_GUARD_COLUMNS,
            node_shapes={context.node_ids[n.name]: (n.gpu_type, n.gpus, n.cpus, n.memory_gb)
                         for n in context.snapshot.nodes if n.name in context.node_ids},
        )
        binds += bound
        stale += not_bound
        _store_borrowing(plan, context, at=now, actor=actor, epoch=epoch)
        _store_explanations(plan, context)
        _store_growth_notes(plan)
        cycle_ms = (time.perf_counter() - started) * 1000
        _store_fleet_sample(plan, context, epoch=epoch, cycle_ms=cycle_ms)
        _fold_team_usage(context, now)
        SchedulerLease.objects.filter(pk=lease.pk).update(
            last_cycle_at=now, last_cycle_ms=cycle_ms, cycles=F("cycles") + 1
        )
    ended = time.perf_counter()
    return CycleResult(led=True, epoch=epoch, binds=binds, stops=stops, resizes=resizes,
                       pending=len(plan.pending), stale=stale, plan_ms=plan_ms, total_ms=(ended - started) * 1000,
                       read_ms=read_ms, commit_ms=(ended - commit_started) * 1000)


def _limit_changed(job_id: str, allocation_id: int, context: SnapshotContext) -> bool:
    """Whether a running job's runtime limit differs from the one the plan's snapshot read (an
    admin raised it, its owner lowered it: services/holds.update). The job row is locked as
    that change locks it, so a change committed first is seen here, and one that comes later
    waits for this commit and finds the job stopping.

    The allocation's row is locked before the job's, as every stop and release takes them
    (services/agent_protocol.py, the lock order): until 5 Dec the job's came first, and an
    agent's exit report holding the allocation and waiting for the job deadlocked with the
    commit, which PostgreSQL then aborted whole (tests/controlplane/loop/test_limit_kill_lock_order.py)."""
    Allocation.objects.select_for_update(no_key=True).filter(pk=allocation_id).values_list("pk", flat=True).first()
    read = next((r.spec.runtime_limit_s for r in context.snapshot.running if r.spec.id == job_id), None)
    now = (Job.objects.select_for_update(no_key=True).filter(pk=int(job_id))
           .values_list("runtime_limit_s", flat=True).first())
    return read is not None and now is not None and float(now) != read


def _store_explanations(plan: engine.Plan, context: SnapshotContext) -> None:
    """Store each waiting job's reason, position and ETA.

    A reason's sentences are split into their words (each number marked) and their numbers
    (models.jobs.split_numbers). The words, code and resolvability stay on the jobs row, which
    is rewritten only when they change: a reason changed, not a number. Everything that moves
    each cycle (queue position, ETA, the numbers: free GPUs, quota use, the estimated start)
    goes to the narrow PendingPlace, in one statement. An Event records each job whose reason
    to wait changed."""
    if not plan.pending:
        return
    rows: list[tuple[Any, ...]] = []
    places: list[tuple[Any, ...]] = []
    reasons: dict[int, engine.PendingExplanation] = {}
    would_splits: dict[str, tuple[str, list[str]]] = {}
    fromtimestamp = datetime.fromtimestamp
    utc = dt_timezone.utc
    for explanation in plan.pending:
        old = context.explanations.get(explanation.job_id)
        if old is None:
            continue  # not pending when the snapshot read it
        if explanation.job_id in context.any_of:
            # any-of dependencies (Slurm's `?`): the control plane decides them, and says them
            explanation = _any_of_explanation(explanation, context)
        words, numbers = split_numbers(fit_stored(explanation.message, REASON_CHARS))
        split = would_splits.get(explanation.would_start_if)
        if split is None:  # many jobs share one: split it once
            split = would_splits[explanation.would_start_if] = split_numbers(fit_stored(explanation.would_start_if, 300))
        would, would_numbers = split
        pk = int(explanation.job_id)
        eta = fromtimestamp(explanation.eta, tz=utc) if explanation.eta else None
        places.append((pk, explanation.queue_position, eta, " ".join(numbers + would_numbers)))
        if (old[0] == explanation.reason and old[1] == words and old[2] == would
                and old[3] == explanation.resolvable):
            continue
        rows.append((pk, explanation.reason, words, would, explanation.resolvable, old[0], old[1], old[2]))
        if old[0] != explanation.reason:
            reasons[pk] = explanation
    written = _write_reasons(rows) if rows else set()
    _write_places(places, context.read_at, context.as_read)
    _record_reason_changes([e for pk, e in reasons.items() if pk in written], context)


def _store_borrowing(plan: engine.Plan, context: SnapshotContext, *, at: datetime, actor: str,
                     epoch: int) -> None:
    """Each running job the plan now counts as borrowed, or as within its team's nominal quota
    again (its team's quota lowered or raised, or its team moved out of its cohort, while it
    ran), says so from now on: its allocation's and its job's `borrowed`, what the API, the job
    page and `qm status` show and the next snapshot reads, and a job.borrowing event saying why.
    A compare-and-set on the allocation as read (its generation and flag): one released, or
    changed since, is left to the next cycle. Usage before the change keeps the flag it had
    (accounting.held_spans cuts the allocation's span at the event)."""
    changes = [(context.live_allocations[c.job_id], c) for c in plan.borrowing if c.job_id in context.live_allocations]
    if not changes:
        return
    # The allocations' rows first, then the jobs', each in id order, as every stop and release
    # takes them (a report of several exits: transitions.complete_releases).
    list(Allocation.objects.select_for_update(no_key=True).filter(pk__in=[live.allocation_id for live, _ in changes])
         .order_by("pk").values_list("pk", flat=True))
    written = []
    for live, change in sorted(changes, key=lambda lc: lc[0].allocation_id):
        if Allocation.objects.filter(
            pk=live.allocation_id, generation=live.generation, state__in=LIVE_ALLOCATION_STATES,
            borrowed=not change.borrowed,
        ).update(borrowed=change.borrowed):
            written.append((live, change))
    if not written:
        return
    jobs = {job.pk: job for job in Job.objects.select_for_update(no_key=True).filter(
        pk__in=[int(c.job_id) for _, c in written]).order_by("pk").only("id", "team_id")}
    for flag in (False, True):
        Job.objects.filter(pk__in=[int(c.job_id) for _, c in written if c.borrowed is flag]).update(borrowed=flag)
    Event.objects.bulk_create([
        Event(**transitions.event_fields(
            EventKind.JOB_BORROWING, actor, job=jobs[int(change.job_id)], allocation=Allocation(pk=live.allocation_id),
            epoch=epoch, at=at, reason="Borrowing" if change.borrowed else "WithinQuota",
            message=fit_stored(
                f"Now counts as borrowed: {change.message}; a lender reclaiming its GPUs preempts borrowed work first"
                if change.borrowed else f"Now counts as within its team's quota: {change.message}", 1000),
            data={"borrowed": change.borrowed},
        ))
        for live, change in written if int(change.job_id) in jobs
    ])
    log.info("jobs_borrowing_changed", borrowed=sorted(int(c.job_id) for _, c in written if c.borrowed),
             within_quota=sorted(int(c.job_id) for _, c in written if not c.borrowed))


def _store_growth_notes(plan: engine.Plan) -> None:
    """Each running elastic job the plan did not grow below its maximum says why (its
    `growth_code` and `growth_note`); a job noted before and not now (it grew, reached its
    maximum, stopped or ended) is cleared. Rows are written only when their note changed, in one
    statement: three a cycle at most, over the few jobs with a note (a partial index)."""
    running = [JobState.RUNNING.value, JobState.PREEMPTING.value]
    noted = {int(note.job_id): (note.code.value, fit_stored(note.message, 300)) for note in plan.growth_notes}
    Job.objects.filter(~Q(growth_code="")).exclude(pk__in=noted).update(growth_code="", growth_note="")
    if not noted:
        return
    changed = [Job(pk=pk, growth_code=noted[pk][0], growth_note=noted[pk][1])
               for pk, code, note in Job.objects.filter(pk__in=noted, state__in=running).values_list(
                   "pk", "growth_code", "growth_note")
               if (code, note) != noted[pk]]
    if changed:
        Job.objects.bulk_update(changed, ["growth_code", "growth_note"])


def _any_of_explanation(explanation: engine.PendingExplanation, context: SnapshotContext) -> engine.PendingExplanation:
    """The engine's explanation of a job whose dependencies are any-of, its sentence and what
    would start it saying "any one of … or …" (services/dependencies.any_of_words)."""
    from controlplane.services import dependencies

    message, would = dependencies.any_of_words(explanation.message, explanation.would_start_if,
                                               context.any_of[explanation.job_id])
    return dataclasses.replace(explanation, message=message, would_start_if=would)


# A waiting job's reason is stored in this many characters (Job.pending_words; an Event's message
# holds as many): the engine's longest sentence, some 750, fits whole.
REASON_CHARS = 1000


def fit_stored(text: str, limit: int) -> str:
    """`text` in at most `limit` characters (its stored column's size): whole, or cut after the
    last clause that fits ("; " or ". "), else at a word, and marked " …". A plain slice cut a
    reason mid-clause and mid-number ("of its 300 " for "of its 3000 s")."""
    if len(text) <= limit:
        return text
    room = text[:limit - 2]
    end = max(room.rfind("; "), room.rfind(". "))
    if end < limit // 2:
        end = room.rfind(" ")
    return (room[:end + 1] if end > 0 else room).rstrip() + " …"


def _write_reasons(rows: list[tuple[Any, ...]]) -> set[int]:
    """(id, code, words, would-start-if words, resolvable, and the code, words and would-start-if
    words the snapshot read) rows → the jobs still pending whose reason still reads as the
    snapshot read it (a compare-and-set: a job held or changed by `qm update` after the read says
    "Held" or "Changed … waiting for the next scheduling cycle", which a reason planned from the
    job as it was would overwrite; the next cycle words it as it is); returns the ids written.
    On PostgreSQL one UPDATE … FROM unnest(arrays), its WHERE checked on the row as it is once
    locked."""
    table = Job._meta.db_table
    pending = JobState.PENDING.value
    if connection.vendor == "postgresql":
        columns = list(zip(*rows, strict=True))
        with connection.cursor() as cursor:
            # Their rows first, in id order, as every writer of several jobs takes them
            # (holds.hold_array, jobs.cancel_waiting, the bind): in the UPDATE's own order (the
            # queue's) it and an array's hold each held a row the other wanted.
            cursor.execute(f"SELECT id FROM {table} WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE",
                           [sorted(columns[0])])
            cursor.execute(
                f"UPDATE {table} AS j SET pending_code = v.code, pending_words = v.words, "
                "would_start_if_words = v.would, pending_resolvable = v.resolvable "
                "FROM unnest(%s::bigint[], %s::varchar[], %s::varchar[], %s::varchar[], %s::boolean[], "
                "%s::varchar[], %s::varchar[], %s::varchar[]) "
                "AS v(id, code, words, would, resolvable, read_code, read_words, read_would) "
                "WHERE j.id = v.id AND j.state = %s AND (j.pending_code, j.pending_words, j.would_start_if_words) "
                "= (v.read_code, v.read_words, v.read_would) RETURNING j.id",
                [*(list(c) for c in columns), pending],
            )
            return {row[0] for row in cursor.fetchall()}
    # SQLite (the embedded demo): one pipelined statement per row.
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {table} SET pending_code = %s, pending_words = %s, would_start_if_words = %s, "
            "pending_resolvable = %s WHERE id = %s AND state = %s AND pending_code = %s AND pending_words = %s "
            "AND would_start_if_words = %s",
            [(code, words, would, resolvable, pk, pending, read_code, read_words, read_would)
             for pk, code, words, would, resolvable, read_code, read_words, read_would in rows],
        )
    wrote = {r[0]: r[1:4] for r in rows}
    return {pk for pk, *now in Job.objects.filter(pk__in=list(wrote), state=pending)
            .values_list("pk", "pending_code", "pending_words", "would_start_if_words")
            if tuple(now) == tuple(wrote[pk])}


def _write_places(places: list[tuple[Any, ...]], told_at: datetime,
                  as_read: dict[str, tuple[Any, ...]] | None = None) -> None:
    """(id, position, ETA, numbers) rows → PendingPlace, for the jobs still pending. A row's first
    ETA (and ``told_at``, this cycle) is set once and kept as the ETA moves. On PostgreSQL one
    INSERT … ON CONFLICT that leaves unchanged rows alone; the table is narrow and roomy (fill
    factor 50), so most of these updates are HOT.

    A first ETA is told only for the request the snapshot read (`as_read`: the job's row as
    read, its BIND_GUARD_COLUMNS, as a bind is guarded): a job changed by PATCH jobs/{id}/ or
    `qm update` after the read (services/holds.update, which starts a new stay and clears the
    place's first ETA) would otherwise get its new stay's first ETA from the old request. See
    `_tell_first_etas`.

    A place is written only for a job held, or not, as the snapshot read it: a hold after the
    read took the job out of line and deleted its place (services/holds.hold), and the cycle's
    place from before it put it back, "held … in 8 min" until the next cycle (found on the demo)."""
    if not places:
        return
    table = PendingPlace._meta.db_table
    jobs = Job._meta.db_table
    pending = JobState.PENDING.value
    holds_read = [_hold_as_read(as_read, place[0]) for place in places]
    if connection.vendor == "postgresql":
        columns = [*zip(*places, strict=True), holds_read]
        with connection.cursor() as cursor:
            # The places as this cycle ranks them, a first ETA kept, never set here; returns the
            # places that have an ETA and no first ETA yet: those whose first ETA is to be told.
            # Such a row is written even if its position, ETA and numbers are unchanged (its first
            # ETA was left untold by a cycle that raced a change), the others only if they moved.
            cursor.execute(
                f"INSERT INTO {table} AS p (job_id, queue_position, eta, numbers, first_eta, first_eta_at) "
                "SELECT v.id, v.pos, v.eta, v.numbers, NULL, NULL "
                "FROM unnest(%s::bigint[], %s::integer[], %s::timestamptz[], %s::text[], %s::text[]) "
                "AS v(id, pos, eta, numbers, hold) "
                f"JOIN {jobs} AS j ON j.id = v.id AND j.state = %s AND (v.hold IS NULL OR j.hold = v.hold) "
                "ON CONFLICT (job_id) DO UPDATE SET queue_position = EXCLUDED.queue_position, eta = EXCLUDED.eta, "
                "numbers = EXCLUDED.numbers "
                "WHERE (p.queue_position, p.eta, p.numbers) "
                "IS DISTINCT FROM (EXCLUDED.queue_position, EXCLUDED.eta, EXCLUDED.numbers) "
                "OR (p.first_eta IS NULL AND EXCLUDED.eta IS NOT NULL) "
                "RETURNING p.job_id, p.first_eta IS NULL AND p.eta IS NOT NULL",
                [*(list(c) for c in columns), pending],
            )
            untold = [pk for pk, to_tell in cursor.fetchall() if to_tell]
        _tell_first_etas(untold, told_at, as_read)
        return
    # SQLite (the embedded demo): one pipelined upsert per row, for the jobs still pending.
    read = {place[0]: hold for place, hold in zip(places, holds_read, strict=True)}
    still = {pk for pk, hold in Job.objects.filter(pk__in=list(read), state=pending).values_list("pk", "hold")
             if read[pk] is None or read[pk] == hold}
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (job_id, queue_position, eta, numbers, first_eta, first_eta_at) "
            "VALUES (%s, %s, %s, %s, NULL, NULL) "
            "ON CONFLICT (job_id) DO UPDATE SET queue_position = excluded.queue_position, eta = excluded.eta, "
            "numbers = excluded.numbers",
            [(pk, pos, adapt(eta), numbers) for pk, pos, eta, numbers in places if pk in still],
        )
    untold = list(PendingPlace.objects.filter(job_id__in=still, first_eta__isnull=True, eta__isnull=False)
                  .values_list("job_id", flat=True))
    _tell_first_etas(untold, told_at, as_read)


#: Where a job's hold is in its row as the snapshot read it (`SnapshotContext.as_read`).
_HOLD_READ_AT = BIND_GUARD_COLUMNS.index("hold")


def _hold_as_read(as_read: dict[str, tuple[Any, ...]] | None, pk: int) -> str | None:
    """The job's hold as the snapshot read it; None when nothing was read to compare with."""
    row = None if as_read is None else as_read.get(str(pk))
    return None if row is None else str(row[_HOLD_READ_AT])


def _tell_first_etas(untold: list[int], told_at: datetime, as_read: dict[str, tuple[Any, ...]] | None) -> None:
    """The first ETA of these places (their ETA as this cycle wrote it, told at `told_at`), for
    the jobs whose row still reads as the snapshot read it: a request changed since the read
    (services/holds.update) is told its first ETA by the next cycle, which plans it as it is.

    The place rows are locked already (written by this transaction), the jobs' rows are locked
    here FOR NO KEY UPDATE SKIP LOCKED, as the change locks them: a change that committed first is
    what this read sees; one that comes later waits for this commit, then clears the place's
    first ETA (a new stay); one in progress holds its job's row and is skipped, never waited for
    (the change waits for the place rows this transaction holds: waiting here would deadlock).
    A few rows a cycle: only places with an ETA and no first ETA (a new stay, or one just
    changed). Two queries, none when there is nothing to tell. `as_read` None: no snapshot to
    compare with (a caller writing places itself), every place is told."""
    if not untold:
        return
    still_as_read = untold if as_read is None else [
        row[0]
        for row in Job.objects.select_for_update(no_key=True, skip_locked=True)
        .filter(pk__in=untold, state=JobState.PENDING).values_list("pk", *BIND_GUARD_COLUMNS)
        if as_read.get(str(row[0])) is not None and tuple(row[1:]) == tuple(as_read[str(row[0])])
    ]
    if still_as_read:
        PendingPlace.objects.filter(job_id__in=still_as_read, first_eta__isnull=True, eta__isnull=False).update(
            first_eta=F("eta"), first_eta_at=told_at)


#: A waiting job's reason that comes back within this many seconds of being recorded (in the same
#: wait) is not recorded again: see `_record_reason_changes`.
REASON_FLAP_WINDOW_S = 600


def _record_reason_changes(explanations: list[engine.PendingExplanation], context: SnapshotContext) -> None:
    """An Event when a job's reason to wait changes (not every cycle it stays the same).

    A reason that comes back, in the same wait, within REASON_FLAP_WINDOW_S of its last record
    is not recorded again. A gang over its quota is the head with a reservation in one cycle
    and not in the next, when a short job of its team arrives ahead of it in the queue (shorter
    limits go first among equals) and takes the head: on the demo its reason went
    QuotaExceeded, WaitingForReservation, QuotaExceeded, … every few seconds, 13 events in two
    minutes. Now each reason is in its events at most once per window; the job's live reason
    (its page, `qm explain`) is always the latest. One query over the jobs whose reason changed."""
    if not explanations:
        return
    from controlplane.models import Event

    kinds = ("job.pending", "job.unschedulable")
    recent = set(Event.objects.filter(
        job_id__in=[int(e.job_id) for e in explanations], kind__in=kinds,
        created_at__gte=context.read_at - timedelta(seconds=REASON_FLAP_WINDOW_S),
    ).filter(created_at__gte=F("job__state_changed_at")).values_list("job_id", "reason"))
    explanations = [e for e in explanations if (int(e.job_id), e.reason) not in recent]
    if not explanations:
        return
    teams = {spec.id: context.team_ids.get(spec.team) for spec in context.snapshot.pending}

    Event.objects.bulk_create(
        [
            Event(
                created_at=context.read_at,
                kind="job.pending" if e.resolvable else "job.unschedulable",
                actor=f"scheduler@epoch:{context.snapshot.epoch}",
                reason=e.reason,
                message=e.message[:1000],
                job_id=int(e.job_id),
                team_id=teams.get(e.job_id),
                epoch=context.snapshot.epoch,
                data={"queue_position": e.queue_position, "eta": e.eta},
            )
            for e in explanations
        ]
    )


def _store_fleet_sample(plan: engine.Plan, context: SnapshotContext, *, epoch: int, cycle_ms: float) -> None:
    last = FleetSample.objects.order_by("-at").values_list("at", flat=True).first()
    if last is not None and (context.read_at - last).total_seconds() < SAMPLE_EVERY_S:
        return
    snapshot = context.snapshot
    # Every waiting figure counts the same jobs: those still waiting after this cycle (the
    # plan's pending), not the snapshot's pending from before this cycle's admissions, so the
    # tile's count, the queue chart's breakdowns and the oldest wait agree.
    explanations = {e.job_id: e for e in plan.pending}
    waiting = [job for job in snapshot.pending if job.id in explanations]
    by_priority: Counter[str] = Counter(job.priority_class for job in waiting)
    by_team: Counter[str] = Counter(job.team for job in waiting)
    by_team_priority: dict[str, Counter[str]] = {}
    for job in waiting:
        by_team_priority.setdefault(job.team, Counter())[job.priority_class] += 1
    # A job held or waiting for a dependency is not in line (eligibility.in_line): its wait is
    # its owner's choice, and a job held for a week read as the queue's oldest feasible wait.
    feasible_waits = [snapshot.now - job.submitted_at for job in waiting
                      if explanations[job.id].resolvable and in_line(job)]
    fleet = plan.fleet
    FleetSample.objects.create(
        at=context.read_at,
        epoch=epoch,
        total_gpus=fleet.total_gpus,
        allocated_gpus=fleet.allocated_gpus,
        unavailable_gpus=fleet.unavailable_gpus,
        borrowed_gpus=fleet.borrowed_gpus,
        stranded_gpus=fleet.stranded_gpus,
        reserved_gpus=fleet.reserved_gpus,
        pending_jobs=len(waiting),
        running_jobs=len(snapshot.running) + len(plan.binds),
        pending_by_priority=dict(sorted(by_priority.items())),
        pending_by_team=dict(sorted(by_team.items())),
        pending_by_team_priority={team: dict(sorted(c.items())) for team, c in sorted(by_team_priority.items())},
        pending_by_reason=dict(fleet.pending_by_reason),
        largest_free_block_by_pool=dict(fleet.largest_free_block_by_pool),
        dominant_share_by_team={k: round(v, 6) for k, v in fleet.dominant_share_by_team.items()},
        mean_slowdown=fleet.mean_slowdown,
        oldest_feasible_pending_s=max(feasible_waits) if feasible_waits else None,
        cycle_ms=cycle_ms,
    )


def _fold_team_usage(context: SnapshotContext, now: datetime) -> None:
    """usage(now) = usage(as_of)·2^(-Δ/half_life) + what each team held over Δ."""
    half_life = float(settings.QM["FAIR_SHARE_HALF_LIFE_S"])
    held: Counter[str] = Counter()
    cpus: Counter[str] = Counter()
    memory: Counter[str] = Counter()
    for running in context.snapshot.running:
        gpus = sum(len(p.gpu_indices) for p in running.placements)
        held[running.spec.team] += gpus
        cpus[running.spec.team] += gpus * running.spec.cpus_per_gpu
        memory[running.spec.team] += gpus * running.spec.memory_gb_per_gpu
    updates = []
    for team in Team.objects.all():
        as_of = team.usage_as_of or now
        dt = max(0.0, (now - as_of).total_seconds())
        decay = 0.5 ** (dt / half_life) if half_life > 0 else 0.0
        team.decayed_gpu_seconds = team.decayed_gpu_seconds * decay + held[team.name] * dt
        team.decayed_cpu_seconds = team.decayed_cpu_seconds * decay + cpus[team.name] * dt
        team.decayed_memory_gb_seconds = team.decayed_memory_gb_seconds * decay + memory[team.name] * dt
        team.usage_as_of = now
        updates.append(team)
    Team.objects.bulk_update(
        updates, ["decayed_gpu_seconds", "decayed_cpu_seconds", "decayed_memory_gb_seconds", "usage_as_of"]
    )
