"""The simulated fleet and how trace jobs become engine job specs.

The simulator owns only what a real control plane would hand the engine: the nodes (with a
spine > leaf > node topology), the GPU types, the priority classes and the team quotas. It
derives the last two from the trace, because a trace names priorities and teams but does not
say what they are worth:

- priority classes: one per distinct integer ``priority`` of the trace, named ``p<value>``,
  with the engine's default grace period, minimum runtime and preemption budget;
- teams: the trace's ``team`` column, or ``default`` when it is absent or empty. A trace with
  one team gets no quotas at all: the engine then governs no GPU type, as in the seed
  program, which has none. Several teams share each GPU type's GPUs equally as nominal quota
  (the remainder going to the first teams by name) in a single cohort ``fleet`` with
  unlimited borrowing and lending, so no GPU idles for want of quota while owners can still
  reclaim what they lent.

A caller that knows the real fleet (the control plane's what-if page) hands the simulator its
own parts instead: the exact node list, the GPU types, the priority classes and a quota table
with cohorts and borrowing limits (:func:`check_fleet` refuses parts that contradict each
other). Each part left out is derived as above, so the command line's replays are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scheduler_core.admission import invalid_request
from scheduler_core.capability import never_runs
from scheduler_core.sim.trace import TraceJob
from scheduler_core.types import (
    GpuTypeInfo,
    JobSpec,
    NodeInfo,
    PriorityClassInfo,
    QuotaInfo,
)

DEFAULT_TEAM = "default"
DEFAULT_GPU_TYPE = "gpu"
COHORT = "fleet"


def priority_class_name(priority: int) -> str:
    return f"p{priority}"


@dataclass(frozen=True, slots=True)
class FleetShape:
    """How many nodes, how big, and how they hang off the network.

    ``gpu_types`` are dealt to nodes in contiguous equal blocks (node order), so each type
    occupies whole leaves when the counts allow. Every node has ``cpus_per_gpu`` cores and
    ``memory_gb_per_gpu`` GB per GPU, so only GPUs ever bind in a trace replay."""

    nodes: int = 64
    gpus_per_node: int = 8
    nodes_per_leaf: int = 16
    leaves_per_spine: int = 4
    gpu_types: tuple[str, ...] = (DEFAULT_GPU_TYPE,)
    gpu_memory_gb: int = 80
    cpus_per_gpu: int = 16
    memory_gb_per_gpu: int = 128

    def __post_init__(self) -> None:
        for name in ("nodes", "gpus_per_node", "nodes_per_leaf", "leaves_per_spine"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"fleet: {name} must be >= 1, got {value}")
        if not self.gpu_types or any(not name for name in self.gpu_types):
            raise ValueError(f"fleet: gpu_types must be non-empty names, got {self.gpu_types!r}")
        if len(self.gpu_types) > self.nodes:
            raise ValueError(f"fleet: {len(self.gpu_types)} GPU types need at least as many nodes, got {self.nodes}")

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def build_nodes(shape: FleetShape) -> tuple[NodeInfo, ...]:
    """Nodes ``n0000 ..`` under leaves ``leaf000 ..`` under spines ``spine00 ..``."""
    nodes: list[NodeInfo] = []
    types = len(shape.gpu_types)
    for index in range(shape.nodes):
        leaf = index // shape.nodes_per_leaf
        spine = leaf // shape.leaves_per_spine
        gpu_type = shape.gpu_types[index * types // shape.nodes]
        nodes.append(
            NodeInfo(
                name=f"n{index:04d}",
                pool=gpu_type,
                gpu_type=gpu_type,
                gpus=shape.gpus_per_node,
                cpus=shape.cpus_per_gpu * shape.gpus_per_node,
                memory_gb=shape.memory_gb_per_gpu * shape.gpus_per_node,
                leaf=f"leaf{leaf:03d}",
                spine=f"spine{spine:02d}",
            )
        )
    return tuple(nodes)


def build_gpu_types(shape: FleetShape) -> tuple[GpuTypeInfo, ...]:
    return tuple(GpuTypeInfo(name=name, memory_gb=shape.gpu_memory_gb) for name in sorted(set(shape.gpu_types)))


def team_of(job: TraceJob) -> str:
    return job.team or DEFAULT_TEAM


def build_priority_classes(jobs: Sequence[TraceJob]) -> tuple[PriorityClassInfo, ...]:
    values = sorted({job.priority for job in jobs} | {0})
    return tuple(PriorityClassInfo(name=priority_class_name(value), value=value) for value in values)


def build_quotas(jobs: Sequence[TraceJob], nodes: Sequence[NodeInfo]) -> tuple[QuotaInfo, ...]:
    """Nominal quotas per team and GPU type, split as the module docstring says."""
    teams = sorted({team_of(job) for job in jobs} | ({DEFAULT_TEAM} if not jobs else set()))
    gpus_by_type: dict[str, int] = {}
    for node in nodes:
        gpus_by_type[node.gpu_type] = gpus_by_type.get(node.gpu_type, 0) + node.gpus
    quotas: list[QuotaInfo] = []
    for gpu_type in sorted(gpus_by_type):
        total = gpus_by_type[gpu_type]
        if len(teams) == 1:
            continue
        share, remainder = divmod(total, len(teams))
        for rank, team in enumerate(teams):
            quotas.append(
                QuotaInfo(
                    team=team,
                    gpu_type=gpu_type,
                    nominal_gpus=share + (1 if rank < remainder else 0),
                    cohort=COHORT,
                )
            )
    return tuple(quotas)


def node_sizes(nodes: Sequence[NodeInfo]) -> dict[str, int]:
    """The GPUs of the largest node of each GPU type: a job of at least that many GPUs of the
    type takes whole nodes (the engine's rule); with one shape, every type's node size."""
    sizes: dict[str, int] = {}
    for node in nodes:
        sizes[node.gpu_type] = max(sizes.get(node.gpu_type, 0), node.gpus)
    return sizes


def check_fleet(
    nodes: Sequence[NodeInfo],
    gpu_types: Sequence[GpuTypeInfo],
    quotas: Sequence[QuotaInfo],
    priority_classes: Sequence[PriorityClassInfo],
) -> None:
    """Refuse a fleet the replay cannot stand on, naming the part at fault (ValueError)."""
    if not nodes:
        raise ValueError("fleet: nodes must not be empty")
    names: set[str] = set()
    types = {gpu_type.name for gpu_type in gpu_types}
    if len(types) != len(gpu_types):
        raise ValueError("fleet: a GPU type is listed twice")
    for node in nodes:
        if node.name in names:
            raise ValueError(f"fleet: node {node.name!r} is listed twice")
        names.add(node.name)
        if node.gpus < 1:
            raise ValueError(f"fleet: node {node.name!r} must have >= 1 GPU, got {node.gpus}")
        if node.gpu_type not in types:
            raise ValueError(f"fleet: node {node.name!r} has GPU type {node.gpu_type!r}, which is not among the GPU types")
    seen: set[tuple[str, str]] = set()
    for quota in quotas:
        key = (quota.team, quota.gpu_type)
        if key in seen:
            raise ValueError(f"quotas: team {quota.team!r} has two quotas on {quota.gpu_type!r}")
        seen.add(key)
        if quota.gpu_type not in types:
            raise ValueError(f"quotas: team {quota.team!r} has a quota on {quota.gpu_type!r}, which is not among the GPU types")
        for field_name in ("nominal_gpus", "borrowing_limit", "lending_limit"):
            value = getattr(quota, field_name)
            if value is not None and value < 0:
                raise ValueError(f"quotas: team {quota.team!r} on {quota.gpu_type!r}: {field_name} must be >= 0, got {value}")
    if len({pc.name for pc in priority_classes}) != len(priority_classes):
        raise ValueError("priority classes: a class name is listed twice")


def class_names_by_value(
    jobs: Sequence[TraceJob], priority_classes: Sequence[PriorityClassInfo]
) -> dict[int, str]:
    """Each trace priority's class: the class of that value (the first by name when several
    share it). A priority no class has is refused (ValueError) rather than guessed."""
    by_value: dict[int, str] = {}
    for pc in sorted(priority_classes, key=lambda pc: pc.name):
        by_value.setdefault(pc.value, pc.name)
    for job in jobs:
        if job.priority not in by_value:
            values = ", ".join(str(v) for v in sorted(by_value)) or "none"
            raise ValueError(f"job {job.job_id!r}: no priority class has value {job.priority} (values: {values})")
    return by_value


def fleet_check(shape: FleetShape) -> Callable[[TraceJob], tuple[str, str] | None]:
    """A check for :func:`~scheduler_core.sim.trace.parse_trace`: the trace column to blame and
    why, for a job the engine would refuse on this fleet, as an invalid request or one that can
    never run (a GPU type the fleet lacks, more GPUs than it has). Replayed, such a job is
    left out of every figure but ``jobs_never_runnable`` (:class:`~scheduler_core.sim.loop.SimResult`),
    which then describe a different trace; the command line refuses the trace instead."""
    nodes = build_nodes(shape)
    gpu_types = {gpu_type.name: gpu_type for gpu_type in build_gpu_types(shape)}

    def check(job: TraceJob) -> tuple[str, str] | None:
        spec = job_spec(job)
        invalid = invalid_request(spec)
        if invalid is not None:
            return "gpus", f"the engine refuses this request: {invalid}"
        refusal = never_runs(spec, nodes, gpu_types)
        if refusal is None:
            return None
        column = _COLUMN_OF_FIELD.get(refusal.field, "gpus")
        return column, (f"can never run on this fleet ({shape.nodes} nodes x {shape.gpus_per_node} GPUs, "
                        f"GPU types {', '.join(sorted(gpu_types))}): {refusal.message}")

    return check


#: The trace column behind each request field :func:`never_runs` may blame.
_COLUMN_OF_FIELD = {"gpu_types": "gpu_type", "gpus": "gpus", "min_gpus": "min_gpus", "gpus_per_node": "gpus_per_node"}


def job_spec(job: TraceJob, *, preemptions_in_window: int = 0, priority_class: str | None = None,
             preemption_budget_frees_at: float | None = None) -> JobSpec:
    """What the engine may know of a trace job: everything but its true duration.

    ``priority_class``: the class's name when the caller gave the classes (default ``p<value>``).
    ``preemptions_in_window`` and ``preemption_budget_frees_at``: its preemptions inside its
    class's budget window, and when it will be under its budget again (see ``JobSpec``).
    Without ``gpus_per_node`` the engine puts jobs of at least one node's GPUs on whole nodes
    and smaller jobs on one node."""
    return JobSpec(
        id=job.job_id,
        team=team_of(job),
        priority_class=priority_class if priority_class is not None else priority_class_name(job.priority),
        gpus=job.gpus,
        submitted_at=job.submit_s,
        gpu_types=job.accepted_gpu_types,
        workload=job.workload,
        min_gpu_memory_gb=job.min_gpu_memory_gb,
        cpus_per_gpu=job.cpus_per_gpu,
        memory_gb_per_gpu=job.memory_gb_per_gpu,
        topology=job.topology,
        roles=job.roles,
        members_on_distinct_nodes=job.members_on_distinct_nodes,
        array_id=job.array_id,
        array_task_limit=job.array_task_limit,
        min_gpus=job.min_gpus,
        max_gpus=job.max_gpus,
        runtime_limit_s=job.runtime_limit_s,
        checkpoint_interval_s=job.checkpoint_interval_s,
        gpus_per_node=job.gpus_per_node,
        preemptions_in_window=preemptions_in_window,
        preemption_budget_frees_at=preemption_budget_frees_at,
        user=job.user,
    )
