"""The locality cost of seed 001 eq. 2, as a topology scorer (phase 4).

Cost = sum over pairs of the job's GPUs of w(d), d the topological distance of the pair:
0 same node (NVLink), 1 same leaf switch, 2 same spine but another leaf, 3 another spine. The
seed's illustrative weights are w(0)=0, w(1)=1, w(2)=10; they are policy, not measurement,
so they are configuration (``SchedulerConfig.locality_weights``).

Counting pairs per level instead of enumerating them keeps the cost O(GPUs' nodes):
pairs within a node are C(n, 2); pairs within a leaf but not within a node are
C(leaf total, 2) minus the within-node pairs, and so on up."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler_core.errors import ConfigError
from scheduler_core.plugins.protocols import TopologyScorer
from scheduler_core.state import ClusterState, Grant


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


class LocalityCost:
    NAME = "locality_eq2"

    def __init__(self, weights: tuple[float, float, float, float] = (0.0, 1.0, 10.0, 30.0)) -> None:
        if len(weights) != 4:
            raise ConfigError(
                f"locality_weights: expected 4 weights (node, leaf, spine, fleet), got {len(weights)}"
            )
        if any(w < 0 for w in weights):
            raise ConfigError(f"locality_weights: weights must be >= 0, got {weights}")
        if list(weights) != sorted(weights):
            raise ConfigError(
                f"locality_weights: weights must not decrease with distance, got {weights}"
            )
        self.weights = weights

    def cost(self, state: ClusterState, grants: Sequence[Grant]) -> float:
        per_node: dict[int, int] = {}
        for g in grants:
            per_node[g.node] = per_node.get(g.node, 0) + g.gpus
        per_leaf: dict[int, int] = {}
        per_spine: dict[int, int] = {}
        for node, n in per_node.items():
            per_leaf[state.leaf[node]] = per_leaf.get(state.leaf[node], 0) + n
            per_spine[state.spine[node]] = per_spine.get(state.spine[node], 0) + n
        total = sum(per_node.values())
        node_pairs = sum(_pairs(n) for n in per_node.values())
        leaf_pairs = sum(_pairs(n) for n in per_leaf.values())
        spine_pairs = sum(_pairs(n) for n in per_spine.values())
        w0, w1, w2, w3 = self.weights
        return (
            w0 * node_pairs
            + w1 * (leaf_pairs - node_pairs)
            + w2 * (spine_pairs - leaf_pairs)
            + w3 * (_pairs(total) - spine_pairs)
        )


_: TopologyScorer = LocalityCost()
