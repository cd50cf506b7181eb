"""State transitions of jobs and allocations: the one place they happen.

Every transition is a compare-and-set on the row's current state (and, for allocations, its
generation): if zero rows change, someone else got there first, and the caller learns it from
the return value instead of overwriting their decision. Every transition records an Event.

Transitions that the scheduler leader makes (bind, signal_stop for preemption and runtime
limits, fence) run inside the leader's commit transaction, after the lease row has been locked
and its epoch checked (see services/cycle.py); they draw new generations from that locked row.
Transitions that agents or users cause (complete_release, cancel_job) need no lease: they only
move an allocation towards released, which can never give a GPU two owners.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.utils import timezone

from controlplane.choices import (
    LIVE_ALLOCATION_STATES,
    AllocationState,
    DependencyMode,
    EventKind,
    JobHold,
    JobState,
    NodeState,
)
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node, PendingPlace, SchedulerLease
from controlplane.models.events import actor_name
from controlplane.services import agent_wakeups, dependencies, exit_codes
from controlplane.services.hold_text import held_sentence, hold_label_of
from scheduler_core.sentences import counted, gpu_hours

log = structlog.get_logger(__name__)

# Why an allocation is being released; decides what happens to its job afterwards.
RELEASE_PREEMPTED = "Preempted"
RELEASE_RUNTIME_LIMIT = "RuntimeLimitExceeded"
RELEASE_CANCELLED = "Cancelled"
RELEASE_RESIZED = "Resized"
# Why the rest of a gang is stopped when one of its members ended on its own (exit code 0, or
# another): that member's exit ends the job (agent_protocol._member_gone, which signals the stop).
RELEASE_GANG_MEMBER_EXITED = "GangMemberExited"
RELEASE_GANG_MEMBER_FAILED = "GangMemberFailed"
GANG_MEMBER_STOPS = (RELEASE_GANG_MEMBER_EXITED, RELEASE_GANG_MEMBER_FAILED)
# Requeued at someone's request (`POST jobs/{id}/requeue/`, Slurm's `scontrol requeue`), and the
# same with `hold` (`scontrol requeuehold`): back to the queue held once stopped. Who asked and why
# are in the stop's notice (a job.stopping event with this reason, see `requeue_request`).
RELEASE_REQUEUED = "Requeued"
RELEASE_REQUEUED_HELD = "RequeuedHeld"
REQUESTED_REQUEUES = (RELEASE_REQUEUED, RELEASE_REQUEUED_HELD)
#: The kinds of a stop's notice other than a cancel's (`job.cancelled`) and a runtime limit's
#: (`job.timed_out`): `job.preempting` for a preemption (`RELEASE_PREEMPTED`, a reclaim too),
#: `job.stopping` for every other stop (a resize, a requeue someone asked for, a gang member's
#: exit or failure). Before migration 0032 those were recorded as `job.preempting` too, with the
#: same reason: a reader looking for a stop's notice takes both kinds and goes by the reason (or
#: by `notice_kind`), so the events of earlier versions read as new ones do.
STOP_NOTICE_KINDS = (EventKind.JOB_PREEMPTING, EventKind.JOB_STOPPING)


def notice_kind(kind: str, reason: str | None) -> str:
    """The kind a stop's notice is recorded under now: an old `job.preempting` notice (stored
    before migration 0032) of a stop that was no preemption (its reason says a resize, a
    requeue asked for, a gang member's exit) reads as `job.stopping`; any other kind as it is."""
    if kind == EventKind.JOB_PREEMPTING and reason and reason != RELEASE_PREEMPTED:
        return EventKind.JOB_STOPPING.value
    return str(kind)


#: The job.requeued reasons of an ended job put back in the queue: nothing was stopped, so
#: no eviction and no lost work (an event reason, never a release reason).
REQUEUED_AFTER_END = "RequeuedAfterEnd"
REQUEUED_HELD_AFTER_END = "RequeuedHeldAfterEnd"
REQUEUES_AFTER_END = (REQUEUED_AFTER_END, REQUEUED_HELD_AFTER_END)
#: Every job.requeued reason someone asked for, running or ended.
ASKED_REQUEUES = (*REQUESTED_REQUEUES, *REQUEUES_AFTER_END)

#: The reason of a `job.finished` event, by the state it ends in: one PascalCase spelling per
#: outcome, whichever path settled it (`quartermaster_finished_jobs_total` splits by it). A
#: runtime limit is `TimedOut`; some paths wrote `Timedout` (the label without its space) before.
FINISHED_REASONS = {
    JobState.SUCCEEDED: "Succeeded",
    JobState.FAILED: "Failed",
    JobState.CANCELLED: "Cancelled",
    JobState.TIMED_OUT: "TimedOut",
}


def record_event(kind: EventKind | str, actor: str, **fields: Any) -> Event:
    """Write one Event; `fields` are those of `event_fields`."""
    return Event.objects.create(**event_fields(kind, actor, **fields))


def event_fields(
    kind: EventKind | str,
    actor: str,
    *,
    job: Job | None = None,
    allocation: Allocation | None = None,
    node: Node | None = None,
    reason: str = "",
    message: str = "",
    data: dict[str, Any] | None = None,
    epoch: int | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """The columns of one Event, for callers that bulk-create many at once."""
    return {
        "created_at": at or timezone.now(),
        "kind": str(kind),
        "actor": actor,
        "reason": reason,
        "message": message[:1000],
        "job": job,
        "allocation": allocation,
        "node": node,
        "team_id": job.team_id if job is not None else None,
        "epoch": epoch,
        "data": data or {},
    }


def draw_generations(lease: SchedulerLease, count: int) -> list[int]:
    """Reserve `count` new generations from the lease row the caller has locked FOR UPDATE."""
    first = lease.generation_counter + 1
    lease.generation_counter += count
    SchedulerLease.objects.filter(pk=lease.pk).update(generation_counter=lease.generation_counter)
    return list(range(first, first + count))


@dataclass(frozen=True)
class GpuSet:
    """The GPUs of one gang member on one node (and its role, in a heterogeneous gang)."""

    node_id: int
    gpu_indices: Sequence[int]
    role: str = ""


def eta_told_at_bind() -> dict[str, Subquery]:
    """A bind's update of the job keeps the first ETA of the wait now ending (its PendingPlace's,
    deleted next), or none if that wait had none (services/eta_record.py reads them)."""
    place = PendingPlace.objects.filter(job_id=OuterRef("pk"))
    return {"eta_told": Subquery(place.values("first_eta")[:1]),
            "eta_told_at": Subquery(place.values("first_eta_at")[:1])}


def bind_job(
    job_id: int,
    gpus: Iterable[GpuSet],
    *,
    lease: SchedulerLease,
    borrowed: bool,
    at: datetime,
    actor: str,
) -> Allocation | None:
    """Give a pending job its whole gang at once, or nothing.

    Returns None if the job is no longer pending (cancelled meanwhile). Raises IntegrityError if
    any GPU already has a live owner: the caller's savepoint then undoes the whole bind, so a
    gang is never partly placed.
    """
    changed = Job.objects.filter(pk=job_id, state=JobState.PENDING).update(
        state=JobState.RUNNING,
        started_at=at,
        state_changed_at=at,
        borrowed=borrowed,
        pending_code="",
        pending_words="",
        would_start_if_words="",
        **eta_told_at_bind(),
    )
    if not changed:
        return None
    PendingPlace.objects.filter(job_id=job_id).delete()
    dependencies.started([job_id], at=at, actor=actor)  # its `after` dependents may start now
    (generation,) = draw_generations(lease, 1)
    allocation = Allocation.objects.create(
        job_id=job_id, generation=generation, epoch=lease.epoch, borrowed=borrowed, created_at=at
    )
    rows = [
        AllocationGpu(allocation=allocation, node_id=member.node_id, gpu_index=index, live=True, role=member.role)
        for member in gpus
        for index in member.gpu_indices
    ]
    AllocationGpu.objects.bulk_create(rows)
    _wake_on_commit({row.node_id for row in rows})
    job = Job.objects.only("id", "team_id").get(pk=job_id)
    placement, names = _describe_gpus(rows)
    node, held = where_held(sorted(names.items(), key=lambda n: n[1]))
    record_event(
        EventKind.JOB_BOUND, actor, job=job, allocation=allocation, node=node, epoch=lease.epoch, at=at,
        reason="Admitted", message=f"Bound to {counted(len(rows), 'GPU')} ({placement}), generation {generation}"
        + (", on borrowed capacity" if borrowed else ""),
        data={"generation": generation, "gpus": len(rows), "borrowed": borrowed, "nodes": held},
    )
    return allocation


@dataclass(frozen=True)
class BindRequest:
    """One bind of a plan: the whole gang of `job_id` on these GPUs."""

    job_id: int
    gpus: Sequence[GpuSet]
    borrowed: bool
    # The job's row as the plan's snapshot read it (its `guard_columns`, see bind_jobs), or None.
    as_read: tuple[Any, ...] | None = None


def bind_jobs(
    requests: Sequence[BindRequest],
    *,
    lease: SchedulerLease,
    at: datetime,
    actor: str,
    node_names: dict[int, str],
    guard_columns: Sequence[Any] = (),
    node_shapes: Mapping[int, tuple[str, int, int, int]] | None = None,
) -> tuple[int, int]:
    """Bind many pending jobs in a handful of queries, each gang whole or not at all.

    The caller holds the leader lease row locked (the cycle's commit), so no other bind runs
    concurrently and live GPUs can only become free under us, never taken. Steps:
      1. lock the requested jobs that are still pending and not held; a job cancelled or held
         meanwhile is stale, and so is one whose row no longer reads as the plan's snapshot
         read it (`guard_columns`, compared with each request's `as_read`): a job whose shape,
         class or limit changed after the read (PATCH jobs/{id}/) is never bound with the old
         one, nor one given a dependency not met yet (`dependencies.waiting_among`). A change
         that commits first is what this locked read sees; one that comes later waits for this
         commit and then finds the job running (services/holds.py);
      2. drop every request touching a GPU that is live already, or that an earlier request of
         this batch takes (a stale snapshot), or a node no longer ready, or one whose inventory
         is no longer what the plan's snapshot read (`node_shapes`: node id → its GPU type, GPU
         count, CPUs and memory as read; an admin's or its agent's change since, which takes the
         lease row first as a cordon does), or a GPU index the node no longer has: it is stale,
         the next cycle sees the truth;
      3. mark the jobs running, draw one generation each, insert the allocations, their GPUs
         and one JOB_BOUND event each, in bulk.
    The database's unique index on live GPUs still guards step 3; should it ever fire, the
    batch's savepoint is undone and every request is retried alone through `bind_job`.
    Returns (bound, stale).
    """
    if not requests:
        return 0, 0
    ids = [r.job_id for r in requests]
    # 1. still pending (locked, so a concurrent cancel waits for our commit and then sees running),
    #    not held, and as the snapshot read it
    pending: dict[int, int] = {}
    singletons: set[int] = set()  # Slurm's singleton (a change of it waits for this lock)
    alternatives: set[int] = set()  # any-of dependencies (Slurm's `?`; likewise)
    as_read = {r.job_id: r.as_read for r in requests}
    # In id order, as every writer of several jobs takes them (holds.hold_array, jobs.cancel_waiting):
    # in the order PostgreSQL read them a job row updated since came after one with a higher
    # id, and a bind and an array's hold each held one and waited for the other.
    for row in Job.objects.select_for_update(no_key=True).filter(
        pk__in=ids, state=JobState.PENDING, hold=JobHold.NONE
    ).order_by("pk").values_list("pk", "team_id", "singleton", "dependency_mode", *guard_columns):
        expected = as_read.get(row[0])
        if guard_columns and expected is not None and tuple(row[4:]) != tuple(expected):
            continue  # changed since the snapshot: stale, the next cycle plans it as it is now
        pending[row[0]] = row[1]
        if row[2]:
            singletons.add(row[0])
        if row[3] == DependencyMode.ANY:
            alternatives.add(row[0])
    # ... and waiting on no job: dependencies changed (PATCH) after the snapshot read it, or a
    # singleton a job of its name now holds up (or one bound with it would). A statement of its
    # own, after the lock, so it sees a change that committed while we waited.
    for job_id in dependencies.waiting_among(pending, singletons=singletons & set(pending),
                                             alternatives=alternatives & set(pending)):
        del pending[job_id]
    # 2. no GPU live already, none twice in this batch, and every node still ready (reconcile
    #    may have quarantined one since our snapshot; it would only fence the bind next pass)
    wanted = {(m.node_id, i) for r in requests for m in r.gpus for i in m.gpu_indices}
    taken = _live_among(wanted)
    unready: set[int] = set()
    count_of: dict[int, int] = {}
    for pk, state, *shape in Node.objects.filter(pk__in={node for node, _ in wanted}).values_list(
            "pk", "state", "gpu_type__name", "gpu_count", "cpus", "memory_gb"):
        count_of[pk] = shape[1]
        read = (node_shapes or {}).get(pk)
        if state != NodeState.READY or (read is not None and tuple(read) != tuple(shape)):
            unready.add(pk)
    chosen: list[BindRequest] = []
    for request in requests:
        gpus = {(m.node_id, i) for m in request.gpus for i in m.gpu_indices}
        if (request.job_id not in pending or gpus & taken or any(m.node_id in unready for m in request.gpus)
                or any(i >= count_of.get(node, 0) for node, i in gpus)):
            continue
        taken |= gpus
        chosen.append(request)
    stale = len(requests) - len(chosen)
    if not chosen:
        return 0, stale
    # 3. write it all
    try:
        with transaction.atomic():
            _bind_many(chosen, pending, lease=lease, at=at, actor=actor, node_names=node_names)
    except IntegrityError:
        bound = 0
        for request in chosen:
            try:
                with transaction.atomic():
                    if bind_job(request.job_id, request.gpus, lease=lease, borrowed=request.borrowed, at=at, actor=actor):
                        bound += 1
            except IntegrityError:
                pass
        return bound, len(requests) - bound
    return len(chosen), stale


def _live_among(gpus: set[tuple[int, int]]) -> set[tuple[int, int]]:
    if not gpus:
        return set()
    nodes = {n for n, _ in gpus}
    live = AllocationGpu.objects.filter(node_id__in=nodes, live=True).values_list("node_id", "gpu_index")
    return {key for key in live if key in gpus}


def _bind_many(
    chosen: Sequence[BindRequest],
    teams: dict[int, int],
    *,
    lease: SchedulerLease,
    at: datetime,
    actor: str,
    node_names: dict[int, str],
) -> None:
    for borrowed in (False, True):
        group = [r.job_id for r in chosen if r.borrowed == borrowed]
        if group:
            Job.objects.filter(pk__in=group, state=JobState.PENDING).update(
                state=JobState.RUNNING, started_at=at, state_changed_at=at, borrowed=borrowed, pending_code="",
                pending_words="", would_start_if_words="", **eta_told_at_bind(),
            )
    # A running job has no place in the queue (its position, ETA and the reason's numbers).
    PendingPlace.objects.filter(job_id__in=[r.job_id for r in chosen]).delete()
    generations = draw_generations(lease, len(chosen))
    allocations = Allocation.objects.bulk_create(
        [
            Allocation(job_id=r.job_id, generation=g, epoch=lease.epoch, borrowed=r.borrowed, created_at=at)
            for r, g in zip(chosen, generations, strict=True)
        ]
    )
    rows = [
        AllocationGpu(allocation=allocation, node_id=member.node_id, gpu_index=index, live=True, role=member.role)
        for allocation, request in zip(allocations, chosen, strict=True)
        for member in request.gpus
        for index in member.gpu_indices
    ]
    AllocationGpu.objects.bulk_create(rows, batch_size=2000)
    _wake_on_commit({row.node_id for row in rows})
    events = []
    for allocation, request in zip(allocations, chosen, strict=True):
        count = sum(len(m.gpu_indices) for m in request.gpus)
        node, held = where_held({(m.node_id, str(node_names.get(m.node_id, m.node_id))) for m in request.gpus})
        placement = ", ".join(
            f"{node_names.get(m.node_id, m.node_id)}:{','.join(map(str, sorted(m.gpu_indices)))}"
            for m in sorted(request.gpus, key=lambda m: m.node_id)
        )
        events.append(Event(
            created_at=at, kind=str(EventKind.JOB_BOUND), actor=actor, reason="Admitted",
            message=(f"Bound to {counted(count, 'GPU')} ({placement}), generation {allocation.generation}"
                     + (", on borrowed capacity" if request.borrowed else ""))[:1000],
            job_id=request.job_id, allocation=allocation, node=node, team_id=teams.get(request.job_id),
            epoch=lease.epoch, data={"generation": allocation.generation, "gpus": count, "borrowed": request.borrowed,
                                     "nodes": held},
        ))
    Event.objects.bulk_create(events, batch_size=2000)
    dependencies.started([r.job_id for r in chosen], at=at, actor=actor)  # their `after` dependents


def _wake_on_commit(node_ids: Iterable[int]) -> None:
    """Once committed, the nodes' agents fetch their new desired state at once (a wake-up,
    see services/agent_wakeups.py), instead of at their next heartbeat."""
    agent_wakeups.wake_nodes_on_commit(node_ids)


def _describe_gpus(rows: Sequence[AllocationGpu]) -> tuple[str, dict[int, str]]:
    """Where the GPUs are, in words ("gpu-01:0,1, gpu-02:0,1"), and their nodes' names by id."""
    per_node: dict[int, list[int]] = {}
    for row in rows:
        per_node.setdefault(row.node_id, []).append(row.gpu_index)
    names = dict(Node.objects.filter(pk__in=per_node).values_list("pk", "name"))
    words = ", ".join(f"{names.get(n, n)}:{','.join(map(str, sorted(g)))}" for n, g in sorted(per_node.items()))
    return words, {n: str(names.get(n, n)) for n in per_node}


def where_held(nodes: Iterable[tuple[int, str]]) -> tuple[Node | None, list[str]]:
    """An allocation's event's `node` and the names of the nodes it held GPUs on (`data.nodes`).

    The node when the allocation held GPUs on exactly one, so that node's history
    (`events/?node=`, the node's page) shows the job from its bind to its end; None for a gang
    (one event, several nodes), whose events name its nodes in their words and in `data.nodes`
    instead, as fence events do. `nodes`: (id, name) pairs, repeats allowed."""
    held = sorted(set(nodes), key=lambda n: n[1])
    names = [name for _, name in held]
    return (Node(pk=held[0][0], name=names[0]) if len(held) == 1 else None), names


def on_nodes(names: Sequence[str]) -> str:
    """A gang's nodes, for its events' words (" (on gpu-a, gpu-b)"); "" for one node, which is
    the event's `node`."""
    return f" (on {', '.join(names)})" if len(names) > 1 else ""


def signal_stop(
    allocation_id: int,
    generation: int,
    *,
    reason: str,
    grace_period_s: float,
    at: datetime,
    actor: str,
    message: str,
    epoch: int | None = None,
    lost_gpu_hours: float | None = None,
    data: dict[str, Any] | None = None,
) -> bool:
    """Tell a live allocation's agents to stop its job by a deadline (SIGTERM, grace, SIGKILL).

    Compare-and-set on (generation, state active): returns False if the allocation moved on.
    The GPUs stay owned (releasing) until the agents confirm the processes are gone or the
    node's lease expires and the allocation is fenced.
    """
    deadline = at + timedelta(seconds=grace_period_s)
    changed = Allocation.objects.filter(
        pk=allocation_id, generation=generation, state=AllocationState.ACTIVE
    ).update(state=AllocationState.RELEASING, release_deadline=deadline, release_reason=reason)
    if not changed:
        return False
    # One query for both: the nodes to wake (those still holding live GPUs) and the event's node.
    held = list(
        AllocationGpu.objects.filter(allocation_id=allocation_id).order_by()
        .values_list("node_id", "node__name", "live").distinct()
    )
    _wake_on_commit({node_id for node_id, _, live in held if live})
    node, names = where_held((node_id, name) for node_id, name, _ in held)
    allocation = Allocation.objects.select_related("job").get(pk=allocation_id)
    job = allocation.job
    Job.objects.filter(pk=job.pk, state=JobState.RUNNING).update(state=JobState.PREEMPTING, state_changed_at=at)
    kind = {
        RELEASE_PREEMPTED: EventKind.JOB_PREEMPTING,
        RELEASE_RUNTIME_LIMIT: EventKind.JOB_TIMED_OUT,
        RELEASE_CANCELLED: EventKind.JOB_CANCELLED,
    }.get(reason, EventKind.JOB_STOPPING)  # a resize, a requeue asked for, a gang member's exit: no preemption
    said: dict[str, Any] = {"generation": generation, "deadline": deadline.isoformat(), "grace_period_s": grace_period_s,
                            "nodes": names, **(data or {})}
    if lost_gpu_hours is not None:
        said["expected_lost_gpu_hours"] = round(lost_gpu_hours, 4)
    record_event(kind, actor, job=job, allocation=allocation, node=node, epoch=epoch, at=at, reason=reason,
                 message=message + on_nodes(names), data=said)
    return True


def complete_release(allocation_id: int, *, exit_code: int | None, at: datetime, actor: str,
                     said: str = "") -> bool:
    """The job's processes are gone on every node: free the GPUs and settle the job.

    Called when agents report the job exited by itself (exit_code set, allocation active) or
    confirm a stop (allocation releasing). What the job becomes follows from why it stopped:
    exited by itself → succeeded/failed; preempted → pending again, its lost work recorded;
    runtime limit → timed out; cancelled → cancelled. ``said``: what its agent said of the end
    that the job's owner should read, added to the job's finished event (`finished_words`), as
    `complete_releases` adds it.
    """
    with transaction.atomic():
        allocation = (
            Allocation.objects.select_for_update(no_key=True).select_related("job").filter(pk=allocation_id).first()
        )
        if allocation is None or allocation.state not in LIVE_ALLOCATION_STATES:
            return False
        job = Job.objects.select_for_update(no_key=True).get(pk=allocation.job_id)
        node, names = where_held(_held_nodes(allocation.pk))
        Allocation.objects.filter(pk=allocation.pk).update(state=AllocationState.RELEASED, released_at=at)
        held = held_until_stop(allocation.pk, AllocationGpu.objects.filter(allocation=allocation, live=True).update(live=False))
        record_event(EventKind.ALLOCATION_RELEASED, actor, job=job, allocation=allocation, node=node, at=at,
                     reason=allocation.release_reason or "Exited",
                     message=f"Generation {allocation.generation} released its GPUs{on_nodes(names)}",
                     data={"generation": allocation.generation, "exit_code": exit_code, "nodes": names})
        _settle_job(job, allocation, exit_code=exit_code, at=at, actor=actor, held=held, node=node, names=names,
                    said=said)
    return True


def complete_releases(
    items: Sequence[tuple[int, int, int | None, datetime]], *, actor_of: dict[int, str],
    said_of: Mapping[int, str] | None = None,
) -> int:
    """Many `complete_release`s in a handful of queries: the agent protocol's batch of exits.

    `items` are (allocation id, generation, exit code, at); an allocation no longer live under
    that generation is skipped. Same outcome, Events and locks as one `complete_release` each
    (allocation rows, then job rows, each in id order); jobs to requeue (preempted, resized) go
    through `_requeue` one by one. `actor_of` maps allocation id → who reported it; `said_of`
    → what its agent said of the end the job's owner should read (a launch that failed, and
    why), added to the job's finished event. Returns how many allocations were released.
    """
    said_of = said_of or {}
    if not items:
        return 0
    wanted = {allocation_id: (generation, code, at) for allocation_id, generation, code, at in items}
    with transaction.atomic():
        # Only the columns used here (a requeue reads the rest lazily): whole job rows cost
        # more to build than everything else an exit report does.
        allocations = [
            a for a in Allocation.objects.select_for_update(no_key=True, of=("self",)).filter(
                pk__in=list(wanted), state__in=LIVE_ALLOCATION_STATES
            ).only("id", "generation", "state", "job_id", "release_reason").order_by("pk")
            if a.generation == wanted[a.pk][0]
        ]
        if not allocations:
            return 0
        jobs = {j.pk: j for j in Job.objects.select_for_update(no_key=True).filter(
            pk__in=[a.job_id for a in allocations]).only("id", "team_id").order_by("pk")}
        ids = [a.pk for a in allocations]
        adapt = connection.ops.adapt_datetimefield_value
        with connection.cursor() as cursor:
            # One row each (every exit has its own time), pipelined in one round trip.
            cursor.executemany(
                f"UPDATE {Allocation._meta.db_table} SET state = %s, released_at = %s WHERE id = %s",
                [(AllocationState.RELEASED.value, adapt(wanted[a.pk][2]), a.pk) for a in allocations],
            )
        # One query for the whole batch: the nodes each allocation held GPUs on (its events' node
        # or, for a gang, their names) and the GPUs each still holds live (a requeued job's lost
        # work counts those; a gang member that exited earlier held none).
        nodes_of: dict[int, list[tuple[int, str]]] = defaultdict(list)
        held_by: dict[int, int] = defaultdict(int)
        for allocation_id, node_id, name, live in (
            AllocationGpu.objects.filter(allocation_id__in=ids).order_by().values("allocation_id", "node_id", "node__name")
            .annotate(live=Count("id", filter=Q(live=True))).values_list("allocation_id", "node_id", "node__name", "live")
        ):
            nodes_of[allocation_id].append((node_id, name))
            held_by[allocation_id] += live
        AllocationGpu.objects.filter(allocation_id__in=ids, live=True).update(live=False)
        events = []
        finished: list[tuple[str, Any, Any, int | None, int]] = []
        for allocation in allocations:
            _, code, at = wanted[allocation.pk]
            job = jobs[allocation.job_id]
            actor = actor_of.get(allocation.pk, "agent")
            node, names = where_held(nodes_of[allocation.pk])
            events.append(Event(**event_fields(
                EventKind.ALLOCATION_RELEASED, actor, job=job, allocation=allocation, node=node, at=at,
                reason=allocation.release_reason or "Exited",
                message=f"Generation {allocation.generation} released its GPUs{on_nodes(names)}",
                data={"generation": allocation.generation, "exit_code": code, "nodes": names},
            )))
            reason = allocation.release_reason
            if reason in (RELEASE_PREEMPTED, RELEASE_RESIZED, *REQUESTED_REQUEUES):
                _settle_job(job, allocation, exit_code=code, at=at, actor=actor, held=held_by[allocation.pk],
                            node=node, names=names)
                continue
            if reason == RELEASE_RUNTIME_LIMIT:
                state = JobState.TIMED_OUT
            elif reason == RELEASE_CANCELLED:
                state = JobState.CANCELLED
            else:
                state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
            finished.append((state.value, adapt(at), adapt(at), code, job.pk))
            message, data = finished_words(state, code, names, said_of.get(allocation.pk, ""))
            events.append(Event(**event_fields(
                EventKind.JOB_FINISHED, actor, job=job, allocation=allocation, node=node, at=at,
                reason=FINISHED_REASONS[state], message=message, data=data,
            )))
        if finished:
            with connection.cursor() as cursor:
                cursor.executemany(
                    f"UPDATE {Job._meta.db_table} SET state = %s, finished_at = %s, state_changed_at = %s, "
                    "exit_code = %s WHERE id = %s",
                    finished,
                )
        Event.objects.bulk_create(events, batch_size=2000)
        # The batch's dependents, in one query when none waits on these jobs; their events are
        # by whoever reported the batch (one agent, as a rule).
        dependencies.ended([dependencies.Change(pk, state, code) for state, _, _, code, pk in finished],
                           at=max(wanted[a.pk][2] for a in allocations),
                           actor=actor_of.get(allocations[0].pk, "agent"))
    return len(allocations)


def finished_words(state: JobState, exit_code: int | None, names: Sequence[str],
                   said: str = "") -> tuple[str, dict[str, Any]]:
    """A `job.finished` event's message and data, whether one exit settled it (`_settle_job`) or
    a batch (`complete_releases`): "Job failed with exit code 126 (on gpu-0, gpu-1): launch
    failed: …". ``said``: what its agent said of the end that the job's owner should read
    (agent_protocol.owner_reads), also `agent_said` in the data; "" for none."""
    message = (f"Job {state.label.lower()}"
               + (f" with exit code {exit_codes.said(exit_code)}" if exit_code is not None else "")
               + on_nodes(names) + (f": {said}" if said else ""))
    return message, {"state": state.value, "exit_code": exit_code, "nodes": list(names),
                     **({"agent_said": said} if said else {})}


def _settle_job(job: Job, allocation: Allocation, *, exit_code: int | None, at: datetime, actor: str,
                held: int, node: Node | None, names: Sequence[str], said: str = "") -> None:
    """``held``: the GPUs the allocation held until this release; ``node``, ``names``: where it
    held them (`where_held`); ``said``: the agent's words for the finished event (`finished_words`)."""
    reason = allocation.release_reason
    if reason == RELEASE_PREEMPTED:
        _requeue(job, allocation, at=at, actor=actor, kind=EventKind.JOB_PREEMPTED, reason=reason,
                 why="preempted", held=held, node=node, names=names, on=on_nodes(names))
        return
    if reason == RELEASE_RESIZED:
        _requeue(job, allocation, at=at, actor=actor, kind=EventKind.JOB_RESIZED, reason=reason,
                 why="stopped to resize", held=held, node=node, names=names, on=on_nodes(names))
        return
    if reason in REQUESTED_REQUEUES:
        requeue_as_asked(job, allocation, at=at, actor=actor, held=held, node=node, names=names)
        return
    if reason == RELEASE_RUNTIME_LIMIT:
        state, kind = JobState.TIMED_OUT, EventKind.JOB_FINISHED
    elif reason == RELEASE_CANCELLED:
        state, kind = JobState.CANCELLED, EventKind.JOB_FINISHED
    else:
        state = JobState.SUCCEEDED if exit_code == 0 else JobState.FAILED
        kind = EventKind.JOB_FINISHED
    Job.objects.filter(pk=job.pk).update(state=state, finished_at=at, state_changed_at=at, exit_code=exit_code)
    message, data = finished_words(state, exit_code, names, said)
    record_event(kind, actor, job=job, allocation=allocation, node=node, at=at, reason=FINISHED_REASONS[state],
                 message=message, data=data)
    dependencies.ended([dependencies.Change(job.pk, state, exit_code)], at=at, actor=actor)


def held_until_stop(allocation_id: int, live: int) -> int:
    """The GPUs an allocation held until its stop: those still live (`live`) and those of gang
    members whose agents confirmed the stop one node at a time before this release (each
    confirmation frees its node at once). Without them a gang preempted on four nodes was
    settled with none and said 'lost 0.00 GPU-hours'. A member gone on its own before the stop
    held nothing then and is not counted."""
    stopped = Event.objects.filter(
        allocation_id=allocation_id, kind=EventKind.ALLOCATION_RELEASED, reason="MemberExited"
    ).values_list("data", flat=True)
    return live + sum(int(d.get("gpus") or 0) for d in stopped if isinstance(d, dict) and d.get("stopping"))


def lost_gpu_seconds(job: Job, allocation_gpus: int, at: datetime) -> float:
    """Work thrown away by stopping now: GPUs × time since the last checkpoint (or start)."""
    since = job.last_checkpoint_at or job.started_at or at
    if job.started_at and since < job.started_at:
        since = job.started_at
    return max(0.0, (at - since).total_seconds()) * allocation_gpus


def _requeue(job: Job, allocation: Allocation, *, at: datetime, actor: str, kind: EventKind, reason: str,
             why: str, held: int, node: Node | None, names: Sequence[str], on: str = "",
             said: str = "", data: dict[str, Any] | None = None) -> float:
    """``held``: the GPUs the allocation held until it was stopped; a gang member that exited
    before lost nothing here (counting every GPU it ever held overstated the loss). ``node``,
    ``names``: where it held them (`where_held`); ``on``: the gang's nodes for the event's words,
    when ``why`` does not name them already. ``said``: the words that open the job's reason and
    the event instead of "Requeued whole after being {why}" (a requeue someone asked for says
    who and why); ``data``: more of the event's data. Returns the GPU-seconds lost."""
    lost = lost_gpu_seconds(job, held, at)
    said = said or f"Requeued whole after being {why}"
    # Only a preemption counts against the class's preemption budget (see `Job.requeue_count`).
    preempted: dict[str, Any] = (
        {"preemption_count": F("preemption_count") + 1, "last_preempted_at": at}
        if kind == EventKind.JOB_PREEMPTED else {}
    )
    Job.objects.filter(pk=job.pk).update(
        state=JobState.PENDING,
        state_changed_at=at,
        started_at=None,
        borrowed=False,
        requeue_count=F("requeue_count") + 1,
        **preempted,
        lost_gpu_seconds=F("lost_gpu_seconds") + lost,
        pending_code="Requeued",
        pending_words=f"{said}; {gpu_hours(lost / 3600)} GPU-hours of work since the last checkpoint were lost"[:500],
    )
    record_event(kind, actor, job=job, allocation=allocation, node=node, at=at, reason=reason,
                 message=f"{said}{on}; lost {gpu_hours(lost / 3600)} GPU-hours since the last checkpoint",
                 data={"lost_gpu_seconds": round(lost, 3), "generation": allocation.generation, "nodes": list(names),
                       **(data or {})})
    return lost


@dataclass(frozen=True)
class RequeueRequest:
    """Who asked for a requeue, why, and whether it comes back held: as its stop's notice says
    (the job.stopping event `services/requeue.py` writes with the stop; job.preempting before 0032)."""

    by: str
    by_id: int | None
    reason: str
    hold: str  # JobHold: "" (not held), user or admin

    @property
    def words(self) -> str:
        """ "Requeued by alice: node-7 flaky" (the job's reason and its events open with it)."""
        return f"Requeued by {self.by}" + (f": {self.reason}" if self.reason else "")


def requeue_request(allocation: Allocation) -> RequeueRequest:
    """The request behind a requeue stop, read from its notice. Its stop and notice are written
    in one transaction, so the notice is there; were it not, the stop's own release reason
    still says whether the job comes back held (by nobody named)."""
    data = (
        Event.objects.filter(allocation_id=allocation.pk, kind__in=STOP_NOTICE_KINDS,
                             reason__in=REQUESTED_REQUEUES)
        .order_by("-created_at", "-id").values_list("data", flat=True).first()
    )
    data = data if isinstance(data, dict) else {}
    held = str(data.get("hold") or "")
    if allocation.release_reason == RELEASE_REQUEUED_HELD and held not in (JobHold.USER, JobHold.ADMIN):
        held = JobHold.USER
    if allocation.release_reason != RELEASE_REQUEUED_HELD:
        held = JobHold.NONE
    by_id = data.get("requested_by_id")
    if not isinstance(by_id, int) or not get_user_model().objects.filter(pk=by_id).exists():
        by_id = None  # an account removed since it asked: the hold is then nobody's named
    return RequeueRequest(by=str(data.get("requested_by") or "someone"),
                          by_id=by_id,
                          reason=str(data.get("reason") or ""), hold=held)


def requeue_as_asked(job: Job, allocation: Allocation, *, at: datetime, actor: str, held: int, node: Node | None,
                     names: Sequence[str], fenced: str = "") -> None:
    """Settle a requeue someone asked for, once its old allocation is released (or fenced: then
    ``fenced`` says what happened to its node): pending again with the same id, `requeue_count`
    + 1 and the work since its last checkpoint lost, as a preemption's requeue is (not counted
    against the preemption budget); a new generation at its next bind. Asked with `hold`, it
    comes back held by whoever asked (an admin's hold when an admin asked), for the reason given,
    with a job.held event, as `qm hold` would hold it."""
    ask = requeue_request(allocation)
    said = ask.words + (f" ({fenced})" if fenced else "")
    lost = _requeue(job, allocation, at=at, actor=actor, kind=EventKind.JOB_REQUEUED, reason=allocation.release_reason,
                    why="", held=held, node=node, names=names, on=on_nodes(names), said=said,
                    data={"requested_by": ask.by, "reason": ask.reason, "hold": ask.hold})
    if not ask.hold:
        return
    holder = ask.by if ask.by_id is not None else ""
    label = hold_label_of(ask.hold, holder)
    message, would = held_sentence(label, ask.reason)
    Job.objects.filter(pk=job.pk, state=JobState.PENDING).update(
        hold=ask.hold, held_at=at, held_by_id=ask.by_id, hold_reason=ask.reason, pending_code="Held",
        pending_words=message, would_start_if_words=would, pending_resolvable=True,
    )
    PendingPlace.objects.filter(job_id=job.pk).delete()
    record_event(EventKind.JOB_HELD, actor, job=job, allocation=allocation, at=at, reason="Held",
                 message=f"Held by {label}" + (f": {ask.reason} —" if ask.reason else ":")
                 + f" requeued held ({gpu_hours(lost / 3600)} GPU-hours lost), out of the queue until released",
                 data={"hold": ask.hold, "held_by": holder or None, "requeued": True,
                       **({"reason": ask.reason} if ask.reason else {})})


#: What happened to a fenced allocation's node, by fence reason (reconcile.FENCE_*,
#: agent_protocol.FENCE_*), as a job's requeue event and reason say it: with the node's name
#: when the allocation held one node, else naming the nodes it held.
FENCED_BECAUSE = {
    "NodeLeaseExpired": ("fenced off {node}, which stopped answering", "fenced off a node that stopped answering"),
    "NodeUnavailable": ("fenced off {node}, whose agent shut down", "fenced off a node whose agent shut down"),
    "AgentRestarted": ("fenced: {node}'s agent restarted without it", "fenced: a node's agent restarted without it"),
    "WorkLostOnNode": ("fenced: {node}'s agent lost its processes", "fenced: a node's agent lost its processes"),
    "RefusedByAgent": ("fenced: {node}'s agent refused to run it", "fenced: a node's agent refused to run it"),
}


def fenced_because(reason: str, node_names: Sequence[str]) -> str:
    """Why a fenced allocation's job was requeued, naming the node(s) it held."""
    one, many = FENCED_BECAUSE.get(reason, FENCED_BECAUSE["NodeLeaseExpired"])
    if len(node_names) == 1:
        return one.format(node=node_names[0])
    return f"{many} (it held {', '.join(node_names)})" if node_names else many


def _held_nodes(allocation_id: int, *, live_only: bool = False) -> list[tuple[int, str]]:
    """The nodes an allocation held GPUs on (with `live_only`, still holds), by name: one query,
    whatever the number of GPUs."""
    rows = AllocationGpu.objects.filter(allocation_id=allocation_id)
    if live_only:
        rows = rows.filter(live=True)
    return sorted(set(rows.order_by().values_list("node_id", "node__name").distinct()), key=lambda n: n[1])


def fence_allocation(allocation_id: int, *, lease: SchedulerLease, at: datetime, actor: str, reason: str) -> bool:
    """Take an allocation away from owners we can no longer hear from.

    Its generation is bumped past anything the old owner holds, so if the owner comes back its
    reports and its stale generation are refused; the job is requeued whole with its lost work.
    The caller holds the leader lease (row locked) and quarantines the node, whose GPUs are not
    used again until its agent re-registers clean.
    """
    # Locked, so a stop committing meanwhile (a cancel, a requeue someone asked for, a runtime
    # limit: signal_stop, which takes the allocation row first) is waited for and read here: its
    # release reason decides what becomes of the job below. Read unlocked, the row as it was
    # before that stop made a cancelled job a plain fence's requeue, back in the queue.
    allocation = (Allocation.objects.select_for_update(no_key=True, of=("self",)).select_related("job")
                  .filter(pk=allocation_id).first())
    if allocation is None or allocation.state not in LIVE_ALLOCATION_STATES:
        return False
    (new_generation,) = draw_generations(lease, 1)
    changed = Allocation.objects.filter(pk=allocation_id, generation=allocation.generation).update(
        state=AllocationState.FENCED, generation=new_generation, released_at=at, release_reason=reason
    )
    if not changed:
        return False
    # The events' node, when the allocation held one (a gang's events name its nodes instead).
    # Only the nodes it still held: a gang member that left a node earlier gave its GPUs back
    # clean, a new owner may run there now, and that node is not what this fence took.
    node, names = where_held(_held_nodes(allocation_id, live_only=True) or _held_nodes(allocation_id))
    held = held_until_stop(allocation_id, AllocationGpu.objects.filter(allocation_id=allocation_id, live=True).update(live=False))
    record_event(EventKind.ALLOCATION_FENCED, actor, job=allocation.job, allocation=allocation, node=node,
                 epoch=lease.epoch, at=at, reason=reason,
                 message=f"Fenced off {', '.join(names) or 'its nodes'}: generation {allocation.generation} → "
                 f"{new_generation}",
                 data={"old_generation": allocation.generation, "new_generation": new_generation, "nodes": names})
    job = allocation.job
    node_gone = _node_gone(names, reason)
    if allocation.release_reason in _ENDED_BY_THEIR_STOP:
        state, said = _ENDED_BY_THEIR_STOP[allocation.release_reason]
        Job.objects.filter(pk=job.pk).update(state=state, finished_at=at, state_changed_at=at)
        record_event(EventKind.JOB_FINISHED, actor, job=job, allocation=allocation, node=node, at=at,
                     reason=FINISHED_REASONS[state], message=f"{said}; {node_gone} before confirming the stop",
                     data={"state": state.value, "exit_code": None, "nodes": names})
        dependencies.ended([dependencies.Change(job.pk, state)], at=at, actor=actor)
    elif allocation.release_reason in GANG_MEMBER_STOPS:
        # A member's own exit ended the job; the rest of the gang was being stopped. Its node
        # going quiet meanwhile does not undo that: it ends as the first member's exit says, as
        # when the rest confirms the stop (until 5 Dec it was requeued: a gang whose rank had
        # finished with 0 ran again).
        code, words = first_member_exit(allocation, default=(None, ""))
        state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
        Job.objects.filter(pk=job.pk).update(state=state, finished_at=at, state_changed_at=at, exit_code=code)
        message, data = finished_words(state, code, names, words)
        record_event(EventKind.JOB_FINISHED, actor, job=job, allocation=allocation, node=node, at=at,
                     reason=FINISHED_REASONS[state], message=f"{message}; {node_gone} before confirming the stop",
                     data=data)
        dependencies.ended([dependencies.Change(job.pk, state, code)], at=at, actor=actor)
    elif allocation.release_reason in REQUESTED_REQUEUES:
        requeue_as_asked(job, allocation, at=at, actor=actor, held=held, node=node, names=names,
                         fenced=f"{node_gone} before confirming the stop")
    elif allocation.release_reason == RELEASE_PREEMPTED:
        # The scheduler's preemption took the job's work, whichever way its stop ends: its
        # node lost during the grace period settles it as a preemption, which spends the
        # class's preemption budget (until 6 Dec it was a plain fence's requeue, and a job on
        # a flaky node could be preempted beyond its budget). The fence is in the event's data.
        _requeue(job, allocation, at=at, actor=actor, kind=EventKind.JOB_PREEMPTED, reason=RELEASE_PREEMPTED,
                 why=f"preempted ({node_gone} before confirming the stop)", held=held, node=node, names=names,
                 data={"fenced": reason})
    else:
        _requeue(job, allocation, at=at, actor=actor, kind=EventKind.JOB_REQUEUED, reason=reason,
                 why=fenced_because(reason, names), held=held, node=node, names=names)
    return True


def first_member_exit(allocation: Allocation, default: tuple[int | None, str]) -> tuple[int | None, str]:
    """The exit code of the gang member that ended first, and what its agent said of it for the
    job's owner (`agent_said` of its MemberExited event); `default` (code, words) when none
    ended with a code."""
    first = (
        Event.objects.filter(allocation=allocation, kind=EventKind.ALLOCATION_RELEASED, reason="MemberExited")
        .order_by("created_at", "id")
        .values_list("data", flat=True)
        .first()
    )
    if first is None:
        return default
    code = first.get("exit_code")
    return default if code is None else (int(code), str(first.get("agent_said") or ""))


#: The stops that end the job even when fenced before confirming them (a cancel, a runtime
#: limit; a gang member's exit too, by its exit code: see fence_allocation): the state it ends
#: in and how its event says so.
_ENDED_BY_THEIR_STOP = {RELEASE_CANCELLED: (JobState.CANCELLED, "Cancelled"),
                        RELEASE_RUNTIME_LIMIT: (JobState.TIMED_OUT, "Timed out")}


def _node_gone(names: list[str], reason: str) -> str:
    """What happened to a fenced allocation's node(s), after "before confirming the stop":
    "gpu-3's agent shut down", "one of its nodes (a, b) stopped answering"."""
    if len(names) == 1:
        return f"{names[0]}'s agent shut down" if reason == "NodeUnavailable" else f"{names[0]} stopped answering"
    which = f"one of its nodes ({', '.join(names)})"
    return f"the agent of {which} shut down" if reason == "NodeUnavailable" else f"{which} stopped answering"


#: Stops that would requeue the job: a cancel during one turns it into a cancel.
REQUEUEING_STOPS = {RELEASE_PREEMPTED: "preempted", RELEASE_RESIZED: "stopped to resize",
                    RELEASE_REQUEUED: "requeued", RELEASE_REQUEUED_HELD: "requeued"}


def cancel_job(job: Job, actor: str, *, at: datetime | None = None) -> bool:
    """Cancel a job: a waiting one at once, a running one by stopping its processes first, and
    one being stopped to be requeued (preempted, resized) by making that stop a cancel.

    One transaction: the job's state, its allocation's and their events are written together
    or not at all, so a concurrent reader never sees a cancel half done (an allocation stopping
    under a job still running). Returns False if the job was neither waiting, nor running with
    a live allocation, nor stopping to be requeued (another cancel, a bind or an exit got there
    first, or its stop already ends it: a runtime limit, a gang member's exit)."""
    at = at or timezone.now()
    with transaction.atomic():
        # Each statement reads what is committed when it runs (READ COMMITTED): a preemption, a
        # stop's completion (the job requeued), a bind may land between them, and an attempt
        # then fails. Try again as long as the job's state moved during the attempt; refuse
        # only once an attempt fails on a state that stayed as it was (until 5 Dec it tried
        # twice: a preemption landing in the first attempt and its completion in the second
        # refused a job that was waiting again: tests/controlplane/api/test_api_cancel_waiting_again.py).
        # Each move is a transition someone committed, so this ends; the bound is a guard.
        seen = _state_of(job.pk)
        for _ in range(CANCEL_ATTEMPTS):
            if _cancel_once(job, actor, at=at):
                return True
            now_seen = _state_of(job.pk)
            if now_seen == seen or now_seen is None:
                return False
            seen = now_seen
        return False


#: The most attempts one cancel makes while the job keeps moving under it (see cancel_job).
CANCEL_ATTEMPTS = 10


def _state_of(job_id: int) -> tuple[str, datetime | None] | None:
    """The job's state and when it last changed, as committed now."""
    return Job.objects.filter(pk=job_id).values_list("state", "state_changed_at").first()


def _cancel_once(job: Job, actor: str, *, at: datetime) -> bool:
    """One attempt of cancel_job on the job as the database says it is now."""
    if Job.objects.filter(pk=job.pk, state=JobState.PENDING).update(
        state=JobState.CANCELLED, finished_at=at, state_changed_at=at
    ):
        record_event(EventKind.JOB_CANCELLED, actor, job=job, at=at, reason="Cancelled",
                     message="Cancelled while waiting")
        record_event(EventKind.JOB_FINISHED, actor, job=job, at=at, reason="Cancelled",
                     message="Job cancelled")
        dependencies.ended([dependencies.Change(job.pk, JobState.CANCELLED)], at=at, actor=actor)
        return True
    allocation = job.allocations.filter(state=AllocationState.ACTIVE).order_by("-generation").first()
    if allocation is not None:
        grace = job.priority_class.grace_period_s
        # False: stopped under us since our read (a preemption, a requeue someone asked for, an
        # exit); the next attempt looks again, a stop to requeue it is then made a cancel.
        return signal_stop(
            allocation.pk, allocation.generation, reason=RELEASE_CANCELLED, grace_period_s=grace, at=at,
            actor=actor, message=f"Cancelled by {actor_name(actor)}; processes get {grace} s to exit",
        )
    return _cancel_requeueing_stop(job, actor, at=at)


def _cancel_requeueing_stop(job: Job, actor: str, *, at: datetime) -> bool:
    """A job whose processes are being stopped to requeue it: the stop becomes a cancel, so
    once its agents confirm (or its node is fenced) the job ends cancelled instead of waiting
    again. Compare-and-set on (generation, releasing, the requeueing reason); the stop itself
    is untouched: same deadline, GPUs owned until the processes are gone."""
    allocation = (
        job.allocations.filter(state=AllocationState.RELEASING, release_reason__in=list(REQUEUEING_STOPS))
        .order_by("-generation").first()
    )
    if allocation is None:
        return False
    if not Allocation.objects.filter(
        pk=allocation.pk, generation=allocation.generation, state=AllocationState.RELEASING,
        release_reason=allocation.release_reason,
    ).update(release_reason=RELEASE_CANCELLED):
        return False
    why = REQUEUEING_STOPS[allocation.release_reason]
    deadline = allocation.release_deadline
    by = f" by {deadline:%Y-%m-%d %H:%M:%S} UTC" if deadline else ""
    node, names = where_held(_held_nodes(allocation.pk))
    record_event(
        EventKind.JOB_CANCELLED, actor, job=job, allocation=allocation, node=node, at=at, reason=RELEASE_CANCELLED,
        message=f"Cancelled by {actor_name(actor)} while being {why}; it ends cancelled instead of being requeued "
                f"once its processes exit{by}{on_nodes(names)}",
        data={"generation": allocation.generation, "deadline": deadline.isoformat() if deadline else None,
              "was": allocation.release_reason, "nodes": names},
    )
    return True
