"""Read the fleet and the queue from the database into the engine's frozen Snapshot.

This module translates; it decides nothing. Alongside the snapshot it returns the identifiers
the commit needs to turn the plan's names back into rows (node names → ids, job ids → their
live allocation and generation).
"""

from __future__ import annotations

import dataclasses
import gc
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import NotSupportedError
from django.db.models import Count, FloatField, Func, Sum, TextField
from django.db.models.functions import Cast, Coalesce
from django.utils.functional import cached_property

import scheduler_core as engine
from controlplane.choices import (
    FINISHED_JOB_STATES,
    LIVE_ALLOCATION_STATES,
    AllocationState,
    EventKind,
    JobState,
    NodeState,
)
from controlplane.models import (
    Allocation,
    AllocationGpu,
    Event,
    GpuType,
    Job,
    MaintenanceWindow,
    Node,
    PriorityClass,
    Project,
    Quota,
    Team,
)
from controlplane.services.hold_text import hold_label_of


@dataclass(frozen=True)
class LiveAllocation:
    allocation_id: int
    generation: int
    gpus: int


@dataclass
class SnapshotContext:
    """What the commit needs besides the snapshot itself."""

    snapshot: engine.Snapshot
    read_at: datetime
    node_ids: dict[str, int] = field(default_factory=dict)
    live_allocations: dict[str, LiveAllocation] = field(default_factory=dict)
    grace_by_job: dict[str, int] = field(default_factory=dict)
    team_ids: dict[str, int] = field(default_factory=dict)
    # Each pending job's stored reason as read: (code, message words, would-start-if words,
    # resolvable), numbers marked (models.jobs.split_numbers). The commit rewrites only those
    # whose words the plan changes; positions, ETAs and numbers go to PendingPlace.
    explanations: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # Each pending job's row as read (its spec's columns, then its hold's): the commit binds a
    # job only if its locked row still reads the same (`BIND_GUARD_COLUMNS`), so a job held or
    # changed after this read is never bound by a plan made from it.
    as_read: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # The waiting jobs whose dependencies are any-of (Slurm's `?`): the engine's sentence lists
    # what they wait on joined by "and"; the commit says "any one of … or …"
    # (services/dependencies.any_of_words).
    any_of: dict[str, tuple[engine.DependencyWait, ...]] = field(default_factory=dict)


def to_seconds(at: datetime) -> float:
    return at.timestamp()


class EpochSeconds(Func):
    """A timestamp as float seconds since the epoch, computed by the database: exactly
    `datetime.timestamp()` of the value Django would have read (its microseconds over 10**6,
    correctly rounded), or NULL. A cycle reads ~12,000 timestamps; having psycopg parse each
    one into a datetime, Django make it aware and the reader turn it into seconds was most of
    the snapshot read's Python time.

    PostgreSQL: `EXTRACT(EPOCH ...)` is an exact numeric (PostgreSQL 14+), and its cast to
    double precision rounds correctly, as Python's int / int division does.
    SQLite (the demo) stores Django's timestamps as UTC text `YYYY-MM-DD HH:MM:SS[.ffffff]`;
    its date functions keep only milliseconds (and round: `.999999` would become the next
    second), so the whole seconds come from `strftime('%s')` of the text cut before its
    fraction, the microseconds from the text itself, and the exact integer of microseconds is
    divided by 1e6 in double precision (both operands exact: one correctly rounded division).
    """

    arity = 1
    output_field = FloatField()

    @cached_property
    def convert_value(self) -> Any:  # the database already returns a float or NULL
        return self._convert_value_noop

    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        # Quartermaster runs on PostgreSQL (production, tests) and SQLite (the embedded demo).
        raise NotSupportedError(
            f"the scheduler's snapshot reads timestamps on PostgreSQL or SQLite, not on {connection.vendor}"
        )

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        sql, params = compiler.compile(self.source_expressions[0])
        return f"(EXTRACT(EPOCH FROM {sql}))::double precision", params

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        sql, params = compiler.compile(self.source_expressions[0])
        return (
            f"((CAST(strftime('%%s', substr({sql}, 1, 19)) AS INTEGER) * 1000000"
            f" + CAST(substr({sql}, 21, 6) AS INTEGER)) / 1000000.0)",
            (*params, *params),
        )


def scheduler_config() -> engine.SchedulerConfig:
    qm = settings.QM
    placement = qm.get("PLACEMENT_POLICY", "pack")
    by_workload = {
        engine.WorkloadClass.TRAINING: placement,
        engine.WorkloadClass.BATCH: placement,
        engine.WorkloadClass.INTERACTIVE: placement,
        engine.WorkloadClass.SERVING: "spread",
    }
    return engine.SchedulerConfig(
        fair_share_half_life_s=float(qm["FAIR_SHARE_HALF_LIFE_S"]),
        placement_by_workload=by_workload,
        max_placement_attempts=int(qm.get("MAX_PLACEMENTS_PER_CYCLE", 4096)),
        # The loop resizes a job by stopping it and binding it again (agents cannot change a
        # running process's GPUs), so growth must repay the work since its checkpoint.
        resize_restarts=True,
    )


# The job columns a spec needs, read as plain tuples (no model instances: a cycle reads
# thousands of jobs, and building a Job per row cost more than the engine's whole plan).
_JOB_COLUMNS = (
    "pk", "team_id", "priority_class_id", "project_id", "gpus", "submitted_at", "workload", "gpus_per_node",
    "gpu_types", "min_gpu_memory_gb", "cpus_per_gpu", "memory_gb_per_gpu", "topology", "min_gpus", "max_gpus",
    "runtime_limit_s", "checkpoint_interval_s", "roles", "submitter_id", "preemption_count", "last_preempted_at",
    # A job array's task limit (the engine counts its tasks holding GPUs against it).
    "array_id", "array_task_limit", "members_on_distinct_nodes",
)


_EXPLANATION_COLUMNS = (
    "pending_code", "pending_words", "would_start_if_words", "pending_resolvable",
)
# Who holds a pending job (`Job.hold`, `held_by`) and why: a held job is out of line
# (JobSpec.held_by), its holder's reason said in its explanation (JobSpec.hold_reason).
_HOLD_COLUMNS = ("hold", "held_by_id", "hold_reason")
# The JSON columns are read as their text: thousands of jobs share a handful of values, which
# the reader decodes once each (a json.loads per row was a quarter of the read).
_AS_TEXT = ("gpu_types", "roles")


# The timestamp columns are read as epoch seconds (`EpochSeconds`): the engine works in seconds.
_AS_SECONDS = ("submitted_at", "last_preempted_at")


def _job_fields(columns: tuple[str, ...]) -> list[Any]:
    def field(column: str) -> Any:
        name = column.rsplit("__", 1)[-1]
        if name in _AS_TEXT:
            return Cast(column, TextField())
        if name in _AS_SECONDS:
            return EpochSeconds(column)
        return column

    return [field(c) for c in columns]


#: The events of a requeue that counts against a job's preemption budget (transitions._requeue
#: adds one to `Job.preemption_count` for each): a preemption, however its stop ended (its
#: node fenced before it confirmed too); not a resize, not a plain fence.
BUDGET_KINDS = (EventKind.JOB_PREEMPTED,)


def _recent_requeues(now: datetime, window_s: int) -> dict[int, list[float]]:
    """Per job requeued at least twice, its last time inside the widest budget window, the
    times (epoch seconds, ascending) of its requeues inside that window: one query, on the
    events' (job, created_at) index, over the few jobs it concerns."""
    since = now - timedelta(seconds=window_s)
    jobs = Job.objects.filter(preemption_count__gte=2, last_preempted_at__gte=since).exclude(
        state__in=FINISHED_JOB_STATES).values("pk")
    times: dict[int, list[float]] = {}
    for job_id, at in (Event.objects.filter(job_id__in=jobs, kind__in=BUDGET_KINDS, created_at__gte=since)
                       .order_by("job_id", "created_at").values_list("job_id", EpochSeconds("created_at"))):
        times.setdefault(job_id, []).append(at)
    return times


def preemptions_in_window(requeues: Sequence[float], since: float, count: int, last: float, window_s: float,
                          budget: int) -> tuple[int, float]:
    """(A job's requeues by preemption inside its class's budget window, when enough of them
    have left it for the job to be under its budget again: the last one's time plus the window
    when under it), in seconds since the epoch. `requeues`: their times from the job's events,
    oldest first; `count` and `last`: the job's own count and last preemption. The cycle's spec
    (`_SpecReader`) and the admin's warning on a lowered budget (services/preemption_budgets.py)
    count it here alike."""
    inside = [t for t in requeues if t >= since]
    if count == 1 or not inside:
        # One requeue; or its events are gone, and all of them count while the last one does.
        return count, last + window_s
    leaving = inside[min(len(inside) - 1, max(0, len(inside) - budget))]
    return len(inside), leaving + window_s


# The names the last read in this process built its specs with, and those specs by their row
# (see `_SpecReader`): one pair, replaced whole by one assignment, so reads in two threads at
# once never pair one read's specs with the other's names.
_Names = tuple[dict[int, str], dict[int, str], dict[int, str]]
_last_read: tuple[_Names, dict[tuple[Any, ...], engine.JobSpec]] | None = None


class _SpecReader:
    """Turns job rows (tuples in `_JOB_COLUMNS` order) into engine specs, memoising what many
    jobs share (enum values, role tuples, GPU type tuples).

    A job's row rarely changes from one cycle to the next, and a spec is frozen: a row read
    exactly as in the last read, under the same team, class and project names, with the same
    preemptions inside its budget window (that one moves with `now`), gets the last read's spec
    object again instead of a new, equal one. `done` hands this read's specs to the next."""

    def __init__(self, now: datetime, teams: dict[int, Team], classes: dict[int, PriorityClass],
                 projects: dict[int, str]) -> None:
        self.now = now
        self.team_names = {pk: t.name for pk, t in teams.items()}
        self.classes = classes
        self.projects = projects
        # In seconds, as the rows' timestamps are read: distinct microseconds stay distinct
        # floats at today's epoch, so the comparison is the datetimes' comparison.
        self.budget_since = {pk: (now - timedelta(seconds=pc.budget_window_s)).timestamp()
                             for pk, pc in classes.items()}
        self.budget_window = {pk: pc.budget_window_s for pk, pc in classes.items()}
        self.recent_requeues = _recent_requeues(now, max(self.budget_window.values(), default=0))
        self._workloads: dict[str, engine.WorkloadClass] = {}
        self._topologies: dict[str, engine.TopologyConstraint] = {}
        self._gpu_types: dict[str | None, tuple[str, ...]] = {}
        self._roles: dict[str | None, tuple[engine.GangRole, ...]] = {}
        self._names = (self.team_names, {pk: pc.name for pk, pc in classes.items()}, projects)
        last = _last_read
        self._last = last[1] if last is not None and last[0] == self._names else {}
        self._seen: dict[tuple[Any, ...], engine.JobSpec] = {}

    def _inside_window(self, job_id: int, class_id: int, count: int, last: float) -> tuple[int, float]:
        return preemptions_in_window(self.recent_requeues.get(job_id, ()), self.budget_since[class_id], count, last,
                                     self.budget_window[class_id], self.classes[class_id].preemption_budget)

    def done(self) -> None:
        global _last_read
        _last_read = (self._names, self._seen)

    def spec(self, row: tuple[Any, ...]) -> engine.JobSpec:
        # The job keeps a count and the time of its last preemption: none inside the window is
        # none at all, and one is that one. A job requeued more than once with its last
        # requeue inside the window (rare) has its requeues' times read from their events
        # (`recent_requeues`, one query per cycle), so the window slides over each of them.
        preemption_count, last_preempted_at = row[19], row[20]
        in_window = 0
        frees_at = None
        if preemption_count and last_preempted_at is not None and last_preempted_at >= self.budget_since[row[2]]:
            in_window, frees_at = self._inside_window(row[0], row[2], preemption_count, last_preempted_at)
        spec = self._last.get(row)
        if spec is None or spec.preemptions_in_window != in_window or spec.preemption_budget_frees_at != frees_at:
            spec = self._spec(row, in_window, frees_at)
        self._seen[row] = spec
        return spec

    def _spec(self, row: tuple[Any, ...], in_window: int, frees_at: float | None) -> engine.JobSpec:
        (pk, team_id, pc_id, project_id, gpus, submitted_at, workload, gpus_per_node, gpu_types, min_memory,
         cpus_per_gpu, memory_per_gpu, topology, min_gpus, max_gpus, runtime_limit_s, checkpoint_interval_s,
         roles, submitter_id, _preemption_count, _last_preempted_at, array_id, array_task_limit,
         members_on_distinct_nodes) = row
        wl = self._workloads.get(workload)
        if wl is None:
            wl = self._workloads[workload] = engine.WorkloadClass(workload)
        topo = self._topologies.get(topology)
        if topo is None:
            topo = self._topologies[topology] = engine.TopologyConstraint(topology)
        types = self._gpu_types.get(gpu_types)
        if types is None:
            types = self._gpu_types[gpu_types] = tuple(json.loads(gpu_types)) if gpu_types else ()
        gang = self._roles.get(roles)
        if gang is None:
            parsed = json.loads(roles) if roles else None
            gang = self._roles[roles] = engine_roles(parsed) if parsed else ()
        return engine.JobSpec(
            id=str(pk),
            team=self.team_names[team_id],
            priority_class=self.classes[pc_id].name,
            gpus=gpus,
            submitted_at=submitted_at,
            project=self.projects.get(project_id, "") if project_id is not None else "",
            workload=wl,
            gpus_per_node=gpus_per_node,
            gpu_types=types,
            min_gpu_memory_gb=min_memory,
            cpus_per_gpu=cpus_per_gpu,
            memory_gb_per_gpu=memory_per_gpu,
            topology=topo,
            min_gpus=min_gpus,
            max_gpus=max_gpus,
            runtime_limit_s=float(runtime_limit_s),
            checkpoint_interval_s=float(checkpoint_interval_s) if checkpoint_interval_s else None,
            roles=gang,
            preemptions_in_window=in_window,
            preemption_budget_frees_at=frees_at,
            user=str(submitter_id or ""),
            array_id=str(array_id) if array_id is not None else "",
            array_task_limit=array_task_limit,
            members_on_distinct_nodes=members_on_distinct_nodes,
        )


def engine_roles(roles: list[dict[str, Any]]) -> tuple[engine.GangRole, ...]:
    """A job's stored roles as the engine's gang roles (the what-if replay reads them so too)."""
    return tuple(
        engine.GangRole(
            name=str(role["name"]),
            count=int(role["count"]),
            gpus_per_member=int(role["gpus_per_member"]),
            gpu_types=tuple(role.get("gpu_types", ())),
            min_gpu_memory_gb=int(role.get("min_gpu_memory_gb", 0)),
            cpus_per_gpu=int(role.get("cpus_per_gpu", 0)),
            memory_gb_per_gpu=int(role.get("memory_gb_per_gpu", 0)),
        )
        for role in roles
    )


_NODE_COLUMNS = ("pk", "name", "pool", "gpu_type_id", "gpu_count", "cpus", "memory_gb", "leaf_switch", "spine",
                 "state", "capacity_tier")


def read_snapshot(now: datetime, epoch: int) -> SnapshotContext:
    """One consistent read of everything a cycle needs: a handful of queries returning plain
    rows (values_list), turned straight into the engine's frozen types.

    The cyclic garbage collector is paused while it runs (as during the engine's plan): the
    read allocates tens of thousands of tuples and frozen objects, none of them garbage, and a
    full collection of a worker's heap that they triggered cost 60–70 ms of a ~110 ms read."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read_snapshot(now, epoch)
    finally:
        if collecting:
            gc.enable()


def _read_snapshot(now: datetime, epoch: int) -> SnapshotContext:
    gpu_types = {g.pk: g for g in GpuType.objects.all()}
    priority_classes = {p.pk: p for p in PriorityClass.objects.all()}
    teams = {t.pk: t for t in Team.objects.select_related("cohort")}
    # A retired node is out of the fleet for good: the engine never sees it (it holds no live
    # allocation: services/nodes.retire refuses while one does).
    nodes = list(Node.objects.exclude(state=NodeState.RETIRED).order_by("name").values_list(*_NODE_COLUMNS))
    context = SnapshotContext(
        snapshot=engine.Snapshot(now=to_seconds(now), nodes=(), gpu_types=(), priority_classes=(), quotas=(),
                                 pending=(), running=()),
        read_at=now,
        node_ids={row[1]: row[0] for row in nodes},
        team_ids={t.name: t.pk for t in teams.values()},
    )
    reader = _SpecReader(now, teams, priority_classes, _project_names())
    grace = {pk: pc.grace_period_s for pk, pc in priority_classes.items()}
    pending = _with_dependency_waits(_read_pending(context, reader, grace), context)
    running = _read_running(context, reader, grace, {row[0]: row[1] for row in nodes})
    reader.done()

    context.snapshot = engine.Snapshot(
        now=to_seconds(now),
        epoch=epoch,
        nodes=_node_infos(nodes, gpu_types),
        gpu_types=tuple(
            engine.GpuTypeInfo(name=g.name, memory_gb=g.memory_gb, throughput=g.relative_throughput)
            for g in sorted(gpu_types.values(), key=lambda g: g.name)
        ),
        priority_classes=_priority_class_infos(priority_classes),
        quotas=_quota_infos(teams, gpu_types),
        pending=pending,
        running=running,
        team_usage=_team_usages(teams, now),
        maintenance=_maintenance_windows(now),
    )
    return context


def read_queue(now: datetime) -> engine.QueueSnapshot:
    """What the engine's queue order reads (`engine.queue_factors_of`), read as `read_snapshot`
    reads it and nothing more, for views of the order (`qm sprio`): the waiting jobs' ids,
    teams, classes, submission times, runtime limits, holds and dependencies (one narrow row a
    job, no spec); the classes' values; the teams' past usage; and the two sums the shares need,
    the fleet's capacity and what each team's running jobs hold, added up by PostgreSQL (one
    grouped query each) instead of reading every node, live allocation, running job and GPU row.
    With 5,012 waiting jobs, 2,422 running on 1,250 nodes: ~35 ms against 105–125 ms for the
    snapshot (docs/benchmarks.md, *sprio's read*). The cyclic garbage collector is paused as in
    `read_snapshot`, for the same reason."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read_queue(now)
    finally:
        if collecting:
            gc.enable()


def _read_queue(now: datetime) -> engine.QueueSnapshot:
    classes = {pk: (name, value) for pk, name, value in PriorityClass.objects.values_list("pk", "name", "value")}
    teams = {t.pk: t for t in Team.objects.all()}
    team_names = {pk: t.name for pk, t in teams.items()}
    sums = _share_sums(teams, now)
    waits = _dependency_waits()
    pending = []
    holds: dict[int, tuple[str, int | None]] = {}
    # In no order: the engine's order is total (ids are unique), whatever order the jobs come in.
    for pk, team_id, class_id, submitted_at, runtime_limit_s, hold, held_by in (
            Job.objects.filter(state=JobState.PENDING).order_by().values_list(
                "pk", "team_id", "priority_class_id", EpochSeconds("submitted_at"), "runtime_limit_s", "hold",
                "held_by_id")):
        if hold:
            holds[len(pending)] = (hold, held_by)
        pending.append(engine.QueuedJob(id=str(pk), team=team_names[team_id], priority_class=classes[class_id][0],
                                        submitted_at=submitted_at, runtime_limit_s=float(runtime_limit_s),
                                        waits_on=waits.get(pk, ())))
    for index, label in _holder_labels(holds).items():
        pending[index] = dataclasses.replace(pending[index], held_by=label)
    return engine.QueueSnapshot(
        now=to_seconds(now),
        pending=tuple(pending),
        priority_values={name: value for name, value in classes.values()},
        capacity=sums.capacity,
        held=sums.held,
        team_usage=sums.team_usage,
    )


@dataclass(frozen=True)
class ShareSums:
    """What the teams' dominant shares are computed from (``engine.fair_shares_of``): the
    fleet's capacity (GPUs, CPUs, memory GB), what each team's running jobs hold of it, and the
    teams' past usage, summed by PostgreSQL rather than read node by node and job by job."""

    capacity: tuple[float, float, float]
    held: dict[str, tuple[float, float, float]]
    team_usage: tuple[engine.TeamUsage, ...]


def read_share_sums(now: datetime) -> ShareSums:
    """:class:`ShareSums` as the next cycle would see them (`qm sshare`; `read_queue` for `qm
    sprio`): three small queries, none of them over the nodes, allocations or jobs row by row."""
    return _share_sums({t.pk: t for t in Team.objects.all()}, now)


def _share_sums(teams: dict[int, Team], now: datetime) -> ShareSums:
    team_names = {pk: t.name for pk, t in teams.items()}
    capacity = Node.objects.exclude(state=NodeState.RETIRED).aggregate(
        gpus=Sum("gpu_count"), cpus=Sum("cpus"), memory=Sum("memory_gb"))
    # Each GPU row held now counts one GPU and its job's CPUs and memory a GPU, to the job's team
    # (engine.fairshare.held_resources over the snapshot's running jobs).
    held = {team_names[team_id]: (float(gpus), float(cpus), float(memory)) for team_id, gpus, cpus, memory in (
        AllocationGpu.held().order_by().values("allocation__job__team_id")
        .annotate(gpus=Count("pk"), cpus=Sum("allocation__job__cpus_per_gpu"),
                  memory=Sum("allocation__job__memory_gb_per_gpu"))
        .values_list("allocation__job__team_id", "gpus", "cpus", "memory"))}
    return ShareSums(
        capacity=(float(capacity["gpus"] or 0), float(capacity["cpus"] or 0), float(capacity["memory"] or 0)),
        held=held,
        team_usage=_team_usages(teams, now),
    )


def _maintenance_windows(now: datetime) -> tuple[engine.MaintenanceWindow, ...]:
    """Every maintenance window not ended and not cancelled, with its nodes in the fleet (a
    retired node is not in the snapshot): one query, over the window-node rows
    (services/maintenance.py writes them)."""
    Through = MaintenanceWindow.nodes.through
    windows: dict[int, tuple[datetime, datetime, str, list[str]]] = {}
    for window_id, start_at, end_at, reason, node in (
        Through.objects.filter(maintenancewindow__cancelled_at__isnull=True, maintenancewindow__end_at__gt=now)
        .exclude(node__state=NodeState.RETIRED)
        .order_by("maintenancewindow__start_at", "maintenancewindow_id", "node__name")
        .values_list("maintenancewindow_id", "maintenancewindow__start_at", "maintenancewindow__end_at",
                     "maintenancewindow__reason", "node__name")
    ):
        windows.setdefault(window_id, (start_at, end_at, reason, []))[3].append(node)
    return tuple(
        engine.MaintenanceWindow(id=str(pk), nodes=tuple(names), start_at=to_seconds(start_at),
                                 end_at=to_seconds(end_at), reason=reason)
        for pk, (start_at, end_at, reason, names) in windows.items()
    )


def nodes_of_windows_written_since(context: SnapshotContext) -> set[int]:
    """The nodes (ids) of the maintenance windows that read differently now than `context`
    read them (one query): a window created since, or moved, lengthened or given other nodes.
    A bind onto one of them was planned without that window, and the cycle's commit leaves it
    out (the next cycle plans with the window). A window cancelled or ended since only frees
    nodes, and leaves no bind out. The caller holds the scheduler lease row, which a window's
    write takes first (services/maintenance.py): one written after this read waits for the
    commit."""
    read = set(context.snapshot.maintenance)
    return {context.node_ids[name] for window in _maintenance_windows(context.read_at) if window not in read
            for name in window.nodes if name in context.node_ids}


def _read_pending(context: SnapshotContext, reader: _SpecReader, grace: dict[int, int]) -> tuple[engine.JobSpec, ...]:
    """Waiting jobs in submission order, with the explanation columns the commit compares
    against (one query), a held job's spec naming who holds it (one more query, only when a
    job is held)."""
    pending = []
    width = len(_JOB_COLUMNS)
    held: dict[int, tuple[str, int | None, str]] = {}
    hold_width = len(_HOLD_COLUMNS)
    for row in Job.objects.filter(state=JobState.PENDING).order_by("submitted_at", "id").values_list(
        *_job_fields(_JOB_COLUMNS), *_HOLD_COLUMNS, *_EXPLANATION_COLUMNS
    ):
        spec = reader.spec(row[:width])
        hold = row[width:width + hold_width]
        if hold[0]:
            held[len(pending)] = hold
        pending.append(spec)
        context.grace_by_job[spec.id] = grace[row[2]]
        context.explanations[spec.id] = row[width + hold_width:]
        context.as_read[spec.id] = row[:width + hold_width]
    labels = _holder_labels({index: hold[:2] for index, hold in held.items()})
    for index, (_, _, reason) in held.items():
        pending[index] = dataclasses.replace(pending[index], held_by=labels[index], hold_reason=reason)
    return tuple(pending)


def _holder_labels(held: dict[int, tuple[str, int | None]]) -> dict[int, str]:
    """Who holds each held job (`JobSpec.held_by`), by the key it is given under, from its
    hold's level and holder: one query for the holders' names, none when no job is held."""
    if not held:
        return {}
    names = dict(get_user_model().objects.filter(pk__in={by for _, by in held.values()}).values_list(
        "pk", "username"))
    return {key: hold_label_of(level, names.get(by, "")) for key, (level, by) in held.items()}


#: What the commit re-reads of a job it binds, under the row's lock, to compare with `as_read`.
BIND_GUARD_COLUMNS = (*_job_fields(_JOB_COLUMNS), *_HOLD_COLUMNS)


def _read_running(context: SnapshotContext, reader: _SpecReader, grace: dict[int, int],
                  node_names: dict[int, str]) -> tuple[engine.RunningJob, ...]:
    """Live allocations, their jobs' columns, then their live GPUs: three queries.

    The jobs are read by their ids, not joined to the allocations: joined, PostgreSQL hashed the
    whole jobs table, every job the fleet ever ran, to find the running ones (54 ms of a 74-ms
    query at 107,000 jobs, 2,422 running; bench/scale_audit.py's installation), in every cycle."""
    allocation_rows = list(
        Allocation.objects.filter(state__in=LIVE_ALLOCATION_STATES)
        .order_by("generation")
        .values_list("pk", "generation", "state", "borrowed", EpochSeconds(Coalesce("started_at", "created_at")),
                     "job_id")
    )
    jobs = _jobs_by_id([row[5] for row in allocation_rows])
    per_allocation: dict[int, dict[int, list[int]]] = {}
    for allocation_id, node_id, gpu_index in (
        AllocationGpu.objects.filter(live=True, allocation__state__in=LIVE_ALLOCATION_STATES)
        .order_by("allocation_id", "node_id", "gpu_index")
        .values_list("allocation_id", "node_id", "gpu_index")
    ):
        per_allocation.setdefault(allocation_id, {}).setdefault(node_id, []).append(gpu_index)
    running = []
    for allocation_id, generation, state, borrowed, started_at, job_id in allocation_rows:
        if (job := jobs.get(job_id)) is None:
            continue  # deleted since its allocation was read, and the allocation with it
        job_row, last_checkpoint_at = job[:-1], job[-1]
        spec = reader.spec(job_row)
        per_node = per_allocation.get(allocation_id, {})
        placements = tuple(
            engine.GpuPlacement(node=node_names[node_id], gpu_indices=tuple(indices))
            for node_id, indices in sorted(per_node.items(), key=lambda item: node_names[item[0]])
        )
        running.append(
            engine.RunningJob(
                spec=spec,
                placements=placements,
                started_at=started_at,
                borrowed=borrowed,
                last_checkpoint_at=last_checkpoint_at,
                generation=generation,
                terminating=state == AllocationState.RELEASING,
            )
        )
        context.live_allocations[spec.id] = LiveAllocation(
            allocation_id, generation, sum(len(i) for i in per_node.values())
        )
        context.grace_by_job[spec.id] = grace[job_row[2]]
    return tuple(running)


#: Ids a query names at most: SQLite (the demo's database) takes 32,766 parameters a statement.
_IDS_A_QUERY = 10_000


def _jobs_by_id(ids: list[int]) -> dict[int, tuple[Any, ...]]:
    """Each job's row in `_JOB_COLUMNS` order, then its last checkpoint (epoch seconds)."""
    rows: dict[int, tuple[Any, ...]] = {}
    for start in range(0, len(ids), _IDS_A_QUERY):
        for row in Job.objects.filter(pk__in=ids[start:start + _IDS_A_QUERY]).values_list(
                *_job_fields(_JOB_COLUMNS), EpochSeconds("last_checkpoint_at")):
            rows[row[0]] = row
    return rows


def _with_dependency_waits(pending: tuple[engine.JobSpec, ...],
                           context: SnapshotContext | None = None) -> tuple[engine.JobSpec, ...]:
    """Each waiting job with dependencies not met yet carries them (`JobSpec.waits_on`, with
    where each upstream job stands now): the engine keeps it out of line. One query per cycle
    (`_dependency_waits`), whatever the number of jobs."""
    any_of: set[int] = set()
    waits = _dependency_waits(any_of)
    if not waits:
        return pending
    out = []
    for spec in pending:
        mine = waits.get(int(spec.id))
        if mine:
            spec = dataclasses.replace(spec, waits_on=mine)
            if context is not None and int(spec.id) in any_of:
                context.any_of[spec.id] = spec.waits_on
        out.append(spec)
    return tuple(out)


def _dependency_waits(any_of: set[int] | None = None) -> dict[int, tuple[engine.DependencyWait, ...]]:
    """Per waiting job with dependencies not met yet, what it waits on, as the engine reads it
    (services/dependencies.waits: one query; the control plane decides what is met); `any_of`
    receives the ids of those whose dependencies are any-of."""
    from controlplane.services import dependencies

    conditions = {c.value: c for c in engine.DependencyCondition}
    return {job_id: tuple(engine.DependencyWait(upstream=str(upstream), condition=conditions[condition],
                                                upstream_state=state) for upstream, condition, state in mine)
            for job_id, mine in dependencies.waits(any_of=any_of).items() if mine}


def _node_infos(nodes: list[tuple[Any, ...]], gpu_types: dict[int, GpuType]) -> tuple[engine.NodeInfo, ...]:
    return tuple(
        engine.NodeInfo(
            name=name,
            pool=pool,
            gpu_type=gpu_types[gpu_type_id].name,
            gpus=gpu_count,
            cpus=cpus,
            memory_gb=memory_gb,
            leaf=leaf,
            spine=spine,
            state=engine.NodeState(state),
            capacity_tier=capacity_tier,
            failure_domain=leaf,
        )
        for _, name, pool, gpu_type_id, gpu_count, cpus, memory_gb, leaf, spine, state, capacity_tier in nodes
    )


def _priority_class_infos(priority_classes: dict[int, PriorityClass]) -> tuple[engine.PriorityClassInfo, ...]:
    return tuple(
        engine.PriorityClassInfo(
            name=p.name,
            value=p.value,
            preemptible=p.preemptible,
            may_preempt_lower=p.may_preempt_lower,
            grace_period_s=p.grace_period_s,
            min_runtime_s=p.min_runtime_s,
            preemption_budget=p.preemption_budget,
            budget_window_s=p.budget_window_s,
        )
        for p in sorted(priority_classes.values(), key=lambda p: p.name)
    )


def _quota_infos(teams: dict[int, Team], gpu_types: dict[int, GpuType]) -> tuple[engine.QuotaInfo, ...]:
    return tuple(
        engine.QuotaInfo(
            team=teams[q.team_id].name,
            gpu_type=gpu_types[q.gpu_type_id].name,
            nominal_gpus=q.nominal_gpus,
            borrowing_limit=q.borrowing_limit,
            lending_limit=q.lending_limit,
            cohort=teams[q.team_id].cohort.name if teams[q.team_id].cohort else None,
        )
        for q in Quota.objects.order_by("team_id", "gpu_type_id")
    )


def _team_usages(teams: dict[int, Team], now: datetime) -> tuple[engine.TeamUsage, ...]:
    return tuple(
        engine.TeamUsage(
            team=t.name,
            gpu_seconds=t.decayed_gpu_seconds,
            cpu_seconds=t.decayed_cpu_seconds,
            memory_gb_seconds=t.decayed_memory_gb_seconds,
            as_of=to_seconds(t.usage_as_of) if t.usage_as_of else to_seconds(now),
        )
        for t in sorted(teams.values(), key=lambda t: t.name)
    )


def _project_names() -> dict[int, str]:
    return dict(Project.objects.values_list("pk", "name"))
