"""What if the fleet had run another policy? Replay the last N days of real jobs through the
simulator twice: once under the live policy, once under the one asked for.

The replay is the simulator's (`scheduler_core.sim`), which runs the very same engine; this
module only turns rows into a trace and a fleet shape, and the two results into numbers.

How rows become a trace (the approximations are stated on the page and in docs/dashboards.md):
- every job submitted in the window that ran or still waits; jobs that ended without ever
  starting (cancelled while waiting, can never run) are left out, but for the runs they had
  before a requeue;
- the replay runs from the first of them's submission to now, not from the window's edge, so
  a fleet younger than the window is measured over the time it had jobs;
- a finished job runs as long as its last run took (finished − last start); a job still
  waiting or running runs to its runtime limit, the most one run may;
- a requeued job run by run (`_requeued_runs`, from `job_runs.run_history`): the scheduler's
  stops (preemptions, resizes) and a node lost under it are the replayed policy's and the
  fleet's, not replayed, but the work each such run kept at its last checkpoint is added to its
  duration; a requeue someone asked for while it ran is demand, replayed at its time
  (`TraceJob.requeued_at`, held: `TraceHold.requeues`); a run that ended before a requeue is a
  run of its own, and the job comes back at the requeue once it has ended;
- its priority is its class's value; a job that accepts exactly one GPU type asks for it, one
  that accepts several or any asks for any;
- its holds as they were (`hold_spans`, every stretch `holds.hold_history` reads from the
  database): held from each hold (at submission for a job submitted held) to its release, to the
  requeue that cleared it or the job's end, or to the end if held now; a job held while it waits
  does not start, one running goes on (the control plane holds only waiting jobs) unless the
  hold came with a requeue, which stops it as on the fleet. Its dependencies (`dependencies_of`): met
  in the replay's own timeline when on a replayed job (which ends as it ended on the fleet, or
  succeeds if it has not ended), when they were met on the fleet when on a job from before the
  window; one never met cancels its job. A singleton waits on the jobs of its submitter and
  name that run or wait ahead of it, in the replay, and on those from before the window until
  they ended on the fleet;
- the fleet is the real one: every registered node (its pool, GPU type and count, CPUs,
  memory, leaf switch and spine), taken as ready throughout but for the maintenance windows
  in force then (not cancelled; a window cancelled once begun, up to its cancellation), which
  both runs keep as the engine did, each from when it was created (``created_at``; created
  before the replayed time: known from the start): a job that started on its nodes before then
  runs into it, as on the fleet; the real GPU types and priority
  classes; the real quota table (teams, cohorts, nominal GPUs, borrowing and lending limits)
  for the live run, and for the what-if run the same table with the nominal GPUs and the
  borrowing and lending limits the user typed (see `quota_table`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import multiprocessing
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from django.db.models import Max, Q
from django.utils import timezone

import scheduler_core
from controlplane.choices import FINISHED_JOB_STATES, DependencyMode, JobState, NodeState
from controlplane.models import (
    GpuType,
    Job,
    JobDependency,
    MaintenanceWindow,
    Node,
    PriorityClass,
    Quota,
    Team,
)
from controlplane.services import job_runs
from controlplane.services.holds import hold_history
from controlplane.services.snapshot import engine_roles, scheduler_config
from controlplane.shared_store import Store
from frontend import replay_worker
from frontend.replay_worker import Run, Work
from scheduler_core.sim import TraceDependency, TraceHold, TraceJob
from scheduler_core.types import (
    DependencyCondition,
    GpuTypeInfo,
    NodeInfo,
    PriorityClassInfo,
    QuotaInfo,
    SchedulerConfig,
    TopologyConstraint,
    WorkloadClass,
)
from scheduler_core.types import MaintenanceWindow as Window

log = structlog.get_logger(__name__)

MAX_DAYS = 30
MAX_TRACE_JOBS = 5_000
PLACEMENTS = ("pack", "spread")
BATCH_WORKLOADS = (WorkloadClass.TRAINING, WorkloadClass.BATCH, WorkloadClass.INTERACTIVE)


class ReplayRefused(Exception):
    """The replay cannot run as asked; the message says why and what to change."""


@dataclass(frozen=True)
class Policy:
    placement: str
    backfill: bool
    preemption: bool
    # The quota table the run uses; None: the live one.
    quotas: tuple[QuotaInfo, ...] | None = None
    quota_note: str = ""

    def describe(self) -> str:
        return (f"{self.placement}, backfill {'on' if self.backfill else 'off'}, "
                f"preemption {'on' if self.preemption else 'off'}, "
                + (self.quota_note or "live quotas"))

    def config(self, base: SchedulerConfig) -> SchedulerConfig:
        placement = dict(base.placement_by_workload)
        for workload in BATCH_WORKLOADS:
            placement[workload] = self.placement
        return dataclasses.replace(base, placement_by_workload=placement, backfill=self.backfill,
                                   preemption=self.preemption)


def live_policy(config: SchedulerConfig) -> Policy:
    return Policy(placement=str(config.placement_by_workload.get(WorkloadClass.TRAINING, "pack")),
                  backfill=config.backfill, preemption=config.preemption)


@dataclass(frozen=True)
class Fleet:
    """The real fleet as the simulator takes it: nodes, GPU types, priority classes, the live
    quota table, and each team's cohort (a quota typed for a team that has none joins it)."""

    nodes: tuple[NodeInfo, ...]
    gpu_types: tuple[GpuTypeInfo, ...]
    priority_classes: tuple[PriorityClassInfo, ...]
    quotas: tuple[QuotaInfo, ...]
    cohort_of: Mapping[str, str | None]

    @property
    def gpus_by_type(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for node in self.nodes:
            out[node.gpu_type] = out.get(node.gpu_type, 0) + node.gpus
        return dict(sorted(out.items()))

    @property
    def total_gpus(self) -> int:
        return sum(node.gpus for node in self.nodes)


def real_fleet() -> Fleet:
    """Read the fleet and the quota table (five queries). Every node counts, taken as ready
    throughout: a node cordoned or down now says nothing of the replayed days. A retired node is
    out of the fleet: left out."""
    nodes = tuple(
        NodeInfo(name=name, pool=pool, gpu_type=gpu_type, gpus=gpus, cpus=cpus, memory_gb=memory, leaf=leaf,
                 spine=spine, capacity_tier=tier, failure_domain=leaf)
        for name, pool, gpu_type, gpus, cpus, memory, leaf, spine, tier in Node.objects.exclude(state=NodeState.RETIRED).order_by("name").values_list(
            "name", "pool", "gpu_type__name", "gpu_count", "cpus", "memory_gb", "leaf_switch", "spine", "capacity_tier")
    )
    if not nodes:
        retired = Node.objects.filter(state=NodeState.RETIRED).count()
        if retired:  # "no node has registered yet" beside a Nodes page listing them was untrue
            raise ReplayRefused(f"Every node of the fleet is retired ({retired}): there is no fleet to replay on. "
                                "Return a node to service (the Nodes page, qm nodes return) to replay on it.")
        raise ReplayRefused("No node has registered yet: there is no fleet to replay on.")
    gpu_types = tuple(GpuTypeInfo(name=name, memory_gb=memory, throughput=throughput)
                      for name, memory, throughput in GpuType.objects.order_by("name").values_list(
                          "name", "memory_gb", "relative_throughput"))
    classes = tuple(
        PriorityClassInfo(name=p.name, value=p.value, preemptible=p.preemptible, may_preempt_lower=p.may_preempt_lower,
                          grace_period_s=p.grace_period_s, min_runtime_s=p.min_runtime_s,
                          preemption_budget=p.preemption_budget, budget_window_s=p.budget_window_s)
        for p in PriorityClass.objects.order_by("name")
    )
    cohort_of = dict(Team.objects.order_by("name").values_list("name", "cohort__name"))
    quotas = tuple(
        QuotaInfo(team=team, gpu_type=gpu_type, nominal_gpus=nominal, borrowing_limit=borrowing,
                  lending_limit=lending, cohort=cohort)
        for team, gpu_type, nominal, borrowing, lending, cohort in Quota.objects.order_by(
            "team__name", "gpu_type__name").values_list(
            "team__name", "gpu_type__name", "nominal_gpus", "borrowing_limit", "lending_limit", "team__cohort__name")
    )
    return Fleet(nodes=nodes, gpu_types=gpu_types, priority_classes=classes, quotas=quotas, cohort_of=cohort_of)


@dataclass(frozen=True)
class QuotaCell:
    """One cell of the what-if quota table: a team's quota on one GPU type, live and asked: its
    nominal GPUs and, for a team in a cohort, its borrowing and lending limits (None: no quota,
    or no limit)."""

    team: str
    gpu_type: str
    live: int | None
    asked: int | None
    capacity: int
    in_cohort: bool = False
    live_borrowing: int | None = None
    asked_borrowing: int | None = None
    live_lending: int | None = None
    asked_lending: int | None = None

    @property
    def field(self) -> str:
        return quota_field(self.team, self.gpu_type)

    @property
    def borrowing_field(self) -> str:
        return quota_field(self.team, self.gpu_type, "borrowing")

    @property
    def lending_field(self) -> str:
        return quota_field(self.team, self.gpu_type, "lending")

    @property
    def changed(self) -> bool:
        return (self.live, self.live_borrowing, self.live_lending) != (self.asked, self.asked_borrowing,
                                                                      self.asked_lending)

    # The inputs' max: the fleet's GPUs of the type, or the live value when above them, so the
    # browser sends the form as prefilled (see `gpus_allowed`).
    @property
    def quota_max(self) -> int:
        return gpus_allowed(self.capacity, self.live)

    @property
    def borrowing_max(self) -> int:
        return gpus_allowed(self.capacity, self.live_borrowing)

    @property
    def lending_max(self) -> int:
        return gpus_allowed(self.capacity, self.live_lending)


def gpus_allowed(capacity: int, live: int | None) -> int:
    """The most GPUs a cell of the quota table takes: the fleet's GPUs of its type, or its live
    value when that is higher. A live quota or limit above the fleet (a node retired since, a
    borrowing limit of 500 standing for "no real cap") is what the live run replays, so the
    what-if run takes it as it stands, and any lower number; above both is a typo."""
    return max(capacity, live or 0)


#: The form's fields of the quota table, by the part of a quota each holds: `quota:TEAM:TYPE`
#: its nominal GPUs, `borrowing:…` and `lending:…` its limits.
QUOTA_PARTS = {"quota": "quota", "borrowing": "borrowing limit", "lending": "lending limit"}


def quota_field(team: str, gpu_type: str, part: str = "quota") -> str:
    return f"{part}:{team}:{gpu_type}"


def is_quota_field(name: str) -> bool:
    return name.split(":", 1)[0] in QUOTA_PARTS and name.count(":") >= 2


def _whole_gpus(data: Mapping[str, str], name: str, current: int | None, what: str, gpus: int, gpu_type: str,
                empty: str, errors: dict[str, str]) -> int | None:
    """A cell's number of GPUs as typed (None when cleared), or `current` when not sent or bad:
    0 to `gpus_allowed` (the fleet's GPUs of the type, or the live `current` above them)."""
    raw = data.get(name)
    if raw is None:
        return current
    text = raw.strip()
    if text == "":
        return None
    try:
        asked = int(text)
    except ValueError:
        errors[name] = f"{what}: expected a whole number of GPUs (or nothing for {empty}), got {raw!r}"
        return current
    top = gpus_allowed(gpus, current)
    if not 0 <= asked <= top:
        said = (f"this fleet's {gpu_type} GPUs" if top == gpus
                else f"its live value; this fleet has {gpus} {gpu_type} GPUs")
        errors[name] = f"{what}: expected 0 to {top} ({said}), got {asked}"
        return current
    return asked


def quota_table(fleet: Fleet, data: Mapping[str, str]) -> tuple[list[QuotaCell], dict[str, str]]:
    """The quota table of the what-if run, read from the form: one cell per team and GPU type
    of the fleet, holding a whole number of nominal GPUs (empty: no quota on that type) and, for
    a team in a cohort, its borrowing and lending limits (empty: no limit), each 0 to the
    fleet's GPUs of the type. A field the form does not send keeps its live value. A limit needs
    a quota to limit, and a team in no cohort borrows from and lends to no one (the API refuses
    such limits alike). Returns the cells and the errors by field."""
    live = {(q.team, q.gpu_type): q for q in fleet.quotas}
    capacity = fleet.gpus_by_type
    cells: list[QuotaCell] = []
    errors: dict[str, str] = {}
    known = set()
    for team, cohort in fleet.cohort_of.items():
        for gpu_type, gpus in capacity.items():
            quota = live.get((team, gpu_type))
            current = quota.nominal_gpus if quota is not None else None
            borrowing = quota.borrowing_limit if quota is not None else None
            lending = quota.lending_limit if quota is not None else None
            names = {part: quota_field(team, gpu_type, part) for part in QUOTA_PARTS}
            known.update(names.values())
            what = f"{{}} of {team} on {gpu_type}"
            asked = _whole_gpus(data, names["quota"], current, what.format("quota"), gpus, gpu_type, "no quota",
                                errors)
            asked_limits = {}
            for part, was in (("borrowing", borrowing), ("lending", lending)):
                name = names[part]
                limit = _whole_gpus(data, name, was, what.format(QUOTA_PARTS[part]), gpus, gpu_type, "no limit",
                                    errors)
                if name in errors or limit is None or limit == was:
                    asked_limits[part] = limit
                    continue
                if cohort is None:
                    errors[name] = (f"{what.format(QUOTA_PARTS[part])}: team {team} is in no cohort, so it "
                                    f"{'borrows from' if part == 'borrowing' else 'lends to'} no one: a limit "
                                    "limits nothing")
                elif asked is None:
                    errors[name] = (f"{what.format(QUOTA_PARTS[part])}: no quota to limit; give {team} nominal "
                                    f"{gpu_type} GPUs first")
                asked_limits[part] = was if name in errors else limit
            cells.append(QuotaCell(team=team, gpu_type=gpu_type, live=current, asked=asked, capacity=gpus,
                                   in_cohort=cohort is not None, live_borrowing=borrowing,
                                   asked_borrowing=asked_limits["borrowing"] if asked is not None else None,
                                   live_lending=lending,
                                   asked_lending=asked_limits["lending"] if asked is not None else None))
    for name in sorted(k for k in data if is_quota_field(k) and k not in known):
        errors[name] = f"{name}: no such team and GPU type on this fleet"
    return cells, errors


def quotas_of(fleet: Fleet, cells: Sequence[QuotaCell]) -> tuple[tuple[QuotaInfo, ...] | None, str]:
    """The what-if run's quota table from the cells (None when it is the live one), and a
    note naming each change. A quota keeps its live cohort, and the limits the cell asks (a new
    one: none unless typed); the engine enforces them as it does the live ones."""
    changed = [c for c in cells if c.changed]
    if not changed:
        return None, ""
    by_key = {(q.team, q.gpu_type): q for q in fleet.quotas}
    quotas = []
    for cell in cells:
        if cell.asked is None:
            continue
        base = by_key.get((cell.team, cell.gpu_type))
        if base is None:
            base = QuotaInfo(team=cell.team, gpu_type=cell.gpu_type, nominal_gpus=cell.asked,
                             cohort=fleet.cohort_of.get(cell.team))
        quotas.append(dataclasses.replace(base, nominal_gpus=cell.asked, borrowing_limit=cell.asked_borrowing,
                                          lending_limit=cell.asked_lending))
    # A quota of the live table on a type no node has stays as it is.
    shown = {(c.team, c.gpu_type) for c in cells}
    quotas += [q for q in fleet.quotas if (q.team, q.gpu_type) not in shown]

    def word(n: int | None, none: str = "none") -> str:
        return none if n is None else str(n)

    def said(c: QuotaCell) -> str:
        parts = []
        if c.live != c.asked:
            parts.append(f"{c.team} {c.gpu_type} {word(c.live)} → {word(c.asked)}")
        if c.asked is not None:
            for what, was, now in (("borrowing limit", c.live_borrowing, c.asked_borrowing),
                                   ("lending limit", c.live_lending, c.asked_lending)):
                if was != now:
                    parts.append(f"{c.team} {c.gpu_type} {what} {word(was, 'no limit')} → {word(now, 'no limit')}")
        return "; ".join(parts)

    note = "quotas changed: " + "; ".join(text for c in changed if (text := said(c)))
    return tuple(quotas), note


def trace_rows(since: datetime, until: datetime) -> list[tuple[Any, ...]]:
    return list(
        Job.objects.filter(submitted_at__gte=since, submitted_at__lt=until)
        # ended without a start: never ran, unless an earlier run of it did (requeued since)
        .exclude(state__in=FINISHED_JOB_STATES, started_at__isnull=True, requeue_count=0)
        .order_by("submitted_at", "id")
        .values_list(
            "id", "submitted_at", "started_at", "finished_at", "state", "gpus", "runtime_limit_s",
            "submitter__username", "team__name", "priority_class__value", "gpu_types",
            "checkpoint_interval_s", "min_gpus", "max_gpus", "gpus_per_node", "workload", "min_gpu_memory_gb",
            "cpus_per_gpu", "memory_gb_per_gpu", "topology", "roles", "members_on_distinct_nodes", "array_id", "array_task_limit",
            "dependency_mode", "name", "singleton", "submitter_id", "requeue_count",
        )[: MAX_TRACE_JOBS + 1]
    )


def maintenance_windows(since: datetime, until: datetime, nodes: Sequence[NodeInfo]) -> tuple[Window, ...]:
    """The maintenance windows in force between ``since`` and ``until`` on the fleet's nodes, in
    seconds from ``since``: a cancelled window only up to its cancellation, if it had begun.
    Each is announced when it was created (at the latest at its start: a start typed a minute
    ago is taken, ``START_GRACE``); one created before ``since`` is known from the start. A
    window changed later is known as it stands from its creation."""
    names = {n.name for n in nodes}
    windows = []
    for window in (MaintenanceWindow.objects.filter(start_at__lt=until, end_at__gt=since)
                   .prefetch_related("nodes").order_by("start_at", "id")):
        end = window.end_at if window.cancelled_at is None else min(window.end_at, window.cancelled_at)
        on = tuple(sorted(n.name for n in window.nodes.all() if n.name in names))
        if end <= window.start_at or not on:
            continue
        announced = min(window.created_at, window.start_at)
        windows.append(Window(str(window.pk), on, (window.start_at - since).total_seconds(),
                              (end - since).total_seconds(), window.reason,
                              announced_at=(announced - since).total_seconds() if announced > since else None))
    return tuple(windows)


#: How a job ended, as ``afterok`` and ``afternotok`` read it: only a success is "ok". A job not
#: ended by the replay's end (waiting or running now) is taken to succeed when its replayed run
#: completes: what becomes of it is not known yet, and most runs succeed.
_NOT_OK_STATES = frozenset(FINISHED_JOB_STATES) - {JobState.SUCCEEDED}


def _seconds(at: datetime, since: datetime) -> float:
    return max(0.0, (at - since).total_seconds())


def hold_spans(rows: Sequence[tuple[Any, ...]], since: datetime, until: datetime) -> dict[int, tuple[TraceHold, ...]]:
    """When each job of ``rows`` (``trace_rows``) was held, in seconds from ``since``: every
    stretch the database records (``holds.hold_history``, the one reading of hold intervals):
    from its placing, at submission for a job submitted held, to its release, to the requeue
    that cleared it, to the job's end if it ended held, or to the end if held now (``end_s``
    None). A hold that came with a requeue (``qm requeue --hold``) stops the job if the replay
    runs it then (``TraceHold.requeues``), as the requeue stopped it on the fleet."""
    return {pk: tuple(TraceHold(_seconds(stretch.placed_at, since),
                                _seconds(stretch.released_at, since) if stretch.released_at is not None else None,
                                stretch.by, requeues=stretch.requeued) for stretch in stretches)
            for pk, stretches in hold_history([row[0] for row in rows], until=until).items()}


def dependencies_of(rows: Sequence[tuple[Any, ...]], since: datetime) -> dict[int, tuple[TraceDependency, ...]]:
    """The dependencies of each job of ``rows`` (one query). An upstream job in ``rows`` meets
    its condition in the replay's own timeline; one outside them (submitted before the window,
    or ended without ever starting) when it was met on the fleet (``satisfied_at``, in seconds
    from ``since``; before it: from the start), or not within the replay if it is not met yet.

    A singleton of all-of dependencies also waits, as ``afterany``, on each job of its
    submitter and name submitted before the window and not ended by its submission: until that
    job ended on the fleet, or to the end if it has not (one more query, only when the window
    has singletons); its peers in ``rows`` the replay finds itself (``TraceJob.singleton``)."""
    found: dict[int, list[TraceDependency]] = {}
    for job_id, upstream, condition, satisfied in (JobDependency.objects.filter(job_id__in=[row[0] for row in rows])
                                                   .order_by("job_id", "upstream_id")
                                                   .values_list("job_id", "upstream_id", "condition", "satisfied_at")):
        met = _seconds(satisfied, since) if satisfied is not None else None
        found.setdefault(job_id, []).append(TraceDependency(str(upstream), DependencyCondition(condition), met))
    singletons = [row for row in rows if row[26] and row[27] is not None and row[24] != DependencyMode.ANY]
    if singletons:
        older: dict[tuple[int, str], list[tuple[int, datetime | None]]] = {}
        for pk, submitter, name, finished in (
                Job.objects.filter(submitted_at__lt=since, submitter_id__in={row[27] for row in singletons},
                                   name__in={row[25] for row in singletons})
                .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=since))
                .order_by("pk").values_list("pk", "submitter_id", "name", "finished_at")):
            older.setdefault((submitter, name), []).append((pk, finished))
        for row in singletons:
            for pk, finished in older.get((row[27], row[25]), ()):
                if finished is None or finished > row[1]:
                    found.setdefault(row[0], []).append(TraceDependency(
                        str(pk), DependencyCondition.AFTER_ANY, _seconds(finished, since) if finished else None))
    return {pk: tuple(deps) for pk, deps in found.items()}


def earlier_run_id(pk: int, number: int) -> str:
    """The trace id of a requeued job's ``number``-th run that ended before it was requeued
    (its latest demand keeps the job's own id, which its dependents name)."""
    return f"{pk}/{number}"


def _requeued_runs(base: TraceJob, history: job_runs.RunHistory, submitted: datetime, since: datetime,
                   state: str, started: datetime | None, finished: datetime | None) -> list[TraceJob]:
    """A requeued job as the replay runs it (``base``: the job as if it had never been
    requeued). Its requeues after an end split its life: each stretch up to such a requeue that
    ran is a run of its own (``earlier_run_id``), submitted when the stretch began (the job's
    submission, or the requeue that began it), as long as it ran (its last run, and the work
    its earlier requeued runs kept), ending as it ended; the next stretch is submitted at the
    requeue and starts only once that run has ended (``afterany``: it was requeued after it
    ended). A stretch that never ran (cancelled while waiting, then requeued) is left out, as a
    job that never started. Within a stretch, the scheduler's stops (preemptions, resizes) and a
    node lost under the job are not replayed, the replayed policy deciding its own, but the work
    each kept counts in the duration; a requeue someone asked for stops the job if the replay runs
    it then (``requeued_at``; one held: its ``TraceHold.requeues``)."""
    starts = [submitted, *(r.at for r in history.resubmissions)]
    out: list[TraceJob] = []
    for number, begun in enumerate(starts):
        last = number == len(starts) - 1
        ends = starts[number + 1] if not last else None
        runs = [r for r in history.runs if r.bound_at >= begun and (ends is None or r.bound_at < ends)]
        kept = sum(r.kept_s for r in runs)
        asked = tuple(_seconds(r.requeued_at, since) for r in runs
                      if r.requeued == job_runs.REQUEUE_ASKED and r.requeued_at is not None)
        # a hold belongs to the stretch it was placed in; one placed with the requeue that began
        # the stretch holds the job as it arrives, and stops nothing (it had ended)
        begun_s = _seconds(begun, since)
        holds = tuple(dataclasses.replace(h, requeues=h.requeues and h.start_s > begun_s) for h in base.holds
                      if h.start_s >= begun_s and (ends is None or h.start_s < _seconds(ends, since)))
        depends_on = base.depends_on if not out else (TraceDependency(out[-1].job_id, DependencyCondition.AFTER_ANY),)
        fields: dict[str, Any] = {"submit_s": begun_s, "holds": holds, "requeued_at": asked, "depends_on": depends_on,
                                  "depends_on_any": base.depends_on_any if not out else False}
        if not last:
            ran = runs[-1] if runs else None
            if ran is None:
                continue
            end = ran.ended_at or ends
            assert end is not None
            out.append(dataclasses.replace(
                base, job_id=earlier_run_id(int(base.job_id), number + 1), **fields,
                duration_s=max(1.0, (end - ran.bound_at).total_seconds() + kept - ran.kept_s),
                succeeds=history.resubmissions[number].from_state == JobState.SUCCEEDED))
        elif state in FINISHED_JOB_STATES and started is not None and finished is not None:
            out.append(dataclasses.replace(base, **fields,
                                           duration_s=max(1.0, (finished - started).total_seconds() + kept)))
        elif state not in FINISHED_JOB_STATES:
            out.append(dataclasses.replace(base, **fields))
    return out


def build_trace(rows: Sequence[tuple[Any, ...]], since: datetime, until: datetime | None = None) -> list[TraceJob]:
    """The jobs of ``rows`` (``trace_rows``) as the simulator replays them: each with the whole
    shape the control loop gives the engine (``services.snapshot``), roles read by the same
    ``engine_roles``; the time it ran (or its limit, if it never finished) is its duration; its
    holds up to ``until`` (``hold_spans``; default now) and its dependencies
    (``dependencies_of``), which the replay keeps as the control plane does; a requeued job as
    its runs (``_requeued_runs``)."""
    until = until or timezone.now()
    holds = hold_spans(rows, since, until)
    dependencies = dependencies_of(rows, since)
    histories = job_runs.run_history([row[0] for row in rows if row[28]], until=until)
    jobs = []
    for (pk, submitted, started, finished, state, gpus, limit, user, team, priority, gpu_types, checkpoint,
         min_gpus, max_gpus, gpus_per_node, workload, min_memory, cpus_per_gpu, memory_per_gpu, topology, roles,
         distinct, array_id, array_task_limit, dependency_mode, name, singleton, _submitter, _requeues) in rows:
        if state in FINISHED_JOB_STATES and started is not None and finished is not None:
            duration = max(1.0, (finished - started).total_seconds())
        else:
            duration = float(limit)
        job = TraceJob(
            job_id=str(pk),
            submit_s=max(0.0, (submitted - since).total_seconds()),
            gpus=gpus,
            duration_s=duration,
            runtime_limit_s=float(limit),
            user=user or "",
            team=team,
            priority=priority,
            gpu_type=gpu_types[0] if gpu_types and len(gpu_types) == 1 else "",
            gpu_types=tuple(gpu_types) if gpu_types and len(gpu_types) > 1 else (),
            checkpoint_interval_s=float(checkpoint) if checkpoint else None,
            min_gpus=min_gpus,
            max_gpus=max_gpus,
            gpus_per_node=gpus_per_node,
            workload=WorkloadClass(workload),
            min_gpu_memory_gb=min_memory,
            cpus_per_gpu=cpus_per_gpu,
            memory_gb_per_gpu=memory_per_gpu,
            topology=TopologyConstraint(topology),
            roles=engine_roles(roles) if roles else (),
            members_on_distinct_nodes=distinct,
            array_id=str(array_id) if array_id is not None else "",
            array_task_limit=array_task_limit,
            holds=holds.get(pk, ()),
            depends_on=dependencies.get(pk, ()),
            depends_on_any=dependency_mode == DependencyMode.ANY,
            succeeds=state not in _NOT_OK_STATES,
            name=name,
            singleton=singleton,
        )
        if pk in histories:
            jobs += _requeued_runs(job, histories[pk], submitted, since, state, started, finished)
        elif state not in FINISHED_JOB_STATES or started is not None:
            jobs.append(job)
    return jobs


# ------------------------------------------------------------------------ running in the background
#
# A replay takes seconds to minutes (the engine runs at every arrival and completion of every
# job, twice), far longer than a page may take. So a request starts it on a thread of the web
# process and the page polls for its progress. State lives in a store every web worker reads:
# Redis when the deployment has it (REDIS_URL), else Django's cache (the embedded demo's single
# process). One replay runs at a time per deployment (a lock with a short lease the running
# thread keeps renewing); a status whose thread died (its worker was recycled) expires after
# STALE_AFTER_S without news, and the page then says so.

KEY_PREFIX = "qm:what-if:"
LOCK_KEY = KEY_PREFIX + "lock"
STALE_AFTER_S = 30
RESULT_TTL_S = 3600
PROGRESS_EVERY_S = replay_worker.PROGRESS_EVERY_S


@functools.cache
def code_fingerprint() -> str:
    """The replay's code as this process runs it: the engine and the replay's own modules. A
    result is stored under a key that includes it, so a deploy that changes how jobs are
    scheduled or what a result holds never serves a result computed before it (until 5 Dec
    2026 a result cached before a deploy, up to RESULT_TTL_S, read 0 jobs that could never
    run, a figure it did not have)."""
    digest = hashlib.sha256()
    engine = Path(scheduler_core.__file__).parent
    for path in [*sorted(engine.rglob("*.py")), Path(__file__), Path(replay_worker.__file__)]:
        digest.update("/".join(path.parts[-3:]).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Request:
    """A replay asked for: its key, and the work for the child process (no database there)."""

    key: str
    work: Work


def prepare(days: int, policy: Policy, *, now: datetime | None = None, fleet: Fleet | None = None) -> Request:
    """Read the window's jobs and the fleet (unless given); refuse what cannot be replayed
    (ReplayRefused)."""
    if not 1 <= days <= MAX_DAYS:
        raise ReplayRefused(f"days: pick 1 to {MAX_DAYS}, got {days}")
    now = now or timezone.now()
    since = now - timedelta(days=days)
    rows = trace_rows(since, now)
    if not rows:
        raise ReplayRefused(f"No job was submitted in the last {days} day{'s' if days != 1 else ''}: nothing to replay.")
    if len(rows) > MAX_TRACE_JOBS:
        raise ReplayRefused(
            f"The last {days} days hold more than {MAX_TRACE_JOBS:,} jobs, more than a replay here takes; "
            "pick fewer days, or run the simulator from the command line (python -m scheduler_core.sim)."
        )
    fleet = fleet or real_fleet()
    base = scheduler_config()
    baseline = live_policy(base)
    last_change = Job.objects.filter(pk__in=[r[0] for r in rows[-50:]]).aggregate(m=Max("state_changed_at"))["m"]
    fingerprint = hashlib.sha256(json.dumps(
        [days, dataclasses.asdict(policy), dataclasses.asdict(baseline), len(rows), rows[0][0], rows[-1][0],
         str(last_change), dataclasses.asdict(fleet), now.strftime("%Y-%m-%d %H"), code_fingerprint()],
        default=str,
    ).encode()).hexdigest()
    first_submitted = rows[0][1]
    windows = maintenance_windows(first_submitted, now, fleet.nodes)
    trace = build_trace(rows, first_submitted, now)
    # a hold, a release or a dependency met since changes the replay, not always the rows' last change
    gates = [(t.job_id, t.holds, t.depends_on, t.requeued_at, t.submit_s, t.duration_s) for t in trace
             if t.holds or t.depends_on or t.singleton or t.requeued_at]
    fingerprint = hashlib.sha256((fingerprint + repr(windows) + repr(gates)).encode()).hexdigest()
    return Request(key=KEY_PREFIX + fingerprint, work=Work(
        days=days, trace=trace, at=now, replayed_from=first_submitted, nodes=fleet.nodes, gpu_types=fleet.gpu_types,
        priority_classes=fleet.priority_classes, maintenance=windows,
        earlier_runs=len(trace) - len({t.job_id.split("/")[0] for t in trace}),
        runs=[Run(f"live policy ({baseline.describe()})", baseline.config(base), fleet.quotas),
              Run(f"what-if ({policy.describe()})", policy.config(base),
                  policy.quotas if policy.quotas is not None else fleet.quotas)],
    ))


def status(key: str, store: Store | None = None) -> dict[str, Any] | None:
    """{"state": running|done|failed, ...} of a replay, or None when unknown or stale."""
    if not key.startswith(KEY_PREFIX) or len(key) != len(KEY_PREFIX) + 64:
        return None
    return (store or Store()).get(key)  # type: ignore[no-any-return]


def start(request: Request, store: Store | None = None) -> tuple[dict[str, Any], threading.Thread | None]:
    """The replay's status, starting it unless it is known or another one runs: a thread of
    this process supervises a spawned child process that simulates (replay_worker.child)."""
    store = store or Store()
    known = store.get(request.key)
    if known is not None:
        return known, None
    if not store.add(LOCK_KEY, request.key, STALE_AFTER_S):
        return {"state": "busy", "detail": "Another replay is running on this deployment; try again in a minute."}, None
    running = {"state": "running", "progress": 0.0, "jobs": len(request.work.trace)}
    store.set(request.key, running, STALE_AFTER_S)
    thread = threading.Thread(target=_supervise, args=(request, store), name="what-if", daemon=True)
    thread.start()
    return running, thread


def _supervise(request: Request, store: Store) -> None:
    """Relay the child's progress and result to the store, renewing the lock's lease meanwhile.
    Blocking on the pipe releases the interpreter lock: this thread costs the web worker nothing."""
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=replay_worker.child, args=(request.work, sending), name="what-if-replay",
                              daemon=True)
    state: dict[str, Any] = {"state": "running", "progress": 0.0, "jobs": len(request.work.trace)}
    outcome: dict[str, Any] | None = None
    try:
        process.start()
        sending.close()
        while outcome is None:
            if receiving.poll(PROGRESS_EVERY_S):
                try:
                    kind, value = receiving.recv()
                except EOFError:
                    outcome = {"state": "failed", "detail": "the replay process ended without a result"}
                    break
                if kind == "progress":
                    state["progress"] = value
                elif kind == "done":
                    outcome = {"state": "done", "replay": value}
                    log.info("what-if replay done", key=request.key, jobs=value.jobs, seconds=round(value.seconds, 2))
                else:
                    outcome = {"state": "failed", "detail": value}
            elif not process.is_alive():
                outcome = {"state": "failed", "detail": f"the replay process ended (exit code {process.exitcode})"}
            if outcome is None:
                store.set(request.key, state, STALE_AFTER_S)
                store.set(LOCK_KEY, request.key, STALE_AFTER_S)
    except Exception as exc:  # noqa: BLE001 - whatever stopped it, the page must say so
        outcome = {"state": "failed", "detail": f"{type(exc).__name__}: {exc}"}
    finally:
        if outcome is not None and outcome["state"] == "failed":
            log.warning("what-if replay failed", key=request.key, detail=outcome["detail"])
        store.set(request.key, outcome or {"state": "failed", "detail": "no result"}, RESULT_TTL_S)
        store.delete(LOCK_KEY)
        receiving.close()
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
