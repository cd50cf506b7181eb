"""Score plugins (phase 4): which node a gang member lands on.

Seed 000: pack small training and batch jobs best-fit onto the fullest node that fits, so whole
nodes stay free for gangs (Kubernetes' MostAllocated); spread only serving replicas, across
failure domains, because packing concentrates failure."""

from __future__ import annotations

from scheduler_core.errors import ConfigError
from scheduler_core.gang import Member
from scheduler_core.plugins.protocols import GangContext, ScorePlugin
from scheduler_core.state import LEAF, ClusterState


def failure_domain(state: ClusterState, node: int) -> str:
    """A node's failure domain; a node without one is its own."""
    info = state.nodes[node]
    return info.failure_domain or "node:" + info.name


class Pack:
    """Best fit: the node with the fewest free GPUs that still fits; among equals, the node
    that stays busy longest anyway (its running jobs' runtime limits), so the small job does
    not keep a soon-free node from becoming whole; then the node whose leaf switch has the
    fewest free GPUs, so empty leaves stay empty for gangs.

    ``candidates``: how many nodes of the fullest bucket that fits are compared by those
    tie-breaks (``SchedulerConfig.pack_candidates``). With 4, the busy-longest rule chose among
    the first four equally full nodes by name only; 32 lets it see every such node of the
    seed's 64-node fleet (on the 18 weeks of docs/engine.md: 64 of 66 goals instead of 63)."""

    NAME = "pack"
    prefers_locality = True
    colocate_gang = True
    stop_at_first_bucket = True

    def __init__(self, candidates: int = 32) -> None:
        if candidates < 1:
            raise ConfigError(f"pack: candidates must be >= 1, got {candidates}")
        self.candidates = candidates

    def bucket_order(self, need: int, width: int) -> range:
        return range(need, width + 1)

    def score(self, state: ClusterState, node: int, member: Member,
              gang: GangContext) -> tuple[float, ...]:
        leaf_free = state.free_sum[(LEAF, state.leaf[node], state.node_class[node])]
        return (
            -float(state.free_gpus[node] - member.gpus),
            state.busy_until[node],
            -float(leaf_free),
        )

    def enough(self, score: tuple[float, ...]) -> bool:
        return False


class Spread:
    """Emptiest node first, and never a second replica in a failure domain while another
    domain can take it (seed 000: spread inference replicas across failure domains)."""

    NAME = "spread"
    prefers_locality = False
    colocate_gang = False
    stop_at_first_bucket = False

    def __init__(self, candidates: int = 32) -> None:
        if candidates < 1:
            raise ConfigError(f"spread: candidates must be >= 1, got {candidates}")
        self.candidates = candidates

    def bucket_order(self, need: int, width: int) -> range:
        return range(width, need - 1, -1)

    def score(self, state: ClusterState, node: int, member: Member,
              gang: GangContext) -> tuple[float, ...]:
        in_domain = gang.domain_counts.get(failure_domain(state, node), 0)
        on_node = gang.used_nodes.get(node, 0)
        return (-float(in_domain), -float(on_node), float(state.free_gpus[node] - member.gpus))

    def enough(self, score: tuple[float, ...]) -> bool:
        # No replica of the gang in its failure domain or on the node, and buckets are walked
        # emptiest first: nothing later can score higher.
        return score[0] == 0.0 and score[1] == 0.0


_: ScorePlugin = Pack()
_ = Spread()
