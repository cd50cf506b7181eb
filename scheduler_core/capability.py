"""Could a job ever run on this fleet? The engine's capability check, public, for submit time.

``never_runs(spec, nodes, gpu_types)`` answers before a job is queued, so the control plane can
refuse an impossible shape with a 400 naming the request field instead of queueing it to wait
forever as ``CanNeverRun``. It cuts the job into gang members exactly as the engine does
(:func:`scheduler_core.gang.demand_for`) and checks only *necessary* conditions for placing
that gang on the fleet when it is empty, so a rejection is never wrong: a job it rejects can
never be placed. Every node counts whatever its state (a cordoned or down node may come back).

It is at least as strict as the engine's own ``CanNeverRun`` for capability and size (no
capable node for a member, a gang larger than the capable fleet or than every switch its
topology allows, a ``same_node`` gang larger than any node every member accepts); it does not
look at quotas, which change while a job waits. ``tests/scheduler_core/test_engine_capability.py``
checks both directions against :func:`scheduler_core.schedule` on random fleets.

``nodes`` may be :class:`~scheduler_core.types.NodeInfo` rows or :class:`NodeShape` rows
(identical nodes counted, what a ``GROUP BY`` query returns), or a mix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler_core.admission import distinct_nodes_words
from scheduler_core.distinct_nodes import node_sets, shapes_of
from scheduler_core.gang import Demand, Member, demand_for, minimum_gpus, node_size_for
from scheduler_core.quota import QuotaLedger, never_under_quota_words
from scheduler_core.sentences import counted
from scheduler_core.types import GpuTypeInfo, JobSpec, NodeInfo, QuotaInfo, TopologyConstraint

__all__ = ["Infeasible", "NodeShape", "fits", "gang_runs_on", "never_runs", "never_under_quota", "node_shapes"]


@dataclass(frozen=True, slots=True)
class NodeShape:
    """Identical nodes, counted: the fleet as the capability check sees it."""

    gpu_type: GpuTypeInfo
    gpus: int
    cpus: int
    memory_gb: int
    leaf: str
    spine: str
    count: int


@dataclass(frozen=True, slots=True)
class Infeasible:
    """Why the fleet can never run the job: the request field to blame and a sentence with
    numbers."""

    field: str
    message: str


def node_shapes(nodes: Iterable[NodeInfo | NodeShape],
                gpu_types: Mapping[str, GpuTypeInfo]) -> list[NodeShape]:
    """Nodes grouped by identical shape (a node whose type is unknown counts as a device of
    0 GB named by its type)."""
    counts: dict[tuple[GpuTypeInfo, int, int, int, str, str], int] = {}
    for node in nodes:
        if isinstance(node, NodeShape):
            key = (node.gpu_type, node.gpus, node.cpus, node.memory_gb, node.leaf, node.spine)
            counts[key] = counts.get(key, 0) + node.count
            continue
        info = gpu_types.get(node.gpu_type) or GpuTypeInfo(node.gpu_type, 0)
        key = (info, node.gpus, node.cpus, node.memory_gb, node.leaf, node.spine)
        counts[key] = counts.get(key, 0) + 1
    return [NodeShape(t, g, c, m, leaf, spine, n)
            for (t, g, c, m, leaf, spine), n in counts.items() if n > 0]


def fits(member: Member, shape: NodeShape) -> bool:
    """Could an empty node of ``shape`` host ``member``: its GPU type and device memory, and
    its GPUs, CPUs and memory (the cycle's filters' ``capable``: GpuCapability, ResourceFit)."""
    return (
        member.accepts_type(shape.gpu_type)
        and shape.gpus >= member.gpus
        and shape.cpus >= member.cpus
        and shape.memory_gb >= member.memory_gb
    )


def _members_per_node(member: Member, shape: NodeShape) -> int:
    """How many copies of ``member`` one empty node of this shape holds."""
    if not fits(member, shape):
        return 0
    return member.copies_per_node(shape.gpus, shape.cpus, shape.memory_gb)


def _role_field(spec: JobSpec, member: Member, name: str) -> str:
    """The request field a gang member's refusal is about: a role's own (``roles.1.count``, the
    API's key for it) when the member is a role's, so the form shows it on that role's row."""
    for index, role in enumerate(spec.roles):
        if role.name == member.role:
            return f"roles.{index}.{name}"
    return "roles"


def _whose(spec: JobSpec, member: Member) -> str:
    """"role learner " before a sentence about one role's members; "" for a plain job."""
    return f"role {member.role} " if spec.roles and member.role else ""


def _single_member_field(spec: JobSpec) -> str:
    if spec.gpus_per_node is not None and spec.topology is not TopologyConstraint.SAME_NODE:
        return "gpus_per_node"
    return "gpus"


def _size_field(spec: JobSpec) -> str:
    if spec.roles:
        return "roles"
    return "min_gpus" if spec.min_gpus is not None and spec.min_gpus < spec.gpus else "gpus"


def _fleet_names(shapes: Iterable[NodeShape]) -> str:
    return ", ".join(sorted({f"{s.gpu_type.name} ({s.gpu_type.memory_gb} GB)" for s in shapes}))


def _type_refusal(spec: JobSpec, member: Member, shapes: list[NodeShape]) -> Infeasible:
    fleet = _fleet_names(shapes)
    # A role without its own GPU types or memory takes the job's: then the job's field is wrong.
    role = next((r for r in spec.roles if r.name == member.role), None)
    field = _role_field(spec, member, "gpu_types") if role is not None and role.gpu_types else "gpu_types"
    memory_field = (_role_field(spec, member, "min_gpu_memory_gb") if role is not None and role.min_gpu_memory_gb
                    else "min_gpu_memory_gb")
    if member.gpu_types and not any(s.gpu_type.name in member.gpu_types for s in shapes):
        kinds = " or ".join(member.gpu_types)
        said = (f"{_whose(spec, member)}asks {kinds} GPUs, which no node carries" if _whose(spec, member)
                else f"no node carries {kinds}")
        return Infeasible(field, f"{said}; the fleet has {fleet}")
    return Infeasible(
        memory_field,
        f"{_whose(spec, member)}asks GPUs with at least {member.min_gpu_memory_gb} GB of memory"
        + (f" among {', '.join(member.gpu_types)}" if member.gpu_types else "")
        + f"; the fleet has {fleet}",
    )


def _member_refusal(spec: JobSpec, member: Member, capable: list[NodeShape]) -> Infeasible:
    """Why no capable node hosts ``member`` (GPUs, then CPUs, then memory)."""
    whose = _whose(spec, member)
    biggest_gpus = max(s.gpus for s in capable)
    if member.gpus > biggest_gpus:
        return Infeasible(
            _role_field(spec, member, "gpus_per_member") if spec.roles else _single_member_field(spec),
            f"{whose}asks {counted(member.gpus, 'GPU')} on one node; the largest node has {biggest_gpus}",
        )
    roomy = [s for s in capable if s.gpus >= member.gpus]
    most_cpus = max(s.cpus for s in roomy)
    per_gpu = member.cpus // member.gpus if member.gpus else 0
    if member.cpus > most_cpus:
        return Infeasible(
            _role_field(spec, member, "cpus_per_gpu") if spec.roles else "cpus_per_gpu",
            f"{whose}asks {counted(member.cpus, 'CPU')} on one node ({counted(member.gpus, 'GPU')} × "
            f"{per_gpu}); the largest node with {counted(member.gpus, 'GPU')} has {most_cpus}",
        )
    most_memory = max(s.memory_gb for s in roomy if s.cpus >= member.cpus)
    per_gpu_mem = member.memory_gb // member.gpus if member.gpus else 0
    return Infeasible(
        _role_field(spec, member, "memory_gb_per_gpu") if spec.roles else "memory_gb_per_gpu",
        f"{whose}asks {member.memory_gb} GB of memory on one node ({counted(member.gpus, 'GPU')} × "
        f"{per_gpu_mem} GB); the largest node with {counted(member.gpus, 'GPU')} has {most_memory} GB",
    )


def never_runs(spec: JobSpec, nodes: Iterable[NodeInfo | NodeShape],
               gpu_types: Mapping[str, GpuTypeInfo]) -> Infeasible | None:
    """The first reason the fleet can never run ``spec``, or ``None``.

    Steps:

    1. Some node must carry an acceptable GPU (type and device memory).
    2. A job larger than every capable GPU together is refused before it is cut (its members
       could number millions); otherwise it is cut into gang members at its smallest size, as
       the engine does.
    3. Every member must fit on one capable node: GPUs, then CPUs, then memory.
    4. The whole gang's GPUs must not exceed the fleet's GPUs that its members accept, and the
       members of each shape must all fit at once; a ``same_node`` gang of several members
       needs one node every member accepts with room for all of them; a gang on distinct nodes
       needs a capable node per member, and for every set of its members that
       :func:`~scheduler_core.distinct_nodes.node_sets` names as many nodes with room for one.
    5. A same-leaf or same-spine gang must fit within one switch's capable nodes.
    6. A gang does not mix device types: steps 3 to 5 must pass on the nodes of one type.

    An empty fleet (no node registered yet) rejects nothing: the engine explains the wait. An
    invalid request (``gpus < 1``...) is not this function's concern and is not rejected."""
    shapes = node_shapes(nodes, gpu_types)
    if not shapes:
        return None
    # 1. capability by GPU type and device memory (every role's own types for a gang)
    if spec.roles:
        probes = [Member(r.name, 1, tuple(sorted(r.gpu_types or spec.gpu_types)),
                         r.min_gpu_memory_gb or spec.min_gpu_memory_gb, 0, 0) for r in spec.roles]
    else:
        probes = [Member("", 1, tuple(sorted(spec.gpu_types)), spec.min_gpu_memory_gb, 0, 0)]
    for probe in probes:
        if not any(probe.accepts_type(s.gpu_type) for s in shapes):
            return _type_refusal(spec, probe, shapes)
    capable = [s for s in shapes if any(p.accepts_type(s.gpu_type) for p in probes)]

    # 2. no more GPUs than the capable fleet, then the gang as the engine cuts it
    size = minimum_gpus(spec)
    if size < 1 or any(r.count < 1 or r.gpus_per_member < 1 for r in spec.roles):
        return None
    fleet_capable = sum(s.gpus * s.count for s in capable)
    if size > fleet_capable:
        kinds = " or ".join(spec.gpu_types) if spec.gpu_types else "capable"
        return Infeasible(
            _size_field(spec),
            f"asks {counted(size, 'GPU')}; the fleet can never give more than {counted(fleet_capable, f'{kinds} GPU')}",
        )
    sizes: dict[str, int] = {}
    for s in capable:
        sizes[s.gpu_type.name] = max(sizes.get(s.gpu_type.name, 0), s.gpus)
    types_by_name = dict(gpu_types)
    for s in capable:
        types_by_name.setdefault(s.gpu_type.name, s.gpu_type)
    demand = demand_for(spec, size, node_size_for(spec, sizes, types_by_name))
    refusal = _gang_refusal(spec, demand, capable, None)
    if refusal is not None or spec.roles:
        return refusal
    # 6. a gang does not mix device types: it must fit on the nodes of one GPU type
    by_type: dict[str, list[NodeShape]] = {}
    for s in capable:
        by_type.setdefault(s.gpu_type.name, []).append(s)
    if len(by_type) < 2:
        return None
    refusals = []
    for name, group in sorted(by_type.items()):
        found = _gang_refusal(spec, demand, group, name)
        if found is None:
            return None
        refusals.append((-sum(s.gpus * s.count for s in group), name, found))
    _, name, found = min(refusals)
    return Infeasible(found.field, f"{found.message} (a gang does not mix GPU types, and no "
                                   f"type can host it; {name} comes closest)")


def never_under_quota(spec: JobSpec, nodes: Iterable[NodeInfo | NodeShape],
                      gpu_types: Mapping[str, GpuTypeInfo], quotas: Iterable[QuotaInfo]) -> Infeasible | None:
    """Why the quotas of ``spec.team`` could never admit ``spec`` on any GPU type whose nodes can
    host it, or ``None``: the cycle's ``CanNeverRun`` over quota, asked before the job is stored
    (the submit form's live check). The fleet could run it (``never_runs`` is ``None``), but on
    every such type the job's smallest size is more than the team may ever hold, nominal plus
    its borrowing limit or all its cohort could lend: a ceiling of the quota table alone,
    whatever runs. The submit still takes such a job (an admin may raise the quota while it
    waits); before, the form said the submit would take it and no more, and the job then waited
    for ever. A heterogeneous gang (its roles may mix types) is left to the cycle: ``None``."""
    shapes = node_shapes(nodes, gpu_types)
    if spec.roles or not shapes or never_runs(spec, shapes, gpu_types) is not None:
        return None
    ledger = QuotaLedger(quotas)
    probe = Member("", 1, tuple(sorted(spec.gpu_types)), spec.min_gpu_memory_gb, 0, 0)
    capable = [s for s in shapes if probe.accepts_type(s.gpu_type)]
    size = minimum_gpus(spec)
    sizes: dict[str, int] = {}
    for s in capable:
        sizes[s.gpu_type.name] = max(sizes.get(s.gpu_type.name, 0), s.gpus)
    types_by_name = {**gpu_types, **{s.gpu_type.name: s.gpu_type for s in capable}}
    demand = demand_for(spec, size, node_size_for(spec, sizes, types_by_name))
    by_type: dict[str, list[NodeShape]] = {}
    for s in capable:
        by_type.setdefault(s.gpu_type.name, []).append(s)
    # in the job's own order of types, else the smallest device first, as the cycle lists them
    rank = {t: i for i, t in enumerate(spec.gpu_types)}
    hosts = sorted((name for name, group in by_type.items() if _gang_refusal(spec, demand, group, name) is None),
                   key=lambda t: (rank.get(t, len(rank)), types_by_name[t].memory_gb,
                                  types_by_name[t].throughput, t))
    clauses = []
    for name in hosts:
        verdict = ledger.check(spec.team, name, size)
        if not verdict.never:
            return None
        clauses.append(verdict.ceiling_words(name))
    if not clauses:
        return None
    return Infeasible(_size_field(spec), never_under_quota_words(spec.team, clauses, size))


def gang_runs_on(spec: JobSpec, demand: Demand, shapes: list[NodeShape], type_name: str | None = None) -> bool:
    """Whether ``demand``, ``spec``'s gang, could be placed on the nodes of ``shapes`` when they
    are empty (steps 3 to 5 of :func:`never_runs`): the live stranded figures ask it of each GPU
    type a gang accepts, as the cycle drops the types it can never run on from its options."""
    return _gang_refusal(spec, demand, shapes, type_name) is None


def _gang_refusal(spec: JobSpec, demand: Demand, capable: list[NodeShape],
                  type_name: str | None) -> Infeasible | None:
    distinct: list[Member] = []
    for m in demand.members:
        if m not in distinct:
            distinct.append(m)

    # 3. every member on one node
    for member in distinct:
        if not any(fits(member, s) for s in capable):
            return _member_refusal(spec, member, capable)

    # 4. all at once on the whole fleet
    if spec.roles and spec.topology is TopologyConstraint.SAME_NODE and len(demand.members) > 1:
        hosts = [s for s in capable if all(m.accepts_type(s.gpu_type) for m in distinct)]
        widest = max((s.gpus for s in hosts), default=0)
        if not any(s.gpus >= demand.gpus
                   and s.cpus >= sum(m.cpus for m in demand.members)
                   and s.memory_gb >= sum(m.memory_gb for m in demand.members) for s in hosts):
            return Infeasible(
                "topology",
                f"asks {counted(demand.gpus, 'GPU')} on one node for all its members; the largest node "
                f"every member accepts has {widest}",
            )
        return None
    accepted = [s for s in capable if any(m.accepts_type(s.gpu_type) for m in distinct)]
    total_capable = sum(s.gpus * s.count for s in accepted)
    if demand.gpus > total_capable:
        kinds = type_name or (" or ".join(spec.gpu_types) if spec.gpu_types else "capable")
        return Infeasible(
            _size_field(spec),
            f"asks {counted(demand.gpus, 'GPU')}; the fleet can never give more than {counted(total_capable, f'{kinds} GPU')}",
        )
    if demand.distinct_nodes and len(demand.members) > 1:
        # one capable node per member, and one that holds a largest member for each of those
        largest = demand.members[0]
        nodes = sum(s.count for s in capable if any(fits(m, s) for m in distinct))
        roomy = sum(s.count for s in capable if fits(largest, s))
        wide = sum(1 for m in demand.members if m == largest)
        if nodes < len(demand.members) or roomy < wide:
            has = (counted(nodes, "capable node") if nodes < len(demand.members)
                   else f"{counted(roomy, 'node')} with room for a member of {counted(largest.gpus, 'GPU')}")
            return Infeasible(
                "members_on_distinct_nodes",
                f"asks {distinct_nodes_words(demand)}, its members on distinct nodes; the fleet has {has}",
            )
    for member in distinct:
        copies = sum(1 for m in demand.members if m == member)
        if copies == 1:
            continue
        room = sum(_members_per_node(member, s) * s.count for s in capable)
        if copies > room:
            return Infeasible(
                _role_field(spec, member, "count") if spec.roles else _single_member_field(spec),
                # members, not nodes: several may share one (three on each of five nodes
                # were "asks 20 nodes ...; the fleet has room for 15")
                f"{_whose(spec, member)}asks {counted(copies, 'member')} of {counted(member.gpus, 'GPU')}"
                + (f", {counted(member.cpus, 'CPU')}" if member.cpus else "")
                + (f" and {member.memory_gb} GB" if member.memory_gb else "")
                + f" each at once; the fleet has room for {room}",
            )

    if demand.distinct_nodes and len(demand.members) > 1:
        # every set of its members' shapes needs that many nodes with room for one of them
        # (distinct_nodes.node_sets), as the engine counts them: members of 1 and 2 GPUs that
        # take only h100 GPUs need two h100 nodes, however many others the fleet has
        where = [[i for i, s in enumerate(capable) if fits(m, s)] for m in demand.members]
        for need in node_sets(shapes_of(demand, where)):
            nodes = sum(capable[i].count for i in need.where)
            if nodes < need.members:
                kind = "/".join(sorted({capable[i].gpu_type.name for i in need.where}))
                return Infeasible(
                    "members_on_distinct_nodes",
                    f"asks {distinct_nodes_words(demand)}, its members on distinct nodes; "
                    f"{need.members} of its members have room on only {counted(nodes, 'node')} ({kind})",
                )

    # 5. within one switch: enough capable GPUs there, and room for the largest members
    largest = demand.members[0]
    big = [m for m in demand.members if m == largest]
    for constraint, word in ((TopologyConstraint.SAME_LEAF, "leaf switch"),
                             (TopologyConstraint.SAME_SPINE, "spine")):
        if spec.topology is not constraint:
            continue
        gpus_under: dict[str, int] = {}
        room_under: dict[str, int] = {}
        for s in accepted:
            key = s.leaf if constraint is TopologyConstraint.SAME_LEAF else s.spine
            gpus_under[key] = gpus_under.get(key, 0) + s.gpus * s.count
            room_under[key] = room_under.get(key, 0) + _members_per_node(largest, s) * s.count
        if not any(gpus_under[k] >= demand.gpus and room_under[k] >= len(big) for k in gpus_under):
            best = max(gpus_under.values())
            return Infeasible(
                "topology",
                f"asks {counted(demand.gpus, 'GPU')} under one {word}; the largest {word} has {counted(best, 'capable GPU')}"
                + (f" in nodes of at least {largest.gpus}" if best >= demand.gpus else ""),
            )
    return None
