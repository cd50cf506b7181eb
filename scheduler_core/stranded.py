"""Stranded GPUs: the one home of the rule (issue #3 item 10, seed 000). The cycle's fleet
figures (:mod:`scheduler_core.fleet`, and through them the simulator and the fleet samples) and
the live fragmentation figures (``controlplane/services/fleet_figures.fragmentation_of``: the
API, /metrics, qm sinfo and the pages) both count them here; each only reads its nodes and
waiting jobs into the values below.

The rule:

* A waiting job (in line: not held, not waiting for a dependency, not one that can never run)
  *needs whole nodes* when some member of its gang asks at least the GPUs of a kind of node
  that member may run on.
* Such a job *strands* the idle GPUs of every partly used node that takes work (ready, in no
  maintenance window now) of a kind some member of it may run on. Idle GPUs run nothing: GPUs
  held for a waiting job's reservation or nomination count, and so do idle GPUs on a node whose
  CPUs or memory are all taken (a member's CPUs and memory say which kinds of node it may run
  on, by their size, not what is free on them now).
* Nothing is stranded while no such job waits; a partly used node of a kind no such job may
  use (another GPU type, too little device memory, too few GPUs, CPUs or memory) strands
  nothing.

Who reads a job says which kinds its members may run on: the cycle by its node classes (GPU
type and memory, GPUs, CPUs and memory) and its admission's type options, the live figures by
:func:`members_of`, which cuts the request into its gang as the cycle does (each role's members
their own, with the role's types, memory and CPUs) and keeps the kinds and GPU types the cycle's
options keep. (Until 7 Dec the live figures read a heterogeneous gang as one job of its total
GPUs, and neither a member's CPUs and memory nor a type its gang can never run on left a kind
out.)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Generic, NamedTuple, TypeVar

from scheduler_core.admission import invalid_request
from scheduler_core.capability import NodeShape, fits, gang_runs_on
from scheduler_core.gang import Demand, Member, demand_for, elastic_sizes, node_size_for
from scheduler_core.types import GangRole, GpuTypeInfo, JobSpec, TopologyConstraint

K = TypeVar("K", bound=Hashable)


class NodeUse(NamedTuple, Generic[K]):
    """One node: its pool, its kind (the cycle's node class; the live figures' :class:`NodeKind`),
    its GPUs running work, those running nothing, and whether it takes work now. (A named tuple,
    not a dataclass: the cycle hands over hundreds of nodes each cycle, and a tuple is built in
    C.)"""

    pool: str
    kind: K
    used: int
    idle: int
    takes_work: bool


@dataclass(frozen=True, slots=True)
class NodeKind:
    """What decides, for the live figures, whether a member may run on a node: its GPU type,
    their memory, and how many; its CPUs and memory (the cycle's node class)."""

    gpu_type: str
    gpu_memory_gb: int
    gpus: int
    cpus: int
    memory_gb: int


def kind_of(shape: NodeShape) -> NodeKind:
    """The kind of the nodes of ``shape`` (their leaf switch and spine left out)."""
    return NodeKind(shape.gpu_type.name, shape.gpu_type.memory_gb, shape.gpus, shape.cpus, shape.memory_gb)


@dataclass(frozen=True, slots=True)
class WaitingMember(Generic[K]):
    """One member of a waiting job's gang: its GPUs and the kinds of node it may run on."""

    gpus: int
    runs_on: frozenset[K]


@dataclass(frozen=True, slots=True)
class WaitingJob(Generic[K]):
    """A waiting job in line, as its distinct members; ``jobs``: how many waiting jobs it stands
    for (the live figures count jobs of one shape together)."""

    members: tuple[WaitingMember[K], ...]
    jobs: int = 1


@dataclass(frozen=True, slots=True)
class Stranded:
    """The idle GPUs stranded, in all and per pool, and per pool how many waiting jobs need
    whole nodes of a kind it holds."""

    gpus: int
    gpus_by_pool: Mapping[str, int]
    waiting_by_pool: Mapping[str, int] | None


def stranded(nodes: Iterable[NodeUse[K]], kind_gpus: Mapping[K, int], waiting: Iterable[WaitingJob[K]], *,
             count_waiting: bool = True) -> Stranded:
    """The GPUs stranded on ``nodes`` by the ``waiting`` jobs (the module's rule); ``kind_gpus``:
    the GPUs of a node of each kind (every kind a waiting member may run on).

    ``nodes`` may leave out nodes that strand nothing whatever waits (not partly used, or
    taking no work): the cycle hands over only the others, a few hundred of a fleet's
    thousands. The waiting jobs per pool are counted over the pools of the nodes handed over;
    without ``count_waiting`` they are not counted (``None``), and ``waiting`` is read only
    until every kind with a partly used node is wanted: the cycle's queue is long, and its
    first few whole-node jobs usually decide."""
    kinds_of_pool: dict[str, set[K]] = {}
    # per (pool, kind), the idle GPUs of its partly used nodes that take work
    partial: dict[tuple[str, K], int] = {}
    for pool, kind, used, idle, takes_work in nodes:
        key = (pool, kind)
        if takes_work and used > 0 and idle > 0:
            partial[key] = partial.get(key, 0) + idle
        elif key not in partial:
            partial[key] = 0
    for pool, kind in partial:
        kinds_of_pool.setdefault(pool, set()).add(kind)
    strandable = {kind for (_, kind), idle in partial.items() if idle}
    wanted: set[K] = set()
    waiting_by_pool = dict.fromkeys(kinds_of_pool, 0)
    for job in waiting:
        if not count_waiting and strandable <= wanted:
            break
        if not any(m.gpus >= kind_gpus[k] for m in job.members for k in m.runs_on):
            continue  # every node each member may run on has room beside it
        uses = {k for m in job.members for k in m.runs_on}
        wanted |= uses
        if not count_waiting:
            continue
        for pool, pool_kinds in kinds_of_pool.items():
            if not pool_kinds.isdisjoint(uses):
                waiting_by_pool[pool] += job.jobs
    by_pool = dict.fromkeys(kinds_of_pool, 0)
    for (pool, kind), idle in partial.items():
        if kind in wanted:
            by_pool[pool] += idle
    return Stranded(sum(by_pool.values()), by_pool, waiting_by_pool if count_waiting else None)


@dataclass(frozen=True, slots=True)
class WaitingShape:
    """A waiting request as the live figures read it from its row: what cuts it into a gang and
    what nodes its members accept."""

    gpus: int
    gpus_per_node: int | None = None
    gpu_types: tuple[str, ...] = ()
    min_gpu_memory_gb: int = 0
    cpus_per_gpu: int = 0
    memory_gb_per_gpu: int = 0
    topology: TopologyConstraint = TopologyConstraint.ANY
    min_gpus: int | None = None
    max_gpus: int | None = None
    roles: tuple[GangRole, ...] = ()
    distinct_nodes: bool = False


class LiveFleet:
    """The fleet the live figures judge waiting jobs on: every node (any state) as
    :class:`~scheduler_core.capability.NodeShape` rows, read once per count and asked of every
    waiting shape. Its kinds (leaf switch and spine left out) serve every check but a switch's,
    and which kinds hold a member is remembered per member: a queue's shapes share most."""

    __slots__ = ("_capable", "_kinds", "_runs_on", "_shapes", "sizes", "smallest", "types")

    def __init__(self, shapes: Iterable[NodeShape]) -> None:
        self._shapes = tuple(shapes)
        counts: dict[NodeKind, int] = {}
        self.types: dict[str, GpuTypeInfo] = {}
        self.sizes: dict[str, int] = {}
        for s in self._shapes:
            kind = kind_of(s)
            counts[kind] = counts.get(kind, 0) + s.count
            self.types.setdefault(s.gpu_type.name, s.gpu_type)
            self.sizes[s.gpu_type.name] = max(self.sizes.get(s.gpu_type.name, 0), s.gpus)
        self._kinds = tuple(
            (kind, NodeShape(self.types[kind.gpu_type], kind.gpus, kind.cpus, kind.memory_gb, "", "", n))
            for kind, n in counts.items())
        self._capable: dict[Member, tuple[tuple[NodeKind, NodeShape], ...]] = {}
        self._runs_on: dict[tuple[Demand, bool, str], bool] = {}
        #: the GPUs of the fleet's smallest node: a job of fewer has no member that fills one
        self.smallest = min((kind.gpus for kind in counts), default=0)

    def __bool__(self) -> bool:
        return bool(self._kinds)

    def capable(self, member: Member) -> tuple[tuple[NodeKind, NodeShape], ...]:
        """The kinds an empty node of which could host ``member``, with their nodes."""
        found = self._capable.get(member)
        if found is None:
            found = self._capable[member] = tuple(k for k in self._kinds if fits(member, k[1]))
        return found

    def runs_on(self, spec: JobSpec, gang: Demand, gpu_type: str) -> bool:
        """Whether ``gang``, ``spec``'s, could ever be placed on the nodes of ``gpu_type``, as
        the cycle's admission judges it (``admission.never_runs`` on the type's option): by
        :func:`~scheduler_core.capability.gang_runs_on` on the nodes some member fits, and for a
        gang kept under one switch, whether one switch holds its GPUs on such nodes. Asked once
        per gang and type."""
        key = (gang, bool(spec.roles), gpu_type)
        found = self._runs_on.get(key)
        if found is None:
            members = set(gang.members)
            # only nodes some member fits count, as the cycle counts its members' classes: 12 GPUs
            # of 128 GB each (members of 8 and 4) on a type whose one 1024 GB node of 8 holds
            # either member was counted 20 capable GPUs with the type's 256 GB nodes
            nodes = [s for kind, s in self._kinds if kind.gpu_type == gpu_type and any(fits(m, s) for m in members)]
            if gang.topology in (TopologyConstraint.SAME_LEAF, TopologyConstraint.SAME_SPINE):
                # The cycle asks only that one switch hold the gang's GPUs (``_largest_domain``),
                # not, as a submit does, room there for its largest members as well: judged by
                # the submit's rule, a gang of 8 and 4 GPUs on one spine, whose member of 8 fits
                # only a node alone on its spine, was dropped from a type the cycle tries it on.
                plain = gang._replace(topology=TopologyConstraint.ANY)
                found = gang_runs_on(replace(spec, topology=TopologyConstraint.ANY), plain, nodes, gpu_type)
                if found and len(gang.members) > 1:
                    leaf = gang.topology is TopologyConstraint.SAME_LEAF
                    under: dict[str, int] = {}
                    for s in self._shapes:
                        if s.gpu_type.name == gpu_type and any(fits(m, s) for m in members):
                            switch = s.leaf if leaf else s.spine
                            under[switch] = under.get(switch, 0) + s.gpus * s.count
                    found = max(under.values(), default=0) >= gang.gpus
            else:
                found = gang_runs_on(spec, gang, nodes, gpu_type)
            self._runs_on[key] = found
        return found


def members_of(shape: WaitingShape, fleet: LiveFleet) -> tuple[WaitingMember[NodeKind], ...]:
    """The distinct members of ``shape``'s smallest gang on ``fleet``, each with the kinds of
    node it may run on, as the cycle reads a waiting job (:mod:`scheduler_core.job_shape`);
    none for a request that can never run.

    Steps:
    1. The gang, cut as the cycle cuts it (:func:`.gang.demand_for`): a role's members of its
       GPUs, types, memory and CPUs each; else ``gpus_per_node`` each, else whole nodes of the
       largest node it accepts with a smaller remainder member last.
    2. Each member's kinds: those whose GPU type and device memory it accepts, with at least
       its GPUs, CPUs and memory (the cycle's filters' ``capable``).
    3. The GPU types the gang may use, as the cycle's type options: a heterogeneous gang may
       mix them, every kind its members accept stays; any other gang runs on one type, one
       every member has a kind of and on which it could ever be placed (:meth:`LiveFleet.runs_on`,
       asked when it has several such types: with one, whether it can ever run at all is the
       last cycle's word, which the caller reads as the job's ``pending_resolvable``)."""
    spec = JobSpec(
        id="", team="", priority_class="", gpus=shape.gpus, submitted_at=0.0,
        gpus_per_node=shape.gpus_per_node, gpu_types=shape.gpu_types,
        min_gpu_memory_gb=shape.min_gpu_memory_gb, cpus_per_gpu=shape.cpus_per_gpu,
        memory_gb_per_gpu=shape.memory_gb_per_gpu, topology=shape.topology,
        min_gpus=shape.min_gpus, max_gpus=shape.max_gpus, roles=shape.roles,
        members_on_distinct_nodes=shape.distinct_nodes,
    )
    if not fleet or invalid_request(spec) is not None:
        return ()
    gang = demand_for(spec, elastic_sizes(spec)[-1], node_size_for(spec, fleet.sizes, fleet.types))
    capable: dict[Member, tuple[tuple[NodeKind, NodeShape], ...]] = {}
    for m in gang.members:
        if m not in capable:
            capable[m] = fleet.capable(m)
    if not all(capable.values()):
        return ()  # some member fits on no node: it can never run, and strands nothing
    if not spec.roles:
        usable = set.intersection(*({kind.gpu_type for kind, _ in on} for on in capable.values()))
        if len(usable) > 1:
            usable = {t for t in usable if fleet.runs_on(spec, gang, t)}
        if not usable:
            return ()
        capable = {m: tuple(k for k in on if k[0].gpu_type in usable) for m, on in capable.items()}
    # members alike (a role's, or a gang's whole-node members) are one
    return tuple(dict.fromkeys(WaitingMember(m.gpus, frozenset(kind for kind, _ in on))
                               for m, on in capable.items()))
