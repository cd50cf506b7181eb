"""Public types of the scheduling engine.

Everything that crosses the engine boundary is a frozen, slotted dataclass or a str-valued enum:
a :class:`Snapshot` of the fleet and the queue goes in, a :class:`Plan` comes out. Time is a
float of seconds on whatever clock the caller uses (the engine only ever compares it with
``Snapshot.now``). GPUs on a node are numbered ``0 .. gpus - 1``.

Mappings in outputs are plain ``dict`` objects built in sorted key order, so two plans built
from the same snapshot compare equal and serialise identically.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Protocol


class WorkloadClass(str, enum.Enum):
    """What a job is for; selects the placement policy (pack or spread)."""

    TRAINING = "training"
    SERVING = "serving"
    INTERACTIVE = "interactive"
    BATCH = "batch"


class TopologyConstraint(str, enum.Enum):
    """How close together a job's GPUs must be. ``ANY`` still prefers locality by score."""

    ANY = "any"
    SAME_NODE = "same_node"
    SAME_LEAF = "same_leaf"
    SAME_SPINE = "same_spine"


class NodeState(str, enum.Enum):
    """Health of a node. Only ``READY`` nodes receive new work."""

    READY = "ready"
    SUSPECT = "suspect"
    CORDONED = "cordoned"
    DRAINING = "draining"
    DOWN = "down"
    QUARANTINED = "quarantined"


class ReasonCode(str, enum.Enum):
    """Why a job is still waiting. The value is the PascalCase reason shown to people."""

    QUOTA_EXCEEDED = "QuotaExceeded"
    NO_CAPABLE_NODE = "NoCapableNode"
    INSUFFICIENT_CONTIGUOUS_GPUS = "InsufficientContiguousGpus"
    INSUFFICIENT_GPUS = "InsufficientGpus"
    INSUFFICIENT_CPU = "InsufficientCpu"
    INSUFFICIENT_MEMORY = "InsufficientMemory"
    TOPOLOGY_UNSATISFIED = "TopologyUnsatisfied"
    WAITING_FOR_RESERVATION = "WaitingForReservation"
    WAITING_FOR_PREEMPTION = "WaitingForPreemption"
    BEHIND_HIGHER_PRIORITY = "BehindHigherPriority"
    PREEMPTION_BUDGET_EXHAUSTED = "PreemptionBudgetExhausted"
    MINIMUM_RUNTIME_PROTECTED = "MinimumRuntimeProtected"
    CAN_NEVER_RUN = "CanNeverRun"
    NODE_NOT_READY = "NodeNotReady"
    UNKNOWN_PRIORITY_CLASS = "UnknownPriorityClass"
    INVALID_REQUEST = "InvalidRequest"
    HELD = "Held"
    WAITING_FOR_DEPENDENCY = "WaitingForDependency"
    MAINTENANCE_WINDOW = "MaintenanceWindow"
    ARRAY_TASK_LIMIT = "JobArrayTaskLimit"


class DependencyCondition(str, enum.Enum):
    """When a job may start relative to another job (Slurm's ``--dependency`` types)."""

    AFTER = "after"
    AFTER_OK = "afterok"
    AFTER_NOT_OK = "afternotok"
    AFTER_ANY = "afterany"


class PreemptionReason(str, enum.Enum):
    """Why a running job is asked to stop."""

    RECLAIM_BORROWED = "reclaim_borrowed"
    HIGHER_PRIORITY = "higher_priority"
    RUNTIME_LIMIT = "runtime_limit"


@dataclass(frozen=True, slots=True)
class GpuTypeInfo:
    """A GPU model: its device memory and relative throughput (1.0 = reference device)."""

    name: str
    memory_gb: int
    throughput: float = 1.0


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One GPU node. ``leaf`` and ``spine`` name its switches; ``failure_domain`` groups nodes
    that fail together (rack, power feed). An empty failure domain means the node is its own."""

    name: str
    pool: str
    gpu_type: str
    gpus: int
    cpus: int
    memory_gb: int
    leaf: str
    spine: str
    state: NodeState = NodeState.READY
    capacity_tier: str = "on_demand"
    failure_domain: str = ""


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    """A priority class. Higher ``value`` runs first and may preempt lower values.

    ``preemptible=False`` protects a job from preemption by higher priority, not from an
    owner reclaiming GPUs the job borrowed: borrowed capacity comes with no guarantee (seed
    004). ``min_runtime_s``: a job of this class is not preempted before it has run this long.
    ``preemption_budget``: at most this many preemptions of one job per ``budget_window_s``.
    """

    name: str
    value: int
    preemptible: bool = True
    may_preempt_lower: bool = True
    grace_period_s: int = 30
    min_runtime_s: int = 0
    preemption_budget: int = 3
    budget_window_s: int = 86400


@dataclass(frozen=True, slots=True)
class QuotaInfo:
    """A team's guaranteed GPUs of one type, and how it shares them within its cohort.

    ``borrowing_limit``: how many GPUs beyond ``nominal_gpus`` the team may borrow from its
    cohort (``None``: no limit). ``lending_limit``: how many of its unused nominal GPUs others
    may borrow (``None``: all of them). A team without a cohort can neither lend nor borrow.
    """

    team: str
    gpu_type: str
    nominal_gpus: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    cohort: str | None = None


@dataclass(frozen=True, slots=True)
class GangRole:
    """One role of a heterogeneous gang, e.g. 1 parameter server + 8 workers.

    Every member of the role gets ``gpus_per_member`` GPUs on one node."""

    name: str
    count: int
    gpus_per_member: int
    gpu_types: tuple[str, ...] = ()
    min_gpu_memory_gb: int = 0
    cpus_per_gpu: int = 0
    memory_gb_per_gpu: int = 0


@dataclass(frozen=True, slots=True)
class DependencyWait:
    """A dependency not met yet: the job may start only once job ``upstream`` meets
    ``condition``. ``upstream_state`` is where that job stands now ("pending", "running"), for
    the sentence; the caller decides what is met, the engine only keeps the job out of line."""

    upstream: str
    condition: DependencyCondition
    upstream_state: str = ""


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a job asks for.

    ``gpus`` is the rigid size (for elastic jobs, the preferred size). ``gpus_per_node``: the
    GPUs each member of the gang takes on one node; ``None`` lets the engine decide (jobs of
    at least one node's worth of GPUs then need whole nodes, smaller jobs go on one node).
    ``min_gpus``/``max_gpus`` make the job elastic in replicas of ``gpus_per_node`` (or of
    ``min_gpus`` when ``gpus_per_node`` is ``None``). ``roles`` make it a heterogeneous gang;
    ``gpus`` is then the sum over roles. ``preemptions_in_window`` is how many times this job
    was preempted inside its priority class's budget window. ``preemption_budget_frees_at``:
    when the window will have moved past enough of those preemptions for the job to be under
    its class's ``preemption_budget`` again, so that it may be preempted again; read only
    while it is at or over its budget, to say when that protection lifts (it decides
    nothing: ``preemptions_in_window`` does). ``None``: the snapshot does not know.
    ``held_by`` (who holds it) and ``waits_on`` (dependencies not met yet) keep a job out of
    the queue: it is explained and holds nothing; a held job is ranked after every queued
    job, one waiting for a dependency has no queue position.
    ``hold_reason``: why it is held, in its holder's words (one line; "" when none was
    given), said in the explanation; it decides nothing. ``array_id``: the job array it is a
    task of ("" for none); ``array_task_limit``: how many tasks of that array may run at once
    (Slurm's ``--array=0-99%10``; ``None``: no limit), the same on every task of the array.
    ``members_on_distinct_nodes``: no two members of the gang share a node (Slurm's
    ``--ntasks-per-node=1``, a Kubernetes pod anti-affinity), for members that need a node's
    NIC bandwidth or host memory to themselves; other jobs may still use the rest of a node.
    Without it members are packed, so two may share a node with room for both.
    """

    id: str
    team: str
    priority_class: str
    gpus: int
    submitted_at: float
    project: str = ""
    workload: WorkloadClass = WorkloadClass.TRAINING
    gpus_per_node: int | None = None
    gpu_types: tuple[str, ...] = ()
    min_gpu_memory_gb: int = 0
    cpus_per_gpu: int = 0
    memory_gb_per_gpu: int = 0
    topology: TopologyConstraint = TopologyConstraint.ANY
    min_gpus: int | None = None
    max_gpus: int | None = None
    resize_cost_s: float = 0.0
    runtime_limit_s: float | None = None
    checkpoint_interval_s: float | None = None
    roles: tuple[GangRole, ...] = ()
    preemptions_in_window: int = 0
    user: str = ""
    restart_cost_s: float = 0.0
    preemption_budget_frees_at: float | None = None
    held_by: str = ""
    waits_on: tuple[DependencyWait, ...] = ()
    hold_reason: str = ""
    array_id: str = ""
    array_task_limit: int | None = None
    members_on_distinct_nodes: bool = False


class Queued(Protocol):
    """What the queue order reads of a waiting job (the queue-order plugins' keys,
    ``eligibility.in_line``): a :class:`JobSpec` has it, and so has the narrower
    :class:`QueuedJob` a reader of the queue alone builds."""

    @property
    def id(self) -> str: ...
    @property
    def team(self) -> str: ...
    @property
    def priority_class(self) -> str: ...
    @property
    def submitted_at(self) -> float: ...
    @property
    def runtime_limit_s(self) -> float | None: ...
    @property
    def held_by(self) -> str: ...
    @property
    def waits_on(self) -> tuple[DependencyWait, ...]: ...


@dataclass(frozen=True, slots=True)
class QueuedJob:
    """A waiting job as the queue order reads it, and nothing more: the fields of its
    :class:`JobSpec` of the same names, for a reader that wants the order without a whole
    snapshot (:class:`QueueSnapshot`)."""

    id: str
    team: str
    priority_class: str
    submitted_at: float
    runtime_limit_s: float | None = None
    held_by: str = ""
    waits_on: tuple[DependencyWait, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuPlacement:
    """GPUs held on one node. ``role`` names the gang role for heterogeneous gangs."""

    node: str
    gpu_indices: tuple[int, ...]
    role: str = ""


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding GPUs. ``generation`` is the allocation's fencing generation; the engine
    echoes it in resizes and preemptions so a stale decision can be refused by storage.
    ``terminating``: already told to stop; its GPUs are not preemptible again and are counted
    free once its grace period has run out."""

    spec: JobSpec
    placements: tuple[GpuPlacement, ...]
    started_at: float
    borrowed: bool = False
    last_checkpoint_at: float | None = None
    generation: int = 1
    terminating: bool = False


@dataclass(frozen=True, slots=True)
class TeamUsage:
    """A team's decayed past usage, already decayed to ``as_of`` (seconds of GPU, CPU core
    and memory-GB). The engine decays it further from ``as_of`` to ``Snapshot.now`` with the
    configured half-life and adds what is running now."""

    team: str
    gpu_seconds: float = 0.0
    cpu_seconds: float = 0.0
    memory_gb_seconds: float = 0.0
    as_of: float = 0.0


@dataclass(frozen=True, slots=True)
class MaintenanceWindow:
    """Nodes taken out of service from ``start_at`` to ``end_at`` (Slurm's maintenance
    reservation). A job may start on one of these nodes only if its run, from its start to
    its runtime limit, overlaps no window of the node; a job without a runtime limit may not
    start there before the window has ended. Running jobs are not stopped for a window: the
    control plane tells operators which ones will still hold GPUs when it starts.

    ``announced_at``: when the window became known (an admin created it), at or before
    ``start_at``; ``None``: known throughout. The engine does not read it (a snapshot holds
    the windows known at its time); the simulator hands a window to the engine only from then,
    so a replay does not plan around a window before anyone knew of it."""

    id: str
    nodes: tuple[str, ...]
    start_at: float
    end_at: float
    reason: str = ""
    announced_at: float | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the engine may know in one cycle. ``epoch`` is the scheduler's lease epoch,
    echoed in the plan so storage can fence a plan from a deposed scheduler."""

    now: float
    nodes: tuple[NodeInfo, ...]
    gpu_types: tuple[GpuTypeInfo, ...]
    priority_classes: tuple[PriorityClassInfo, ...]
    quotas: tuple[QuotaInfo, ...]
    pending: tuple[JobSpec, ...]
    running: tuple[RunningJob, ...]
    team_usage: tuple[TeamUsage, ...] = ()
    epoch: int = 0
    maintenance: tuple[MaintenanceWindow, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """What the queue order of a :class:`Snapshot` depends on, and only it: its ``now``, its
    waiting jobs, its priority classes' values, and the parts of the teams' dominant shares
    summed already, the fleet's capacity (GPUs, CPUs, memory GB of its nodes) and what each
    team's running jobs hold of it (``held``), beside its ``team_usage``.
    ``scheduler_core.queue.queue_factors_of`` gives the same factors from it as
    ``queue_factors`` from the whole snapshot, without its nodes, running jobs or quotas."""

    now: float
    pending: tuple[QueuedJob, ...]
    priority_values: Mapping[str, int]
    capacity: tuple[float, float, float]
    held: Mapping[str, tuple[float, float, float]]
    team_usage: tuple[TeamUsage, ...] = ()


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Policy: which plugins run and their weights.

    Placement policies are plugin names: ``placement_by_workload`` maps a workload class to a
    score plugin (``"pack"``: best fit, fullest node first; ``"spread"``: emptiest node and
    fewest replicas per failure domain). ``locality_weights`` are the penalties of seed 001
    eq. 2 for two GPUs of one job at distance 0 (same node), 1 (same leaf), 2 (same spine,
    other leaf), 3 (other spine). ``fair_share_half_life_s`` decays past usage for DRF;
    ``aging_per_hour`` is how many priority-value points an hour of waiting adds, so nothing
    starves. ``max_placement_attempts`` caps full placement searches per cycle (every job is
    still explained); ``max_preemptions_per_cycle`` caps victims per cycle and
    ``max_preemption_searches`` the pending jobs that may look for victims.
    ``default_runtime_estimate_s`` is the remaining run time assumed for a running elastic job
    without a runtime limit when weighing growth against its resize cost. ``resize_restarts``:
    a resize stops the job and binds it again (the control plane), so growth must also repay
    the work since its last checkpoint and its restart cost; the simulator resizes in place.
    ``pack_candidates`` is how many nodes of the fullest bucket that fits the ``pack`` score
    compares by its tie-breaks (busy longest by runtime limits, then the fullest leaf).
    ``widest_gang_first``: among tied jobs (``QueueOrderPlugin.tie_key``), the rigid
    whole-node gangs that the free whole nodes could hold now are tried widest first
    (:func:`scheduler_core.queue.widest_fitting_gangs_first`).
    """

    queue_order: str = "priority_fair_share"
    filters: tuple[str, ...] = ("node_ready", "gpu_capability", "resource_fit")
    placement_by_workload: Mapping[WorkloadClass, str] = field(
        default_factory=lambda: {
            WorkloadClass.TRAINING: "pack",
            WorkloadClass.BATCH: "pack",
            WorkloadClass.INTERACTIVE: "pack",
            WorkloadClass.SERVING: "spread",
        }
    )
    victim_chooser: str = "least_lost_work"
    locality_weights: tuple[float, float, float, float] = (0.0, 1.0, 10.0, 30.0)
    fair_share_half_life_s: float = 7 * 86400.0
    aging_per_hour: float = 1.0
    backfill: bool = True
    preemption: bool = True
    elastic_growth: bool = True
    max_preemptions_per_cycle: int = 16
    max_preemption_searches: int = 16
    max_placement_attempts: int = 256
    default_runtime_estimate_s: float = 4 * 3600.0
    resize_restarts: bool = False
    pack_candidates: int = 32
    max_reservation_moves: int = 8
    widest_gang_first: bool = True


# ----------------------------------------------------------------------------------- the plan


@dataclass(frozen=True, slots=True)
class Bind:
    """Start ``job_id`` on these GPUs. ``borrowed``: some of its GPUs come from the cohort."""

    job_id: str
    placements: tuple[GpuPlacement, ...]
    borrowed: bool = False


@dataclass(frozen=True, slots=True)
class Preemption:
    """Ask a running job to stop (whole gang), with a grace period to checkpoint."""

    job_id: str
    reason: PreemptionReason
    for_job: str | None
    grace_period_s: int
    lost_gpu_hours: float
    message: str
    generation: int = 1


@dataclass(frozen=True, slots=True)
class Resize:
    """Change an elastic job's GPUs to exactly ``placements`` (grow or shrink)."""

    job_id: str
    placements: tuple[GpuPlacement, ...]
    from_gpus: int = 0
    to_gpus: int = 0
    for_job: str | None = None
    message: str = ""
    generation: int = 1


class GrowthCode(str, enum.Enum):
    """Why a running elastic job below its maximum did not grow this cycle. The value is the
    PascalCase word shown to people."""

    GROWTH_OFF = "GrowthOff"
    QUEUE_FIRST = "QueueFirst"
    NOT_WORTH_IT = "NotWorthIt"
    QUOTA = "GrowthQuota"
    BEHIND_RESERVATION = "BehindReservation"
    NO_ROOM = "NoRoom"
    MAINTENANCE_WINDOW = "MaintenanceWindow"


@dataclass(frozen=True, slots=True)
class GrowthNote:
    """Why a running elastic job holds fewer GPUs than its maximum after this cycle (a job
    that grew has a :class:`Resize` instead): what a researcher asks of a job that does not
    scale up."""

    job_id: str
    code: GrowthCode
    message: str


@dataclass(frozen=True, slots=True)
class BorrowingChange:
    """A running job that now counts as borrowed where its snapshot said it did not: its team's
    quota or cohort changed under it (a lowered nominal, a quota deleted, a move out of the
    cohort). What the cycle acted on (a lender reclaims borrowed jobs first), so the caller
    stores it. ``borrowed`` is always true today: a mark is never cleared (see
    ``cycle._borrowing_beyond_a_lowered_quota``); the field keeps the record's meaning plain."""

    job_id: str
    borrowed: bool
    message: str


@dataclass(frozen=True, slots=True)
class Reservation:
    """The head job's promised start: these GPUs, no later than ``start_at``."""

    job_id: str
    start_at: float
    placements: tuple[GpuPlacement, ...]


@dataclass(frozen=True, slots=True)
class Kill:
    """Stop a job now because it reached its runtime limit."""

    job_id: str
    message: str
    generation: int = 1
    reason: PreemptionReason = PreemptionReason.RUNTIME_LIMIT


@dataclass(frozen=True, slots=True)
class PendingExplanation:
    """Why one job is still waiting, and what would start it.

    ``resolvable``: ``False`` when no amount of waiting helps (the job can never run on this
    fleet as it is). ``queue_position``: 1-based rank in the cycle's order among the jobs still
    waiting, jobs that can never run ranked after every job that can, and held jobs (not in
    line until released) after those; ``None`` for a job waiting for a dependency, held or
    not: it cannot start until another job starts or ends, so it has no place in the queue
    and counts in no other job's. ``eta``: earliest
    start the engine can compute from runtime limits, or ``None``."""

    job_id: str
    code: ReasonCode
    reason: str
    message: str
    resolvable: bool
    queue_position: int | None
    eta: float | None
    would_start_if: str


_new = object.__new__
_set_node, _set_gpu_indices, _set_role = (vars(GpuPlacement)[name].__set__ for name in (
    "node", "gpu_indices", "role"))


def gpu_placement(node: str, gpu_indices: tuple[int, ...], role: str = "") -> GpuPlacement:
    """``GpuPlacement(...)``, equal and with the same ``repr``, built without the frozen
    ``__init__`` (see :func:`pending_explanation`): every bind's plan builds several."""
    made: GpuPlacement = _new(GpuPlacement)
    _set_node(made, node)
    _set_gpu_indices(made, gpu_indices)
    _set_role(made, role)
    return made


class _PendingExplanationBuilt:
    """A :class:`PendingExplanation` being built: the same slots in the same order, but not
    frozen, so they are stored as plain attribute writes (see :func:`pending_explanation`)."""

    __slots__ = ("job_id", "code", "reason", "message", "resolvable", "queue_position", "eta",
                 "would_start_if")
    job_id: str
    code: ReasonCode
    reason: str
    message: str
    resolvable: bool
    queue_position: int | None
    eta: float | None
    would_start_if: str


# the layouts must match for the class swap in pending_explanation (Python checks it too)
assert _PendingExplanationBuilt.__slots__ == tuple(f.name for f in fields(PendingExplanation))


def pending_explanation(job_id: str, code: ReasonCode, reason: str, message: str,
                        resolvable: bool, queue_position: int | None, eta: float | None,
                        would_start_if: str) -> PendingExplanation:
    """``PendingExplanation(...)``, equal and with the same ``repr``, built about three times
    as fast: a frozen dataclass's ``__init__`` goes through ``object.__setattr__`` per field;
    this fills the unfrozen twin with the same slots and then makes it a
    ``PendingExplanation`` (a class swap Python allows between identical layouts). The engine
    builds one per waiting job, thousands a cycle: 0.5 µs each with a descriptor call per
    slot, about 0.2 µs so."""
    made: _PendingExplanationBuilt = _new(_PendingExplanationBuilt)
    made.job_id = job_id
    made.code = code
    made.reason = reason
    made.message = message
    made.resolvable = resolvable
    made.queue_position = queue_position
    made.eta = eta
    made.would_start_if = would_start_if
    made.__class__ = PendingExplanation  # type: ignore[assignment]
    return made  # type: ignore[return-value]  # (it is one now; typing.cast is a call per job)


@dataclass(frozen=True, slots=True)
class FleetFigures:
    """What the dashboards show for this cycle, counted after the plan's binds.

    ``total_gpus = allocated_gpus + free_gpus + reserved_gpus + unavailable_gpus``: reserved
    GPUs are idle but promised to a job with a reservation or a nomination; unavailable GPUs
    sit idle on nodes that are not ready or are inside a maintenance window. ``stranded_gpus``: idle GPUs (free or reserved) on partially used ready nodes, counted only while a job that
    needs at least one whole node waits (zero otherwise). ``largest_free_block_by_pool``: most
    idle GPUs (free or reserved) on one ready node, per pool. ``dominant_share_by_team``: DRF dominant share of
    what each team holds now. ``mean_slowdown``: mean of (wait + run so far) / run so far over
    running jobs, run time floored at 60 s."""

    total_gpus: int
    allocated_gpus: int
    free_gpus: int
    stranded_gpus: int
    largest_free_block_by_pool: Mapping[str, int]
    dominant_share_by_team: Mapping[str, float]
    pending_by_reason: Mapping[str, int]
    unavailable_gpus: int = 0
    reserved_gpus: int = 0
    borrowed_gpus: int = 0
    mean_slowdown: float = 0.0


@dataclass(frozen=True, slots=True)
class Plan:
    """The engine's decision for one cycle. ``phase_durations`` (seconds per phase) is filled
    only when the caller passes a clock; it is excluded from equality so plans stay
    comparable."""

    binds: tuple[Bind, ...]
    preemptions: tuple[Preemption, ...]
    resizes: tuple[Resize, ...]
    reservations: tuple[Reservation, ...]
    pending: tuple[PendingExplanation, ...]
    kills: tuple[Kill, ...]
    fleet: FleetFigures
    epoch: int = 0
    phase_durations: Mapping[str, float] = field(default_factory=dict, compare=False)
    growth_notes: tuple[GrowthNote, ...] = ()
    """One per running elastic job below its maximum that did not grow (and is not stopping)."""
    borrowing: tuple[BorrowingChange, ...] = ()
    """One per running job the cycle marked borrowed where the snapshot did not."""
