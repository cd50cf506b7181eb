"""The extension points of the cycle, each a small :class:`typing.Protocol`.

* :class:`FilterPlugin` (phase 3): may this node host this gang member? Two questions: could
  it ever (``capable``, asked once per node class, decides ``CanNeverRun``/``NoCapableNode``)
  and can it now (``admits``, asked per candidate node the indexes propose).
* :class:`ScorePlugin` (phase 4): which of the candidate nodes for one member is best, and in
  which order to walk the free-GPU buckets (pack walks up from the request, spread walks down).
* :class:`TopologyScorer` (phase 4): the cost of a whole gang's allocation (seed 001 eq. 2);
  the lowest-cost allocation among the candidate domains wins.
* :class:`QueueOrderPlugin` (phase 1): the sort key of a pending job.
* :class:`VictimChooser` (phase 6): the order in which preemption candidates are tried.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from scheduler_core.gang import Member
from scheduler_core.state import ClusterState, Grant, NodeClass
from scheduler_core.types import PreemptionReason, Queued, ReasonCode


@dataclass(slots=True)
class GangContext:
    """What a gang placement has taken so far: nodes (with member counts) and failure
    domains (with member counts), so score plugins can co-locate or spread members.
    ``own_nodes``: for a gang whose members may not share a node, the nodes the members
    placed so far took (no other member goes there); ``None`` for any other gang. (Not
    ``used_nodes``: that also holds the nodes a growing job already runs on, which its
    regrown gang may reuse.)"""

    used_nodes: dict[int, int] = field(default_factory=dict)
    domain_counts: dict[str, int] = field(default_factory=dict)
    own_nodes: set[int] | None = None


class QueueContext(NamedTuple):
    """What a queue-order plugin may look at besides the job itself (a named tuple: built
    once per pending job, so it must be cheap)."""

    now: float
    priority_value: int
    dominant_share: float


@dataclass(frozen=True, slots=True)
class VictimCandidate:
    """One way to free GPUs: preempt a whole running job, or shrink an elastic one.

    ``tier`` 0 is borrowed work an owner reclaims, tier 1 is lower-priority work.
    ``lost_gpu_hours`` is GPUs × time since last checkpoint plus restart cost (for a shrink:
    the resize pause of the GPUs that keep running)."""

    job_id: str
    tier: int
    reason: PreemptionReason
    priority_value: int
    gpus: int
    lost_gpu_hours: float
    started_at: float
    shrink_to: int | None = None


class FilterPlugin(Protocol):
    NAME: str

    def capable(self, node_class: NodeClass, member: Member) -> ReasonCode | None:
        """``None`` if an empty, ready node of this class could host ``member``."""
        ...

    def admits(self, state: ClusterState, node: int, member: Member) -> ReasonCode | None:
        """``None`` if ``node`` can host ``member`` now."""
        ...


class ScorePlugin(Protocol):
    NAME: str
    prefers_locality: bool
    """Try a multi-member gang inside one leaf, then one spine, before the whole fleet."""
    colocate_gang: bool
    """Offer nodes the gang already uses before any other node."""
    candidates: int
    """How many admissible nodes to compare per member."""
    stop_at_first_bucket: bool
    """Stop walking buckets once one bucket yielded a candidate."""

    def bucket_order(self, need: int, width: int) -> range:
        """Free-GPU counts to visit, in order, for a member of ``need`` GPUs on nodes of up to
        ``width`` GPUs."""
        ...

    def score(self, state: ClusterState, node: int, member: Member,
              gang: GangContext) -> tuple[float, ...]:
        """Higher is better, compared element by element. Ties go to the candidate found
        first."""
        ...

    def enough(self, score: tuple[float, ...]) -> bool:
        """``True`` if no later candidate can beat a candidate of this score (buckets are walked
        in the plugin's order), so the search may stop."""
        ...


class TopologyScorer(Protocol):
    NAME: str

    def cost(self, state: ClusterState, grants: Sequence[Grant]) -> float:
        """Lower is better."""
        ...


class QueueOrderPlugin(Protocol):
    NAME: str

    def sort_key(self, job: Queued, ctx: QueueContext) -> tuple[float, ...]:
        """Jobs are tried in ascending key order (ties broken by submission time and id)."""
        ...

    def effective_priority(self, job: Queued, ctx: QueueContext) -> float:
        """The priority the order gives the job (its class's value and what waiting added), as
        `qm sprio` shows it; a plugin that orders by something else says the class's value."""
        ...

    def tie_key(self, job: Queued, ctx: QueueContext) -> tuple[float, ...]:
        """The part of :meth:`sort_key` that ranks the job; jobs with equal tie keys are tied,
        and the rest of the order among them is a tie-break the cycle may refine (see
        ``queue.widest_fitting_gangs_first``)."""
        ...


class VictimChooser(Protocol):
    NAME: str

    def order(self, candidates: Sequence[VictimCandidate]) -> list[VictimCandidate]:
        """Candidates in the order preemption should take them."""
        ...
