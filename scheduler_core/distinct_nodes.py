"""A gang on distinct nodes: which sets of its members must find that many nodes of their own.

Every member of such a gang needs a node no other member is on, with room for it (GPUs, CPUs
and memory) among the nodes it accepts. Members of one *shape* (the same GPUs, CPUs, memory
and acceptable nodes) accept the same nodes, so by Hall's theorem the gang has nodes enough
exactly when, for every set of its shapes, the nodes with room for at least one shape of the
set number at least the set's members. A set needs checking only when it is *closed upward*:
it holds every shape that dominates one of its own (asks at least as much of every resource
on no more nodes, so its nodes are among the other's: adding it costs no node and adds
members). For a job without roles (members of one size and a smaller remainder, CPUs and
memory per GPU alike) the closed sets are the prefixes, largest members first; a
heterogeneous gang whose smaller members need a GPU type, device memory, CPUs or memory that
fewer nodes have gets the sets of those members alone too (until 7 Dec only the prefixes by
GPUs were counted: three h100-only members of a gang whose largest member took any type were
counted on every node).

The callers count nodes their own way: the whole fleet by class for "can never run"
(``admission``, and ``capability`` at submit by node shape), the free nodes now for the waiting
words (``diagnosis._distinct_shortfall``) and the placer's pre-check (``Placer.plausible``),
each future release for the ETA (``ReleaseTimeline.node_sets``). This module says which sets
to count and how many members each holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from scheduler_core.gang import Demand

EXHAUSTIVE_SHAPES = 8
"""Up to this many shapes every closed set is checked (at most 255 sets); a gang with more
gets its prefixes only, largest first (each a necessary condition, exact when nested)."""


class Shape(NamedTuple):
    """Members of a gang on distinct nodes that ask the same: ``gpus``, ``cpus`` and
    ``memory_gb`` each, on the nodes of ``where`` (node classes, or the submit check's node
    shapes), ``members`` of them."""

    gpus: int
    cpus: int
    memory_gb: int
    where: frozenset[int]
    members: int

    def dominates(self, other: Shape) -> bool:
        """Does every node with room for this shape have room for ``other``?"""
        return (self.gpus >= other.gpus and self.cpus >= other.cpus
                and self.memory_gb >= other.memory_gb and self.where <= other.where)


def shapes_of(demand: Demand, where: Sequence[Sequence[int]]) -> tuple[Shape, ...]:
    """The gang's shapes in its members' order (largest first), ``where[i]`` the nodes member
    ``i`` accepts."""
    counts: dict[tuple[int, int, int, frozenset[int]], int] = {}
    for m, accepted in zip(demand.members, where, strict=True):
        key = (m.gpus, m.cpus, m.memory_gb, frozenset(accepted))
        counts[key] = counts.get(key, 0) + 1
    return tuple(Shape(*key, count) for key, count in counts.items())


class NodeSet(NamedTuple):
    """A closed set of a gang's shapes: its ``members`` need as many nodes of their own, each
    with room for one of ``shapes``."""

    shapes: tuple[Shape, ...]
    members: int

    @property
    def where(self) -> frozenset[int]:
        return frozenset().union(*(s.where for s in self.shapes))

    def room(self, where: int, gpus: int, cpus: int, memory_gb: int) -> bool:
        """Has a node of ``where`` with these free resources room for one of the set?"""
        return any(where in s.where and gpus >= s.gpus and cpus >= s.cpus
                   and memory_gb >= s.memory_gb for s in self.shapes)


def node_sets(shapes: Sequence[Shape]) -> tuple[NodeSet, ...]:
    """The sets of shapes to count (see the module's words), fewer members first; among sets
    of equal members, those of the larger shapes first. A set whose shapes' nodes are those of
    a set with more members is left out (it can never be the one short)."""
    k = len(shapes)
    if k > EXHAUSTIVE_SHAPES:
        out, total = [], 0
        for i, s in enumerate(shapes):
            total += s.members
            out.append(NodeSet(tuple(shapes[:i + 1]), total))
        return tuple(out)
    above = [sum(1 << a for a in range(k) if a != b and shapes[a].dominates(shapes[b]))
             for b in range(k)]
    closed: list[tuple[int, tuple[int, ...], NodeSet]] = []
    for mask in range(1, 1 << k):
        chosen = tuple(i for i in range(k) if mask >> i & 1)
        if any(above[i] & ~mask for i in chosen):
            continue
        members = sum(shapes[i].members for i in chosen)
        closed.append((members, chosen, NodeSet(tuple(shapes[i] for i in chosen), members)))
    # sets with room on the same nodes: only the one with the most members can be short
    by_nodes: dict[frozenset[int], tuple[int, tuple[int, ...], NodeSet]] = {}
    for entry in closed:
        # (a shape dominating another of the set adds no node: its nodes are the other's)
        bottom = frozenset(i for i in entry[1]
                           if not any(j != i and shapes[i].dominates(shapes[j]) for j in entry[1]))
        kept = by_nodes.get(bottom)
        if kept is None or entry[0] > kept[0]:
            by_nodes[bottom] = entry
    return tuple(entry[2] for entry in sorted(by_nodes.values(), key=lambda e: (e[0], e[1])))
