"""The fleet as a grid: one row per node, one cell per GPU slot, each cell its holder's team.

Read in two queries (nodes, with whether a maintenance window holds each now; live GPUs), whatever
the fleet size. Teams are shown to everyone
(the fleet's shape is a fleet metric); job ids only to those who may read the job.

`fleet_counts` is the grid's figures without its cells: each node's pool, state, GPU type, GPUs,
GPUs held and whether it takes work, from a count of the held GPUs per node (two queries, no GPU
or job row read into Python). The Nodes page, which shows a page of the grid's rows, draws its fleet-wide
figures (each pool's use and fragmentation, GPUs by state) from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Exists, OuterRef, QuerySet, Value
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import AllocationGpu, Node
from controlplane.services import maintenance
from controlplane.services.access import access_of
from controlplane.services.fleet_figures import NodeFigures


@dataclass(frozen=True)
class Slot:
    """A held GPU. `job_id` is None when the viewer may not read the job; `team_id` picks the
    team's colour (figures.team_colour)."""

    team: str
    job_id: int | None
    team_id: int


@dataclass(frozen=True)
class NodeRow:
    id: int
    name: str
    pool: str
    leaf_switch: str
    spine: str
    state: str
    gpu_type: str
    capacity_tier: str
    slots: tuple[Slot | None, ...]  # None: the slot is free
    in_maintenance: bool = False  # inside a maintenance window now: it takes no work
    gpu_memory_gb: int = 0  # each GPU's, as its type says: which waiting jobs could use a whole node
    # its CPUs and memory: which waiting jobs' members it could hold (fragmentation's stranded GPUs)
    cpus: int = 0
    memory_gb: int = 0

    @property
    def figures(self) -> NodeFigures:
        """The node as fragmentation reads it (services/fleet_figures.fragmentation_of)."""
        return NodeFigures(self.pool, self.gpu_type, self.gpu_memory_gb, len(self.slots), self.used, self.schedulable,
                           cpus=self.cpus, memory_gb=self.memory_gb, leaf_switch=self.leaf_switch, spine=self.spine)

    @property
    def state_said(self) -> str:
        return f"{self.state}, in maintenance" if self.in_maintenance else self.state

    @property
    def used(self) -> int:
        return sum(1 for s in self.slots if s is not None)

    @property
    def free(self) -> int:
        return len(self.slots) - self.used

    @property
    def schedulable(self) -> bool:
        """Takes work now: ready, and in no maintenance window (the scheduler starts nothing there
        during one, and the cycle's figures count its idle GPUs as unavailable)."""
        return self.state == NodeState.READY and not self.in_maintenance


@dataclass(frozen=True)
class NodeCount:
    """A node's figures in the grid's terms (NodeRow's `used`, `free`, `schedulable`), without
    its slots; `listed`: whether the page's filters keep it."""

    id: int
    pool: str
    state: str
    gpus: int
    used: int
    in_maintenance: bool = False
    listed: bool = True
    gpu_type: str = ""
    gpu_memory_gb: int = 0
    cpus: int = 0
    memory_gb: int = 0
    leaf_switch: str = ""
    spine: str = ""

    @property
    def free(self) -> int:
        return self.gpus - self.used

    @property
    def figures(self) -> NodeFigures:
        """The node as fragmentation reads it (services/fleet_figures.fragmentation_of)."""
        return NodeFigures(self.pool, self.gpu_type, self.gpu_memory_gb, self.gpus, self.used, self.schedulable,
                           cpus=self.cpus, memory_gb=self.memory_gb, leaf_switch=self.leaf_switch, spine=self.spine)

    @property
    def schedulable(self) -> bool:
        return self.state == NodeState.READY and not self.in_maintenance


def fleet_counts(listed: QuerySet[Node] | None = None) -> list[NodeCount]:
    """Every node in the fleet (retired ones are out of it), ordered as `fleet_grid` orders them,
    each marked whether `listed` (a filtered queryset of nodes) holds it: the GPUs held now
    counted per node in PostgreSQL (as many as the grid's slots would hold: at most its GPU
    count). Two queries, whatever the fleet's size."""
    held = dict(AllocationGpu.held().values("node_id").annotate(n=Count("id")).order_by().values_list("node_id", "n"))
    closed = Exists(maintenance.active_at(timezone.now()).filter(nodes=OuterRef("pk")))
    kept = Exists(listed.filter(pk=OuterRef("pk"))) if listed is not None else Value(True)
    return [
        NodeCount(id=pk, pool=pool, state=state, gpus=gpus, used=min(held.get(pk, 0), gpus), in_maintenance=away,
                  listed=keep, gpu_type=gpu_type, gpu_memory_gb=memory, cpus=cpus, memory_gb=memory_gb,
                  leaf_switch=leaf, spine=spine)
        for pk, pool, state, gpus, away, keep, gpu_type, memory, cpus, memory_gb, leaf, spine
        in Node.objects.exclude(state=NodeState.RETIRED)
        .annotate(in_maintenance=closed, listed=kept).order_by("pool", "leaf_switch", "name")
        .values_list("id", "pool", "state", "gpu_count", "in_maintenance", "listed", "gpu_type__name",
                     "gpu_type__memory_gb", "cpus", "memory_gb", "leaf_switch", "spine")
    ]


def fleet_grid(user: AbstractBaseUser | AnonymousUser, *, node_ids: Iterable[int] | None = None) -> list[NodeRow]:
    """Every node in the fleet (or those in `node_ids`) ordered by pool, leaf switch and name: a
    retired node is out of the fleet, and shows only when asked for by id."""
    access = access_of(user)
    nodes = Node.objects.all() if node_ids is not None else Node.objects.exclude(state=NodeState.RETIRED)
    gpus = AllocationGpu.held()
    if node_ids is not None:
        wanted = list(node_ids)
        nodes = nodes.filter(id__in=wanted)
        gpus = gpus.filter(node_id__in=wanted)
    holders: dict[tuple[int, int], Slot] = {}
    for node_id, index, job_id, team_id, team in gpus.values_list(
        "node_id", "gpu_index", "allocation__job_id", "allocation__job__team_id", "allocation__job__team__name"
    ):
        holders[(node_id, index)] = Slot(team=team, job_id=job_id if access.may_read_team(team_id) else None,
                                              team_id=team_id)
    now = timezone.now()
    closed = Exists(maintenance.active_at(now).filter(nodes=OuterRef("pk")))
    rows = []
    for n in nodes.annotate(in_maintenance=closed).order_by("pool", "leaf_switch", "name").values(
        "id", "name", "pool", "leaf_switch", "spine", "state", "gpu_count", "gpu_type__name", "capacity_tier",
        "in_maintenance", "gpu_type__memory_gb", "cpus", "memory_gb",
    ):
        rows.append(
            NodeRow(
                id=n["id"],
                name=n["name"],
                pool=n["pool"],
                leaf_switch=n["leaf_switch"],
                spine=n["spine"],
                state=n["state"],
                gpu_type=n["gpu_type__name"],
                capacity_tier=n["capacity_tier"],
                slots=tuple(holders.get((n["id"], i)) for i in range(n["gpu_count"])),
                in_maintenance=n["in_maintenance"],
                gpu_memory_gb=n["gpu_type__memory_gb"],
                cpus=n["cpus"],
                memory_gb=n["memory_gb"],
            )
        )
    return rows
