"""Phase 7: a reason, a sentence with numbers and an ETA for every job left waiting.

Statuses carry what happens next (Kubernetes' Unschedulable vs UnschedulableAndUnresolvable):
``resolvable`` is ``False`` only when waiting cannot help (``CanNeverRun``, an invalid request,
an unknown priority class). Numbers in the sentences are the ones the deciding phase saw.

ETAs: a reservation or a nomination knows its start; a job over quota gets the time its team's
own jobs will have released enough GPUs by their runtime limits, or the first release time at
which its gang fits if that is later (it needs both); a job short of capacity gets
the later of two estimates (:class:`~scheduler_core.backfill.ReleaseTimeline`): the first
release time at which enough capable GPUs (and nodes with room for its largest member) are
free, and the time by which the capacity of its node classes has run the work of the jobs ahead
of it in the queue that wait for the same classes (their GPUs x runtime limits, or
``default_runtime_estimate_s``; GPUs already held for them excluded), back to back. That second
term is what makes a job's ETA grow with its queue position; it ignores fragmentation and
backfill, so it is an estimate and the message says so. GPUs promised to a reservation or a
nomination stay busy in the timeline until that job has run, so its work is not counted ahead.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

from scheduler_core.backfill import ReleaseTimeline, ends_by_head, team_ends, team_release_eta
from scheduler_core.context import CycleContext, Outcome
from scheduler_core.gang import Demand
from scheduler_core.placement import loners
from scheduler_core.quota import QuotaLedger
from scheduler_core.state import FLEET, HOLD, LEAF, SPINE
from scheduler_core.types import (
    JobSpec,
    PendingExplanation,
    ReasonCode,
    TopologyConstraint,
    pending_explanation,
)

REASONS: dict[ReasonCode, str] = {code: code.value for code in ReasonCode}
"""PascalCase reason per code (a dict lookup is cheaper than the enum's ``value``)."""

CAPACITY_CODES = frozenset({
    ReasonCode.INSUFFICIENT_GPUS,
    ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
    ReasonCode.INSUFFICIENT_CPU,
    ReasonCode.INSUFFICIENT_MEMORY,
    ReasonCode.TOPOLOGY_UNSATISFIED,
    ReasonCode.BEHIND_HIGHER_PRIORITY,
    ReasonCode.PREEMPTION_BUDGET_EXHAUSTED,
})

AHEAD_CODES = CAPACITY_CODES | {ReasonCode.WAITING_FOR_RESERVATION,
                                ReasonCode.WAITING_FOR_PREEMPTION}
"""Waiting jobs whose work counts as *ahead* of later jobs on the same node classes: those
waiting for capacity (not those waiting for their quota, which may start much later)."""


def type_names(ctx: CycleContext, classes: Sequence[int]) -> str:
    names = sorted({ctx.state.classes[c].gpu_type.name for c in classes})
    return "/".join(names) if names else "capable"


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
    return f" ({total} more are idle, held for {whose})"


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
                       needs_whole_node=needs_whole)

    if blocked_by_head and ctx.head is not None:
        head = ctx.head
        why = (
            "it declares no runtime limit"
            if spec.runtime_limit_s is None
            else f"its runtime limit of {spec.runtime_limit_s:.0f} s ends after that"
        )
        return out(
            ReasonCode.BEHIND_HIGHER_PRIORITY,
            f"It fits only on GPUs reserved for job {head.job_id}, which starts at "
            f"t={head.start_at:.0f}; {why}, so starting now would delay it.",
            f"job {head.job_id} starts, or this job declares a runtime limit ending before "
            f"t={head.start_at:.0f}",
        )
    if free < need:
        return out(
            ReasonCode.INSUFFICIENT_GPUS,
            f"Needs {need} {kind} GPUs; {free} are free{held_note(ctx, union)}.",
            f"{need - free} more {kind} GPUs free up",
        )
    largest_member = demand.largest_member
    big_classes = tuple(sorted({c for m, cls in zip(demand.members, member_classes, strict=True)
                                if m.gpus == largest_member for c in cls}))
    block = state.largest_free_block(big_classes)
    if block < largest_member:
        return out(
            ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
            f"{free} {kind} GPUs free, none with {largest_member} on one node "
            f"(largest free block: {block}).",
            f"a node with {largest_member} free {kind} GPUs becomes available",
        )
    bigs = loners(state, demand, member_classes)
    roomy = state.nodes_with_free(big_classes, largest_member)
    if roomy < bigs:
        return out(
            ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
            f"{free} {kind} GPUs free, but only {roomy} nodes with {largest_member} free; "
            f"its gang needs {bigs}.",
            f"{bigs - roomy} more nodes with {largest_member} free {kind} GPUs",
        )
    if demand.topology in (TopologyConstraint.SAME_LEAF, TopologyConstraint.SAME_SPINE):
        leaf = demand.topology is TopologyConstraint.SAME_LEAF
        where = "leaf switch" if leaf else "spine"
        level, domains = (LEAF, len(state.leaf_names)) if leaf else (SPINE,
                                                                      len(state.spine_names))
        most = max((state.free_in(level, d, union) for d in range(domains)), default=0)
        return out(
            ReasonCode.TOPOLOGY_UNSATISFIED,
            f"{free} {kind} GPUs free, but no single {where} has room for all {need} (at most "
            f"{most} free under one).",
            f"{need} {kind} GPUs free up under one {where}",
        )
    cpu_short = mem_short = 0
    for c in big_classes:
        buckets = state.buckets.get((FLEET, 0, c))
        if buckets is None:
            continue
        for f in range(largest_member, len(buckets)):
            for n in buckets[f]:
                if state.free_cpus[n] < demand.members[0].cpus:
                    cpu_short += 1
                elif state.free_mem[n] < demand.members[0].memory_gb:
                    mem_short += 1
    if cpu_short and cpu_short >= mem_short:
        return out(
            ReasonCode.INSUFFICIENT_CPU,
            f"{cpu_short} nodes have {largest_member} free GPUs but fewer than "
            f"{demand.members[0].cpus} free CPUs.",
            f"{demand.members[0].cpus} CPUs free up next to {largest_member} free GPUs",
        )
    if mem_short:
        return out(
            ReasonCode.INSUFFICIENT_MEMORY,
            f"{mem_short} nodes have {largest_member} free GPUs but less than "
            f"{demand.members[0].memory_gb} GB of free memory.",
            f"{demand.members[0].memory_gb} GB of memory frees up next to free GPUs",
        )
    return out(
        ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
        f"{free} {kind} GPUs free, but spread too thinly for its gang of "
        f"{len(demand.members)} members.",
        f"the free {kind} GPUs consolidate onto fewer nodes",
    )


def explain(ctx: CycleContext, queue: Sequence[JobSpec]) -> tuple[PendingExplanation, ...]:
    """One explanation per pending job that was not bound, in queue order.

    Steps per job: the outcome's own ETA (a reservation's or a nomination's start), else, for
    a job over its quota, the time its team's jobs release the quota it lacks, and, for a job
    short of capacity, the first release time at which its gang fits; then the drain term
    (the work queued ahead of it on its node classes, run back to back). A job over its quota
    also needs the GPUs: its ETA is the later of the quota's time and the capacity terms."""
    timeline: ReleaseTimeline | None = None
    # ReleaseTimeline.eta depends only on the gang's GPU count, its largest member, how many
    # members are that large, and the classes: requests that differ in CPUs or memory per GPU
    # share one estimate. The flag: does the capacity suffice already?
    etas: dict[tuple[int, int, int, tuple[int, ...]], tuple[float | None, bool]] = {}
    quota_etas: dict[tuple[str, str, int], float | None] = {}
    # the state no longer changes in this phase: one release list per (team, GPU type)
    releases: dict[tuple[str, str], list[tuple[float, int]]] = {}
    # Outcomes shared by many jobs (memoised for identical shapes) are worded once; keyed by
    # identity because hashing an Outcome would hash its whole gang. Each entry also carries
    # what the per-job part below needs, so no enum is hashed per job.
    worded: dict[int, tuple[float | None, str, ReasonCode, str, bool, str,
                            _DrainLine | None, bool, bool, int, bool, str | None,
                            float | None, bool, str | None]] = {}
    # Work (GPU-seconds) of the waiting jobs so far in the queue, per node class.
    ahead = [0.0] * len(ctx.state.classes)
    lines: dict[tuple[int, ...], _DrainLine] = {}
    # A job with a reservation or a nomination is in the release timeline itself (its GPUs
    # are busy from its start until it has run): its work is not added again.
    promised = ctx.reservations
    # The head over its quota now (team, GPU type, its GPUs, when it has run, id, start), and
    # per request size the quota ETA of a later job of its team that would outlast its start.
    head_quota: tuple[str, str, int, float, str, float] | None = None
    head = ctx.head
    if head is not None and head.quota_team is not None and head.quota_type is not None:
        head_spec = ctx.reserved_specs[head.job_id]
        head_quota = (head.quota_team, head.quota_type, sum(g.gpus for g in head.grants),
                      head.start_at + (head_spec.runtime_limit_s
                                       or ctx.config.default_runtime_estimate_s),
                      head.job_id, head.start_at)
    after_head: dict[int, float | None] = {}
    default_runtime = ctx.config.default_runtime_estimate_s
    out: list[PendingExplanation] = []
    append = out.append
    bound = ctx.bound
    outcomes = ctx.outcomes
    # 1-based among the jobs still waiting: those this cycle binds are no longer ahead
    position = 0
    for spec in queue:
        if spec.id in bound:
            continue
        position += 1
        outcome = outcomes[spec.id]
        entry = worded.get(id(outcome))
        if entry is None:
            base = outcome.eta
            code = outcome.code
            quota_at: float | None = None
            capacity_now = False
            quota_code = code is ReasonCode.QUOTA_EXCEEDED
            if (base is None or quota_code) and outcome.resolvable:
                # (a job over quota may come with the time its preemption would start it:
                # then the earlier of that and its quota's time)
                preset = base
                capacity = (code in CAPACITY_CODES or quota_code) and outcome.demand is not None
                if capacity:
                    d = outcome.demand
                    assert d is not None
                    largest = d.largest_member
                    key = (d.gpus, largest, sum(1 for m in d.members if m.gpus == largest),
                           outcome.classes)
                    if code is ReasonCode.TOPOLOGY_UNSATISFIED:
                        if timeline is None:
                            timeline = ReleaseTimeline(ctx)
                        base, capacity_now = domain_eta(timeline, d, outcome.classes), False
                    else:
                        if key not in etas:
                            if timeline is None:
                                timeline = ReleaseTimeline(ctx)
                            etas[key] = (timeline.eta(d, outcome.classes),
                                         timeline.fits_at(d, outcome.classes, 0))
                        base, capacity_now = etas[key]
                if code is ReasonCode.QUOTA_EXCEEDED and outcome.quota_type is not None:
                    gpus = outcome.demand.gpus if outcome.demand else spec.gpus
                    verdict = ctx.ledger.check(spec.team, outcome.quota_type, gpus)
                    shortage = verdict.shortage(gpus)
                    cohort = ctx.ledger.cohort_of(spec.team, outcome.quota_type)
                    qkey = (spec.team, outcome.quota_type,
                            shortage if cohort is None else -gpus)
                    if qkey not in quota_etas:
                        if cohort is None:
                            tkey = (spec.team, outcome.quota_type)
                            if tkey not in releases:
                                releases[tkey] = team_ends(ctx, *tkey)
                            quota_etas[qkey] = team_release_eta(ctx, spec.team,
                                                                outcome.quota_type, shortage,
                                                                releases[tkey])
                        else:
                            quota_etas[qkey] = cohort_release_eta(ctx, spec.team,
                                                                  outcome.quota_type, gpus,
                                                                  releases)
                    quota_at = quota_etas[qkey]
                    # it needs both its quota and the GPUs: the later of the two, unknown if
                    # either is (GPUs that never free by runtime limits)
                    if quota_at is None or not capacity:
                        base = quota_at
                    elif base is None:
                        base = quota_at if capacity_now else None
                    else:
                        base = max(base, quota_at)
                    if base is None:
                        quota_at = None
                if preset is not None:
                    if base is None or preset < base:
                        base, quota_at = preset, None
            elif code is ReasonCode.PREEMPTION_BUDGET_EXHAUSTED and outcome.demand is not None:
                # the time its victims' protection lifts (and they stop), unless the GPUs free
                # up earlier by runtime limits anyway
                d = outcome.demand
                largest = d.largest_member
                key = (d.gpus, largest, sum(1 for m in d.members if m.gpus == largest),
                       outcome.classes)
                if key not in etas:
                    if timeline is None:
                        timeline = ReleaseTimeline(ctx)
                    etas[key] = (timeline.eta(d, outcome.classes),
                                 timeline.fits_at(d, outcome.classes, 0))
                freed = etas[key][0]
                if freed is not None and base is not None and freed < base:
                    base = freed
            line: _DrainLine | None = None
            if code in AHEAD_CODES and outcome.demand is not None and outcome.classes:
                line = lines.get(outcome.classes)
                if line is None:
                    if timeline is None:
                        timeline = ReleaseTimeline(ctx)
                    line = lines[outcome.classes] = _DrainLine(timeline, outcome.classes)
            # A job over its quota waits for its team's jobs, not for the queue ahead of it
            # (which may run beside it): its capacity term is the release time alone.
            drains = code in CAPACITY_CODES and outcome.eta is None
            entry = worded[id(outcome)] = (
                base, outcome.message, code, REASONS[code], outcome.resolvable,
                outcome.would_start_if, line, drains, _fits_now(outcome),
                outcome.demand.gpus if outcome.demand is not None else 0, base != outcome.eta,
                None if base is None or (quota_at is not None and base > quota_at)
                else f"{outcome.message} Estimated start t={base:.0f} from runtime limits.",
                quota_at, code in AHEAD_CODES, outcome.quota_type if quota_at is not None else None,
            )
        (base, text, code, reason, resolvable, would, line, drains, fits_now, demand_gpus,
         estimated, position_free, quota_at, adds, quota_type) = entry
        eta = base
        message = text
        if line is not None:
            spread = line.spread
            if drains:
                work = 0.0
                for c, _ in spread:
                    work += ahead[c]
                if work > 0:
                    # ReleaseTimeline.drain(classes, work) from the line's cursor, inlined: it runs
                    # for thousands of jobs a cycle
                    area = line.area
                    i = line.cursor
                    last = len(area) - 1
                    while i < last and area[i + 1] <= work:
                        i += 1
                    line.cursor = i
                    rate = line.rates[i]
                    if rate > 0:
                        drained: float | None = line.times[i] + (work - area[i]) / rate
                    else:
                        drained = line.times[i] if area[i] >= work else None
                    if drained is not None and (eta is None and fits_now or
                                                eta is not None and drained > eta):
                        eta = drained
            if adds and spec.id not in promised:
                work = demand_gpus * (spec.runtime_limit_s or default_runtime)
                for c, share in spread:
                    ahead[c] += work * share
        if quota_type is not None and head_quota is not None and spec.team == head_quota[0] \
                and quota_type == head_quota[1] and not ends_by_head(ctx, spec):
            # The head holds its reservation on this team's quota: this job, still running at
            # the head's start, must leave it room (the cycle's own rule), so its quota counts
            # the head as held from now until the head has run.
            if demand_gpus not in after_head:
                after_head[demand_gpus] = _quota_eta_after_head(ctx, spec.team, quota_type,
                                                                demand_gpus, head_quota[2],
                                                                head_quota[3], releases)
            later = after_head[demand_gpus]
            if later is None or eta is None or later > eta:
                eta = later
                message = text if later is None else (
                    f"{text} Estimated start t={later:.0f}: its team's quota must also hold job "
                    f"{head_quota[4]} from its reservation at t={head_quota[5]:.0f} until it has "
                    f"run (by runtime limits).")
                estimated = False
        if eta is not None and estimated:
            if quota_at is not None and eta > quota_at:
                message = (f"{text} Estimated start t={eta:.0f}: its quota has room from "
                           f"t={quota_at:.0f}, but the capable GPUs are busy until then (by "
                           f"runtime limits).")
            elif eta != base:
                message = (f"{text} Estimated start t={eta:.0f}: the capable GPUs first run the "
                           f"jobs ahead of it (by their runtime limits, back to back).")
            elif position_free is not None:
                message = position_free
            else:
                message = f"{text} Estimated start t={eta:.0f} from runtime limits."
        append(pending_explanation(spec.id, code, reason, message, resolvable, position, eta,
                                  would))
    return tuple(out)


def domain_eta(timeline: ReleaseTimeline, demand: Demand,
               classes: tuple[int, ...]) -> float | None:
    """For a ``same_leaf`` or ``same_spine`` gang: the first release time at which one leaf
    switch (spine) has enough free GPUs of ``classes`` and enough nodes with room for its
    largest member; ``None`` if none does by known runtime limits. (The fleet-wide
    :meth:`ReleaseTimeline.eta` says "fits now" as soon as the fleet has the GPUs somewhere.)

    Steps: free GPUs per ready capable node now; then frame by frame the recorded releases,
    keeping per domain the free sum and the count of nodes with room."""
    state = timeline.state
    wanted = set(classes)
    domain_of = state.leaf if demand.topology is TopologyConstraint.SAME_LEAF else state.spine
    largest = demand.largest_member
    width = max(state.classes[c].gpus for c in classes)
    need_nodes = max(1, sum(1 for m in demand.members if m.gpus == largest and 2 * m.gpus > width))
    free: dict[int, int] = {}
    roomy: dict[int, int] = {}
    capable = [state.ready[n] and state.node_class[n] in wanted for n in range(len(state.nodes))]
    for n, f in enumerate(timeline.base):
        if capable[n]:
            d = domain_of[n]
            free[d] = free.get(d, 0) + f
            roomy[d] = roomy.get(d, 0) + (f >= largest)
    for i, changed in enumerate(timeline.changes):
        for n, before, after in changed:
            if capable[n]:
                d = domain_of[n]
                free[d] += after - before
                roomy[d] += (after >= largest) - (before >= largest)
        if any(f >= demand.gpus and roomy[d] >= need_nodes for d, f in free.items()):
            return timeline.times[i]
    return None


def _quota_eta_after_head(ctx: CycleContext, team: str, gpu_type: str, gpus: int,
                          head_gpus: int, head_end: float,
                          releases: dict[tuple[str, str], list[tuple[float, int]]]
                          ) -> float | None:
    """When ``team``'s quota admits ``gpus`` more GPUs of ``gpu_type`` while also holding the
    head's ``head_gpus`` until ``head_end``."""
    key = (team, gpu_type)
    if key not in releases:
        releases[key] = team_ends(ctx, *key)
    if ctx.ledger.cohort_of(team, gpu_type) is not None:
        return cohort_release_eta(ctx, team, gpu_type, gpus, releases,
                                  extra=(head_end, head_gpus))
    shortage = ctx.ledger.check(team, gpu_type, gpus + head_gpus).shortage(gpus + head_gpus)
    return team_release_eta(ctx, team, gpu_type, shortage,
                            sorted([*releases[key], (head_end, head_gpus)]))


def cohort_release_eta(ctx: CycleContext, team: str, gpu_type: str, gpus: int,
                       releases: dict[tuple[str, str], list[tuple[float, int]]],
                       extra: tuple[float, int] | None = None) -> float | None:
    """When ``team``'s quota admits ``gpus`` more GPUs of ``gpu_type`` as the running jobs of
    its cohort end by their runtime limits: its own jobs free its quota, the others' free what
    they lend. ``None`` if that never happens by known limits.

    Steps: the cohort's members on the type and, per member, its releases in time order
    (``releases`` memoises :func:`~scheduler_core.backfill.team_ends` per team and type); a
    binary search over the release times for the first at which a ledger charged with each
    member's use then admits the request. Use only falls as time passes, and admission only
    grows as use falls (less own use, more lent, less borrowed by others), so the search is
    sound. Jobs that start meanwhile are not foreseen, except ``extra``: GPUs ``team`` also
    holds from now until a time (the head's reservation on its quota)."""
    ledger = ctx.ledger
    cohort = ledger.cohort_of(team, gpu_type)
    members = ledger.cohort_members(cohort, gpu_type) if cohort is not None else ()
    freed: list[tuple[str, list[float], list[int]]] = []
    times: set[float] = set()
    for member in members:
        key = (member.team, gpu_type)
        if key not in releases:
            releases[key] = team_ends(ctx, *key)
        rows = releases[key]
        if extra is not None and member.team == team:
            rows = sorted([*rows, extra])
        ends = [end for end, _ in rows]
        freed.append((member.team, ends, list(accumulate(g for _, g in rows))))
        times.update(ends)

    def admitted(at: float) -> bool:
        trial = QuotaLedger(members)
        for member, ends, total in freed:
            k = bisect_right(ends, at)
            held = extra[1] if extra is not None and member == team else 0
            trial.charge(member, gpu_type, ledger.used_by(member, gpu_type) + held
                         - (total[k - 1] if k else 0))
        return trial.check(team, gpu_type, gpus).admitted

    order = sorted(times)
    lo, hi = 0, len(order)
    while lo < hi:
        mid = (lo + hi) // 2
        if admitted(order[mid]):
            hi = mid
        else:
            lo = mid + 1
    return order[lo] if lo < len(order) else None


class _DrainLine:
    """:meth:`ReleaseTimeline.drain` for one class set, for a work total that only grows
    along the queue: a cursor over the frames instead of a search per job (advanced in
    :func:`explain`'s loop). ``spread`` says how a job's work on these classes is shared among
    them (by their capacity)."""

    __slots__ = ("area", "rates", "times", "cursor", "spread")

    def __init__(self, timeline: ReleaseTimeline, classes: tuple[int, ...]) -> None:
        self.area, self.rates = timeline.integral(classes)
        self.times = timeline.times
        self.cursor = 0
        caps = [(c, timeline.capacity(c)) for c in classes]
        total = sum(cap for _, cap in caps)
        self.spread = tuple((c, cap / total) for c, cap in caps if total > 0 and cap > 0)


def _fits_now(outcome: Outcome) -> bool:
    """Did the release timeline give no ETA because the capacity is there already (the job
    waits behind others), rather than because it never frees up?"""
    return outcome.code in (ReasonCode.BEHIND_HIGHER_PRIORITY,
                            ReasonCode.PREEMPTION_BUDGET_EXHAUSTED)
