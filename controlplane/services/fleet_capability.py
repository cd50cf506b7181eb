"""Could this job ever run on this fleet? Asked at submit time, so an impossible shape gets a 400
naming the field instead of waiting forever as `CanNeverRun`.

A thin layer over the engine's own gang model (`scheduler_core.gang`): the job is cut into
members exactly as the scheduler will cut it, and each check below is a *necessary* condition
for placing that gang on the empty fleet. A job that passes may still never run (the engine
then reports it as `CanNeverRun`), but a job this module rejects can never be placed, so a
rejection is never wrong. Every node counts whatever its state: a cordoned or down node may
come back, and the fleet "can ever give" its GPUs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import connection

from controlplane.models import GpuType, Node
from scheduler_core.gang import Member, demand_for, minimum_gpus, node_size_for
from scheduler_core.types import GpuTypeInfo, JobSpec, TopologyConstraint


@dataclass(frozen=True)
class NodeShape:
    """Identical nodes, counted: the fleet as the capability check sees it."""

    gpu_type: GpuTypeInfo
    gpus: int
    cpus: int
    memory_gb: int
    leaf: str
    spine: str
    count: int


@dataclass(frozen=True)
class Infeasible:
    """Why the fleet can never run the job: the request field to blame and a sentence with numbers."""

    field: str
    message: str


_FLEET_SQL = """
    SELECT t.name, t.memory_gb, t.relative_throughput,
           n.gpu_count, n.cpus, n.memory_gb, n.leaf_switch, n.spine, count(n.id)
    FROM {gpu_type} t LEFT JOIN {node} n ON n.gpu_type_id = t.id
    GROUP BY t.id, n.gpu_count, n.cpus, n.memory_gb, n.leaf_switch, n.spine
"""


def fleet() -> tuple[list[NodeShape], dict[str, GpuTypeInfo]]:
    """The fleet grouped by identical node shape, and every known GPU type (with nodes or not),
    in one query: a few dozen rows even for thousands of nodes. Plain SQL: it runs on every
    submit, and compiling the equivalent ORM aggregate costs more than running it."""
    sql = _FLEET_SQL.format(gpu_type=GpuType._meta.db_table, node=Node._meta.db_table)
    shapes: list[NodeShape] = []
    types: dict[str, GpuTypeInfo] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    for name, memory, throughput, gpus, cpus, memory_gb, leaf, spine, count in rows:
        info = types.setdefault(name, GpuTypeInfo(name, memory, throughput))
        if count:
            shapes.append(NodeShape(info, gpus, cpus, memory_gb, leaf, spine, count))
    return shapes, types


def _fits(member: Member, shape: NodeShape) -> bool:
    return (
        member.accepts_type(shape.gpu_type)
        and shape.gpus >= member.gpus
        and shape.cpus >= member.cpus
        and shape.memory_gb >= member.memory_gb
    )


def _members_per_node(member: Member, shape: NodeShape) -> int:
    """How many copies of `member` one empty node of this shape holds."""
    if not _fits(member, shape):
        return 0
    limits = [shape.gpus // member.gpus]
    if member.cpus:
        limits.append(shape.cpus // member.cpus)
    if member.memory_gb:
        limits.append(shape.memory_gb // member.memory_gb)
    return min(limits)


def _gpus_capable(member: Member, shapes: Iterable[NodeShape]) -> int:
    return sum(s.gpus * s.count for s in shapes if member.accepts_type(s.gpu_type))


def _single_member_field(spec: JobSpec) -> str:
    if spec.gpus_per_node is not None and spec.topology is not TopologyConstraint.SAME_NODE:
        return "gpus_per_node"
    return "gpus"


def check(spec: JobSpec, shapes: Sequence[NodeShape], gpu_types: dict[str, GpuTypeInfo]) -> Infeasible | None:
    """The first reason the fleet can never run `spec`, or None.

    Steps:
    1. Some node must carry an acceptable GPU (type and device memory).
    2. Cut the job into gang members at its smallest size, as the engine does.
    3. The largest member must fit on one node: GPUs, then CPUs, then memory.
    4. The members of the largest size must all fit at once, and the whole gang's GPUs must
       not exceed the capable GPUs of the fleet.
    5. A same-leaf or same-spine job must fit within one switch's capable nodes.
    An empty fleet (no node registered yet) rejects nothing: the engine explains the wait.
    """
    if not shapes:
        return None
    # 1. capability by GPU type and device memory
    probe = Member("", 1, tuple(sorted(spec.gpu_types)), spec.min_gpu_memory_gb, 0, 0)
    capable = [s for s in shapes if probe.accepts_type(s.gpu_type)]
    if not capable:
        fleet = ", ".join(sorted({f"{s.gpu_type.name} ({s.gpu_type.memory_gb} GB)" for s in shapes}))
        if spec.gpu_types and not any(s.gpu_type.name in spec.gpu_types for s in shapes):
            return Infeasible("gpu_types", f"no node carries {' or '.join(spec.gpu_types)}; the fleet has {fleet}")
        return Infeasible(
            "min_gpu_memory_gb",
            f"asks GPUs with at least {spec.min_gpu_memory_gb} GB of memory"
            + (f" among {', '.join(spec.gpu_types)}" if spec.gpu_types else "")
            + f"; the fleet has {fleet}",
        )

    # 2. the gang at its smallest size, cut as the engine cuts it; a job larger than every
    # capable GPU together is refused before it is cut (its members could number millions).
    size = minimum_gpus(spec)
    fleet_capable = sum(s.gpus * s.count for s in capable)
    if size > fleet_capable:
        kinds = " or ".join(spec.gpu_types) if spec.gpu_types else "capable"
        return Infeasible(
            "min_gpus" if spec.min_gpus is not None and spec.min_gpus < spec.gpus else "gpus",
            f"asks {size} GPUs; the fleet can never give more than {fleet_capable} {kinds} GPUs",
        )
    sizes: dict[str, int] = {}
    for s in capable:
        sizes[s.gpu_type.name] = max(sizes.get(s.gpu_type.name, 0), s.gpus)
    demand = demand_for(spec, size, node_size_for(spec, sizes, gpu_types))
    largest = demand.members[0]

    # 3. the largest member on one node
    if not any(_fits(largest, s) for s in capable):
        biggest_gpus = max(s.gpus for s in capable)
        if largest.gpus > biggest_gpus:
            return Infeasible(
                _single_member_field(spec),
                f"asks {largest.gpus} GPUs on one node; the largest node has {biggest_gpus}",
            )
        roomy = [s for s in capable if s.gpus >= largest.gpus]
        most_cpus = max(s.cpus for s in roomy)
        if largest.cpus > most_cpus:
            return Infeasible(
                "cpus_per_gpu",
                f"asks {largest.cpus} CPUs on one node ({largest.gpus} GPUs × {spec.cpus_per_gpu}); "
                f"the largest node with {largest.gpus} GPUs has {most_cpus}",
            )
        most_memory = max(s.memory_gb for s in roomy if s.cpus >= largest.cpus)
        return Infeasible(
            "memory_gb_per_gpu",
            f"asks {largest.memory_gb} GB of memory on one node ({largest.gpus} GPUs × "
            f"{spec.memory_gb_per_gpu} GB); the largest node with {largest.gpus} GPUs has {most_memory} GB",
        )

    # 4. all at once on the whole fleet
    total_capable = _gpus_capable(largest, capable)
    if demand.gpus > total_capable:
        kinds = " or ".join(spec.gpu_types) if spec.gpu_types else "capable"
        return Infeasible(
            "min_gpus" if spec.min_gpus is not None and spec.min_gpus < spec.gpus else "gpus",
            f"asks {demand.gpus} GPUs; the fleet can never give more than {total_capable} {kinds} GPUs",
        )
    big = [m for m in demand.members if m == largest]
    room = sum(_members_per_node(largest, s) * s.count for s in capable)
    if len(big) > room:
        return Infeasible(
            _single_member_field(spec),
            f"asks {len(big)} nodes with {largest.gpus} free GPUs"
            + (f", {largest.cpus} CPUs" if largest.cpus else "")
            + (f" and {largest.memory_gb} GB" if largest.memory_gb else "")
            + f" each; the fleet has room for {room}",
        )

    # 5. within one switch: enough capable GPUs there, and room for the largest members
    for constraint, attr, word in (
        (TopologyConstraint.SAME_LEAF, "leaf", "leaf switch"),
        (TopologyConstraint.SAME_SPINE, "spine", "spine"),
    ):
        if spec.topology is not constraint:
            continue
        gpus_under: dict[str, int] = defaultdict(int)
        room_under: dict[str, int] = defaultdict(int)
        for s in capable:
            gpus_under[getattr(s, attr)] += s.gpus * s.count
            room_under[getattr(s, attr)] += _members_per_node(largest, s) * s.count
        if not any(gpus_under[k] >= demand.gpus and room_under[k] >= len(big) for k in gpus_under):
            best = max(gpus_under.values())
            return Infeasible(
                "topology",
                f"asks {demand.gpus} GPUs under one {word}; the largest {word} has {best} capable GPUs"
                + (f" in nodes of at least {largest.gpus}" if best >= demand.gpus else ""),
            )
    return None
