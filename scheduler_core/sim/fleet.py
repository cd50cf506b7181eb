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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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


def job_spec(job: TraceJob, *, preemptions_in_window: int = 0) -> JobSpec:
    """What the engine may know of a trace job: everything but its true duration.

    ``gpus_per_node`` is left to the engine, which puts jobs of at least one node's GPUs on
    whole nodes and smaller jobs on one node."""
    return JobSpec(
        id=job.job_id,
        team=team_of(job),
        priority_class=priority_class_name(job.priority),
        gpus=job.gpus,
        submitted_at=job.submit_s,
        gpu_types=(job.gpu_type,) if job.gpu_type else (),
        min_gpus=job.min_gpus,
        max_gpus=job.max_gpus,
        runtime_limit_s=job.runtime_limit_s,
        checkpoint_interval_s=job.checkpoint_interval_s,
        preemptions_in_window=preemptions_in_window,
        user=job.user,
    )
