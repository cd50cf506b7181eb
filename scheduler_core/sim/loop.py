"""The discrete-event replay: a trace through the very same engine the control loop runs.

Algorithm (one *instant* per distinct event time, in time order, up to the horizon):

1. Pop every event at this time: arrivals join the queue; completions and the ends of
   preemption grace periods free GPUs (a preempted job is requeued, keeping only the work it
   had saved at its last checkpoint); a running job reaching its runtime limit only wakes the
   engine, which must decide the kill itself, and so do a maintenance window's announce (the
   engine sees a window only from then, as the control plane's snapshot holds a window only
   once an admin has created it) and its end.
2. If anything changed, build a :class:`~scheduler_core.types.Snapshot` and call
   ``schedule(snapshot, config)``; apply its kills, preemptions, resizes (shrinks first) and
   binds, validating each against the fleet (a GPU held twice, a partial gang, a whole-node job
   on part of a node, a stale generation, a bind or growth whose run overlaps a window known by
   then on its nodes: each is a :class:`SimulationError`, an engine bug). A job that started
   before a window on its nodes was announced keeps running into it, as in the product
   (running jobs are never stopped for a window; the control plane names them to operators):
   the report counts them and the GPU-hours they held inside windows.
   When the plan freed GPUs at once (a kill, a preemption without grace, a shrink), call the
   engine again at the same instant, up to :data:`MAX_CYCLES_PER_INSTANT` times.
3. Record the allocated and stranded GPUs that now hold until the next event.

Nothing happens between events, so the engine is never called when nothing changed. The
engine sees ``runtime_limit_s``; only this module reads ``duration_s``, to end jobs.

Progress is counted in GPU-seconds: a job needs ``duration_s × gpus`` and makes progress at
the rate of the GPUs it holds, so an elastic job shrunk to half its size runs half as fast
(linear scaling, the optimistic model). A job with ``checkpoint_interval_s`` saves its
progress every interval of a run; a preempted job keeps what it saved and loses the rest.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from scheduler_core.sim.fleet import (
    FleetShape,
    build_gpu_types,
    build_nodes,
    build_priority_classes,
    build_quotas,
    check_fleet,
    class_names_by_value,
    job_spec,
    node_sizes,
    priority_class_name,
    team_of,
)
from scheduler_core.sim.metrics import (
    JobOutcome,
    TimeIntegral,
    allocated_upper_bound,
    eta_figures,
    summarize,
    team_figures,
)
from scheduler_core.sim.trace import TraceDependency, TraceJob
from scheduler_core.types import (
    DependencyCondition,
    DependencyWait,
    GpuPlacement,
    GpuTypeInfo,
    JobSpec,
    MaintenanceWindow,
    NodeInfo,
    Plan,
    PriorityClassInfo,
    QuotaInfo,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TeamUsage,
)

Scheduler = Callable[[Snapshot, SchedulerConfig], Plan]
Clock = Callable[[], float]

#: Engine calls at one instant when plans keep freeing GPUs at once (kills, grace-less
#: preemptions, shrinks). Bounded so a plan that frees and refills forever cannot hang a run.
MAX_CYCLES_PER_INSTANT = 4

#: The simulator's lease epoch; every plan must echo it.
EPOCH = 1


class SimulationError(RuntimeError):
    """The engine returned a plan that cannot take effect on the simulated fleet."""


def _known(window: MaintenanceWindow, now: float) -> bool:
    """Whether ``window`` has been announced by ``now`` (``None``: known throughout)."""
    return window.announced_at is None or window.announced_at <= now


class _Kind(int, Enum):
    # Order of processing within an instant does not change the outcome (all events of an
    # instant are applied before the engine runs); it only keeps the heap deterministic.
    COMPLETE = 0
    GRACE_END = 1
    LIMIT = 2
    ARRIVAL = 3
    REOPEN = 4  # a maintenance window ends: its nodes take work again (no job)
    ANNOUNCE = 5  # a maintenance window becomes known: the engine plans around it (no job)
    GATE = 6  # a hold begins or ends, or a dependency on a job outside the trace is met (no job)


class _State(str, Enum):
    FUTURE = "future"
    PENDING = "pending"
    RUNNING = "running"
    TERMINATING = "terminating"
    DONE = "done"
    KILLED = "killed"
    NEVER_RUNNABLE = "never runnable"
    CANCELLED = "cancelled"  # a dependency it waited on can never be met, as the control plane cancels it


@dataclass(slots=True)
class _Job:
    """Mutable simulator-side state of one trace job (never shown to the engine)."""

    trace: TraceJob
    spec: JobSpec
    state: _State = _State.FUTURE
    pending_since: float = 0.0
    wait_s: float = 0.0
    placements: tuple[GpuPlacement, ...] = ()
    gpus_held: int = 0
    borrowed: bool = False
    generation: int = 0
    # progress of the current run: (time, GPU-seconds done at that time, GPUs from then on)
    marks: list[tuple[float, float, int]] = field(default_factory=list)
    saved_gpu_s: float = 0.0
    started_at: float = 0.0
    placed_at: float = 0.0  # when ``placements`` were last set (a bind or a resize)
    version: int = 0  # bumped whenever scheduled completion/limit/grace events go stale
    end_s: float | None = None
    preempted_at: list[float] = field(default_factory=list)
    view: RunningJob | None = None
    # this stretch in the queue: the first ETA the engine gave, and whether it was explained
    # at all (a job bound in the cycle of its arrival never is)
    eta_told: float | None = None
    eta_told_at: float = 0.0
    explained: bool = False
    ever_started: bool = False  # what an ``after`` dependency on it waits for
    # kept out of the queue at the last snapshot: held, or waiting for a dependency
    out_of_line: bool = False
    held: bool = False
    gated: bool = False  # has a hold, a dependency or is a singleton: each snapshot gates it

    @property
    def work_gpu_s(self) -> float:
        return self.trace.gpu_seconds

    def progress_at(self, at_s: float) -> float:
        mark = self.marks[0]
        for candidate in self.marks:
            if candidate[0] <= at_s:
                mark = candidate
            else:
                break
        return mark[1] + mark[2] * (at_s - mark[0])

    def completion_time(self) -> float:
        at_s, done, rate = self.marks[-1]
        return at_s + max(0.0, self.work_gpu_s - done) / rate

    def last_checkpoint(self, now: float) -> float | None:
        interval = self.trace.checkpoint_interval_s
        if interval is None:
            return None
        count = math.floor((now - self.started_at) / interval)
        return self.started_at + count * interval if count >= 1 else None


@dataclass(frozen=True, slots=True)
class SimResult:
    """A replay's metrics (see :mod:`scheduler_core.sim.metrics`) and how the run went.

    ``teams``: per team, :func:`~scheduler_core.sim.metrics.team_figures` (who gains and who
    pays under another policy or quota table); not part of :meth:`as_dict`, so the CLI's
    report is what it always was.

    ``never_runnable``: the jobs (ids, in the order the engine found them) that could never
    run: a shape the fleet cannot hold, more than the quota table lets their team hold, or a
    request the engine refuses. They leave the queue when found, so every wait figure and
    ``jobs_total`` leave them out; ``extras["jobs_never_runnable"]`` counts them, so no caller
    reads the waits without it (the command line refuses such a trace before replaying it; a
    caller of :func:`simulate` is told here)."""

    metrics: dict[str, float | int | None]
    extras: dict[str, float | int | None]
    teams: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    never_runnable: tuple[str, ...] = ()

    @property
    def jobs_never_runnable(self) -> int:
        """How many jobs could never run (:attr:`never_runnable`), left out of the waits."""
        return len(self.never_runnable)

    def as_dict(self) -> dict[str, float | int | None]:
        return {**self.metrics, **self.extras}


class Simulator:
    """Replays ``jobs`` on the fleet ``shape`` with ``schedule`` until ``horizon_s``.

    ``nodes``, ``gpu_types``, ``quotas`` and ``priority_classes``, when given, replace what
    the simulator would derive from ``shape`` and the trace (see :mod:`scheduler_core.sim.fleet`):
    the real fleet, a real or changed quota table (``()`` governs nothing), the real classes,
    which must give every trace priority a class of that value. With ``nodes`` given, ``shape``
    only lends its ``gpu_memory_gb`` when ``gpu_types`` is left out; a job of at least the
    largest node of its GPU type takes whole nodes.

    ``clock`` (wall time, e.g. ``time.perf_counter``) is only used to time engine cycles for
    the report; ``progress`` is called with the simulated time after every instant."""

    def __init__(
        self,
        jobs: Sequence[TraceJob],
        shape: FleetShape,
        schedule: Scheduler,
        config: SchedulerConfig,
        *,
        horizon_s: float,
        clock: Clock | None = None,
        progress: Callable[[float], None] | None = None,
        nodes: Sequence[NodeInfo] | None = None,
        gpu_types: Sequence[GpuTypeInfo] | None = None,
        quotas: Sequence[QuotaInfo] | None = None,
        priority_classes: Sequence[PriorityClassInfo] | None = None,
        maintenance: Sequence[MaintenanceWindow] = (),
    ) -> None:
        if horizon_s <= 0:
            raise ValueError(f"horizon must be > 0 s, got {horizon_s}")
        self.shape = shape
        self.schedule = schedule
        self.config = config
        self.horizon_s = horizon_s
        self.clock = clock
        self.progress = progress
        self.nodes: tuple[NodeInfo, ...] = tuple(nodes) if nodes is not None else build_nodes(shape)
        self.node_by_name: dict[str, NodeInfo] = {node.name: node for node in self.nodes}
        if gpu_types is not None:
            self.gpu_types = tuple(gpu_types)
        elif nodes is not None:
            self.gpu_types = tuple(
                GpuTypeInfo(name=name, memory_gb=shape.gpu_memory_gb) for name in sorted({n.gpu_type for n in self.nodes})
            )
        else:
            self.gpu_types = build_gpu_types(shape)
        self.priority_classes: tuple[PriorityClassInfo, ...] = (
            tuple(priority_classes) if priority_classes is not None else build_priority_classes(jobs)
        )
        self.window_by_class = {pc.name: pc.budget_window_s for pc in self.priority_classes}
        self.budget_by_class = {pc.name: pc.preemption_budget for pc in self.priority_classes}
        self.grace_by_class = {pc.name: pc.grace_period_s for pc in self.priority_classes}
        self.quotas: tuple[QuotaInfo, ...] = tuple(quotas) if quotas is not None else build_quotas(jobs, self.nodes)
        check_fleet(self.nodes, self.gpu_types, self.quotas, self.priority_classes)
        self.class_by_value: dict[int, str] | None = (
            class_names_by_value(jobs, self.priority_classes) if priority_classes is not None else None
        )
        self.total_gpus = sum(node.gpus for node in self.nodes)
        self.node_size_by_type = node_sizes(self.nodes)
        #: The largest node's GPUs: a typeless job of this many takes whole nodes, and the
        #: metrics' "small" jobs are those below it.
        self.node_size = max(self.node_size_by_type.values())
        # holder of every GPU: node name -> index -> job id
        self.holder: dict[str, dict[int, str]] = {node.name: {} for node in self.nodes}
        self.free: dict[str, int] = {node.name: node.gpus for node in self.nodes}
        self.jobs: dict[str, _Job] = {}
        self.pending: dict[str, _Job] = {}
        self.active: dict[str, _Job] = {}  # running or terminating
        self.pending_whole_node = 0
        self.events: list[tuple[float, int, int, str, int]] = []
        self._seq = 0
        self.allocated = TimeIntegral(horizon_s)
        self.stranded = TimeIntegral(horizon_s)
        self.teams = sorted({team_of(job) for job in jobs})
        self.team_usage: dict[str, float] = {team: 0.0 for team in self.teams}
        self.team_held: dict[str, int] = {team: 0 for team in self.teams}
        self.team_allocated: dict[str, TimeIntegral] = {team: TimeIntegral(horizon_s) for team in self.teams}
        self.usage_as_of = 0.0
        self.cycle_seconds: list[float] = []
        self.counts = {"preemptions": 0, "kills": 0, "resizes": 0, "binds": 0}
        self.requeued_held: set[str] = set()  # jobs a requeue held stopped (TraceHold.requeues)
        self.requeued_asked: set[str] = set()  # jobs a requeue not held stopped (TraceJob.requeued_at)
        self.has_requeues = any(j.requeued_at for j in jobs)
        self.never_runnable: list[str] = []  # in the order the engine found them
        # per stretch of waiting that got an ETA and ended in a start: start - first ETA
        self.eta_errors_s: list[float] = []
        self.eta_shares: list[float] = []  # per such stretch: the wait it had / the wait it was told
        self.eta_missing = 0  # stretches explained but never given an ETA, then started
        self.maintenance = self._check_maintenance(maintenance)
        self.windows_of: dict[str, list[MaintenanceWindow]] = {}
        for window in self.maintenance:
            if window.end_at < horizon_s:
                self._push(window.end_at, _Kind.REOPEN, "", 0)
            if window.announced_at is not None and 0 < window.announced_at < horizon_s:
                self._push(window.announced_at, _Kind.ANNOUNCE, "", 0)
            for name in window.nodes:
                self.windows_of.setdefault(name, []).append(window)
        # jobs that held GPUs on a node inside one of its windows (started before it was
        # announced), and the GPU-seconds they held there
        self.overrun_jobs: set[str] = set()
        self.overrun_gpu_s = 0.0
        for job in jobs:
            if job.job_id in self.jobs:
                raise ValueError(f"job id {job.job_id!r} appears twice in the trace")
            self.jobs[job.job_id] = _Job(trace=job, spec=self._spec(job))
            if job.submit_s < horizon_s:
                self._push(job.submit_s, _Kind.ARRIVAL, job.job_id, 0)
            for at_s in job.requeued_at:
                if job.submit_s < at_s < horizon_s:
                    self._push(at_s, _Kind.GATE, job.job_id, 0)
        self._gates(jobs)

    def _gates(self, jobs: Sequence[TraceJob]) -> None:
        """What keeps jobs out of the queue: their holds and dependencies. A trace with neither
        (every CSV trace) costs nothing more per instant."""
        singletons = [j for j in jobs if j.singleton and j.user]
        #: jobs with a hold or a dependency, in trace order: the only ones each snapshot gates
        self.gated: tuple[_Job, ...] = tuple(self.jobs[j.job_id] for j in jobs
                                             if j.holds or j.depends_on or (j.singleton and j.user))
        self.has_holds = any(j.holds for j in jobs)
        self.has_dependencies = any(j.depends_on for j in jobs) or bool(singletons)
        for job in self.gated:
            job.gated = True
        #: each singleton's group (every job of the trace of its user and name, itself included,
        #: one tuple shared by the group), and every job's place in the trace, which says who
        #: waits ahead of whom
        self.place: dict[str, int] = {}
        self.singleton_group: dict[str, tuple[_Job, ...]] = {}
        if singletons:
            keys = {(j.user, j.name) for j in singletons}
            by_key: dict[tuple[str, str], list[_Job]] = {}
            for index, trace_job in enumerate(jobs):
                self.place[trace_job.job_id] = index
                if (trace_job.user, trace_job.name) in keys:
                    by_key.setdefault((trace_job.user, trace_job.name), []).append(self.jobs[trace_job.job_id])
            groups = {key: tuple(members) for key, members in by_key.items()}
            for j in singletons:
                self.singleton_group[j.job_id] = groups[(j.user, j.name)]
        self.dependency_never_met: list[str] = []  # cancelled for it, in the order found
        self.pending_whole_node_out_of_line = 0
        #: jobs of the trace others depend on: their start (``after``) or their end out of a
        #: plan (never runnable) may put a dependent in line at once, worth another engine call
        self.upstreams: set[str] = set()
        self.after_upstreams: set[str] = set()
        for group in {id(group): group for group in self.singleton_group.values()}.values():
            self.upstreams.update(p.trace.job_id for p in group)
        for job in self.gated:
            trace = job.trace
            for hold in trace.holds:
                for at_s in (hold.start_s, hold.end_s):
                    if at_s is not None and trace.submit_s < at_s < self.horizon_s:
                        # a requeue held names its job: it stops that job if it runs then
                        named = hold.requeues and at_s == hold.start_s
                        self._push(at_s, _Kind.GATE, trace.job_id if named else "", 0)
            for dependency in trace.depends_on:
                if dependency.upstream in self.jobs:
                    self.upstreams.add(dependency.upstream)
                    if dependency.condition is DependencyCondition.AFTER:
                        self.after_upstreams.add(dependency.upstream)
                elif dependency.met_s is not None and trace.submit_s < dependency.met_s < self.horizon_s:
                    self._push(dependency.met_s, _Kind.GATE, "", 0)

    # ------------------------------------------------------------------------------ events

    def _push(self, at_s: float, kind: _Kind, job_id: str, version: int) -> None:
        self._seq += 1
        heapq.heappush(self.events, (at_s, int(kind), self._seq, job_id, version))

    def run(self) -> SimResult:
        while self.events and self.events[0][0] < self.horizon_s:
            now = self.events[0][0]
            changed = False
            while self.events and self.events[0][0] == now:
                _, kind, _, job_id, version = heapq.heappop(self.events)
                if kind == _Kind.REOPEN or kind == _Kind.ANNOUNCE or kind == _Kind.GATE:
                    if job_id:
                        self._requeue_asked(self.jobs[job_id], now)
                    changed = True
                    continue
                changed |= self._handle(now, _Kind(kind), self.jobs[job_id], version)
            if changed:
                for _ in range(MAX_CYCLES_PER_INSTANT):
                    if not self._cycle(now):
                        break
            self._record(now)
            if self.progress is not None:
                self.progress(now)
        return self._result()

    def _handle(self, now: float, kind: _Kind, job: _Job, version: int) -> bool:
        if kind is _Kind.ARRIVAL:
            self._enqueue(job, now)
            return True
        if version != job.version or job.state not in (_State.RUNNING, _State.TERMINATING):
            return False  # a completion, limit or grace end of a run that is already over
        if kind is _Kind.COMPLETE:
            self._release(job, now)
            job.state, job.end_s = _State.DONE, now
            return True
        if kind is _Kind.GRACE_END:
            self._stop_preempted(job, now)
            return True
        return True  # LIMIT: the engine decides the kill

    def _enqueue(self, job: _Job, now: float) -> None:
        job.state = _State.PENDING
        job.pending_since = now
        job.eta_told, job.explained = None, False
        self.pending[job.trace.job_id] = job
        if self._needs_whole_nodes(job.trace):
            self.pending_whole_node += 1

    def _dequeue(self, job: _Job, now: float) -> None:
        del self.pending[job.trace.job_id]
        job.wait_s += now - job.pending_since
        if self._needs_whole_nodes(job.trace):
            self.pending_whole_node -= 1
            if job.out_of_line:
                self.pending_whole_node_out_of_line -= 1
        job.out_of_line = job.held = False

    def _needs_whole_nodes(self, job: TraceJob) -> bool:
        # A gang of roles is laid out role by role (each role's members), never by the job's total.
        return (job.gpus_per_node is None and not job.roles
                and job.gpus >= self.node_size_by_type.get(job.gpu_type, self.node_size))

    def _check_whole_nodes(self, where: str, job: TraceJob, partial: Sequence[str]) -> None:
        """A job of at least one node's GPUs takes whole nodes; when its GPUs are not a multiple
        of the node size, the remainder goes on one more node (12 GPUs on 8-GPU nodes: 8 + 4),
        as the engine splits it (``gang.demand_for``)."""
        size = self.node_size_by_type.get(job.gpu_type, self.node_size)
        remainder = job.gpus % size
        if len(partial) > (1 if remainder else 0):
            shape = f"{job.gpus // size} whole node(s)" + (f" and {remainder} GPUs on one more" if remainder else "")
            raise SimulationError(
                f"{where}: needs whole nodes ({job.gpus} GPUs: {shape}), got {', '.join(partial)}"
            )

    def _spec(self, job: TraceJob, preempted_at: Sequence[float] = ()) -> JobSpec:
        """The engine's view of ``job`` preempted at ``preempted_at`` (ascending), the times
        its class's budget window counts: how many, and when the window will have moved past
        enough of them for the job to be under its budget again (the oldest counted one while
        it is exactly at its budget)."""
        name = self.class_by_value[job.priority] if self.class_by_value is not None else None
        count = len(preempted_at)
        frees_at = None
        if count:
            pc = name if name is not None else priority_class_name(job.priority)
            budget = self.budget_by_class.get(pc, 0)
            if 0 < budget <= count:
                frees_at = preempted_at[count - budget] + self.window_by_class.get(pc, 0)
        return job_spec(job, preemptions_in_window=count, priority_class=name,
                        preemption_budget_frees_at=frees_at)

    # ------------------------------------------------------------------------------ cycle

    def _cycle(self, now: float) -> bool:
        """One engine call; returns whether GPUs were freed at once (worth another call)."""
        snapshot = self._snapshot(now)
        started = self.clock() if self.clock is not None else 0.0
        plan = self.schedule(snapshot, self.config)
        if self.clock is not None:
            self.cycle_seconds.append(self.clock() - started)
        if plan.epoch != EPOCH:
            raise SimulationError(f"plan at t={now:.0f}s carries epoch {plan.epoch}, expected {EPOCH}")
        return self._apply(plan, now)

    def _snapshot(self, now: float) -> Snapshot:
        self._update_usage(now)
        running: list[RunningJob] = []
        for job in self.active.values():
            checkpoint = job.last_checkpoint(now)
            if job.view is None or job.view.last_checkpoint_at != checkpoint:
                job.view = RunningJob(
                    spec=job.spec,
                    placements=job.placements,
                    started_at=job.started_at,
                    borrowed=job.borrowed,
                    last_checkpoint_at=checkpoint,
                    generation=job.generation,
                    terminating=job.state is _State.TERMINATING,
                )
            running.append(job.view)
        for job in self.pending.values():
            if job.preempted_at:
                self._refresh_budget(job, now)
        if self.gated:
            self._gate(now)
        return Snapshot(
            now=now,
            nodes=self.nodes,
            gpu_types=self.gpu_types,
            priority_classes=self.priority_classes,
            quotas=self.quotas,
            pending=tuple(job.spec for job in self.pending.values()),
            running=tuple(running),
            team_usage=tuple(
                TeamUsage(team=team, gpu_seconds=self.team_usage[team], as_of=now) for team in self.teams
            ),
            epoch=EPOCH,
            maintenance=tuple(w for w in self.maintenance if w.end_at > now and _known(w, now)),
        )

    def _gate(self, now: float) -> None:
        """Tell the engine which waiting jobs are held and which wait on dependencies at ``now``
        (``JobSpec.held_by``, ``waits_on``: it keeps them out of the queue), as the control plane's
        snapshot does; cancel a waiting job whose dependencies can never be met, as the control
        plane does, down a chain (its own dependents may then be met or never met in turn)."""
        cancelled = True
        while cancelled:
            cancelled = False
            # per singleton group, what runs and the first job waiting (found once per pass)
            lines: dict[int, tuple[list[_Job], _Job | None]] = {}
            for job in [j for j in self.pending.values() if j.gated]:
                if job.state is not _State.PENDING:
                    continue  # cancelled earlier in this pass
                waits, never = self._waits(job.trace, now, lines)
                if never:
                    self._dequeue(job, now)
                    job.state, job.end_s = _State.CANCELLED, now
                    self.dependency_never_met.append(job.trace.job_id)
                    cancelled = True
                    continue
                hold = next((h for h in job.trace.holds if h.covers(now)), None)
                if hold is not None and not job.held:
                    # a hold starts a new stay in the queue for the ETA record, as it deletes the
                    # job's place in the control plane
                    job.eta_told, job.explained = None, False
                out = hold is not None or bool(waits)
                if out != job.out_of_line and self._needs_whole_nodes(job.trace):
                    self.pending_whole_node_out_of_line += 1 if out else -1
                job.out_of_line, job.held = out, hold is not None
                by = hold.by if hold is not None else ""
                if job.spec.held_by != by or job.spec.waits_on != waits:
                    job.spec = dataclasses.replace(job.spec, held_by=by, waits_on=waits)

    def _waits(self, job: TraceJob, now: float,
               lines: dict[int, tuple[list[_Job], _Job | None]]) -> tuple[tuple[DependencyWait, ...], bool]:
        """The dependencies of ``job`` not met at ``now``, and whether they can never be met
        (all-of: one of them never; any-of: every one never, unless one is met); then, for a
        singleton, the jobs of its name that run and the first one waiting, if ahead of it (said
        as ``afterany``, as the control plane's snapshot says them; any one of them keeps it out
        of line, so the rest waiting behind that one need not be named). ``lines``: each
        singleton group's running jobs and first waiting job, filled in as groups come up."""
        waits: list[DependencyWait] = []
        nevers = 0
        any_met = False
        for dependency in job.depends_on:
            met, never, state = self._dependency_state(dependency, now)
            if met:
                any_met = True
                continue
            if never:
                if not job.depends_on_any:
                    return (), True
                nevers += 1
                continue
            waits.append(DependencyWait(upstream=dependency.upstream, condition=dependency.condition,
                                        upstream_state=state))
        if job.depends_on_any and any_met:
            waits = []
        elif job.depends_on and nevers == len(job.depends_on):
            return (), True
        group = self.singleton_group.get(job.job_id)
        if group:
            line = lines.get(id(group))
            if line is None:
                waiting = [p for p in group if p.state is _State.PENDING]
                first = min(waiting, key=lambda p: (p.trace.submit_s, self.place[p.trace.job_id])) if waiting else None
                line = lines[id(group)] = ([p for p in group if p.state in (_State.RUNNING, _State.TERMINATING)], first)
            running, first = line
            blockers = [*running, *([first] if first is not None and first.trace is not job else [])]
            waits += [DependencyWait(upstream=p.trace.job_id, condition=DependencyCondition.AFTER_ANY,
                                     upstream_state=p.state.value) for p in blockers]
        return tuple(waits), False

    def _dependency_state(self, dependency: TraceDependency, now: float) -> tuple[bool, bool, str]:
        """Whether ``dependency`` is met at ``now``, whether it can never be, and where its
        upstream job stands (for the engine's sentence)."""
        upstream = self.jobs.get(dependency.upstream)
        if upstream is None:
            return dependency.met_s is not None and dependency.met_s <= now, False, ""
        ended = upstream.state in (_State.DONE, _State.KILLED, _State.NEVER_RUNNABLE, _State.CANCELLED)
        succeeded = upstream.state is _State.DONE and upstream.trace.succeeds
        condition = dependency.condition
        if condition is DependencyCondition.AFTER:
            met, never = upstream.ever_started or ended, False
        elif condition is DependencyCondition.AFTER_OK:
            met, never = succeeded, ended and not succeeded
        elif condition is DependencyCondition.AFTER_NOT_OK:
            met, never = ended and not succeeded, succeeded
        else:
            met, never = ended, False
        state = "waiting" if upstream.state is _State.FUTURE else upstream.state.value
        return met, never, state

    def _check_maintenance(self, windows: Sequence[MaintenanceWindow]) -> tuple[MaintenanceWindow, ...]:
        """The windows, each on known nodes and ending after it starts (``ValueError`` if not)."""
        seen: set[str] = set()
        for window in windows:
            if window.id in seen:
                raise ValueError(f"maintenance window {window.id!r} is given twice")
            seen.add(window.id)
            unknown = [name for name in window.nodes if name not in self.node_by_name]
            if unknown:
                raise ValueError(f"maintenance window {window.id!r}: no node named {unknown[0]!r} in the fleet "
                                 f"(its nodes are {self.nodes[0].name} to {self.nodes[-1].name})")
            if not window.end_at > window.start_at:
                raise ValueError(f"maintenance window {window.id!r} ends at {window.end_at:g} s, "
                                 f"not after its start at {window.start_at:g} s")
            if window.announced_at is not None and not window.announced_at <= window.start_at:
                raise ValueError(f"maintenance window {window.id!r} is announced at {window.announced_at:g} s, "
                                 f"after its start at {window.start_at:g} s")
        return tuple(sorted(windows, key=lambda w: (w.start_at, w.end_at, w.id)))

    def _check_clear_of_maintenance(self, job: _Job, nodes: Iterable[str], start: float, now: float) -> None:
        """A run from ``start`` to its runtime limit on ``nodes`` overlaps no window of theirs
        known at ``now`` (the engine cannot keep clear of a window not yet announced)."""
        limit = job.trace.runtime_limit_s
        end = math.inf if limit is None else start + limit
        for window in self.maintenance:
            if window.start_at < end and window.end_at > start and _known(window, now):
                hit = sorted(set(nodes) & set(window.nodes))
                if hit:
                    raise SimulationError(
                        f"t={now:.0f}s: job {job.trace.job_id} placed on {hit[0]}, whose maintenance window "
                        f"{window.id} ({window.start_at:.0f}-{window.end_at:.0f} s) its run to t={end:.0f} overlaps")

    def _under_maintenance(self, now: float) -> set[str]:
        return {name for w in self.maintenance if w.start_at <= now < w.end_at for name in w.nodes}

    def _refresh_budget(self, job: _Job, now: float) -> None:
        window = self.window_by_class.get(job.spec.priority_class, 0)
        count = sum(1 for at_s in job.preempted_at if now - at_s < window)
        if count != job.spec.preemptions_in_window:
            # the times are in order: those still in the window are the last ``count``
            job.spec = self._spec(job.trace, job.preempted_at[len(job.preempted_at) - count:])

    def _update_usage(self, now: float) -> None:
        """Decay every team's usage to ``now`` and add what it held since the last update.

        Holding ``g`` GPUs over ``dt`` adds ``g · h/ln 2 · (1 − 2^(−dt/h))`` GPU-seconds of
        decayed usage (the integral of ``g · 2^(−age/h)``), ``h`` the configured half-life."""
        elapsed = now - self.usage_as_of
        if elapsed <= 0:
            return
        half_life = self.config.fair_share_half_life_s
        decay = 0.5 ** (elapsed / half_life) if half_life > 0 else 0.0
        gained = (half_life / math.log(2)) * (1.0 - decay) if half_life > 0 else 0.0
        for team in self.teams:
            self.team_usage[team] = self.team_usage[team] * decay + self.team_held[team] * gained
        self.usage_as_of = now

    # ------------------------------------------------------------------------------ apply

    def _apply(self, plan: Plan, now: float) -> bool:
        freed = False
        for kill in plan.kills:
            job = self._active(kill.job_id, "kill", kill.generation, now)
            self._release(job, now)
            job.state, job.end_s = _State.KILLED, now
            self.counts["kills"] += 1
            freed = True
        for preemption in plan.preemptions:
            job = self._active(preemption.job_id, "preempt", preemption.generation, now)
            if job.state is _State.TERMINATING:
                raise SimulationError(f"t={now:.0f}s: job {job.trace.job_id} preempted twice")
            if preemption.grace_period_s < 0:
                raise SimulationError(
                    f"t={now:.0f}s: preemption of {job.trace.job_id} has a negative grace period"
                )
            self.counts["preemptions"] += 1
            job.preempted_at.append(now)
            if preemption.grace_period_s == 0:
                self._stop_preempted(job, now)
                freed = True
            else:
                job.state = _State.TERMINATING
                job.view = None
                self._push(now + preemption.grace_period_s, _Kind.GRACE_END, job.trace.job_id, job.version)
        shrinks_first = sorted(
            plan.resizes, key=lambda r: sum(len(p.gpu_indices) for p in r.placements) - self._held(r.job_id)
        )
        for resize in shrinks_first:
            job = self._active(resize.job_id, "resize", resize.generation, now)
            if job.state is _State.TERMINATING:
                raise SimulationError(f"t={now:.0f}s: job {job.trace.job_id} resized while terminating")
            before = job.gpus_held
            self._resize(job, resize.placements, now)
            self.counts["resizes"] += 1
            freed |= job.gpus_held < before
        bound = {bind.job_id for bind in plan.binds} if self.singleton_group else set()
        for bind in plan.binds:
            group = self.singleton_group.get(bind.job_id)
            if group and any(p.trace.job_id in bound and p.trace.job_id != bind.job_id for p in group):
                # a singleton bound beside a job of its name: the control plane drops its bind as
                # stale (dependencies.waiting_among), and the next cycle finds it waiting on that job
                continue
            waiting = self.pending.get(bind.job_id)
            if waiting is None:
                state = self.jobs[bind.job_id].state.value if bind.job_id in self.jobs else "unknown"
                raise SimulationError(f"t={now:.0f}s: bind of job {bind.job_id}, which is {state}, not pending")
            if waiting.out_of_line:
                why = "held" if waiting.held else "waiting for a dependency"
                raise SimulationError(f"t={now:.0f}s: bind of job {bind.job_id}, which is {why}, out of the queue")
            self._bind(waiting, bind.placements, bind.borrowed, now)
            self.counts["binds"] += 1
            # a job that waits for this one to start may start at once
            freed |= bind.job_id in self.after_upstreams
        for explanation in plan.pending:
            waiting = self.pending.get(explanation.job_id)
            if waiting is None:
                continue
            if waiting.out_of_line:
                # held or waiting for a dependency: told no ETA, it is not in line for one (a
                # hold starts a new stay for the ETA record once released, see _gate)
                continue
            if not explanation.resolvable:
                # Nothing in a replay changes a request, the classes, the fleet or the quota
                # table: a job the engine finds can never run (CanNeverRun), or refuses (an
                # invalid request, an unknown class), never will. It leaves the queue; before,
                # a refused one waited to the horizon, its wait counted in every wait figure.
                self._dequeue(waiting, now)
                waiting.state = _State.NEVER_RUNNABLE
                self.never_runnable.append(waiting.trace.job_id)
                # it ended without starting: a job waiting on it may be met (or never) at once
                freed |= waiting.trace.job_id in self.upstreams
                continue
            waiting.explained = True
            if waiting.eta_told is None and explanation.eta is not None:
                waiting.eta_told, waiting.eta_told_at = explanation.eta, now
        return freed

    def _held(self, job_id: str) -> int:
        job = self.jobs.get(job_id)
        return job.gpus_held if job is not None else 0

    def _active(self, job_id: str, action: str, generation: int, now: float) -> _Job:
        job = self.active.get(job_id)
        if job is None:
            state = self.jobs[job_id].state.value if job_id in self.jobs else "unknown"
            raise SimulationError(f"t={now:.0f}s: {action} of job {job_id}, which is {state}, not running")
        if generation != job.generation:
            raise SimulationError(
                f"t={now:.0f}s: {action} of job {job_id} carries generation {generation}, "
                f"the allocation is at {job.generation}"
            )
        return job

    def _check_placements(self, job: _Job, placements: Sequence[GpuPlacement], now: float) -> int:
        """Validate placements for ``job`` (GPUs it holds count as free); return the GPU count."""
        job_id = job.trace.job_id
        where = f"t={now:.0f}s: job {job_id}"
        if not placements:
            raise SimulationError(f"{where}: placed on no GPUs")
        seen_nodes: set[str] = set()
        partial: list[str] = []
        total = 0
        rigid = job.trace.min_gpus is None and job.trace.max_gpus is None
        for placement in placements:
            node = self.node_by_name.get(placement.node)
            if node is None:
                raise SimulationError(f"{where}: placed on unknown node {placement.node!r}")
            if placement.node in seen_nodes:
                raise SimulationError(f"{where}: node {placement.node} appears twice in one placement")
            seen_nodes.add(placement.node)
            indices = placement.gpu_indices
            if not indices or len(set(indices)) != len(indices):
                raise SimulationError(f"{where}: GPU indices {indices} on {node.name} are empty or repeated")
            holders = self.holder[node.name]
            for index in indices:
                if not 0 <= index < node.gpus:
                    raise SimulationError(f"{where}: GPU {index} does not exist on {node.name} ({node.gpus} GPUs)")
                owner = holders.get(index)
                if owner is not None and owner != job_id:
                    raise SimulationError(f"{where}: GPU {node.name}/{index} is held by {owner}")
            accepted = job.trace.accepted_gpu_types
            if accepted and node.gpu_type not in accepted:
                raise SimulationError(f"{where}: needs {' or '.join(accepted)}, placed on {node.gpu_type} node {node.name}")
            if len(indices) != node.gpus:
                partial.append(f"{len(indices)} of {node.gpus} on {node.name}")
            total += len(indices)
        if rigid and self._needs_whole_nodes(job.trace):
            self._check_whole_nodes(where, job.trace, partial)
        if rigid and job.trace.gpus_per_node is None and not job.trace.roles \
                and not self._needs_whole_nodes(job.trace) and len(placements) != 1:
            raise SimulationError(f"{where}: a {job.trace.gpus}-GPU job must sit on one node, got {len(placements)}")
        low = job.trace.min_gpus if job.trace.min_gpus is not None else job.trace.gpus
        high = job.trace.max_gpus if job.trace.max_gpus is not None else job.trace.gpus
        if not low <= total <= high:
            raise SimulationError(f"{where}: got {total} GPUs, needs between {low} and {high} (a gang is all or nothing)")
        return total

    def _take(self, job: _Job, placements: tuple[GpuPlacement, ...], now: float) -> None:
        for placement in placements:
            holders = self.holder[placement.node]
            for index in placement.gpu_indices:
                holders[index] = job.trace.job_id
            self.free[placement.node] -= len(placement.gpu_indices)
        job.placements = placements
        job.placed_at = now

    def _give_back(self, job: _Job, now: float) -> None:
        inside = self._overrun(job, now)
        if inside > 0:
            self.overrun_gpu_s += inside
            self.overrun_jobs.add(job.trace.job_id)
        for placement in job.placements:
            holders = self.holder[placement.node]
            for index in placement.gpu_indices:
                del holders[index]
            self.free[placement.node] += len(placement.gpu_indices)
        job.placements = ()

    def _set_held(self, job: _Job, gpus: int, now: float) -> None:
        self._update_usage(now)
        team = team_of(job.trace)
        self.team_held[team] += gpus - job.gpus_held
        self.team_allocated[team].set(now, self.team_held[team])
        job.gpus_held = gpus

    def _bind(self, job: _Job, placements: tuple[GpuPlacement, ...], borrowed: bool, now: float) -> None:
        gpus = self._check_placements(job, placements, now)
        if self.maintenance:
            self._check_clear_of_maintenance(job, (p.node for p in placements), now, now)
        if job.eta_told is not None:
            self.eta_errors_s.append(now - job.eta_told)
            if job.eta_told > job.eta_told_at:
                self.eta_shares.append((now - job.eta_told_at) / (job.eta_told - job.eta_told_at))
        elif job.explained:
            self.eta_missing += 1
        self._dequeue(job, now)
        self._take(job, placements, now)
        self._set_held(job, gpus, now)
        job.ever_started = True
        job.state = _State.RUNNING
        job.borrowed = borrowed
        job.generation += 1
        job.started_at = now
        job.version += 1
        job.marks = [(now, job.saved_gpu_s, gpus)]
        job.view = None
        self.active[job.trace.job_id] = job
        self._push(job.completion_time(), _Kind.COMPLETE, job.trace.job_id, job.version)
        if job.trace.runtime_limit_s is not None:
            self._push(now + job.trace.runtime_limit_s, _Kind.LIMIT, job.trace.job_id, job.version)

    def _resize(self, job: _Job, placements: tuple[GpuPlacement, ...], now: float) -> None:
        gpus = self._check_placements(job, placements, now)
        if self.maintenance:
            # growth onto a node must keep clear of its windows for the rest of the run
            held = {p.node: len(p.gpu_indices) for p in job.placements}
            grown = [p.node for p in placements if len(p.gpu_indices) > held.get(p.node, 0)]
            self._check_clear_of_maintenance(job, grown, job.started_at, now)
        done = job.progress_at(now)
        self._give_back(job, now)
        self._take(job, placements, now)
        self._set_held(job, gpus, now)
        job.generation += 1
        job.view = None
        job.marks.append((now, done, gpus))
        job.version += 1
        self._push(job.completion_time(), _Kind.COMPLETE, job.trace.job_id, job.version)
        if job.trace.runtime_limit_s is not None:
            self._push(job.started_at + job.trace.runtime_limit_s, _Kind.LIMIT, job.trace.job_id, job.version)

    def _overrun(self, job: _Job, until: float) -> float:
        """The GPU-seconds ``job`` held inside windows on its nodes from when its placements
        were set to ``until``: a run started before a window on its nodes was announced."""
        held = 0.0
        for placement in job.placements:
            for window in self.windows_of.get(placement.node, ()):
                inside = min(until, window.end_at) - max(job.placed_at, window.start_at)
                if inside > 0:
                    held += inside * len(placement.gpu_indices)
        return held

    def _release(self, job: _Job, now: float) -> None:
        self._give_back(job, now)
        self._set_held(job, 0, now)
        del self.active[job.trace.job_id]
        job.version += 1
        job.view = None

    def _requeue_asked(self, job: _Job, now: float) -> None:
        """A requeue someone asked for (``TraceHold.requeues``, ``TraceJob.requeued_at``): a job
        running then is stopped as the control plane stops it, its processes given its class's
        grace period, then back in the queue from its last checkpoint, where a requeue held keeps
        it out of line until released. A job waiting then is only held (or left as it is, for a
        requeue not held); one already being stopped, or ended, is left as it is."""
        if job.state is not _State.RUNNING:
            return
        held = any(hold.requeues and hold.start_s == now for hold in job.trace.holds)
        (self.requeued_held if held else self.requeued_asked).add(job.trace.job_id)
        name = self.class_by_value[job.trace.priority] if self.class_by_value is not None else None
        grace = self.grace_by_class.get(name if name is not None else priority_class_name(job.trace.priority), 0)
        if grace <= 0:
            self._stop_preempted(job, now)
            return
        job.state = _State.TERMINATING
        job.view = None
        self._push(now + grace, _Kind.GRACE_END, job.trace.job_id, job.version)

    def _stop_preempted(self, job: _Job, now: float) -> None:
        checkpoint = job.last_checkpoint(now)
        if checkpoint is not None:
            job.saved_gpu_s = job.progress_at(checkpoint)
        self._release(job, now)
        job.spec = self._spec(job.trace, job.preempted_at)
        self._enqueue(job, now)

    # ------------------------------------------------------------------------------ metrics

    def _record(self, now: float) -> None:
        total = self.total_gpus
        free_total = sum(self.free.values())
        self.allocated.set(now, total - free_total)
        stranded = 0
        # a whole-node job held or waiting for a dependency is out of line: it strands nothing
        if self.pending_whole_node > self.pending_whole_node_out_of_line:
            # idle GPUs of a node in maintenance are out of service, not stranded
            closed = self._under_maintenance(now) if self.maintenance else ()
            for node in self.nodes:
                free = self.free[node.name]
                if free < node.gpus and node.name not in closed:
                    stranded += free
        self.stranded.set(now, stranded)

    def _eta_figures(self) -> dict[str, float | int | None]:
        """How the first ETA each waiting job was told compares with its start. A job still
        waiting at the horizon past the ETA it was told counts as late by at least the time
        since; one whose ETA lies beyond the horizon is not judged."""
        overdue = [job for job in self.pending.values() if job.eta_told is not None and job.eta_told < self.horizon_s]
        waited_unexplained = sum(1 for job in self.pending.values() if job.explained and job.eta_told is None)
        return eta_figures(
            [*self.eta_errors_s, *(self.horizon_s - job.eta_told for job in overdue if job.eta_told is not None)],
            self.eta_missing + waited_unexplained,
            shares=[*self.eta_shares, *((self.horizon_s - job.eta_told_at) / (job.eta_told - job.eta_told_at)
                                        for job in overdue if job.eta_told is not None and job.eta_told > job.eta_told_at)])

    def _result(self) -> SimResult:
        horizon = self.horizon_s
        outcomes: list[JobOutcome] = []
        team_outcomes: dict[str, list[JobOutcome]] = {team: [] for team in self.teams}
        for job in self.jobs.values():
            if job.trace.submit_s >= horizon or job.state in (_State.NEVER_RUNNABLE, _State.CANCELLED):
                continue
            wait = job.wait_s + (horizon - job.pending_since if job.state is _State.PENDING else 0.0)
            outcome = JobOutcome(
                job_id=job.trace.job_id,
                gpus=job.trace.gpus,
                submit_s=job.trace.submit_s,
                duration_s=job.trace.duration_s,
                wait_s=wait,
                end_s=job.end_s,
            )
            outcomes.append(outcome)
            team_outcomes[team_of(job.trace)].append(outcome)
        metrics = summarize(
            outcomes,
            horizon_s=horizon,
            total_gpus=self.total_gpus,
            gpus_per_node=self.node_size,
            allocated_gpu_seconds=self.allocated.area(),
            stranded_gpu_seconds=self.stranded.area(),
        )
        in_horizon = [job.trace for job in self.jobs.values() if job.trace.submit_s < horizon]
        capacity = horizon * self.total_gpus
        offered = sum(job.gpu_seconds for job in in_horizon)
        no_wait = sum(job.gpus * (min(job.submit_s + job.duration_s, horizon) - job.submit_s) for job in in_horizon)
        cycles = sorted(self.cycle_seconds)
        extras: dict[str, float | int | None] = {
            "offered_load": offered / capacity,
            "no_wait_allocated": no_wait / capacity,
            "allocated_upper_bound": allocated_upper_bound(
                ((job.submit_s, job.gpus, job.duration_s) for job in in_horizon),
                horizon_s=horizon,
                total_gpus=self.total_gpus,
            ),
            "jobs_pending_at_horizon": sum(1 for job in self.pending.values() if job.trace.submit_s < horizon),
            "jobs_running_at_horizon": len(self.active),
            "jobs_killed": sum(1 for job in self.jobs.values() if job.state is _State.KILLED),
            "jobs_never_runnable": len(self.never_runnable),
            "preemptions": self.counts["preemptions"],
            "resizes": self.counts["resizes"],
            "engine_cycles": len(cycles) if self.clock is not None else None,
            "engine_ms_p50": cycles[len(cycles) // 2] * 1000 if cycles else None,
            "engine_ms_max": cycles[-1] * 1000 if cycles else None,
            "engine_seconds_total": sum(cycles) if self.clock is not None else None,
            "horizon_min": horizon / 60.0,
            **self._eta_figures(),
        }
        if self.has_holds:
            extras["jobs_held_at_horizon"] = sum(1 for job in self.pending.values() if job.held)
            extras["jobs_requeued_held"] = len(self.requeued_held)
        if self.has_requeues:
            extras["jobs_requeued"] = len(self.requeued_asked)
        if self.has_dependencies:
            extras["jobs_dependency_never_met"] = len(self.dependency_never_met)
            extras["jobs_waiting_for_dependency_at_horizon"] = sum(
                1 for job in self.pending.values() if job.out_of_line and job.spec.waits_on)
        if self.maintenance:
            extras["maintenance_gpu_hours"] = sum(
                self.node_by_name[name].gpus * max(0.0, min(w.end_at, horizon) - max(w.start_at, 0.0))
                for w in self.maintenance for name in w.nodes) / 3600.0
            still = {job_id: self._overrun(job, horizon) for job_id, job in self.active.items()}
            extras["maintenance_overrun_jobs"] = len(self.overrun_jobs | {j for j, held in still.items() if held > 0})
            extras["maintenance_overrun_gpu_hours"] = (self.overrun_gpu_s + sum(still.values())) / 3600.0
        teams = {
            team: team_figures(
                team_outcomes[team], horizon_s=horizon, allocated_gpu_seconds=self.team_allocated[team].area()
            )
            for team in self.teams
        }
        return SimResult(metrics=metrics, extras=extras, teams=teams, never_runnable=tuple(self.never_runnable))


def simulate(
    jobs: Sequence[TraceJob],
    shape: FleetShape,
    *,
    config: SchedulerConfig | None = None,
    schedule: Scheduler | None = None,
    horizon_s: float = 7 * 86400.0,
    clock: Clock | None = None,
    progress: Callable[[float], None] | None = None,
    nodes: Sequence[NodeInfo] | None = None,
    gpu_types: Sequence[GpuTypeInfo] | None = None,
    quotas: Sequence[QuotaInfo] | None = None,
    priority_classes: Sequence[PriorityClassInfo] | None = None,
    maintenance: Sequence[MaintenanceWindow] = (),
) -> SimResult:
    """Replay ``jobs`` through ``schedule`` (default: the engine's :func:`scheduler_core.schedule`).

    ``nodes``, ``gpu_types``, ``quotas``, ``priority_classes``: the real fleet's parts in place
    of the ones derived from ``shape`` and the trace (see :class:`Simulator`); ``maintenance``:
    windows taking nodes out of service (the engine keeps runs off them)."""
    if schedule is None:
        from scheduler_core import schedule as engine_schedule

        schedule = engine_schedule
    return Simulator(
        jobs,
        shape,
        schedule,
        config if config is not None else SchedulerConfig(),
        horizon_s=horizon_s,
        clock=clock,
        progress=progress,
        nodes=nodes,
        gpu_types=gpu_types,
        quotas=quotas,
        priority_classes=priority_classes,
        maintenance=maintenance,
    ).run()
