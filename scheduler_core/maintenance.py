"""Maintenance windows: which nodes a run may use (Slurm's maintenance reservations).

A window takes nodes out of service from ``start_at`` to ``end_at``. The rule is one overlap
test: a run from ``start`` to ``end`` (its runtime limit; no limit: it never ends) may use a
node only if it overlaps no window of that node. So a job whose limit ends it before the
window starts may still use the node until then, which is how the nodes empty in time without
an operator draining them hours ahead; a job that would still run when the window begins
waits, with ``MaintenanceWindow``, or goes elsewhere. Running jobs are never stopped for a
window: the engine does not know more about them than their limit, and the control plane
tells operators which ones will still hold GPUs when it starts.

Every placement (a bind now, the head's reservation at a later start, a preemptor's fit, an
elastic job's growth) passes the nodes its run may not use in
:attr:`~scheduler_core.placement.PlacementRequest.closed`. Window ends are start times the
reservation search tries besides running jobs' ends: a gang that fits only on nodes under
maintenance gets its reservation when they reopen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from scheduler_core.errors import SnapshotError
from scheduler_core.types import MaintenanceWindow

NO_NODES: frozenset[int] = frozenset()


def run_end(start: float, runtime_limit_s: float | None) -> float:
    """When a run starting at ``start`` ends by its runtime limit (never without one)."""
    return math.inf if runtime_limit_s is None else start + runtime_limit_s


class MaintenanceCalendar:
    """The snapshot's windows that have not ended, per node index."""

    __slots__ = ("windows", "_by_node", "_nodes_of", "_closed", "ends", "active_nodes")

    def __init__(self, windows: Sequence[MaintenanceWindow], index_of: Mapping[str, int],
                 now: float) -> None:
        self.windows: tuple[MaintenanceWindow, ...] = ()
        self._by_node: dict[int, list[MaintenanceWindow]] = {}
        # the nodes closed by each set of overlapping windows (indexes into ``windows``): a
        # cycle asks for many runs, but few windows make few distinct sets
        self._closed: dict[tuple[int, ...], frozenset[int]] = {}
        kept: list[MaintenanceWindow] = []
        nodes_of: list[tuple[int, ...]] = []
        active: set[int] = set()
        for w in sorted(windows, key=lambda w: (w.start_at, w.end_at, w.id)):
            if not w.end_at > w.start_at:
                raise SnapshotError(
                    f"maintenance window {w.id!r} ends at {w.end_at} but starts at {w.start_at}")
            if w.end_at <= now:
                continue
            # a node the snapshot does not list (retired, removed) takes no work anyway
            nodes = [index_of[name] for name in w.nodes if name in index_of]
            if not nodes:
                continue
            kept.append(w)
            nodes_of.append(tuple(nodes))
            for n in nodes:
                self._by_node.setdefault(n, []).append(w)
                if w.start_at <= now:
                    active.add(n)
        self.windows = tuple(kept)
        self._nodes_of = tuple(nodes_of)
        self.active_nodes: frozenset[int] = frozenset(active)
        """Nodes inside a window now: their idle GPUs are unavailable, not free."""
        self.ends: tuple[float, ...] = tuple(sorted({w.end_at for w in kept}))
        """Every window's end, earliest first: when nodes reopen."""

    def __bool__(self) -> bool:
        return bool(self._by_node)

    def reopens(self, now: float) -> dict[int, float]:
        """Per node inside a window now: when the last window covering ``now`` ends."""
        return {n: max(w.end_at for w in self._by_node[n] if w.start_at <= now < w.end_at)
                for n in self.active_nodes}

    def closed(self, start: float, end: float) -> frozenset[int]:
        """The nodes with a window overlapping the run from ``start`` to ``end``."""
        hit = tuple(i for i, w in enumerate(self.windows) if w.start_at < end and w.end_at > start)
        if not hit:
            return NO_NODES
        found = self._closed.get(hit)
        if found is None:
            found = self._closed[hit] = frozenset(n for i in hit for n in self._nodes_of[i])
        return found

    def closed_for_run(self, start: float, runtime_limit_s: float | None) -> frozenset[int]:
        return self.closed(start, run_end(start, runtime_limit_s))

    def blocking(self, nodes: Iterable[int], start: float, end: float) -> list[MaintenanceWindow]:
        """The windows on ``nodes`` that overlap the run, earliest first, each once."""
        found: dict[str, MaintenanceWindow] = {}
        for n in nodes:
            for w in self._by_node.get(n, ()):
                if w.start_at < end and w.end_at > start:
                    found.setdefault(w.id, w)
        return sorted(found.values(), key=lambda w: (w.start_at, w.end_at, w.id))
