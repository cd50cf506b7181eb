"""Why a job that passed its quota found no room now, read off the free-capacity indexes.

Phases 3 and 4 say only that a gang did not fit; the user needs to know which dimension stands
in the way (seed 001: feasibility is multi-dimensional, and fragmentation is the usual
culprit): too few capable GPUs, none with enough on one node, too few nodes with room for the
gang's members, no single leaf switch or spine with room, CPUs or memory short next to the free
GPUs, GPUs held for the head's reservation, or a maintenance window its run would overlap.
Each is an :class:`~scheduler_core.outcome.Outcome` with the numbers the cycle saw; phase 7
adds the ETA and the queue position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from scheduler_core.admission import distinct_nodes_words
from scheduler_core.context import CycleContext
from scheduler_core.distinct_nodes import node_sets, shapes_of
from scheduler_core.gang import Demand
from scheduler_core.maintenance import NO_NODES, run_end
from scheduler_core.outcome import Outcome
from scheduler_core.placement import PlacementRequest, loners
from scheduler_core.sentences import counted, span_words, verb
from scheduler_core.state import FLEET, HOLD, LEAF, SPINE, Grant
from scheduler_core.types import JobSpec, ReasonCode, TopologyConstraint


def type_names(ctx: CycleContext, classes: Sequence[int]) -> str:
    """The GPU types of node classes as a sentence names them: "a100-40gb/h100-80gb"."""
    names = sorted({ctx.state.classes[c].gpu_type.name for c in classes})
    return "/".join(names) if names else "capable"


def short_of_gpus(ctx: CycleContext, need: int, free: int, kind: str,
                  classes: tuple[int, ...]) -> tuple[str, str]:
    """``InsufficientGpus``' sentence and what would start the job."""
    short = need - free
    return (f"Needs {counted(need, f'{kind} GPU')}; {free} {verb(free, 'is', 'are')} free"
            f"{held_note(ctx, classes)}.",
            f"{counted(short, f'more {kind} GPU')} {verb(short, 'frees', 'free')} up")


def held_note(ctx: CycleContext, classes: Sequence[int]) -> str:
    """Idle GPUs of ``classes`` held for a reservation or a nomination, as a clause (they are
    not free, but a user looking at the nodes sees them idle): " (4 more are idle, held for
    job big's reservation)", or ""."""
    state = ctx.state
    wanted = set(classes)
    holders = []
    total = 0
    for job_id in ctx.reservations:
        gpus = sum(g.gpus for g in state.holdings.get((HOLD, job_id), ())
                   if state.node_class[g.node] in wanted)
        if gpus:
            holders.append(job_id)
            total += gpus
    if not total:
        return ""
    whose = (f"job {holders[0]}'s reservation" if len(holders) == 1
             else f"the reservations of jobs {', '.join(holders)}")
    return f" ({total} more {verb(total, 'is', 'are')} idle, held for {whose})"


def no_block(demand: Demand, free: int, kind: str, block: int, alone: int) -> tuple[str, str]:
    """``InsufficientContiguousGpus`` when no node has room for one of the gang's largest
    members, and what would start it: a node for a single-node job, but for a gang as many
    nodes as its members of that size need (``alone`` of them need a node each), not one
    (a 16-GPU gang was told it would start when "a node with 8 free GPUs becomes available")."""
    largest = demand.largest_member
    wide = sum(1 for m in demand.members if m.gpus == largest)
    said = (f"{counted(free, f'{kind} GPU')} free, none with {largest} on one node "
            f"(largest free block: {block})")
    each = counted(largest, f"free {kind} GPU")
    if wide == 1:
        return f"{said}.", f"a node with {each} becomes available"
    if alone == wide:
        return (f"{said}; its gang needs {wide} such nodes.",
                f"{counted(wide, 'node')} with {each} become available")
    return (f"{said}; its gang has {wide} members of that size.",
            f"room for its {wide} members of {counted(largest, f'{kind} GPU')} each frees up")


def short_beside(ctx: CycleContext, demand: Demand, big_classes: tuple[int, ...]
                 ) -> tuple[int, int, int]:
    """Of the nodes with GPUs free for one of the gang's largest members: how many have too few
    free CPUs for it, how many (with the CPUs) too little free memory, and how many such
    members they all hold now by GPUs, CPUs and memory."""
    state = ctx.state
    member = demand.members[0]
    cpu_short = mem_short = room = 0
    for c in big_classes:
        buckets = state.buckets.get((FLEET, 0, c))
        if buckets is None:
            continue
        for f in range(demand.largest_member, len(buckets)):
            for n in buckets[f]:
                if state.free_cpus[n] < member.cpus:
                    cpu_short += 1
                elif state.free_mem[n] < member.memory_gb:
                    mem_short += 1
                else:
                    room += member.copies_per_node(f, state.free_cpus[n], state.free_mem[n])
    return cpu_short, mem_short, room


class _DistinctShort(NamedTuple):
    """The members of a gang on distinct nodes that the free nodes cannot hold: ``need`` of
    them (a set of its shapes, :func:`~scheduler_core.distinct_nodes.node_sets`), the least of
    ``size`` GPUs, need a node each; of the nodes with ``size`` GPUs free for one of them,
    ``room`` also have its CPUs and memory, ``cpu_short`` lack the CPUs and ``mem_short``
    (with the CPUs) the memory. ``cpus`` and ``memory_gb``: the least any of those members
    asks; ``kind``: the GPU types of the nodes they take."""

    need: int
    size: int
    room: int
    cpu_short: int
    mem_short: int
    cpus: int
    memory_gb: int
    kind: str


def _distinct_shortfall(ctx: CycleContext, demand: Demand,
                        member_classes: tuple[tuple[int, ...], ...]) -> _DistinctShort | None:
    """Every member of a gang on distinct nodes needs a node of its own with room for it, by
    GPUs, CPUs and memory, as placement checks: for every set of its members' shapes that
    :func:`~scheduler_core.distinct_nodes.node_sets` names (Hall's condition; for a job
    without roles the prefixes, largest members first), the free nodes with room for one of
    the set must be at least as many as its members. ``None`` when every set has its nodes;
    else the set furthest short (of the larger members at a tie). Until 7 Dec the nodes were
    counted by GPUs only (a gang was told "only 2 nodes have 4 free" when one of them had too
    few CPUs), and by prefixes only: members of a role that takes only h100 GPUs were counted
    on every node the gang's larger members take, and the gang was told its free GPUs were
    "spread too thinly"."""
    state = ctx.state
    worst: _DistinctShort | None = None
    for need in node_sets(shapes_of(demand, member_classes)):
        size = min(s.gpus for s in need.shapes)
        room = cpu_short = mem_short = 0
        where = need.where
        for c in sorted(where):
            buckets = state.buckets.get((FLEET, 0, c))
            if buckets is None:
                continue
            takers = [s for s in need.shapes if c in s.where]
            for f in range(min(s.gpus for s in takers), len(buckets)):
                fit = [s for s in takers if s.gpus <= f]
                for n in buckets[f]:
                    cpus, mem = state.free_cpus[n], state.free_mem[n]
                    if any(s.cpus <= cpus and s.memory_gb <= mem for s in fit):
                        room += 1
                    elif any(s.cpus <= cpus for s in fit):
                        mem_short += 1
                    else:
                        cpu_short += 1
        if room < need.members and (worst is None or need.members - room > worst.need - worst.room):
            worst = _DistinctShort(need.members, size, room, cpu_short, mem_short,
                                   min(s.cpus for s in need.shapes),
                                   min(s.memory_gb for s in need.shapes), type_names(ctx, sorted(where)))
    return worst


def _distinct_words(found: _DistinctShort, demand: Demand, free: int, kind: str
                    ) -> tuple[ReasonCode, str, str]:
    """The reason, sentence and "would start if" of a gang on distinct nodes short of nodes
    with room for its members: by GPUs as ``InsufficientContiguousGpus``; when nodes have the
    GPUs but too few CPUs or too little memory beside them, those nodes named as the ordinary
    gang's CPU and memory sentences name them, and the dimension that decides it."""
    need, size, room = found.need, found.size, found.room
    short = need - room
    said = (f"{counted(free, f'{kind} GPU')} free, but its members go on distinct nodes: it "
            f"needs {distinct_nodes_words(demand, 'free ')}, and only ")
    # members that take fewer types than the gang are short of nodes of theirs: named so
    node = f"{found.kind} node" if found.kind != kind else "node"
    kind = found.kind
    if not found.cpu_short and not found.mem_short:
        return (ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
                f"{said}{counted(room, node)} {verb(room, 'has', 'have')} {size} free.",
                f"{counted(short, 'more node')} with {counted(size, f'free {kind} GPU')}")
    more = " more" if room else ""
    beside = []
    if found.cpu_short:
        beside.append(f"{found.cpu_short}{more} {verb(found.cpu_short, 'has', 'have')} "
                      f"{counted(size, 'free GPU')} but fewer than {counted(found.cpus, 'free CPU')}")
    if found.mem_short:
        beside.append(f"{found.mem_short}{more} {verb(found.mem_short, 'has', 'have')} "
                      f"{counted(size, 'free GPU')} but less than {found.memory_gb} GB of free memory")
    sentence = (f"{said}{counted(room, node)} {verb(room, 'has', 'have')} room for one: "
                f"{'; '.join(beside)}.")
    if room + found.cpu_short + found.mem_short < need:
        # too few nodes have even the GPUs: nodes with room for a whole member must free up
        asks = ", ".join(part for part in (
            counted(size, f"free {kind} GPU"),
            counted(found.cpus, "free CPU") if found.cpus else "",
            f"{found.memory_gb} GB of free memory" if found.memory_gb else "") if part)
        return (ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS, sentence,
                f"{counted(short, 'more node')} with room for a member ({asks})")
    each = f" for each of {counted(short, 'more member')}"
    if found.cpu_short >= found.mem_short:
        return (ReasonCode.INSUFFICIENT_CPU, sentence,
                f"{counted(found.cpus, 'CPU')} {verb(found.cpus, 'frees', 'free')} up next to "
                f"{counted(size, 'free GPU')}{each}")
    return (ReasonCode.INSUFFICIENT_MEMORY, sentence,
            f"{found.memory_gb} GB of memory frees up next to free GPUs{each}")


def diagnose(ctx: CycleContext, spec: JobSpec, demand: Demand,
             member_classes: tuple[tuple[int, ...], ...], blocked_by_head: bool,
             needs_whole: bool) -> Outcome:
    """Why a gang that passed quota found no room, from the free-capacity indexes."""
    state = ctx.state
    union = ctx.placer.union(member_classes)
    kind = type_names(ctx, union)
    free = state.free_in(FLEET, 0, union)
    need = demand.gpus

    def out(code: ReasonCode, message: str, would: str) -> Outcome:
        return Outcome(code, message, True, would, demand=demand, classes=union,
                       needs_whole_node=needs_whole, member_classes=member_classes)

    if blocked_by_head and ctx.head is not None:
        head = ctx.head
        why = (
            "it declares no runtime limit"
            if spec.runtime_limit_s is None
            else f"its runtime limit of {span_words(spec.runtime_limit_s)} ends after that"
        )
        return out(
            ReasonCode.BEHIND_HIGHER_PRIORITY,
            f"It fits only on GPUs reserved for job {head.job_id}, which starts at "
            f"t={head.start_at:.0f}; {why}, so starting now would delay it.",
            f"job {head.job_id} starts, or this job declares a runtime limit ending before "
            f"t={head.start_at:.0f}",
        )
    if free < need:
        return out(ReasonCode.INSUFFICIENT_GPUS, *short_of_gpus(ctx, need, free, kind, union))
    largest_member = demand.largest_member
    big_classes = tuple(sorted({c for m, cls in zip(demand.members, member_classes, strict=True)
                                if m.gpus == largest_member for c in cls}))
    block = state.largest_free_block(big_classes)
    bigs = loners(state, demand, member_classes)
    if demand.distinct_nodes and len(demand.members) > 1:
        found = _distinct_shortfall(ctx, demand, member_classes)
        if found is not None:
            return out(*_distinct_words(found, demand, free, kind))
    if block < largest_member:
        return out(ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
                   *no_block(demand, free, kind, block, bigs))
    roomy = state.nodes_with_free(big_classes, largest_member)
    if roomy < bigs:
        return out(
            ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
            f"{counted(free, f'{kind} GPU')} free, but only {counted(roomy, 'node')} with "
            f"{largest_member} free; its gang needs {bigs}.",
            f"{counted(bigs - roomy, 'more node')} with {counted(largest_member, f'free {kind} GPU')}",
        )
    if demand.topology in (TopologyConstraint.SAME_LEAF, TopologyConstraint.SAME_SPINE):
        leaf = demand.topology is TopologyConstraint.SAME_LEAF
        where = "leaf switch" if leaf else "spine"
        level, domains = (LEAF, len(state.leaf_names)) if leaf else (SPINE,
                                                                      len(state.spine_names))
        most = max((state.free_in(level, d, union) for d in range(domains)), default=0)
        return out(
            ReasonCode.TOPOLOGY_UNSATISFIED,
            f"{counted(free, f'{kind} GPU')} free, but no single {where} has room for all {need} "
            f"(at most {most} free under one).",
            f"{counted(need, f'{kind} GPU')} {verb(need, 'frees', 'free')} up under one {where}",
        )
    cpu_short, mem_short, room = short_beside(ctx, demand, big_classes)
    member = demand.members[0]
    wide = sum(1 for m in demand.members if m.gpus == largest_member)
    # a gang's members of that size the nodes with enough beside their GPUs leave out: one
    # more node with the CPUs would not start a gang that needs two
    more = wide - room if wide > 1 and room < wide else 0
    among = f"; there is room for {room} of its gang's {wide} members of that size" if more else ""
    each = f" for each of {counted(more, 'more member')}" if more else ""
    if cpu_short and cpu_short >= mem_short:
        return out(
            ReasonCode.INSUFFICIENT_CPU,
            f"{counted(cpu_short, 'node')} {verb(cpu_short, 'has', 'have')} "
            f"{counted(largest_member, 'free GPU')} but fewer than "
            f"{counted(member.cpus, 'free CPU')}{among}.",
            f"{counted(member.cpus, 'CPU')} {verb(member.cpus, 'frees', 'free')} "
            f"up next to {counted(largest_member, 'free GPU')}{each}",
        )
    if mem_short:
        return out(
            ReasonCode.INSUFFICIENT_MEMORY,
            f"{counted(mem_short, 'node')} {verb(mem_short, 'has', 'have')} "
            f"{counted(largest_member, 'free GPU')} but less than "
            f"{member.memory_gb} GB of free memory{among}.",
            f"{member.memory_gb} GB of memory frees up next to free GPUs{each}",
        )
    return out(
        ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
        f"{counted(free, f'{kind} GPU')} free, but spread too thinly for its gang of "
        f"{len(demand.members)} members.",
        f"the free {kind} GPUs consolidate onto fewer nodes",
    )


#: How many node names a sentence lists before "…" (a gang may use hundreds).
LISTED_NODES = 4


def node_list(names: Sequence[str]) -> str:
    """Node names as a sentence lists them: "n0, n1", or the first four and "…"."""
    return ", ".join(names[:LISTED_NODES]) + (", …" if len(names) > LISTED_NODES else "")


def taken_nodes(ctx: CycleContext, grants: Sequence[Grant], nodes: Sequence[int],
                blocked: Sequence[int]) -> str:
    """Which of the ``nodes`` a placement uses the windows take out of service (``blocked``),
    as "takes … out of service" names them: "it" or "them" when they are all of its nodes,
    else by name ("n3", "5 of them (n1, n2, n3, n4, …)"), a heterogeneous gang's with the
    roles of its members there ("n1 (rollout)"). (A 4-node gang with one node under a window
    was told it "would fit now on 1 node": only that node was counted.)"""
    if len(blocked) == len(nodes):
        return "it" if len(nodes) == 1 else "them"
    state = ctx.state
    named = []
    for n in blocked:
        roles = sorted({g.role for g in grants if g.node == n and g.role})
        named.append(state.nodes[n].name + (f" ({', '.join(roles)})" if roles else ""))
    listed = node_list(named)
    return listed if len(blocked) <= LISTED_NODES else f"{len(blocked)} of them ({listed})"


def maintenance_outcome(ctx: CycleContext, spec: JobSpec, requests: Sequence[PlacementRequest],
                        needs_whole: bool) -> Outcome | None:
    """``MaintenanceWindow`` for a job that would be placed now but for the maintenance
    windows its run would overlap (one what-if placement per GPU type it accepts, ignoring
    the windows, each a placement attempt of the cycle), or ``None``. Its start here is when
    those windows have ended: the nodes it would use reopen then. (Phase 7 moves it earlier
    when other capable nodes free up sooner, clear of the windows: ``explain._Explainer.word``.)"""
    calendar = ctx.calendar
    now = ctx.snapshot.now
    end = run_end(now, spec.runtime_limit_s)
    if not calendar or not calendar.closed(now, end):
        return None
    for request in requests:
        # a what-if counts as a placement attempt (the cycle's budget bounds them); a gang
        # that does not fit even with the windows ignored never will this cycle
        key = (request.demand, request.member_classes, request.score.NAME, False, NO_NODES)
        if key in ctx.failed_shapes:
            continue
        ctx.attempts += 1
        grants = ctx.placer.place(request._replace(closed=NO_NODES))
        if grants is None:
            ctx.failed_shapes[key] = True
            continue
        nodes = sorted({g.node for g in grants})
        windows = calendar.blocking(nodes, now, end)
        if not windows:
            continue
        names = ctx.state.nodes
        blocked = [n for n in nodes if calendar.blocking((n,), now, end)]
        reopen = max(w.end_at for w in windows)
        first = min(w.start_at for w in windows)
        them = taken_nodes(ctx, grants, nodes, blocked)
        if len(windows) == 1:
            w = windows[0]
            what = (f"maintenance window {w.id}{f' ({w.reason})' if w.reason else ''} takes "
                    f"{them} out of service from t={w.start_at:.0f} to t={w.end_at:.0f}")
        else:
            what = f"maintenance takes {them} out of service (" + "; ".join(
                f"window {w.id}{f' ({w.reason})' if w.reason else ''} from t={w.start_at:.0f} "
                f"to t={w.end_at:.0f}" for w in windows) + ")"
        why = ("it declares no runtime limit, so it could still be running then"
               if spec.runtime_limit_s is None
               else f"its runtime limit of {span_words(spec.runtime_limit_s)} would end it at "
                    f"t={end:.0f}")
        return Outcome(
            ReasonCode.MAINTENANCE_WINDOW,
            f"It would fit now on {counted(len(nodes), 'node')} "
            f"({node_list([names[n].name for n in nodes])}), but {what}, and {why}. It may start there "
            f"once the maintenance has ended, or earlier elsewhere as GPUs free up.",
            True,
            f"the maintenance ends at t={reopen:.0f}, GPUs free up on other nodes"
            + ("" if now >= first else f", or it declares a runtime limit ending by t={first:.0f}"),
            eta=reopen, demand=request.demand, classes=ctx.placer.union(request.member_classes),
            needs_whole_node=needs_whole,
            type_classes=tuple(ctx.placer.union(r.member_classes) for r in requests)
            if len(requests) > 1 else (),
        )
    return None
