"""When capacity comes back: free GPUs per node class at each future release time.

Runtime limits make a running job's end known (seed 000: EASY backfill rests on them), so the
free capacity of every node class can be laid out along time once a cycle, after the plan's
binds and holds are in place. Phase 7 reads it for every waiting job's ETA (the first release
time at which its gang fits, and how long the work queued ahead of it takes to drain); the
maintenance calendar's windows take nodes out of it while they last.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from itertools import accumulate

from scheduler_core.admission import capable_classes
from scheduler_core.context import CycleContext
from scheduler_core.distinct_nodes import NodeSet, node_sets, shapes_of
from scheduler_core.gang import Demand
from scheduler_core.maintenance import NO_NODES
from scheduler_core.placement import PlacementRequest
from scheduler_core.state import FLEET, HOLD, JOB, ClusterState, Grant, Restore
from scheduler_core.types import TopologyConstraint

PLACEMENT_PROBES = 24
"""Placements tried per gang shape by :meth:`ReleaseTimeline.placed_frame` (as many as the
head's reservation search tries, :data:`~scheduler_core.backfill.RESERVATION_PROBES`)."""

Releases = dict[float, list[tuple[int, int]]]
"""GPUs coming back, by time: per time, (node index, bit mask of its GPUs)."""


def _releases(ctx: CycleContext, reopens: dict[int, float]) -> Releases:
    """When each held GPU comes back: a node inside a window with its reopening; a promised
    GPU once its promise's job has run (:func:`_promised`); a GPU of a job preempted this
    cycle after the grace period; any other at its holder's expected end."""
    state = ctx.state
    by_time: Releases = {}
    for n, at in reopens.items():
        if state.free_mask[n]:
            by_time.setdefault(at, []).append((n, state.free_mask[n]))
    promised = _promised(ctx, by_time)
    now = ctx.snapshot.now
    stops = {p.job_id: now + p.grace_period_s for p in ctx.preempted.values()}
    ends = ctx.ends
    # (a hold always belongs to a promise: its GPUs come back with the promise's; the
    # holders and their grants read in one pass, thousands of jobs a cycle)
    for (kind, job_id), grants in state.holdings.items():
        if kind != JOB:
            continue
        release = stops.get(job_id, ends.get(job_id)) if stops else ends.get(job_id)
        if release is None:
            continue
        for g in grants:
            mask = g.mask & ~promised.get(g.node, 0) if promised else g.mask
            if mask:
                # (GPUs a job frees inside a window come back with the node)
                at = max(release, reopens[g.node]) if g.node in reopens else release
                by_time.setdefault(at, []).append((g.node, mask))
    return by_time


def _promise_ends(ctx: CycleContext) -> list[tuple[float, str]]:
    """(end, job id) of each reservation or nomination whose job is known, latest end first:
    its start plus its runtime limit (or the default estimate)."""
    default_runtime = ctx.config.default_runtime_estimate_s
    ends = [(promise.start_at + (spec.runtime_limit_s or default_runtime), job_id)
            for job_id, promise in ctx.reservations.items()
            if (spec := ctx.reserved_specs.get(job_id)) is not None]
    return sorted(ends, reverse=True)


def _promised(ctx: CycleContext, by_time: Releases) -> dict[int, int]:
    """The GPUs promised to a reservation or a nomination, per node (a bit mask), with their
    releases added to ``by_time``.

    That job takes them at its start, whoever holds them now, and they come back only when it
    has run: its start plus its runtime limit (or the default estimate). Their release by
    today's holder (a running job, or the hold) is deferred to then, so the work of a job with
    a promise is in the timeline itself, and a job behind the head is not told it can start on
    the head's GPUs. A GPU promised twice comes back at the later of the two ends."""
    free_mask = ctx.state.free_mask
    promised: dict[int, int] = {}
    for end, n, mask in _promised_gpus(ctx):
        promised[n] = promised.get(n, 0) | mask
        # bits free now stay counted from now (a hold covers every free one)
        mask &= ~free_mask[n]
        if mask:
            by_time.setdefault(end, []).append((n, mask))
    return promised


def _promised_gpus(ctx: CycleContext) -> Iterator[tuple[float, int, int]]:
    """(end, node index, GPU mask) of each promise's GPUs, latest end first, a GPU promised
    twice only with the later end."""
    index_of = ctx.state.index_of
    covered: dict[int, int] = {}
    for end, job_id in _promise_ends(ctx):
        for p in ctx.reservations[job_id].placements:
            n = index_of[p.node]
            mask = 0
            for i in p.gpu_indices:
                mask |= 1 << i
            mask &= ~covered.get(n, 0)
            if mask:
                covered[n] = covered.get(n, 0) | mask
                yield end, n, mask


Resources = dict[float, list[tuple[int, int, int]]]
"""CPUs and memory coming back, by time: per time, (node index, CPUs, GB)."""

Rooms = list[list[tuple[int, int, int, int, int, int, int]]]
"""Per frame, the ready nodes whose free GPUs, CPUs or memory change in it: (node, GPUs, CPUs
and GB free before, the same after)."""


def _resource_releases(ctx: CycleContext, reopens: dict[int, float]) -> Resources:
    """When each held CPU and GB of memory comes back, by the rules :func:`_releases` and
    :func:`_promised` follow for the GPUs: a job's at its expected end (a preempted one's
    after its grace period; inside a window, when its node reopens), except the share that
    goes with GPUs promised to a reservation or a nomination, which that job takes at its
    start and gives back with the GPUs when it has run; a hold's with its promise. (Asked
    only for a gang on distinct nodes, whose nodes need room beside their GPUs.)"""
    state = ctx.state
    held_until = {job_id: end for end, job_id in _promise_ends(ctx)}
    promised: dict[int, list[tuple[int, float]]] = {}
    for end, n, mask in _promised_gpus(ctx):
        promised.setdefault(n, []).append((mask, end))
    now = ctx.snapshot.now
    stops = {p.job_id: now + p.grace_period_s for p in ctx.preempted.values()}
    by_time: Resources = {}
    for (kind, holder_id), grants in state.holdings.items():
        if kind == JOB:
            release = stops.get(holder_id, ctx.ends.get(holder_id))
        else:
            release = held_until.get(holder_id) if kind == HOLD else None
        if release is None:
            continue
        for g in grants:
            cpus, memory_gb = g.cpus, g.memory_gb
            if not (cpus or memory_gb):
                continue
            if kind == JOB and g.node in promised and g.mask:
                gpus = g.gpus
                for mask, end in promised[g.node]:
                    share = (g.mask & mask).bit_count()
                    if share:
                        part = (g.cpus * share // gpus, g.memory_gb * share // gpus)
                        by_time.setdefault(end, []).append((g.node, *part))
                        cpus -= part[0]
                        memory_gb -= part[1]
            at = max(release, reopens[g.node]) if g.node in reopens else release
            by_time.setdefault(at, []).append((g.node, cpus, memory_gb))
    return by_time


def _frames(state: ClusterState, free: list[int], by_time: Releases, now: float
            ) -> tuple[list[float], list[list[int]], list[list[tuple[int, int, int]]]]:
    """The timeline's frames: their times (``now``, then each time a ready node gets GPUs
    back), the free GPUs per node class in each, and each frame's changes (node, free
    before, free after). ``free`` (per node, now) is advanced to the last frame."""
    ready, node_class = state.ready, state.node_class
    n_classes = len(state.classes)
    sums = [0] * n_classes
    for n, f in enumerate(free):
        if ready[n]:
            sums[node_class[n]] += f
    # each frame's sums as one tuple, made a row per class at the end (thousands of frames a
    # cycle: one append a frame instead of one per class)
    frames: list[tuple[int, ...]] = [tuple(sums)]
    changes: list[list[tuple[int, int, int]]] = [[]]
    times: list[float] = [now]
    for at in sorted(by_time):
        changed: list[tuple[int, int, int]] = []
        for n, mask in by_time[at]:
            if not ready[n]:
                continue
            before = free[n]
            gpus = mask.bit_count()
            free[n] = before + gpus
            sums[node_class[n]] += gpus
            changed.append((n, before, before + gpus))
        if not changed:
            continue
        frames.append(tuple(sums))
        changes.append(changed)
        times.append(at)
    rows = [list(row) for row in zip(*frames, strict=True)]
    return times, rows, changes


class ReleaseTimeline:
    """Free capacity per node class after each future release, for ETA estimates.

    Built once per cycle from the state after the plan (binds and holds in place): frame ``i``
    is the capacity once every holder ending at or before ``times[i]`` is gone. Free GPUs per
    class are kept for every frame; "nodes with at least ``s`` free GPUs" per class is built
    on first use for each size ``s`` from the recorded changes. A query binary-searches the
    first frame where the gang's capable classes have enough free GPUs and a node with room for
    each member that needs one of its own; for a gang on distinct nodes (every member needs
    one) room by GPUs, CPUs and memory, for every set of its members (:meth:`node_sets`), the
    nodes' free CPUs and memory laid out along the same frames on first use (:meth:`room_row`).
    :meth:`drain` adds the jobs ahead in the queue: the time by
    which the free capacity of the classes, integrated from ``now``, covers the work (GPUs x
    runtime limit) of the jobs ahead that wait for those classes, as if they ran back to back
    with no fragmentation. Both are estimates, labelled as such in the explanation. GPUs
    promised to a reservation or a nomination come back only when that job has run, whoever
    holds them now; jobs preempted in the cycle free theirs after their grace period."""

    def __init__(self, ctx: CycleContext) -> None:
        state = ctx.state
        self.state = state
        self.calendar = ctx.calendar
        now = ctx.snapshot.now
        self.upcoming = tuple(w for w in ctx.calendar.windows if w.start_at > now)
        # a node inside a maintenance window offers its free GPUs only once it reopens
        reopens = ctx.calendar.reopens(now)
        free = list(state.free_gpus)
        for n in reopens:
            free[n] = 0
        self.base = list(free)
        self._gpu_releases = _releases(ctx, reopens)
        self.times, self.free, self.changes = _frames(state, free, self._gpu_releases, now)
        self.ctx = ctx
        self._reopens = reopens
        # a gang on distinct nodes (rare): its sets of members' shapes per class set, the
        # free GPUs, CPUs and memory of every ready node along the frames, nodes with room
        # for each set per frame, and each node's frames
        self._sets: dict[tuple[Demand, tuple[int, ...]], tuple[NodeSet, ...]] = {}
        self._rooms: tuple[list[tuple[int, int, int]], Rooms] | None = None
        self._room_rows: dict[tuple[tuple[int, int, int, frozenset[int]], ...], list[int]] = {}
        self._rooms_per_node: dict[int, tuple[list[int], list[tuple[int, int, int]]]] | None = None
        self._domain_rooms: dict[tuple[bool, tuple[int, ...], tuple[tuple[tuple[int, int, int, frozenset[int]], ...], ...]],
                                 tuple[dict[int, int], dict[int, list[int]]]] = {}
        self._at_least: dict[tuple[int, int], list[int]] = {}
        self._per_node: dict[int, tuple[list[int], list[int]]] | None = None
        # (memo keyed by the demand's identity: outcomes, and their demands, live the cycle)
        self._clear: dict[tuple[int, tuple[int, ...], float, float | None], float | None] = {}
        self._lost_memo: dict[tuple[int, frozenset[int], tuple[int, ...], int], tuple[int, int]] = {}
        self._integrals: dict[tuple[int, ...], tuple[list[float], list[int]]] = {}
        self._by_class: tuple[list[list[int]], list[list[tuple[int, int, int]]]] | None = None
        # per leaf-or-spine level, class set and member sizes: free GPUs and nodes with room
        # per domain now; and per class set, which nodes are ready and capable
        self._domain_base: dict[tuple[bool, tuple[int, ...], tuple[int, ...]],
                                tuple[dict[int, int], dict[int, list[int]]]] = {}
        self._domain_base_one: dict[tuple[bool, tuple[int, ...], int], tuple[dict[int, int], dict[int, int]]] = {}
        self._capable: dict[tuple[int, ...], list[bool]] = {}
        self._returns: list[list[Grant]] | None = None
        self._per_node_returns: dict[int, tuple[list[int], list[Grant]]] | None = None
        self._busy_nodes: list[tuple[float, int]] | None = None

    def capacity(self, node_class: int) -> int:
        """Free GPUs of ``node_class`` once every known release happened."""
        return self.free[node_class][-1]

    def integral(self, classes: tuple[int, ...]) -> tuple[list[float], list[int]]:
        """Per frame: GPU-seconds free on ``classes`` from ``now`` to the frame's time, and
        the free GPUs during the frame (built once per class set)."""
        found = self._integrals.get(classes)
        if found is not None:
            return found
        rows = [self.free[c] for c in classes]
        rates = [sum(col) for col in zip(*rows, strict=True)] if len(rows) > 1 else list(rows[0])
        times = self.times
        area = [0.0]
        total = 0.0
        for i in range(1, len(times)):
            total += rates[i - 1] * (times[i] - times[i - 1])
            area.append(total)
        found = self._integrals[classes] = (area, rates)
        return found

    def drain(self, classes: tuple[int, ...], work: float) -> float | None:
        """When the free GPU-seconds of ``classes`` from ``now`` reach ``work`` (``now`` if
        ``work`` is 0), or ``None`` if capacity stays too small to ever cover it."""
        if not classes:
            return None
        if work <= 0:
            return self.times[0]
        area, rates = self.integral(classes)
        i = bisect_right(area, work) - 1
        rate = rates[i]
        if rate <= 0:
            if area[i] >= work:
                return self.times[i]
            return None
        return self.times[i] + (work - area[i]) / rate

    def at_least(self, node_class: int, size: int) -> list[int]:
        """Per frame: ready nodes of ``node_class`` with at least ``size`` free GPUs."""
        key = (node_class, size)
        found = self._at_least.get(key)
        if found is not None:
            return found
        if self._by_class is None:
            # once per timeline: base free GPUs sorted per class, and each frame's changes
            # split by class, so a query never walks other classes' nodes
            state = self.state
            n_classes = len(state.classes)
            base: list[list[int]] = [[] for _ in range(n_classes)]
            for n, f in enumerate(self.base):
                if state.ready[n]:
                    base[state.node_class[n]].append(f)
            for row in base:
                row.sort()
            per_class: list[list[tuple[int, int, int]]] = [[] for _ in range(n_classes)]
            for frame, changed in enumerate(self.changes):
                for n, before, after in changed:
                    per_class[state.node_class[n]].append((frame, before, after))
            self._by_class = (base, per_class)
        base_rows, class_changes = self._by_class
        row = base_rows[node_class]
        count = len(row) - bisect_left(row, size)
        steps = [0] * len(self.times)
        for frame, before, after in class_changes[node_class]:
            if before < size <= after:
                steps[frame] += 1
        counts = list(accumulate(steps, initial=count))[1:]
        self._at_least[key] = counts
        return counts

    def node_sets(self, demand: Demand, classes: tuple[int, ...]) -> tuple[NodeSet, ...]:
        """For a gang on distinct nodes of several members: the sets of its members that need
        that many nodes of their own with room (GPUs, CPUs and memory) for one of them
        (:func:`~scheduler_core.distinct_nodes.node_sets`), each member on the classes of
        ``classes`` it is capable of; ``()`` for any other gang, counted by its GPUs alone.
        Until 7 Dec a gang on distinct nodes was counted by GPUs too: a node whose GPUs were
        free but whose CPUs a CPU-heavy job held counted as ready for a member."""
        if not demand.distinct_nodes or len(demand.members) < 2:
            return ()
        key = (demand, classes)
        found = self._sets.get(key)
        if found is None:
            wanted = set(classes)
            where = [[c for c in capable_classes(self.ctx, m) if c in wanted] for m in demand.members]
            found = self._sets[key] = node_sets(shapes_of(demand, where))
        return found

    def _room_frames(self) -> tuple[list[tuple[int, int, int]], Rooms]:
        """Every node's free GPUs, CPUs and memory now (as the frames count them: a node in a
        window with no free GPU until it reopens), and per frame the ready nodes whose free
        resources change (:data:`Rooms`). A CPU or GB coming back between two frames counts
        from the next one (it comes back without GPUs only when all of its holder's are
        promised: the promise's job takes them at its start)."""
        if self._rooms is not None:
            return self._rooms
        state, times = self.state, self.times
        ready = state.ready
        gpus = list(self.base)
        cpus = list(state.free_cpus)
        memory = list(state.free_mem)
        base = list(zip(gpus, cpus, memory, strict=True))
        per_frame: dict[int, list[tuple[int, int, int]]] = {}
        for at, items in _resource_releases(self.ctx, self._reopens).items():
            frame = bisect_left(times, at, 1)
            if frame < len(times):
                per_frame.setdefault(frame, []).extend(items)
        rooms: Rooms = [[]]
        for frame in range(1, len(times)):
            before: dict[int, tuple[int, int, int]] = {}
            for n, _, after in self.changes[frame]:
                before.setdefault(n, (gpus[n], cpus[n], memory[n]))
                gpus[n] = after
            for n, c, m in per_frame.get(frame, ()):
                if ready[n]:
                    before.setdefault(n, (gpus[n], cpus[n], memory[n]))
                    cpus[n] += c
                    memory[n] += m
            rooms.append([(n, *was, gpus[n], cpus[n], memory[n]) for n, was in before.items()])
        self._rooms = (base, rooms)
        return self._rooms

    def room_row(self, need: NodeSet) -> list[int]:
        """Per frame: ready nodes with room for one of ``need``'s shapes on a class it takes
        (memoised by the shapes' asks, whatever their numbers of members: gangs of one
        member shape and different sizes share it)."""
        key = tuple((s.gpus, s.cpus, s.memory_gb, s.where) for s in need.shapes)
        found = self._room_rows.get(key)
        if found is not None:
            return found
        base, rooms = self._room_frames()
        state = self.state
        node_class, ready = state.node_class, state.ready
        where = need.where
        counts = []
        if len(need.shapes) == 1:
            # (nearly every gang without roles: one shape per set, its test inlined)
            gpus, cpus, memory = key[0][:3]
            count = sum(1 for n, (g, c, m) in enumerate(base)
                        if g >= gpus and c >= cpus and m >= memory and ready[n] and node_class[n] in where)
            counts.append(count)
            for changed in rooms[1:]:
                for n, g0, c0, m0, g1, c1, m1 in changed:
                    if node_class[n] in where:
                        count += ((g1 >= gpus and c1 >= cpus and m1 >= memory)
                                  - (g0 >= gpus and c0 >= cpus and m0 >= memory))
                counts.append(count)
        else:
            room = need.room
            count = sum(1 for n, (g, c, m) in enumerate(base)
                        if ready[n] and node_class[n] in where and room(node_class[n], g, c, m))
            counts.append(count)
            for changed in rooms[1:]:
                for n, g0, c0, m0, g1, c1, m1 in changed:
                    k = node_class[n]
                    if k in where:
                        count += room(k, g1, c1, m1) - room(k, g0, c0, m0)
                counts.append(count)
        self._room_rows[key] = counts
        return counts

    def room_at(self, node: int, frame: int) -> tuple[int, int, int]:
        """Free GPUs, CPUs and memory of ``node`` at ``frame``."""
        base, rooms = self._room_frames()
        if self._rooms_per_node is None:
            per_node: dict[int, tuple[list[int], list[tuple[int, int, int]]]] = {}
            for frame_no, changed in enumerate(rooms):
                for n, _, _, _, g, c, m in changed:
                    frames, values = per_node.setdefault(n, ([], []))
                    frames.append(frame_no)
                    values.append((g, c, m))
            self._rooms_per_node = per_node
        found = self._rooms_per_node.get(node)
        if found is None:
            return base[node]
        i = bisect_right(found[0], frame) - 1
        return base[node] if i < 0 else found[1][i]

    def _needs(self, demand: Demand, classes: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        """The gang's :meth:`~scheduler_core.gang.Demand.node_needs` on ``classes``: a node
        for each member that needs one of its own, with room for that member's size (until
        7 Dec only the largest members were counted, so a gang on distinct nodes of 4, 4 and
        2 GPUs was told it would start when two nodes had 4 free)."""
        return demand.node_needs(max(self.state.classes[c].gpus for c in classes))

    def _node_rows(self, needs: tuple[tuple[int, int], ...], classes: tuple[int, ...]
                   ) -> list[tuple[list[list[int]], int]]:
        """Per needed size: the per-frame rows of capable nodes with that much free, and
        how many such nodes the gang needs."""
        return [([self.at_least(c, size) for c in classes if size <= self.state.classes[c].gpus],
                 count) for size, count in needs]

    def _fits(self, demand: Demand, classes: tuple[int, ...]) -> Callable[[int], bool]:
        """Does the gang fit at frame ``i``: enough free GPUs of ``classes`` and, for each
        member that needs a node of its own, a node with room for it?"""
        gpus = demand.gpus
        free_rows = [self.free[c] for c in classes]
        sets = self.node_sets(demand, classes)
        if sets:
            room_rows = [(self.room_row(need), need.members) for need in sets]

            def fits_rooms(i: int) -> bool:
                return (sum(row[i] for row in free_rows) >= gpus
                        and all(row[i] >= count for row, count in room_rows))

            return fits_rooms
        node_rows = self._node_rows(self._needs(demand, classes), classes)
        if len(node_rows) == 1:  # members needing a node of their own all of one size
            rows, count = node_rows[0]

            def fits_one(i: int) -> bool:
                return (sum(row[i] for row in free_rows) >= gpus
                        and sum(row[i] for row in rows) >= count)

            return fits_one

        def fits(i: int) -> bool:
            return (sum(row[i] for row in free_rows) >= gpus
                    and all(sum(row[i] for row in rows) >= count for rows, count in node_rows))

        return fits

    def free_in(self, classes: tuple[int, ...], at: float) -> int:
        """Free GPUs of ``classes`` at time ``at`` (by runtime limits)."""
        frame = bisect_right(self.times, at) - 1
        return sum(self.free[c][frame] for c in classes)

    def free_at(self, node: int, frame: int) -> int:
        """Free GPUs of ``node`` at ``frame``."""
        if self._per_node is None:
            # once per timeline, on the first query: each node's frames and free counts
            per_node: dict[int, tuple[list[int], list[int]]] = {}
            for frame_no, changed in enumerate(self.changes):
                for n, _, after in changed:
                    frames, counts = per_node.setdefault(n, ([], []))
                    frames.append(frame_no)
                    counts.append(after)
            self._per_node = per_node
        found = self._per_node.get(node)
        if found is None:
            return self.base[node]
        i = bisect_right(found[0], frame) - 1
        return self.base[node] if i < 0 else found[1][i]

    def clear_of_windows(self, demand: Demand, classes: tuple[int, ...], start: float,
                         runtime_limit_s: float | None) -> float | None:
        """The first time from ``start`` at which the gang, running to its runtime limit, fits
        by the counts on capable nodes that no maintenance window touches during the run:
        ``start`` itself when no window is in the way, else a later release or window end;
        ``None`` if no known time is clear. (The timeline's frames only add GPUs, so windows
        that open later are checked here, per start, and not in the frames.)

        The windows a run from ``t`` overlaps change only where ``t`` passes a window's end or
        ``t`` + limit passes its start: between two such breaks the nodes lost are the same
        and the rest only gain GPUs frame by frame, so each stretch is one binary search."""
        span = math.inf if runtime_limit_s is None else runtime_limit_s
        end = start + span
        # a window open now is in the frames already (its nodes' GPUs come back at its end)
        if not any(w.start_at < end and w.end_at > start for w in self.upcoming):
            return start
        key = (id(demand), classes, start, runtime_limit_s)
        if key not in self._clear:
            self._clear[key] = self._clear_of_windows(demand, classes, start, runtime_limit_s)
        return self._clear[key]

    def _clear_of_windows(self, demand: Demand, classes: tuple[int, ...], start: float,
                          runtime_limit_s: float | None) -> float | None:
        calendar, times = self.calendar, self.times
        fits = self._domain_fits(demand, classes) if demand.topology in DOMAIN_TOPOLOGIES \
            else self._counts_fit(demand, classes)
        frame = bisect_right(times, start) - 1
        if not fits(frame, NO_NODES):
            return start        # the counts do not explain this start: not for windows to move
        span = math.inf if runtime_limit_s is None else runtime_limit_s
        breaks = sorted({start} | {w.end_at for w in calendar.windows if w.end_at > start}
                        | {w.start_at - span for w in calendar.windows if w.start_at - span > start})
        for i, at in enumerate(breaks):
            frame = bisect_right(times, at) - 1
            if fits(frame, calendar.closed_for_run(at, runtime_limit_s)):
                return at
            upper = breaks[i + 1] if i + 1 < len(breaks) else math.inf
            # strictly inside the stretch the windows in the way are those of any inner point
            closed = calendar.closed_for_run(at + 1.0 if upper == math.inf else (at + upper) / 2,
                                             runtime_limit_s)
            lo, hi = frame + 1, bisect_left(times, upper)
            last = hi
            while lo < hi:
                mid = (lo + hi) // 2
                if fits(mid, closed):
                    hi = mid
                else:
                    lo = mid + 1
            if lo < last:
                return times[lo]
        return None

    def _counts_fit(self, demand: Demand, classes: tuple[int, ...]
                    ) -> Callable[[int, frozenset[int]], bool]:
        """Does the gang fit at ``frame`` by the counts of ``classes``, less what ``closed``
        takes?"""
        gpus = demand.gpus
        needs = self._needs(demand, classes)
        free_rows = [self.free[c] for c in classes]
        sets = self.node_sets(demand, classes)
        if sets:
            state = self.state
            rows = [(self.room_row(need), need) for need in sets]

            def fits_rooms(frame: int, closed: frozenset[int]) -> bool:
                shut = [n for n in closed if state.ready[n] and state.node_class[n] in classes]
                lost = sum(self.free_at(n, frame) for n in shut)
                if sum(row[frame] for row in free_rows) - lost < gpus:
                    return False
                rooms = [(state.node_class[n], self.room_at(n, frame)) for n in shut]
                return all(row[frame] - sum(1 for k, free in rooms if need.room(k, *free)) >= need.members
                           for row, need in rows)

            return fits_rooms
        node_rows = self._node_rows(needs, classes)

        def fits(frame: int, closed: frozenset[int]) -> bool:
            lost = [self._lost(frame, closed, classes, size) if closed else (0, 0)
                    for size, _ in needs]
            return (sum(row[frame] for row in free_rows) - lost[0][0] >= gpus
                    and all(sum(row[frame] for row in rows) - lost_roomy >= count
                            for (rows, count), (_, lost_roomy) in zip(node_rows, lost, strict=True)))

        return fits

    def _lost(self, frame: int, closed: frozenset[int], classes: tuple[int, ...],
              largest: int) -> tuple[int, int]:
        """Free GPUs, and nodes with room for ``largest``, that ``closed`` takes from
        ``classes`` at ``frame`` (many jobs share a frame and a set of windows)."""
        key = (frame, closed, classes, largest)
        found = self._lost_memo.get(key)
        if found is None:
            state = self.state
            free = [self.free_at(n, frame) for n in closed
                    if state.ready[n] and state.node_class[n] in classes]
            found = self._lost_memo[key] = (sum(free), sum(f >= largest for f in free))
        return found

    def _domain_need(self, demand: Demand, classes: tuple[int, ...]
                     ) -> tuple[list[int], list[bool], tuple[tuple[int, int], ...]]:
        """A ``same_leaf``/``same_spine`` gang's domain per node, which nodes are ready and
        capable, and the nodes its members need (:meth:`_needs`)."""
        state = self.state
        needs = self._needs(demand, classes)
        leaf = demand.topology is TopologyConstraint.SAME_LEAF
        capable = self._capable.get(classes)
        if capable is None:
            wanted = set(classes)
            capable = self._capable[classes] = [
                state.ready[n] and state.node_class[n] in wanted for n in range(len(state.nodes))]
        return state.leaf if leaf else state.spine, capable, needs

    def domain_frame(self, demand: Demand, classes: tuple[int, ...]) -> int | None:
        """For a ``same_leaf`` or ``same_spine`` gang: the first frame at which one leaf
        switch (spine) has enough free GPUs of ``classes`` and a node with room for each member
        that needs one of its own (0: now); ``None`` if none does by known runtime limits. (The
        fleet-wide :meth:`eta` says "fits" as soon as the fleet has the GPUs somewhere.)

        Steps: free GPUs and nodes with room per domain now (once per cycle for each level,
        class set and member size); then frame by frame the recorded releases, checking each
        domain as a release adds to it. Releases only add GPUs, so a domain that has the room
        part way through a frame still has it at the frame's end: the frame is the answer
        without applying the rest of it (no set of touched domains to check afterwards)."""
        if not classes:
            return None
        domain_of, capable, needs = self._domain_need(demand, classes)
        gpus = demand.gpus
        sets = self.node_sets(demand, classes)
        if sets:
            return self._domain_frame_rooms(domain_of, capable, classes, gpus, sets)
        if len(needs) == 1:
            return self._domain_frame_one(domain_of, capable, classes, gpus, *needs[0])
        sizes = tuple(size for size, _ in needs)
        counts = [count for _, count in needs]
        key = (domain_of is self.state.leaf, classes, sizes)
        base = self._domain_base.get(key)
        if base is None:
            base = self._domain_base[key] = ({}, {})
            for n, f in enumerate(self.base):
                if capable[n]:
                    d = domain_of[n]
                    base[0][d] = base[0].get(d, 0) + f
                    row = base[1].setdefault(d, [0] * len(sizes))
                    for k, size in enumerate(sizes):
                        row[k] += f >= size
        free = dict(base[0])
        roomy = {d: list(row) for d, row in base[1].items()}

        def room(d: int) -> bool:
            return free[d] >= gpus and all(r >= c for r, c in zip(roomy[d], counts, strict=True))

        if any(room(d) for d in free):
            return 0
        for i, changed in enumerate(self.changes):
            for n, before, after in changed:
                if capable[n]:
                    d = domain_of[n]
                    free[d] += after - before
                    row = roomy[d]
                    for k, size in enumerate(sizes):
                        row[k] += (after >= size) - (before >= size)
                    if room(d):
                        return i
        return None

    def _domain_frame_rooms(self, domain_of: list[int], capable: list[bool], classes: tuple[int, ...],
                            gpus: int, sets: tuple[NodeSet, ...]) -> int | None:
        """:meth:`domain_frame` for a gang on distinct nodes: per domain its free GPUs and its
        nodes with room for each of the gang's :meth:`node_sets`, GPUs, CPUs and memory, from
        now along the frames (the frames only add, so the first domain with room decides).
        The counts now are kept per level, capable nodes and sets' asks (many gangs share
        them)."""
        base, rooms = self._room_frames()
        node_class = self.state.node_class
        # each set's test as (GPUs, CPUs, GB, classes) per shape
        asks = tuple(tuple((s.gpus, s.cpus, s.memory_gb, s.where) for s in need.shapes) for need in sets)
        needed = [need.members for need in sets]
        if len(asks) == 1 and len(asks[0]) == 1:
            return self._domain_frame_room(domain_of, capable, classes, gpus, asks[0][0], needed[0])

        def room(k: int, g: int, c: int, m: int) -> list[int]:
            return [any(g >= a and c >= b and m >= d and k in w for a, b, d, w in shapes) for shapes in asks]

        key = (domain_of is self.state.leaf, classes, asks)
        start = self._domain_rooms.get(key)
        if start is None:
            start_free: dict[int, int] = {}
            start_roomy: dict[int, list[int]] = {}
            for n, (g, c, m) in enumerate(base):
                if capable[n]:
                    d = domain_of[n]
                    start_free[d] = start_free.get(d, 0) + g
                    row = start_roomy.setdefault(d, [0] * len(sets))
                    for j, ok in enumerate(room(node_class[n], g, c, m)):
                        row[j] += ok
            start = self._domain_rooms[key] = (start_free, start_roomy)
        free = dict(start[0])
        roomy = {d: list(row) for d, row in start[1].items()}

        def fits(d: int) -> bool:
            return free[d] >= gpus and all(r >= count for r, count in zip(roomy[d], needed, strict=True))

        if any(fits(d) for d in free):
            return 0
        for i, changed in enumerate(rooms):
            for n, g0, c0, m0, g1, c1, m1 in changed:
                if capable[n]:
                    d, k = domain_of[n], node_class[n]
                    free[d] += g1 - g0
                    row = roomy[d]
                    for j, (was, now) in enumerate(zip(room(k, g0, c0, m0), room(k, g1, c1, m1), strict=True)):
                        row[j] += now - was
                    if fits(d):
                        return i
        return None

    def _domain_frame_room(self, domain_of: list[int], capable: list[bool], classes: tuple[int, ...],
                           gpus: int, ask: tuple[int, int, int, frozenset[int]], count: int) -> int | None:
        """:meth:`_domain_frame_rooms` for a gang whose members are all of one shape (nearly
        every gang on distinct nodes without roles): one count per domain, the test inlined."""
        base, rooms = self._room_frames()
        node_class = self.state.node_class
        size, cpus, memory, where = ask
        key = (domain_of is self.state.leaf, classes, ((ask,),))
        start = self._domain_rooms.get(key)
        if start is None:
            start_free: dict[int, int] = {}
            start_roomy: dict[int, list[int]] = {}
            for n, (g, c, m) in enumerate(base):
                if capable[n]:
                    d = domain_of[n]
                    start_free[d] = start_free.get(d, 0) + g
                    row = start_roomy.setdefault(d, [0])
                    row[0] += g >= size and c >= cpus and m >= memory and node_class[n] in where
            start = self._domain_rooms[key] = (start_free, start_roomy)
        free = dict(start[0])
        roomy = {d: row[0] for d, row in start[1].items()}
        if any(f >= gpus and roomy[d] >= count for d, f in free.items()):
            return 0
        for i, changed in enumerate(rooms):
            for n, g0, c0, m0, g1, c1, m1 in changed:
                if capable[n]:
                    d = domain_of[n]
                    free[d] += g1 - g0
                    if node_class[n] in where:
                        roomy[d] += ((g1 >= size and c1 >= cpus and m1 >= memory)
                                     - (g0 >= size and c0 >= cpus and m0 >= memory))
                    if free[d] >= gpus and roomy[d] >= count:
                        return i
        return None

    def _domain_frame_one(self, domain_of: list[int], capable: list[bool], classes: tuple[int, ...],
                          gpus: int, size: int, count: int) -> int | None:
        """:meth:`domain_frame` for a gang whose members that need a node of their own are
        all of one size (nearly every gang): plain counts per domain, no row per size."""
        key = (domain_of is self.state.leaf, classes, size)
        base = self._domain_base_one.get(key)
        if base is None:
            base = self._domain_base_one[key] = ({}, {})
            for n, f in enumerate(self.base):
                if capable[n]:
                    d = domain_of[n]
                    base[0][d] = base[0].get(d, 0) + f
                    base[1][d] = base[1].get(d, 0) + (f >= size)
        free, roomy = dict(base[0]), dict(base[1])
        if any(f >= gpus and roomy[d] >= count for d, f in free.items()):
            return 0
        for i, changed in enumerate(self.changes):
            for n, before, after in changed:
                if capable[n]:
                    d = domain_of[n]
                    free[d] += after - before
                    roomy[d] += (after >= size) - (before >= size)
                    if free[d] >= gpus and roomy[d] >= count:
                        return i
        return None

    def _domain_fits(self, demand: Demand, classes: tuple[int, ...]
                     ) -> Callable[[int, frozenset[int]], bool]:
        """Does the gang fit under one leaf switch (spine) at ``frame`` on the capable nodes
        outside ``closed``? Node by node, so only for the rare gang a window is in the way of."""
        domain_of, capable, needs = self._domain_need(demand, classes)
        nodes = [n for n, ok in enumerate(capable) if ok]
        gpus = demand.gpus
        sets = self.node_sets(demand, classes)
        if sets:
            node_class = self.state.node_class

            def fits_rooms(frame: int, closed: frozenset[int]) -> bool:
                free: dict[int, int] = {}
                roomy: dict[int, list[int]] = {}
                for n in nodes:
                    if n not in closed:
                        (g, c, m), d, k = self.room_at(n, frame), domain_of[n], node_class[n]
                        free[d] = free.get(d, 0) + g
                        row = roomy.setdefault(d, [0] * len(sets))
                        for j, need in enumerate(sets):
                            row[j] += need.room(k, g, c, m)
                return any(f >= gpus and all(r >= need.members for r, need in zip(roomy[d], sets, strict=True))
                           for d, f in free.items())

            return fits_rooms

        def fits(frame: int, closed: frozenset[int]) -> bool:
            free: dict[int, int] = {}
            roomy: dict[int, list[int]] = {}
            for n in nodes:
                if n not in closed:
                    f, d = self.free_at(n, frame), domain_of[n]
                    free[d] = free.get(d, 0) + f
                    row = roomy.setdefault(d, [0] * len(needs))
                    for k, (size, _) in enumerate(needs):
                        row[k] += f >= size
            return any(f >= gpus and all(r >= count for r, (_, count) in zip(roomy[d], needs, strict=True))
                       for d, f in free.items())

        return fits

    def fits_at(self, demand: Demand, classes: tuple[int, ...], frame: int) -> bool:
        """Does the gang fit at ``frame`` (0: now) by the counts alone?"""
        return bool(classes) and self._fits(demand, classes)(frame)

    def _frame_returns(self) -> list[list[Grant]]:
        """Per frame, what comes back in it as grants of no holder: the GPUs of the frames'
        releases and the CPUs and memory :func:`_resource_releases` gives back (from the
        frame whose time is at or after theirs, as :meth:`_room_frames` counts them)."""
        if self._returns is not None:
            return self._returns
        times = self.times
        returns: list[list[Grant]] = [[] for _ in times]
        last = len(times)
        for at, items in self._gpu_releases.items():
            frame = bisect_left(times, at, 1)
            if frame < last:
                returns[frame].extend(Grant(n, mask, 0, 0) for n, mask in items)
        for at, resources in _resource_releases(self.ctx, self._reopens).items():
            frame = bisect_left(times, at, 1)
            if frame < last:
                returns[frame].extend(Grant(n, 0, cpus, memory_gb) for n, cpus, memory_gb in resources)
        self._returns = returns
        return returns

    def placed_frame(self, request: PlacementRequest, first: int) -> int | None:
        """The first frame from ``first`` at which the placer places ``request`` on the state
        as that frame finds it: every release up to its time given back (GPUs, CPUs and
        memory), the nodes inside a maintenance window closed until they reopen. At most
        :data:`PLACEMENT_PROBES` placements are tried, on frames where the placer's index
        checks pass; ``None`` if none placed it. The state is what-if'd and restored.

        For a packed heterogeneous gang, whose members share nodes by their shapes and take
        classes of their own: the counts on the union of its classes said "fits" when the
        GPUs were there on some class, though a member could take none of them (a 4-GPU
        h100 member told t=1000, when an a100 node freed, started at t=2000), or when the
        members' CPUs, memory or sizes did not pack onto the nodes free then."""
        ctx, times = self.ctx, self.times
        returns = self._frame_returns()
        state, placer = self.state, ctx.placer
        reopens = self._reopens
        # only the nodes of its classes: the placer looks at no other (the what-ifs of
        # every node up to the frame where the counts fit were most of a probe's cost)
        wanted = set(placer.union(request.member_classes))
        node_class = state.node_class
        upto: list[Grant] = []
        for n, (frames, totals) in self._node_returns().items():
            if node_class[n] in wanted:
                i = bisect_right(frames, first) - 1
                if i >= 0:
                    upto.append(totals[i])
        # a node's holders all gone by the frame's time leave it idle, as the score plugins
        # see a node then (the busy-longest tie-break of pack: a node that frees before the
        # frame is no busier than an idle one)
        busy_until = state.busy_until
        busy = self._busy()
        idled: list[tuple[int, float]] = []
        # members of one set of classes need their GPUs free there, the largest a node with
        # room for it (index sums, before a placement is tried)
        groups: dict[tuple[int, ...], list[int]] = {}
        for m, cls in zip(request.demand.members, request.member_classes, strict=True):
            group = groups.setdefault(cls, [0, 0])
            group[0] += m.gpus
            group[1] = max(group[1], m.gpus)
        undo: list[Restore] = [state.simulate_return(upto)]
        probes = 0
        try:
            for frame in range(first, len(times)):
                if frame > first:
                    undo.append(state.simulate_return(
                        [g for g in returns[frame] if node_class[g.node] in wanted]))
                if any(state.free_in(FLEET, 0, cls) < gpus or state.largest_free_block(cls) < largest
                       for cls, (gpus, largest) in groups.items()):
                    continue
                at = times[frame]
                while len(idled) < len(busy) and busy[len(idled)][0] <= at:
                    until, n = busy[len(idled)]
                    idled.append((n, until))
                    busy_until[n] = 0.0
                closed = frozenset(n for n, reopen in reopens.items() if reopen > at) | request.closed
                probe = request._replace(closed=closed)
                if not placer.plausible(probe):
                    continue
                probes += 1
                if placer.place(probe) is not None:
                    return frame
                if probes >= PLACEMENT_PROBES:
                    return None
            return None
        finally:
            for restore in reversed(undo):
                restore()
            for n, until in idled:
                busy_until[n] = until

    def _node_returns(self) -> dict[int, tuple[list[int], list[Grant]]]:
        """Per node something comes back to: the frames it does, and all that has come back
        to it by each of them, as one grant (the GPUs' masks together, the CPUs and memory
        summed), so a what-if of the state at a frame gives back one grant per node."""
        if self._per_node_returns is not None:
            return self._per_node_returns
        per_node: dict[int, tuple[list[int], list[Grant]]] = {}
        for frame, pieces in enumerate(self._frame_returns()):
            for g in pieces:
                frames, totals = per_node.setdefault(g.node, ([], []))
                if frames and frames[-1] == frame:
                    last = totals[-1]
                    totals[-1] = Grant(g.node, last.mask | g.mask, last.cpus + g.cpus,
                                       last.memory_gb + g.memory_gb)
                elif totals:
                    last = totals[-1]
                    frames.append(frame)
                    totals.append(Grant(g.node, last.mask | g.mask, last.cpus + g.cpus,
                                        last.memory_gb + g.memory_gb))
                else:
                    frames.append(frame)
                    totals.append(Grant(g.node, g.mask, g.cpus, g.memory_gb))
        self._per_node_returns = per_node
        return per_node

    def _busy(self) -> list[tuple[float, int]]:
        """(busy until, node) of every node busy until a known time, soonest first."""
        if self._busy_nodes is None:
            self._busy_nodes = sorted((until, n) for n, until in enumerate(self.state.busy_until)
                                      if 0 < until < math.inf)
        return self._busy_nodes

    def eta(self, demand: Demand, classes: tuple[int, ...]) -> float | None:
        """Estimated earliest start, or ``None`` when capacity suffices already (something
        else blocks the job) or never frees up within known runtime limits."""
        if not classes:
            return None
        fits = self._fits(demand, classes)
        if fits(0):
            return None
        lo, hi = 1, len(self.times)
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(mid):
                hi = mid
            else:
                lo = mid + 1
        if lo >= len(self.times):
            return None
        return self.times[lo]


DOMAIN_TOPOLOGIES = frozenset({TopologyConstraint.SAME_LEAF, TopologyConstraint.SAME_SPINE})
"""Constraints that put a whole gang under one leaf switch or spine."""
