"""Phases 3 and 4 for one gang: filter candidate nodes, score them, choose an allocation.

The search never scans the fleet. Candidates come from the free-capacity buckets of
:class:`~scheduler_core.state.ClusterState`; filter plugins only see the nodes the buckets
propose.

Algorithm for a gang (``Placer.place``):

1. A single-member job: walk the fleet-level buckets of its capable node classes in the score
   plugin's order (pack: up from the request, spread: down from a whole node) and keep the
   best-scoring admissible node.
2. A multi-member gang whose score plugin prefers locality (pack): try one leaf switch, then
   one spine, then the whole fleet; the topology constraint cuts this list short (``same_leaf``
   stops after leaves). At each level, candidate domains with enough free capable GPUs are
   tried best-fit first (fewest free GPUs that still suffice); inside a domain, members fill
   the sub-domains with the most free GPUs first, so a gang spans as few leaves as possible.
   Up to ``DOMAINS_PER_SCOPE`` successful allocations are compared by the topology scorer
   (seed 001 eq. 2) and the cheapest wins; the first level with any success ends the search,
   since a smaller scope never costs more.
3. A gang whose plugin spreads (serving): members are placed one by one over the whole fleet
   (or the constrained domain) with the spread score, which avoids failure domains the gang
   already uses.
4. When that greedy order fails in a domain: a gang on distinct nodes whose shapes do not nest
   is matched to nodes (``_match``); a packed gang of members of more than one shape is
   searched for by bounded backtracking (``_search``).

Every tentative allocation is taken on the state under a probe holder and released again, so
the state is unchanged when ``place`` returns; the caller commits the grants it returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from scheduler_core.distinct_nodes import Shape, node_sets, shapes_of
from scheduler_core.gang import Demand, Member
from scheduler_core.maintenance import NO_NODES
from scheduler_core.plugins.protocols import FilterPlugin, GangContext, ScorePlugin, TopologyScorer
from scheduler_core.plugins.scores import failure_domain
from scheduler_core.state import FLEET, HOLD, LEAF, SPINE, ClusterState, Grant, Holder, choose_gpus
from scheduler_core.types import TopologyConstraint

_new_tuple = tuple.__new__

DOMAINS_PER_SCOPE = 3
"""Successful allocations compared per topology level before choosing the cheapest."""
FAILED_DOMAINS_PER_SCOPE = 6
"""Domains that pass the free-GPU check but fail member by member, tried per level."""
SEARCH_STEPS = 64
"""Members :meth:`Placer._search` may take on a node, in all, for one gang in one domain."""
SEARCH_LOOKS = 128
"""Nodes it looks at for one member at one step (hundreds of nodes may be alike)."""

_PROBE: Holder = (HOLD, "\x00probe")

_SCOPES_LOCAL: dict[TopologyConstraint, tuple[int, ...]] = {
    TopologyConstraint.ANY: (LEAF, SPINE, FLEET),
    TopologyConstraint.SAME_SPINE: (LEAF, SPINE),
    TopologyConstraint.SAME_LEAF: (LEAF,),
    TopologyConstraint.SAME_NODE: (LEAF,),
}
_SCOPES_SPREAD: dict[TopologyConstraint, tuple[int, ...]] = {
    TopologyConstraint.ANY: (FLEET,),
    TopologyConstraint.SAME_SPINE: (SPINE,),
    TopologyConstraint.SAME_LEAF: (LEAF,),
    TopologyConstraint.SAME_NODE: (LEAF,),
}


def loners(state: ClusterState, demand: Demand,
           member_classes: Sequence[tuple[int, ...]]) -> int:
    """Members of the largest size that cannot share a node with another such member (more
    than half of the widest capable node, or any member of a gang on distinct nodes): each
    needs a node of its own."""
    largest = demand.largest_member
    count = 0
    seen: tuple[int, ...] | None = None
    widest = 0
    for m, cls in zip(demand.members, member_classes, strict=True):
        if m.gpus == largest:
            if cls is not seen:  # members of a gang usually share one classes tuple
                seen, widest = cls, state.widest(cls)
            if demand.distinct_nodes or 2 * m.gpus > widest:  # Demand.own_node, inlined
                count += 1
    return count


_Rooms = tuple[tuple[tuple[int, ...], int, int], ...]
"""Nodes a gang needs, as (classes, free GPUs at least, how many such nodes)."""
_DomainNeeds = tuple[tuple[tuple[tuple[int, ...], int], ...], _Rooms]
"""What a domain must hold for a gang (:meth:`Placer._domain_needs`): free GPUs per set of
classes its members take, and the nodes with room its members that need one of their own
take."""
_GangFacts = tuple[tuple[int, ...], tuple[int, ...], int, _Rooms, _DomainNeeds]
"""See :meth:`Placer._facts`."""


class PlacementRequest(NamedTuple):
    """One gang to place. ``member_classes[i]`` are the node classes member ``i`` may use
    (capable and, for quota, of an allowed GPU type). ``seed`` is what the job already holds
    (an elastic job growing), so new members co-locate or spread relative to it. ``closed``:
    nodes the run may not use, their maintenance windows overlapping it (see
    :mod:`scheduler_core.maintenance`). (A named tuple: one is built per placement attempt.)"""

    demand: Demand
    member_classes: tuple[tuple[int, ...], ...]
    score: ScorePlugin
    seed_nodes: tuple[int, ...] = ()
    closed: frozenset[int] = NO_NODES


class Placer:
    def __init__(self, state: ClusterState, filters: Sequence[FilterPlugin],
                 topology: TopologyScorer) -> None:
        self.state = state
        self.filters = tuple(filters)
        self.topology = topology
        self._unions: dict[tuple[tuple[int, ...], ...], tuple[int, ...]] = {}
        self.kept = False
        """The last :meth:`place` left its grants taken under the probe holder."""
        self._gang_facts: dict[tuple[Demand, tuple[tuple[int, ...], ...]], _GangFacts | None] = {}
        self._crossed_gangs: dict[tuple[Demand, tuple[tuple[int, ...], ...]], bool] = {}
        self._closed: frozenset[int] = NO_NODES
        """The closed nodes of the request being placed (no node of it is admitted)."""

    def union(self, member_classes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
        """Every class some member may use, sorted (memoised: gangs of one shape ask often)."""
        found = self._unions.get(member_classes)
        if found is None:
            found = self._unions[member_classes] = tuple(sorted(
                {c for cls in member_classes for c in cls}))
        return found

    # ------------------------------------------------------------------ public

    def place(self, req: PlacementRequest, *, keep: bool = False) -> list[Grant] | None:
        """Grants for every member of the gang, or ``None``. The state is left unchanged,
        except with ``keep`` when the gang was placed by a single attempt over the whole
        fleet (a spreading gang): then its grants stay taken under the probe holder and
        :attr:`kept` is set, and the caller must :meth:`adopt` or :meth:`drop` them before
        anything else touches the state. The state then ends as if the grants had been
        released and taken again (same holdings, same bucket order), without the work."""
        assert not self.kept, "the grants kept by the last place() were not adopted or dropped"
        self._closed = req.closed
        members = req.demand.members
        if not self.plausible(req):
            return None
        union = self.union(req.member_classes)
        if len(members) > 1 and req.demand.topology is TopologyConstraint.SAME_NODE:
            return self._one_node(req)
        if len(members) == 1:
            # One member: pick the node without touching the state.
            gang = self._seeded(req)
            grant = self._choose(FLEET, 0, members[0], req.member_classes[0], req.score, gang)
            return None if grant is None else [grant]
        scopes = (_SCOPES_LOCAL if req.score.prefers_locality else _SCOPES_SPREAD)[
            req.demand.topology
        ]
        hinted = {self.state.leaf[n] for n in req.seed_nodes} | {
            self.state.spine[n] for n in req.seed_nodes
        } if req.seed_nodes else set()
        # over the whole fleet there is one domain, so one attempt: its grants are the answer
        keep = keep and scopes == (FLEET,)
        for level in scopes:
            best: tuple[float, int, list[Grant]] | None = None
            ok = failed = 0
            domains = self._domains(level, union, req, hinted)
            for rank, domain in enumerate(domains):
                grants = self._attempt(level, domain, req, keep)
                if grants is None:
                    failed += 1
                    if failed >= FAILED_DOMAINS_PER_SCOPE:
                        break
                    continue
                # with a single candidate domain there is nothing to compare the cost with
                cost = self.topology.cost(self.state, grants) if len(domains) > 1 else 0.0
                if best is None or cost < best[0]:
                    best = (cost, rank, grants)
                ok += 1
                if ok >= DOMAINS_PER_SCOPE or (level == LEAF and not self._can_share(req)):
                    # Inside one leaf, members that cannot share a node cost the same
                    # wherever they land: the first success is as good as any.
                    break
            if best is not None:
                return best[2]
        return None

    # ------------------------------------------------------------------ search

    def plausible(self, req: PlacementRequest, rooms: GrowingRooms | None = None) -> bool:
        """Index-only necessary conditions: enough free capable GPUs, as many nodes with
        room for the largest member as there are members too large to share a node with
        it, and for a gang on distinct nodes as many nodes with the GPUs for one of each set
        of its members as the set has members (its smaller members may take fewer nodes). ``place`` fails whenever this is ``False``; it costs a few dict lookups.
        ``rooms``: the request's domains with room so far in a search where capacity only
        grows (see :class:`GrowingRooms`)."""
        key = (req.demand, req.member_classes)
        facts = self._gang_facts.get(key)
        if facts is None:
            facts = self._gang_facts[key] = self._facts(req)
        if facts is None:
            return False
        union, classes, need, sets, _ = facts
        if self.state.free_in(FLEET, 0, union) < req.demand.gpus:
            return False
        for set_classes, size, members in sets:
            if self.state.nodes_with_free(set_classes, size) < members:
                return False
        largest = req.demand.largest_member
        if need <= 1:
            return self.state.largest_free_block(classes) >= largest
        if self.state.nodes_with_free(classes, largest) < need:
            return False
        topology = req.demand.topology
        if len(req.demand.members) > 1 and topology in (TopologyConstraint.SAME_LEAF,
                                                        TopologyConstraint.SAME_SPINE):
            # some one switch must have the GPUs and the roomy nodes (per-domain index sums)
            level = LEAF if topology is TopologyConstraint.SAME_LEAF else SPINE
            if rooms is not None:
                return rooms.any_room(self, level, union, req)
            return bool(self._domains(level, union, req, set()))
        return True

    def _facts(self, req: PlacementRequest) -> _GangFacts | None:
        """What :meth:`plausible` needs that depends on the gang and the fleet's classes only:
        the classes' union, the classes of its largest members, how many of those need a node
        of their own, and for a gang on distinct nodes every set of its members that needs as
        many nodes (:func:`~scheduler_core.distinct_nodes.node_sets`: the classes, the fewest
        GPUs one of them asks, how many they are), so that members of a role that takes fewer
        nodes than the largest are counted too (``None`` for a gang that cannot be placed at
        all)."""
        if not req.demand.members or any(not cls for cls in req.member_classes):
            return None
        largest = req.demand.largest_member
        biggest = [cls for m, cls in zip(req.demand.members, req.member_classes, strict=True)
                   if m.gpus == largest]
        classes = tuple(sorted({c for cls in biggest for c in cls}))
        sets: tuple[tuple[tuple[int, ...], int, int], ...] = ()
        if req.demand.distinct_nodes and len(req.demand.members) > 1:
            sets = tuple((tuple(sorted(need.where)), min(s.gpus for s in need.shapes), need.members)
                         for need in node_sets(shapes_of(req.demand, req.member_classes)))
        return (self.union(req.member_classes), classes,
                loners(self.state, req.demand, req.member_classes), sets,
                self._domain_needs(req, sets))

    def _domain_needs(self, req: PlacementRequest, sets: _Rooms) -> _DomainNeeds:
        """What one domain must hold for the gang, by index sums (:meth:`has_room`): the GPUs
        of each set of classes its members take, when they take more than one (a role's
        GPUs on its own type), and the nodes its members that need one of their own take.
        Those are the members too large to share a node with another (more than half the
        widest node of their classes) or, on distinct nodes, every member: for each size,
        as many nodes with that much free on their classes as such members at least that
        large (Hall's condition by GPUs; for a gang on distinct nodes, per set of its
        members, ``sets``). Until 7 Dec a domain was asked only for a node each for the
        members of the largest size, and not at all when there was one: a gang of 8, 6 and 6
        GPUs on 8-GPU nodes tried a leaf with 20 GPUs free, 8 on one node and 4 on each of
        three others, and failed there member by member."""
        demand, state = req.demand, self.state
        groups: dict[tuple[int, ...], int] = {}
        for m, cls in zip(demand.members, req.member_classes, strict=True):
            groups[cls] = groups.get(cls, 0) + m.gpus
        gpus = tuple(groups.items()) if len(groups) > 1 else ()
        loners: list[tuple[int, tuple[int, ...]]] = []
        widest: dict[tuple[int, ...], int] = {}
        for m, cls in zip(demand.members, req.member_classes, strict=True):
            width = widest.get(cls)
            if width is None:
                width = widest[cls] = state.widest(cls)
            if demand.distinct_nodes or 2 * m.gpus > width:  # Demand.own_node, inlined
                loners.append((m.gpus, cls))
        loners.sort(key=lambda lone: -lone[0])
        rooms: list[tuple[tuple[int, ...], int, int]] = []
        taken: set[int] = set()
        for count, (size, cls) in enumerate(loners, 1):
            taken.update(cls)
            classes = tuple(sorted(taken))
            if rooms and rooms[-1][1] == size:
                rooms[-1] = (classes, size, count)
            else:
                rooms.append((classes, size, count))
        return gpus, (*rooms, *sets)

    def _roomy_in(self, level: int, domain: int, classes: tuple[int, ...], largest: int) -> int:
        count = 0
        for c in classes:
            buckets = self.state.buckets.get((level, domain, c))
            if buckets is None:
                continue
            for free in range(largest, len(buckets)):
                count += len(buckets[free])
        return count

    def _can_share(self, req: PlacementRequest) -> bool:
        """Could two members of this gang ever sit on one node?"""
        sizes = sorted(m.gpus for m in req.demand.members)
        if len(sizes) < 2 or req.demand.distinct_nodes:
            return False
        widest = max(self.state.classes[c].gpus for cls in req.member_classes for c in cls)
        return sizes[0] + sizes[1] <= widest

    def _domains(self, level: int, union: tuple[int, ...], req: PlacementRequest,
                 hinted: set[int]) -> list[int]:
        if level == FLEET:
            return [0]
        domains: set[int] = set()
        for c in union:
            domains.update(self.state.domains_of_class.get((level, c), ()))
        needs = self.needs_in_domain(req)
        scored = []
        for d in domains:
            free = self.has_room(level, d, union, req, needs)
            if free is not None:
                scored.append((free, d))
        # Best fit (fewest free GPUs that suffice) for locality-preferring plugins, emptiest
        # first for spreading ones; domains the job already uses first in both cases.
        sign = 1 if req.score.prefers_locality else -1
        scored.sort(key=lambda fd: (fd[1] not in hinted if level == LEAF else True,
                                    sign * fd[0], fd[1]))
        return [d for _, d in scored]

    def needs_in_domain(self, req: PlacementRequest) -> _DomainNeeds:
        """:meth:`_domain_needs` of the request's gang (memoised with :meth:`_facts`)."""
        key = (req.demand, req.member_classes)
        facts = self._gang_facts.get(key)
        if facts is None:
            facts = self._gang_facts[key] = self._facts(req)
        return ((), ()) if facts is None else facts[4]

    def has_room(self, level: int, domain: int, union: tuple[int, ...], req: PlacementRequest,
                 needs: _DomainNeeds) -> int | None:
        """The free GPUs of ``union`` in ``domain`` if it has room for the gang by the counts
        (its GPUs, on each set of classes its members take, and the nodes its members that
        need one of their own take, ``needs``), else ``None``. Necessary only: a domain it
        admits may still fail member by member."""
        state = self.state
        free = state.free_in(level, domain, union)
        if free < req.demand.gpus:
            return None
        gpus, rooms = needs
        for classes, wanted in gpus:
            if state.free_in(level, domain, classes) < wanted:
                return None
        for classes, size, count in rooms:
            if self._roomy_in(level, domain, classes, size) < count:
                return None
        return free

    def _one_node(self, req: PlacementRequest) -> list[Grant] | None:
        """Every member of a ``same_node`` gang on one node: a node of a class all members
        accept, with room for all of them together."""
        common = set(req.member_classes[0]).intersection(*req.member_classes[1:])
        if not common:
            return None
        members = req.demand.members
        together = Member("", req.demand.gpus, (), 0, sum(m.cpus for m in members),
                          sum(m.memory_gb for m in members))
        grant = self._choose(FLEET, 0, together, tuple(sorted(common)), req.score,
                             self._seeded(req))
        if grant is None:
            return None
        gang = GangContext()
        try:
            for m in members:
                self._take_on(grant.node, m, gang)
            return list(self.state.holdings.get(_PROBE, []))
        finally:
            self.state.release(_PROBE)

    def _seeded(self, req: PlacementRequest) -> GangContext:
        gang = GangContext(own_nodes=set() if req.demand.distinct_nodes else None)
        for n in req.seed_nodes:
            gang.used_nodes[n] = gang.used_nodes.get(n, 0) + 1
            fd = failure_domain(self.state, n)
            gang.domain_counts[fd] = gang.domain_counts.get(fd, 0) + 1
        return gang

    def _attempt(self, level: int, domain: int, req: PlacementRequest,
                 keep: bool = False) -> list[Grant] | None:
        """Place every member inside one domain; release (unless ``keep`` and placed) and
        return the grants."""
        gang = self._seeded(req)
        pending = list(zip(req.demand.members, req.member_classes, strict=True))
        placed = False
        try:
            if req.score.prefers_locality and len(pending) > 1:
                leftover = self._fill(level, domain, pending, req.score, gang)
            else:
                leftover = [
                    (m, cls) for m, cls in pending
                    if not self._place_member(level, domain, m, cls, req.score, gang)
                ]
            if leftover:
                # the greedy order (largest first) can take a node a smaller member needed
                if self._crossed(req):
                    self.state.release(_PROBE)
                    if not self._match(level, domain, req):
                        return None
                elif self._mixed(req):
                    self.state.release(_PROBE)
                    if not self._search(level, domain, req):
                        return None
                else:
                    return None
            placed = True
            return list(self.state.holdings.get(_PROBE, []))
        finally:
            if keep and placed:
                self.kept = True
            else:
                self.state.release(_PROBE)

    def _crossed(self, req: PlacementRequest) -> bool:
        """Is this a gang on distinct nodes whose members' shapes do not nest in the order
        they are placed (a member asks less of one thing than the member after it: fewer CPUs
        or less memory, or takes classes it does not)? Placing members in that order finds
        nodes for a gang whose shapes nest so whenever there are any (a node with room for a
        member has room for every later one); for the others it may not (memoised per gang).
        Until 7 Dec shapes that nested in the other order passed: members of 1 GPU, the first
        asking no memory, the second 32 GB, where one node had the memory; the first took that
        node and the gang never started ("spread too thinly") though it fit."""
        if not req.demand.distinct_nodes or len(req.demand.members) < 2:
            return False
        key = (req.demand, req.member_classes)
        found = self._crossed_gangs.get(key)
        if found is None:
            shapes = [Shape(m.gpus, m.cpus, m.memory_gb, frozenset(cls), 1)
                      for m, cls in zip(req.demand.members, req.member_classes, strict=True)]
            found = self._crossed_gangs[key] = any(
                not a.dominates(b) for a, b in zip(shapes, shapes[1:], strict=False))
        return found

    @staticmethod
    def _mixed(req: PlacementRequest) -> bool:
        """Is this a packed gang whose members are not all of one shape (GPUs, CPUs, memory
        and classes)? Placing members of one shape one by one finds room for all of them
        whenever there is (each takes one member's room on one node, wherever it goes); for
        the others it may not."""
        if req.demand.distinct_nodes:
            return False
        members, classes = req.demand.members, req.member_classes
        first, cls = members[0], classes[0]
        return any(m.gpus != first.gpus or m.cpus != first.cpus or m.memory_gb != first.memory_gb
                   or c != cls for m, c in zip(members, classes, strict=True))

    def _search(self, level: int, domain: int, req: PlacementRequest) -> bool:
        """Every member of a packed gang in ``domain`` by a bounded backtracking search, taken
        under the probe holder in the members' order; False, the state unchanged, if it finds
        none. The member with the fewest admissible nodes goes next (one with none ends the
        branch), tried on one node of each kind (:meth:`_kinds`) in its score plugin's bucket
        order; :data:`SEARCH_STEPS` members taken in all. Asked only when placing largest first
        failed for a gang whose members are not all of one shape (:meth:`_mixed`): a member
        of 5 GPUs took a node that had the 5 GPUs but not the CPUs its 1-GPU member of 4 CPUs
        needed, which only the other node had."""
        state = self.state
        members, classes, score = req.demand.members, req.member_classes, req.score
        pending = list(range(len(members)))
        chosen: dict[int, int] = {}
        steps = SEARCH_STEPS

        def fit() -> bool:
            nonlocal steps
            if not pending:
                return True
            nodes: list[int] | None = None
            at = 0
            looked: set[tuple[Member, tuple[int, ...]]] = set()
            for k, i in enumerate(pending):
                shape = (members[i], classes[i])
                if shape in looked:
                    continue
                looked.add(shape)
                found = self._kinds(level, domain, members[i], classes[i], score)
                if not found:
                    return False
                if nodes is None or len(found) < len(nodes):
                    nodes, at = found, k
            assert nodes is not None
            i = pending.pop(at)
            m = members[i]
            for n in nodes:
                if steps <= 0:
                    break
                steps -= 1
                mask = choose_gpus(state.free_mask[n], state.nodes[n].gpus, m.gpus)
                state.take(_PROBE, Grant(n, mask, m.cpus, m.memory_gb, m.role))
                if fit():
                    chosen[i] = n
                    return True
                state.give_back_last(_PROBE)
            pending.insert(at, i)
            return False

        if not fit():
            return False
        # taken again in the members' order, as every other way of placing takes them
        state.release(_PROBE)
        gang = self._seeded(req)
        for i in range(len(members)):
            self._take_on(chosen[i], members[i], gang)
        return True

    def _kinds(self, level: int, domain: int, member: Member, classes: tuple[int, ...],
               score: ScorePlugin) -> list[int]:
        """One admissible node for ``member`` in the domain of each kind (class and free
        GPUs, CPUs and memory: nodes alike for every member of the gang), in the score
        plugin's bucket order, among the first :data:`SEARCH_LOOKS` nodes of its classes
        with room for its GPUs."""
        state = self.state
        free_cpus, free_mem = state.free_cpus, state.free_mem
        kinds: set[tuple[int, int, int, int]] = set()
        found: list[int] = []
        looks = SEARCH_LOOKS
        for free in score.bucket_order(member.gpus, state.widest(classes)):
            for c in classes:
                buckets = state.buckets.get((level, domain, c))
                if buckets is None or free >= len(buckets):
                    continue
                for n in buckets[free]:
                    looks -= 1
                    if looks < 0:
                        return found
                    kind = (c, free, free_cpus[n], free_mem[n])
                    if kind not in kinds and self._admits(n, member):
                        kinds.add(kind)
                        found.append(n)
        return found

    def _match(self, level: int, domain: int, req: PlacementRequest) -> bool:
        """Every member of a gang on distinct nodes on a node of its own in ``domain``, by a
        maximum matching of members to the admissible nodes with room for them (augmenting
        paths, members largest first, each member's nodes in its score plugin's bucket
        order), taken under the probe holder; False, the state unchanged, if there is none.
        Asked only when placing largest first failed for a gang whose shapes do not nest
        (:meth:`_crossed`): a learner that takes any GPU type placed first on the only free
        h100 node its two h100-only workers needed. The state is not changed while matching."""
        state = self.state
        members = req.demand.members
        candidates: dict[tuple[Member, tuple[int, ...]], list[int]] = {}
        options: list[list[int]] = []
        for m, classes in zip(members, req.member_classes, strict=True):
            nodes = candidates.get((m, classes))
            if nodes is None:
                nodes = candidates[(m, classes)] = []
                width = state.widest(classes)
                for free in req.score.bucket_order(m.gpus, width):
                    for c in classes:
                        buckets = state.buckets.get((level, domain, c))
                        if buckets is not None and free < len(buckets):
                            nodes.extend(n for n in buckets[free] if self._admits(n, m))
            options.append(nodes)
        holder_of: dict[int, int] = {}

        def augment(i: int, seen: set[int]) -> bool:
            for n in options[i]:
                if n in seen:
                    continue
                seen.add(n)
                other = holder_of.get(n)
                if other is None or augment(other, seen):
                    holder_of[n] = i
                    return True
            return False

        for i in range(len(members)):
            if not augment(i, set()):
                return False
        gang = self._seeded(req)
        for n, i in sorted(holder_of.items(), key=lambda item: item[1]):
            self._take_on(n, members[i], gang)
        return True

    def adopt(self, holder: Holder) -> None:
        """Give the kept grants (see :meth:`place`) to ``holder``."""
        if self.kept:
            self.state.transfer(_PROBE, holder)
            self.kept = False

    def drop(self) -> None:
        """Release the kept grants (see :meth:`place`), if any."""
        if self.kept:
            self.state.release(_PROBE)
            self.kept = False

    def _fill(self, level: int, domain: int, members: list[tuple[Member, tuple[int, ...]]],
              score: ScorePlugin, gang: GangContext) -> list[tuple[Member, tuple[int, ...]]]:
        """Place as many members as possible in ``domain``, filling its sub-domains with the
        most free capable GPUs first. Returns the members left over."""
        if level == LEAF:
            return self._fill_leaf(domain, members, score, gang)
        union = tuple(sorted({c for _, cls in members for c in cls}))
        sub_level = SPINE if level == FLEET else LEAF
        if level == FLEET:
            subs = {d for c in union for d in self.state.domains_of_class.get((SPINE, c), ())}
        else:
            subs = set(self.state.leaves_of_spine.get(domain, ()))
        ordered = sorted(subs, key=lambda d: (-self.state.free_in(sub_level, d, union), d))
        left = members
        for sub in ordered:
            if not left:
                break
            if self.state.free_in(sub_level, sub, union) < min(m.gpus for m, _ in left):
                continue
            left = self._fill(sub_level, sub, left, score, gang)
        return left

    def _fill_leaf(self, leaf: int, members: list[tuple[Member, tuple[int, ...]]],
                   score: ScorePlugin, gang: GangContext) -> list[tuple[Member, tuple[int, ...]]]:
        """Place members inside one leaf, as bundles: members of one shape that fit on one
        node together go to one node (pairs on one node cost w(0) = 0 in eq. 2), the largest
        bundle that some node can take first. Returns the members left over."""
        left = list(members)
        placed_any = True
        while left and placed_any:
            placed_any = False
            first, classes = left[0]
            same = 1
            while same < len(left) and left[same] == left[0]:
                same += 1
            widest = self.state.widest(classes)
            most = 1 if gang.own_nodes is not None else max(1, min(same, widest // max(1, first.gpus)))
            for k in range(most, 0, -1):
                bundle = first if k == 1 else Member(
                    first.role, first.gpus * k, first.gpu_types, first.min_gpu_memory_gb,
                    first.cpus * k, first.memory_gb * k)
                grant = self._choose(LEAF, leaf, bundle, classes, score, gang)
                if grant is None:
                    continue
                for _ in range(k):
                    self._take_on(grant.node, first, gang)
                del left[:k]
                placed_any = True
                break
            if not placed_any:
                # The largest shape does not fit at all here; smaller members may.
                rest = [(m, cls) for m, cls in left[same:]
                        if not self._place_member(LEAF, leaf, m, cls, score, gang)]
                return left[:same] + rest
        return left

    def _take_on(self, node: int, member: Member, gang: GangContext) -> None:
        state = self.state
        mask = choose_gpus(state.free_mask[node], state.nodes[node].gpus, member.gpus)
        self._take(Grant(node, mask, member.cpus, member.memory_gb, member.role), gang)

    def _take(self, grant: Grant, gang: GangContext) -> None:
        """Take ``grant`` under the probe holder and count it in the gang."""
        state = self.state
        node = grant.node
        state.take(_PROBE, grant)
        gang.used_nodes[node] = gang.used_nodes.get(node, 0) + 1
        if gang.own_nodes is not None:
            gang.own_nodes.add(node)
        fd = failure_domain(state, node)
        gang.domain_counts[fd] = gang.domain_counts.get(fd, 0) + 1

    def _place_member(self, level: int, domain: int, member: Member, classes: tuple[int, ...],
                      score: ScorePlugin, gang: GangContext) -> bool:
        """Choose a node for ``member`` and take it under the probe holder."""
        grant = self._choose(level, domain, member, classes, score, gang)
        if grant is None:
            return False
        # the grant is what _take_on would build: nothing changed since _choose
        self._take(grant, gang)
        return True

    def _choose(self, level: int, domain: int, member: Member, classes: tuple[int, ...],
                score: ScorePlugin, gang: GangContext) -> Grant | None:
        """The best admissible node for ``member`` in the domain, as a grant (not taken)."""
        state = self.state
        chosen = -1
        # members of a gang on distinct nodes never go where another member is
        taken = gang.own_nodes
        if score.colocate_gang:
            for n in gang.used_nodes:
                if self._in_domain(n, level, domain) and state.node_class[n] in classes \
                        and self._admits(n, member) and (taken is None or n not in taken):
                    chosen = n
                    break
        if chosen < 0:
            width = state.widest(classes)
            best_score: tuple[float, ...] | None = None
            found = 0
            for free in score.bucket_order(member.gpus, width):
                for c in classes:
                    buckets = state.buckets.get((level, domain, c))
                    if buckets is None or free >= len(buckets):
                        continue
                    for n in buckets[free]:
                        if not self._admits(n, member) or (taken is not None and n in taken):
                            continue
                        s = score.score(state, n, member, gang)
                        if best_score is None or s > best_score:
                            best_score, chosen = s, n
                        found += 1
                        if found >= score.candidates or score.enough(s):
                            found = score.candidates
                            break
                    if found >= score.candidates:
                        break
                if found >= score.candidates or (found and score.stop_at_first_bucket):
                    break
        if chosen < 0:
            return None
        mask = choose_gpus(state.free_mask[chosen], state.nodes[chosen].gpus, member.gpus)
        # (built as a tuple, as ClusterState.grants_of builds them: every member placed asks)
        return _new_tuple(Grant, (chosen, mask, member.cpus, member.memory_gb, member.role))

    def _in_domain(self, node: int, level: int, domain: int) -> bool:
        if level == FLEET:
            return True
        if level == SPINE:
            return self.state.spine[node] == domain
        return self.state.leaf[node] == domain

    def _admits(self, node: int, member: Member) -> bool:
        if node in self._closed:
            return False
        for f in self.filters:
            if f.admits(self.state, node, member) is not None:
                return False
        return True


class GrowingRooms:
    """Which leaf switches (spines) have room for a ``same_leaf`` (``same_spine``) gang, along
    a search in which capacity only grows: a reservation search frees holders one by one and
    asks :meth:`Placer.plausible` after each. A domain with room keeps it, and one without
    gains it only when a node of it frees GPUs, so after the first full pass only the domains
    of the nodes freed since (:meth:`freed`) are looked at again. (The full pass over every
    leaf after each of some 300 removals was about a third of the head's search.)"""

    __slots__ = ("found", "domains", "touched", "needs")

    def __init__(self) -> None:
        self.needs: _DomainNeeds = ((), ())
        """What a domain must hold for the gang (the gang does not change)."""
        self.found = False
        """Some domain had room: it still has."""
        self.domains: set[int] | None = None
        """The domains of the gang's classes, once all were looked at and none had room."""
        self.touched: set[int] = set()
        """Nodes that freed GPUs since the last look."""

    def freed(self, nodes: Iterable[int]) -> None:
        if self.domains is not None and not self.found:
            self.touched.update(nodes)

    def any_room(self, placer: Placer, level: int, union: tuple[int, ...],
                 req: PlacementRequest) -> bool:
        if self.found:
            return True
        state = placer.state
        if self.domains is None:
            self.needs = placer.needs_in_domain(req)
            self.domains = set()
            for c in union:
                self.domains.update(state.domains_of_class.get((level, c), ()))
            looked_at: Iterable[int] = self.domains
        else:
            domain_of = state.leaf if level == LEAF else state.spine
            looked_at = {domain_of[n] for n in self.touched} & self.domains
        needs = self.needs
        self.found = any(placer.has_room(level, d, union, req, needs) is not None for d in looked_at)
        self.touched.clear()
        return self.found
