"""Gangs: what a job needs, as the members that must all be placed at once.

A job becomes a :class:`Demand`: a tuple of :class:`Member` objects, each of which lands on
exactly one node. A rigid job's members are placed all together or not at all; an elastic job
is a series of demands of growing size (one per replica count). Demands are hashable and
compare by shape, so the cycle can remember that a shape failed and skip identical jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from scheduler_core.types import GpuTypeInfo, JobSpec, TopologyConstraint


class Member(NamedTuple):
    """One member of a gang: GPUs, CPUs and memory it needs on a single node. A named tuple,
    not a dataclass: gangs are built and hashed (as dict keys) thousands of times a cycle,
    and a tuple is built and hashed in C. Never compared with other tuples."""

    role: str
    gpus: int
    gpu_types: tuple[str, ...]
    min_gpu_memory_gb: int
    cpus: int
    memory_gb: int

    def accepts_type(self, gpu: GpuTypeInfo) -> bool:
        """Capability by type and by device memory (seed 001 example 8.2: a job that needs
        35 GB runs on 40 GB or 80 GB devices)."""
        if self.gpu_types and gpu.name not in self.gpu_types:
            return False
        return gpu.memory_gb >= self.min_gpu_memory_gb

    def copies_per_node(self, gpus: int, cpus: int, memory_gb: int) -> int:
        """How many copies of this member one empty node of that size holds (its GPUs, CPUs
        and memory each divided among them; capability by type is the caller's)."""
        copies = gpus // self.gpus if self.gpus else 0
        if self.cpus:
            copies = min(copies, cpus // self.cpus)
        if self.memory_gb:
            copies = min(copies, memory_gb // self.memory_gb)
        return copies


class Demand(NamedTuple):
    """A gang: members sorted largest first (then by role), plus its topology constraint and
    whether its members must each be on a node of their own (``distinct_nodes``). Build it
    with :meth:`of`, which also fills the totals. A named tuple, like :class:`Member`."""

    members: tuple[Member, ...]
    topology: TopologyConstraint
    gpus: int
    largest_member: int
    distinct_nodes: bool = False

    @classmethod
    def of(cls, members: tuple[Member, ...], topology: TopologyConstraint,
           distinct_nodes: bool = False) -> Demand:
        ordered = tuple(sorted(
            members, key=lambda m: (-m.gpus, m.role, m.gpu_types, m.min_gpu_memory_gb)))
        return cls(
            members=ordered,
            topology=topology,
            gpus=sum(m.gpus for m in ordered),
            largest_member=ordered[0].gpus if ordered else 0,
            distinct_nodes=distinct_nodes,
        )

    def own_node(self, member_gpus: int, widest: int) -> bool:
        """Does a member of ``member_gpus`` GPUs need a node no other member of the gang is
        on? Always for a gang on distinct nodes; otherwise when it takes more than half of
        the widest node it may use (two such never fit on one)."""
        return self.distinct_nodes or 2 * member_gpus > widest

    def node_needs(self, widest: int) -> tuple[tuple[int, int], ...]:
        """The nodes the members that need a node of their own (:meth:`own_node`) ask for,
        as (size, how many of those members are at least that large), largest size first:
        a gang on distinct nodes of 4, 4 and 2 GPUs needs two nodes with 4 free and three
        with 2 free, ``((4, 2), (2, 3))``. The gang fits by these counts when, for every
        size, that many nodes each have that many GPUs free (each member's nodes include the
        larger members' ones, so checking these prefixes is Hall's condition: exact by GPUs
        when the members accept the same nodes). A gang none of whose
        members needs a node of its own still needs one node for its largest member."""
        distinct = self.distinct_nodes
        if not distinct and 2 * self.largest_member <= widest:
            # most gangs: no member needs a node of its own (asked once per job explained)
            return ((self.largest_member, 1),)
        needs: list[tuple[int, int]] = []
        count = 0
        for m in self.members:  # largest first; own_node only gets harder to meet as they shrink
            if not (distinct or 2 * m.gpus > widest):  # own_node, inlined: a hot path
                break
            count += 1
            if needs and needs[-1][0] == m.gpus:
                needs[-1] = (m.gpus, count)
            else:
                needs.append((m.gpus, count))
        return tuple(needs) or ((self.largest_member, 1),)


def _member(spec: JobSpec, role: str, gpus: int) -> Member:
    return Member(
        role=role,
        gpus=gpus,
        gpu_types=tuple(sorted(spec.gpu_types)),
        min_gpu_memory_gb=spec.min_gpu_memory_gb,
        cpus=spec.cpus_per_gpu * gpus,
        memory_gb=spec.memory_gb_per_gpu * gpus,
    )


def _members(spec: JobSpec, sizes: list[int]) -> list[Member]:
    """One member per size, sharing the object between members of equal size."""
    made: dict[int, Member] = {}
    out = []
    for g in sizes:
        m = made.get(g)
        if m is None:
            m = made[g] = _member(spec, "", g)
        out.append(m)
    return out


def node_size_for(spec: JobSpec, node_sizes_by_type: Mapping[str, int],
                  gpu_types: Mapping[str, GpuTypeInfo]) -> int:
    """The GPUs of the largest node whose GPU type the job accepts (0 if none)."""
    probe = _member(spec, "", 1)
    best = 0
    for type_name, size in node_sizes_by_type.items():
        info = gpu_types.get(type_name, GpuTypeInfo(type_name, 0))
        if probe.accepts_type(info) and size > best:
            best = size
    return best


def _split(total: int, per_node: int) -> list[int]:
    """``total`` GPUs as members of ``per_node`` GPUs, plus one smaller remainder member."""
    if per_node <= 0:
        return [total]
    whole, rest = divmod(total, per_node)
    return [per_node] * whole + ([rest] if rest else [])


def demand_for(spec: JobSpec, gpus: int, node_size: int) -> Demand:
    """The gang for ``spec`` at ``gpus`` GPUs.

    Steps:
    1. Heterogeneous gangs (``roles``): one member per role member, fields a role leaves empty
       inherited from the job.
    2. ``gpus_per_node`` given: members of that size (a smaller remainder member if ``gpus``
       is not a multiple).
    3. Otherwise a job smaller than one node goes on one node; a job of at least one node's
       GPUs takes whole nodes (members of ``node_size``), the seed's rule for gangs.
    A ``SAME_NODE`` job is always a single member.
    """
    members: list[Member] = []
    if spec.roles:
        for role in spec.roles:
            for _ in range(role.count):
                members.append(
                    Member(
                        role=role.name,
                        gpus=role.gpus_per_member,
                        gpu_types=tuple(sorted(role.gpu_types or spec.gpu_types)),
                        min_gpu_memory_gb=role.min_gpu_memory_gb or spec.min_gpu_memory_gb,
                        cpus=(role.cpus_per_gpu or spec.cpus_per_gpu) * role.gpus_per_member,
                        memory_gb=(role.memory_gb_per_gpu or spec.memory_gb_per_gpu)
                        * role.gpus_per_member,
                    )
                )
    elif spec.topology is TopologyConstraint.SAME_NODE:
        members.append(_member(spec, "", gpus))
    elif spec.gpus_per_node is not None:
        members.extend(_members(spec, _split(gpus, spec.gpus_per_node)))
    elif node_size > 0 and gpus > node_size:
        members.extend(_members(spec, _split(gpus, node_size)))
    else:
        members.append(_member(spec, "", gpus))
    return Demand.of(tuple(members), spec.topology, spec.members_on_distinct_nodes)


def with_resources_per_gpu(demand: Demand, cpus_per_gpu: int, memory_gb_per_gpu: int) -> Demand:
    """``demand`` (of a job without roles) for a job that differs only in CPUs and memory per
    GPU: equal to what :func:`demand_for` builds for that job, without splitting and sorting
    again (members' order does not depend on CPUs or memory)."""
    made: dict[int, Member] = {}
    members = []
    for m in demand.members:
        scaled = made.get(m.gpus)
        if scaled is None:
            scaled = made[m.gpus] = Member(m.role, m.gpus, m.gpu_types, m.min_gpu_memory_gb,
                                           cpus_per_gpu * m.gpus, memory_gb_per_gpu * m.gpus)
        members.append(scaled)
    return Demand(tuple(members), demand.topology, demand.gpus, demand.largest_member,
                  demand.distinct_nodes)


def replica_size(spec: JobSpec) -> int:
    """GPUs per replica of an elastic job: ``gpus_per_node``, else its minimum size."""
    if spec.gpus_per_node is not None and spec.gpus_per_node > 0:
        return spec.gpus_per_node
    return max(1, spec.min_gpus or spec.gpus)


def is_elastic(spec: JobSpec) -> bool:
    return (
        not spec.roles
        and spec.min_gpus is not None
        and spec.max_gpus is not None
        and spec.max_gpus > spec.min_gpus
    )


def elastic_sizes(spec: JobSpec) -> tuple[int, ...]:
    """Sizes to try for an elastic job, largest first: max, ..., min in replica steps."""
    if not is_elastic(spec):
        return (spec_gpus(spec),)
    assert spec.min_gpus is not None and spec.max_gpus is not None
    step = replica_size(spec)
    sizes = list(range(spec.max_gpus, spec.min_gpus - 1, -step))
    if sizes[-1] != spec.min_gpus:
        sizes.append(spec.min_gpus)
    return tuple(s for s in sizes if s > 0)


def spec_gpus(spec: JobSpec) -> int:
    """GPUs a rigid job asks for (the sum over roles for heterogeneous gangs)."""
    if spec.roles:
        return sum(r.count * r.gpus_per_member for r in spec.roles)
    return spec.gpus


def minimum_gpus(spec: JobSpec) -> int:
    """The smallest size the job can run at."""
    if is_elastic(spec):
        assert spec.min_gpus is not None
        return spec.min_gpus
    return spec_gpus(spec)
