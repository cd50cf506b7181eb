"""Queue depth and fragmentation, read from what is stored: the jobs' last explanations
(pending_code, written by each cycle) and the live allocations' GPUs. The stranded GPUs are
counted by the engine's own rule (scheduler_core/stranded.py, which the cycle's fleet figures
count by too): this module only reads the nodes and the waiting jobs into it and presents what
it finds.

Counts only: nothing here names a job, so every signed-in user may read them (a member sees
other teams' work only as these anonymous numbers).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, Exists, Min, OuterRef, Q, Sum
from django.utils import timezone

from controlplane.choices import JobState, NodeState
from controlplane.models import AllocationGpu, FleetSample, Job, JobDependency, Node, SchedulerLease
from controlplane.services import dependencies, maintenance
from controlplane.services.snapshot import engine_roles
from scheduler_core.capability import NodeShape
from scheduler_core.stranded import (
    LiveFleet,
    NodeKind,
    NodeUse,
    WaitingJob,
    WaitingShape,
    members_of,
    stranded,
)
from scheduler_core.types import GpuTypeInfo, ReasonCode, TopologyConstraint


@dataclass
class QueueFigures:
    pending_jobs: int = 0
    pending_gpus: int = 0
    running_jobs: int = 0
    running_gpus: int = 0
    oldest_pending_s: float | None = None
    pending_by_reason: dict[str, int] = field(default_factory=dict)
    pending_by_priority_class: dict[str, int] = field(default_factory=dict)
    pending_by_team: dict[str, int] = field(default_factory=dict)
    unschedulable_jobs: int = 0


#: The states a job counts as waiting and as running in (the overview's tiles link to the Jobs
#: page under them: frontend/views/overview.tile_urls).
WAITING_STATES = (JobState.PENDING,)
RUNNING_STATES = (JobState.RUNNING, JobState.PREEMPTING)


def queue_figures(now: datetime | None = None) -> QueueFigures:
    """Three queries (two grouped, one count), whatever the queue's length."""
    now = now or timezone.now()
    figures = QueueFigures()
    by_reason: Counter[str] = Counter()
    by_class: Counter[str] = Counter()
    by_team: Counter[str] = Counter()
    oldest: datetime | None = None
    rows = (
        Job.objects.filter(state__in=WAITING_STATES)
        .values("pending_code", "priority_class__name", "team__name")
        .annotate(n=Count("id"), g=Sum("gpus"), first=Min("submitted_at"))
        .order_by()
    )
    for row in rows:
        figures.pending_jobs += row["n"]
        figures.pending_gpus += row["g"] or 0
        by_reason[row["pending_code"] or "Submitted"] += row["n"]
        by_class[row["priority_class__name"]] += row["n"]
        by_team[row["team__name"]] += row["n"]
        if oldest is None or row["first"] < oldest:
            oldest = row["first"]
    for row in (
        Job.objects.filter(state__in=[*RUNNING_STATES, JobState.UNSCHEDULABLE])
        .values("state").annotate(n=Count("id")).order_by()
    ):
        if row["state"] == JobState.UNSCHEDULABLE:
            figures.unschedulable_jobs += row["n"]
        else:
            figures.running_jobs += row["n"]
    # The GPUs running jobs hold, not the GPUs they asked for: an elastic job runs anywhere
    # between its minimum and maximum, and these must agree with the fleet's figures.
    figures.running_gpus = AllocationGpu.held().filter(
        allocation__job__state__in=[JobState.RUNNING, JobState.PREEMPTING]
    ).count()
    figures.oldest_pending_s = (now - oldest).total_seconds() if oldest is not None else None
    figures.pending_by_reason = dict(sorted(by_reason.items()))
    figures.pending_by_priority_class = dict(sorted(by_class.items()))
    figures.pending_by_team = dict(sorted(by_team.items()))
    return figures


@dataclass
class PoolFragmentation:
    pool: str
    gpu_type: str
    nodes: int = 0
    total_gpus: int = 0
    allocated_gpus: int = 0
    free_gpus: int = 0
    unavailable_gpus: int = 0
    largest_free_block: int = 0
    whole_free_nodes: int = 0
    partially_used_nodes: int = 0
    stranded_gpus: int = 0
    waiting_whole_node_jobs: int = 0
    node_size: int = 0


@dataclass
class FragmentationFigures:
    total_gpus: int
    allocated_gpus: int
    free_gpus: int
    stranded_gpus: int
    pending_for_contiguous_gpus: int
    pools: list[PoolFragmentation]
    # The last cycle's count of idle GPUs held for a waiting job's reservation or nomination
    # (None before the first cycle): which of the free GPUs above are draining for a gang.
    reserved_gpus: int | None = None


@dataclass(frozen=True)
class NodeFigures:
    """One node as fragmentation reads it: its pool, GPU type (and each GPU's memory), GPUs, how
    many are held now, whether it takes work now (ready and in no maintenance window), its CPUs
    and memory, and its leaf switch and spine (which nodes a waiting job's members may run on,
    and whether its gang could ever run on a GPU type, as the cycle judges them). The overview's
    heat map and the nodes page read their nodes already and hand them to `fragmentation_of` as
    these."""

    pool: str
    gpu_type: str
    gpu_memory_gb: int
    gpus: int
    used: int
    takes_work: bool
    cpus: int
    memory_gb: int
    leaf_switch: str
    spine: str


def fragmentation_figures(now: datetime | None = None) -> FragmentationFigures:
    """Free GPUs per pool, how they are scattered, and how many are stranded
    (`fragmentation_of`), from the live GPUs per node (one grouped query) against each node's
    GPU count (retired nodes left out), and a ready node inside a maintenance window now taking
    no work, as the cycle's figures count it (scheduler_core/fleet.py)."""
    held = dict(
        AllocationGpu.objects.filter(live=True).values("node_id").annotate(n=Count("id")).values_list("node_id", "n")
    )
    now = now or timezone.now()
    in_maintenance = set(maintenance.active_at(now).values_list("nodes", flat=True))
    # A retired node is out of the fleet: none of its GPUs count (nor does its pool, when all of
    # that pool's nodes are retired).
    ordered = fragmentation_of(
        NodeFigures(node.pool, node.gpu_type.name, node.gpu_type.memory_gb, node.gpu_count,
                    min(held.get(node.pk, 0), node.gpu_count),
                    node.state == NodeState.READY and node.pk not in in_maintenance,
                    cpus=node.cpus, memory_gb=node.memory_gb, leaf_switch=node.leaf_switch, spine=node.spine)
        for node in Node.objects.exclude(state=NodeState.RETIRED).select_related("gpu_type").only(
            "id", "pool", "gpu_count", "state", "cpus", "memory_gb", "leaf_switch", "spine", "gpu_type__name",
            "gpu_type__memory_gb")
    )
    contiguous = Job.objects.filter(
        state=JobState.PENDING, pending_code=ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS.value
    ).count()
    reserved = FleetSample.objects.order_by("-at").values_list("reserved_gpus", flat=True).first()
    return FragmentationFigures(
        reserved_gpus=reserved,
        total_gpus=sum(p.total_gpus for p in ordered),
        allocated_gpus=sum(p.allocated_gpus for p in ordered),
        free_gpus=sum(p.free_gpus for p in ordered),
        stranded_gpus=sum(p.stranded_gpus for p in ordered),
        pending_for_contiguous_gpus=contiguous,
        pools=ordered,
    )


def fragmentation_of(nodes: Iterable[NodeFigures]) -> list[PoolFragmentation]:
    """Per pool, by name: its GPUs, those held, free GPUs on nodes that take work, the largest free
    block, whole free and partly used nodes, and how many GPUs are stranded. One query (two
    when a waiting job has dependencies or is a singleton) whatever the fleet's size, for the
    waiting jobs; the nodes are the caller's.

    Steps:
    1. Per pool: free GPUs on nodes that take work, the largest free block, whole free nodes. A
       node that takes no work (not ready, or ready inside a maintenance window now) has its
       idle GPUs unavailable, not free.
    2. Stranded GPUs, and per pool the waiting jobs that need whole nodes of a kind it holds:
       counted by the cycle's own rule (scheduler_core/stranded.py), from the nodes (free here
       is idle: no live allocation holds it, so GPUs the cycle holds for a waiting job's
       reservation count, as the cycle counts them) and the waiting jobs read by shape, each
       cut into its gang as the cycle cuts it, each member with the kinds of node it may run on
       (`stranded.members_of`: its members' GPUs, types, memory and CPUs, a role's its own, against the nodes'
       GPU type, GPUs, CPUs and memory, grouped with their leaf switch and spine as
       `capability.NodeShape`s). Until 7 Dec this
       module counted them by a rule of its own, which judged a job by its GPUs per node
       alone (not its gang's members, nor an elastic job's smallest size): a job of 6 GPUs
       beside nodes of 4 and of 8 stranded the 8-GPU nodes' idle GPUs here and nothing in the
       cycle's figures. And until 7 Dec it read a heterogeneous gang as one job of its total
       GPUs and a node as its GPU type, memory and GPUs alone: a job asking 96 CPUs stranded
       the idle GPUs of 64-CPU nodes no member of it fits on.
    """
    pools: dict[str, PoolFragmentation] = {}
    uses: list[NodeUse[NodeKind]] = []
    shapes: Counter[tuple[str, int, int, int, int, str, str]] = Counter()
    for node in nodes:
        pool = pools.setdefault(node.pool, PoolFragmentation(node.pool, node.gpu_type))
        used = min(node.used, node.gpus)
        free = node.gpus - used
        uses.append(NodeUse(node.pool, NodeKind(node.gpu_type, node.gpu_memory_gb, node.gpus, node.cpus,
                                                node.memory_gb), used, free, node.takes_work))
        shapes[(node.gpu_type, node.gpu_memory_gb, node.gpus, node.cpus, node.memory_gb, node.leaf_switch,
                node.spine)] += 1
        pool.nodes += 1
        pool.total_gpus += node.gpus
        pool.allocated_gpus += used
        pool.node_size = max(pool.node_size, node.gpus)
        if not node.takes_work:
            pool.unavailable_gpus += free
            continue
        pool.free_gpus += free
        pool.largest_free_block = max(pool.largest_free_block, free)
        if used == 0:
            pool.whole_free_nodes += 1
        elif free > 0:
            pool.partially_used_nodes += 1

    kinds = {use.kind for use in uses}
    fleet = LiveFleet(NodeShape(GpuTypeInfo(gpu_type, memory), gpus, cpus, memory_gb, leaf, spine, count)
                      for (gpu_type, memory, gpus, cpus, memory_gb, leaf, spine), count in shapes.items())
    types_of_pool: dict[str, set[str]] = defaultdict(set)
    for use in uses:
        types_of_pool[use.pool].add(use.kind.gpu_type)
    for name, pool in pools.items():
        # A pool of several GPU types names them all (the API's and qm sinfo's GPU type): it named
        # its first node's alone.
        pool.gpu_type = ", ".join(sorted(types_of_pool[name]))
    if not pools:
        return []
    figures = stranded(uses, {k: k.gpus for k in kinds}, _waiting_jobs(fleet))
    waiting = figures.waiting_by_pool or {}
    for pool in pools.values():
        pool.waiting_whole_node_jobs = waiting.get(pool.pool, 0)
        pool.stranded_gpus = figures.gpus_by_pool.get(pool.pool, 0)
    return [pools[name] for name in sorted(pools)]


def _waiting_jobs(fleet: LiveFleet) -> list[WaitingJob[NodeKind]]:
    """The waiting jobs in line that might need whole nodes, by shape, each as its gang's
    members with the kinds of node of ``fleet`` each may run on (`stranded.members_of`: its
    roles, GPUs, types, memory and CPUs, as the cycle reads them).

    Only jobs in line, as the engine counts them (scheduler_core/eligibility.py): a held job or
    one waiting for a dependency takes no place in the queue and strands nothing; nor does one
    the last cycle found can never run (`pending_resolvable`). A job smaller than the smallest
    node has no member that fills one. Jobs without dependencies are counted by shape (one
    grouped query, whatever the queue); those with some (few) are asked whether they still
    wait (`dependencies.waits`, one more query)."""
    big = (Job.objects.filter(state=JobState.PENDING, hold="", pending_resolvable=True, gpus__gte=fleet.smallest)
           .annotate(linked=Exists(JobDependency.objects.filter(job=OuterRef("pk")))))
    shape = ("gpus", "gpus_per_node", "gpu_types", "min_gpu_memory_gb", "cpus_per_gpu", "memory_gb_per_gpu",
             "topology", "min_gpus", "max_gpus", "roles", "members_on_distinct_nodes")
    rows: list[dict[str, Any]] = list(
        big.filter(linked=False, singleton=False).values(*shape).annotate(n=Count("id")).order_by())
    linked = list(big.filter(Q(linked=True) | Q(singleton=True)).values("id", *shape).order_by())
    if linked:
        blocked = dependencies.waits([row["id"] for row in linked])
        rows += [{**row, "n": 1} for row in linked if row["id"] not in blocked]
    return [
        WaitingJob(members_of(WaitingShape(
            gpus=row["gpus"], gpus_per_node=row["gpus_per_node"], gpu_types=tuple(row["gpu_types"] or ()),
            min_gpu_memory_gb=row["min_gpu_memory_gb"], cpus_per_gpu=row["cpus_per_gpu"],
            memory_gb_per_gpu=row["memory_gb_per_gpu"], topology=TopologyConstraint(row["topology"]),
            min_gpus=row["min_gpus"], max_gpus=row["max_gpus"], roles=engine_roles(row["roles"] or []),
            distinct_nodes=row["members_on_distinct_nodes"]), fleet), row["n"])
        for row in rows
    ]


# ----------------------------------------------------------------------------- the loop


def loop_stalled_after_s() -> float:
    """Silence after which the scheduling loop counts as stalled: 30 s (the alert threshold in
    docs/operations.md), or five cycle intervals when those are longer."""
    return max(30.0, 5.0 * float(settings.QM["CYCLE_INTERVAL_S"]))


def loop_stalled(age_s: float | None) -> bool | None:
    """Whether a loop whose last cycle is `age_s` old has stalled (None: no cycle yet)."""
    return None if age_s is None else age_s > loop_stalled_after_s()


@dataclass
class LoopFigures:
    last_cycle_at: datetime | None
    last_cycle_age_s: float | None
    stalled_after_s: float
    stalled: bool | None


def loop_figures(now: datetime | None = None) -> LoopFigures:
    """When the leader last committed a cycle, and whether the loop has stalled (one query)."""
    now = now or timezone.now()
    last = SchedulerLease.objects.filter(name="scheduler").values_list("last_cycle_at", flat=True).first()
    age = round((now - last).total_seconds(), 1) if last is not None else None
    return LoopFigures(last_cycle_at=last, last_cycle_age_s=age, stalled_after_s=loop_stalled_after_s(),
                       stalled=loop_stalled(age))
