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

Every tentative allocation is taken on the state under a probe holder and released again, so
the state is unchanged when ``place`` returns; the caller commits the grants it returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler_core.gang import Demand, Member
from scheduler_core.plugins.protocols import FilterPlugin, GangContext, ScorePlugin, TopologyScorer
from scheduler_core.plugins.scores import failure_domain
from scheduler_core.state import FLEET, HOLD, LEAF, SPINE, ClusterState, Grant, Holder, choose_gpus
from scheduler_core.types import TopologyConstraint

DOMAINS_PER_SCOPE = 3
"""Successful allocations compared per topology level before choosing the cheapest."""
FAILED_DOMAINS_PER_SCOPE = 6
"""Domains that pass the free-GPU check but fail member by member, tried per level."""

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


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    """One gang to place. ``member_classes[i]`` are the node classes member ``i`` may use
    (capable and, for quota, of an allowed GPU type). ``seed`` is what the job already holds
    (an elastic job growing), so new members co-locate or spread relative to it."""

    demand: Demand
    member_classes: tuple[tuple[int, ...], ...]
    score: ScorePlugin
    seed_nodes: tuple[int, ...] = ()


class Placer:
    def __init__(self, state: ClusterState, filters: Sequence[FilterPlugin],
                 topology: TopologyScorer) -> None:
        self.state = state
        self.filters = tuple(filters)
        self.topology = topology

    # ------------------------------------------------------------------ public

    def place(self, req: PlacementRequest) -> list[Grant] | None:
        """Grants for every member of the gang, or ``None``. The state is left unchanged."""
        members = req.demand.members
        if not members or any(not cls for cls in req.member_classes):
            return None
        union = tuple(sorted({c for cls in req.member_classes for c in cls}))
        if self.state.free_in(FLEET, 0, union) < req.demand.gpus:
            return None
        if len(members) == 1:
            return self._attempt(FLEET, 0, req)
        scopes = (_SCOPES_LOCAL if req.score.prefers_locality else _SCOPES_SPREAD)[
            req.demand.topology
        ]
        hinted = {self.state.leaf[n] for n in req.seed_nodes} | {
            self.state.spine[n] for n in req.seed_nodes
        }
        for level in scopes:
            best: tuple[float, int, list[Grant]] | None = None
            ok = failed = 0
            for rank, domain in enumerate(self._domains(level, union, req, hinted)):
                grants = self._attempt(level, domain, req)
                if grants is None:
                    failed += 1
                    if failed >= FAILED_DOMAINS_PER_SCOPE:
                        break
                    continue
                cost = self.topology.cost(self.state, grants)
                if best is None or cost < best[0]:
                    best = (cost, rank, grants)
                ok += 1
                if ok >= DOMAINS_PER_SCOPE:
                    break
            if best is not None:
                return best[2]
        return None

    # ------------------------------------------------------------------ search

    def _domains(self, level: int, union: tuple[int, ...], req: PlacementRequest,
                 hinted: set[int]) -> list[int]:
        if level == FLEET:
            return [0]
        domains: set[int] = set()
        for c in union:
            domains.update(self.state.domains_of_class.get((level, c), ()))
        need = req.demand.gpus
        scored = []
        for d in domains:
            free = self.state.free_in(level, d, union)
            if free >= need:
                scored.append((free, d))
        # Best fit (fewest free GPUs that suffice) for locality-preferring plugins, emptiest
        # first for spreading ones; domains the job already uses first in both cases.
        sign = 1 if req.score.prefers_locality else -1
        scored.sort(key=lambda fd: (fd[1] not in hinted if level == LEAF else True,
                                    sign * fd[0], fd[1]))
        return [d for _, d in scored]

    def _attempt(self, level: int, domain: int, req: PlacementRequest) -> list[Grant] | None:
        """Place every member inside one domain; release and return the grants."""
        gang = GangContext()
        for n in req.seed_nodes:
            gang.used_nodes[n] = gang.used_nodes.get(n, 0) + 1
            fd = failure_domain(self.state, n)
            gang.domain_counts[fd] = gang.domain_counts.get(fd, 0) + 1
        pending = list(zip(req.demand.members, req.member_classes, strict=True))
        try:
            if req.score.prefers_locality and len(pending) > 1:
                leftover = self._fill(level, domain, pending, req.score, gang)
            else:
                leftover = [
                    (m, cls) for m, cls in pending
                    if not self._place_member(level, domain, m, cls, req.score, gang)
                ]
            if leftover:
                return None
            return list(self.state.holdings.get(_PROBE, []))
        finally:
            self.state.release(_PROBE)

    def _fill(self, level: int, domain: int, members: list[tuple[Member, tuple[int, ...]]],
              score: ScorePlugin, gang: GangContext) -> list[tuple[Member, tuple[int, ...]]]:
        """Place as many members as possible in ``domain``, filling its sub-domains with the
        most free capable GPUs first. Returns the members left over."""
        if level == LEAF:
            return [(m, cls) for m, cls in members
                    if not self._place_member(LEAF, domain, m, cls, score, gang)]
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

    def _place_member(self, level: int, domain: int, member: Member, classes: tuple[int, ...],
                      score: ScorePlugin, gang: GangContext) -> bool:
        state = self.state
        chosen = -1
        if score.colocate_gang:
            for n in gang.used_nodes:
                if self._in_domain(n, level, domain) and state.node_class[n] in classes \
                        and self._admits(n, member):
                    chosen = n
                    break
        if chosen < 0:
            width = max(state.classes[c].gpus for c in classes)
            best_score = float("-inf")
            found = 0
            for free in score.bucket_order(member.gpus, width):
                for c in classes:
                    buckets = state.buckets.get((level, domain, c))
                    if buckets is None or free >= len(buckets):
                        continue
                    for n in buckets[free]:
                        if not self._admits(n, member):
                            continue
                        s = score.score(state, n, member, gang)
                        if s > best_score:
                            best_score, chosen = s, n
                        found += 1
                        if found >= score.candidates:
                            break
                    if found >= score.candidates:
                        break
                if found >= score.candidates or (found and score.stop_at_first_bucket):
                    break
        if chosen < 0:
            return False
        mask = choose_gpus(state.free_mask[chosen], state.nodes[chosen].gpus, member.gpus)
        state.take(_PROBE, Grant(chosen, mask, member.cpus, member.memory_gb, member.role))
        gang.used_nodes[chosen] = gang.used_nodes.get(chosen, 0) + 1
        fd = failure_domain(state, chosen)
        gang.domain_counts[fd] = gang.domain_counts.get(fd, 0) + 1
        return True

    def _in_domain(self, node: int, level: int, domain: int) -> bool:
        if level == FLEET:
            return True
        if level == SPINE:
            return self.state.spine[node] == domain
        return self.state.leaf[node] == domain

    def _admits(self, node: int, member: Member) -> bool:
        for f in self.filters:
            if f.admits(self.state, node, member) is not None:
                return False
        return True
