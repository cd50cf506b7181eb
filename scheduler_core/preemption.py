"""Phase 6: preemption that counts its cost.

Seed rules (000 "Preemption costs work", 004 §3): an owner reclaiming its quota preempts
borrowers first; a higher-priority job may preempt lower-priority work; victims are whole gangs
(or replicas an elastic job can give up, which it gives up before being preempted whole);
cheap victims first (time since last checkpoint × GPUs, plus restart); each victim gets a
grace period, a reason and its expected lost GPU-hours; minimum runtimes and preemption
budgets protect victims; no cascades.

Steps for one pending job that found no room (:func:`preempt_for`):

1. *Nomination.* Jobs already stopping (terminating, or killed this cycle) will free their GPUs
   anyway. If the job fits once they are gone (a what-if on the state and the quota ledger),
   it claims them and waits; no new victim is chosen. This is also what keeps a preemptor
   from choosing fresh victims every cycle while its victims drain.
2. *Candidates.* Running jobs it may preempt: tier 0, borrowed work of another team on the
   same GPU type while the preemptor stays within its nominal quota (``reclaim_borrowed``, any
   priority, Kueue's ``reclaimWithinCohort: Any``): of its own cohort, or of a cohort (or a
   team in none) that holds more above nominal than it lends itself, as a team moved out of
   the cohort it borrowed from does (:meth:`QuotaLedger.overdrawn`); tier 1,
   preemptible jobs of a strictly lower priority class, of its own team, borrowed, or on GPU
   types no quota governs (``higher_priority``). Jobs inside their minimum runtime or past
   their preemption budget are protected. An elastic job above its minimum offers its extra
   replicas one by one before itself.
3. *Greedy removal.* In the victim chooser's order, remove candidates (reversible what-ifs)
   until quota and placement both succeed, within the cycle's preemption budget.
4. *Reprieve.* Put victims back, most expensive first, whenever the job still fits without
   them (the Kubernetes scheduler's reprieve), so only the victims actually needed go.
5. Undo every what-if. The victims keep their GPUs until the control loop has fenced them;
   the job is *nominated*: the free part of its chosen GPUs is held for it, and it gets a
   reservation at ``now`` + the longest grace period. Each victim gets its notice: a
   :class:`Preemption` (:func:`preemption_notice`: why, its grace period, the work it may lose)
   or, for an elastic job giving up replicas, a :class:`Resize` (:func:`shrink_notice`).

When no way is found but some candidates are protected (or the cycle's budget is spent), a
second search ignoring protection tells the job what stands in its way: the protection of the
victims *that* search would take, and nothing when none of them is protected
(:func:`_protection_in_the_way`) or when that way in is a reclaim the owner would not make
anyway, waiting being cheaper (:func:`_cheaper_to_wait`).

Victims are running jobs, never pending ones, and a nominated job never preempts again in the
same cycle, so preemption cannot cascade.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler_core.admission import gpus_by_type
from scheduler_core.backfill import NOMINATED, keep_promised
from scheduler_core.context import CycleContext
from scheduler_core.distinct_nodes import Shape, node_sets
from scheduler_core.gang import Demand, demand_for, elastic_sizes, is_elastic
from scheduler_core.job_shape import fleet_node_size
from scheduler_core.plugins.protocols import VictimCandidate
from scheduler_core.sentences import counted, gpu_hours, verb
from scheduler_core.state import HOLD, JOB, Grant, Restore, indices_of
from scheduler_core.types import (
    GpuPlacement,
    JobSpec,
    Preemption,
    PreemptionReason,
    PriorityClassInfo,
    Resize,
    RunningJob,
)
from scheduler_core.victims import Held, Offer, VictimIndex

MAX_VICTIMS_PER_SEARCH = 64
MAX_REPRIEVE_CHECKS = 16

FitCheck = Callable[[], list[Grant] | None]
"""Tries quota and placement for the pending job against the current (what-if) state."""


@dataclass(frozen=True, slots=True)
class Found:
    """A successful search: the victims to signal (empty for a pure nomination), the
    terminating jobs claimed, and the pending job's GPUs once they are all gone."""

    victims: tuple[VictimCandidate, ...]
    claimed: tuple[str, ...]
    grants: tuple[Grant, ...]
    parts: tuple[tuple[Grant, ...] | None, ...] = ()
    """Per victim: the replicas taken from an elastic job, or ``None`` for a whole job."""


@dataclass(frozen=True, slots=True)
class Protected:
    """The search would succeed only by preempting protected jobs (min runtime, budget) or by
    exceeding the cycle's preemption budget; ``why`` says which, with numbers."""

    why: str
    victims: tuple[str, ...] = ()
    """The jobs the search would preempt if none were protected (for the wait estimate)."""


def lost_gpu_hours(ctx: CycleContext, job: RunningJob, gpus: int) -> float:
    """GPUs × time since the last checkpoint (or start), plus restart time, in GPU-hours."""
    since = job.last_checkpoint_at if job.last_checkpoint_at is not None else job.started_at
    since = max(since, job.started_at)
    exposed = max(0.0, ctx.snapshot.now - since)
    return gpus * (exposed + job.spec.restart_cost_s) / 3600.0


def _held(ctx: CycleContext, job_id: str) -> list[Grant]:
    """The job's grants (the state's own list: read it, do not change it)."""
    return ctx.state.holdings.get((JOB, job_id), [])


def _by_type(ctx: CycleContext, grants: list[Grant]) -> dict[str, int]:
    out: dict[str, int] = {}
    for g in grants:
        t = ctx.state.nodes[g.node].gpu_type
        out[t] = out.get(t, 0) + g.gpus
    return out


class WhatIf:
    """Removes holders (whole or in part) from the state and the quota ledger, reversibly.

    GPUs a removal frees that are promised to the head's reservation stay held for the head
    (unless ``spec``'s runtime limit ends it by the head's start, counted from the longest
    grace period from now, when it would start at the latest), and those promised to a job nominated earlier
    this cycle stay held for it: a job behind the head in the queue that claimed a stopping
    job's GPUs, or preempted a job on them, took the head's GPUs at its start (for ever
    without a runtime limit), and two nominated jobs were promised the same GPUs."""

    def __init__(self, ctx: CycleContext, spec: JobSpec) -> None:
        self.ctx = ctx
        self.undo: list[Restore] = []
        self.keep: dict[int, int] = dict(ctx.nominated)
        head = ctx.head
        # it starts once what it waits for has stopped, up to a grace period from now
        grace = max((pc.grace_period_s for pc in ctx.priority.values()), default=0)
        if head is not None and head.job_id != spec.id and (
                spec.runtime_limit_s is None
                or ctx.snapshot.now + grace + spec.runtime_limit_s > head.start_at):
            for g in head.grants:
                self.keep[g.node] = self.keep.get(g.node, 0) | g.mask

    def remove(self, job_id: str, team: str, part: list[Grant] | None = None) -> Restore:
        ctx = self.ctx
        holder = (JOB, job_id)
        grants = part if part is not None else _held(ctx, job_id)
        freed = list(grants)
        if part is None:
            state_restore = ctx.state.simulate_removal(holder)
        else:
            state_restore = ctx.state.simulate_partial_removal(holder, part)
        give_back = keep_promised(ctx, freed, self.keep, NOMINATED) if self.keep else None
        types = _by_type(ctx, grants)
        for t, n in types.items():
            ctx.ledger.charge(team, t, -n)

        def restore() -> None:
            if give_back is not None:
                give_back()
            state_restore()
            for t, n in types.items():
                ctx.ledger.charge(team, t, n)

        self.undo.append(restore)
        return restore

    def rollback(self) -> None:
        while self.undo:
            self.undo.pop()()


def _stopping_pool(ctx: CycleContext, classes: frozenset[int], team: str) -> list[str]:
    """Unclaimed stopping jobs that hold capable GPUs (or quota of ``team``), largest first,
    so a gang needs as few of them as possible; at most ``MAX_VICTIMS_PER_SEARCH``."""
    if ctx.stopping is None:
        rows: list[tuple[int, str, frozenset[int]]] = []
        for job_id, job in ctx.running.items():
            if not (job.terminating or job_id in ctx.killed):
                continue
            held = ctx.state.holdings.get((JOB, job_id), [])
            if held:
                rows.append((-sum(g.gpus for g in held), job_id,
                             frozenset(ctx.state.node_class[g.node] for g in held)))
        rows.sort()
        ctx.stopping = rows
    pool: list[str] = []
    for _, job_id, held_classes in ctx.stopping:
        if job_id in ctx.claimed_terminating:
            continue
        if held_classes.isdisjoint(classes) and ctx.running[job_id].spec.team != team:
            continue
        pool.append(job_id)
        if len(pool) >= MAX_VICTIMS_PER_SEARCH:
            break
    return pool


def _nomination(ctx: CycleContext, spec: JobSpec, classes: frozenset[int], gpus: int,
                fit: FitCheck) -> Found | None:
    """Remove stopping jobs (largest first) until the job fits, then claim those whose GPUs
    its placement uses. Placement is tried only once the capable free GPUs suffice."""
    pool = _stopping_pool(ctx, classes, spec.team)
    if not pool:
        return None
    what_if = WhatIf(ctx, spec)
    removed: list[str] = []
    grants: list[Grant] | None = None
    probes = 0
    try:
        for job_id in pool:
            what_if.remove(job_id, ctx.running[job_id].spec.team)
            removed.append(job_id)
            if ctx.state.free_in(0, 0, classes) < gpus:
                continue
            probes += 1
            grants = fit()
            if grants is not None or probes >= MAX_REPRIEVE_CHECKS:
                break
    finally:
        what_if.rollback()
    if grants is None:
        return None
    nodes: dict[int, int] = {}
    for g in grants:
        nodes[g.node] = nodes.get(g.node, 0) | g.mask
    claimed = tuple(sorted(
        job_id for job_id in removed
        if any(g.mask & nodes.get(g.node, 0) for g in _held(ctx, job_id))
    ))
    return Found(victims=(), claimed=claimed, grants=tuple(grants))


def _eligible(ctx: CycleContext, spec: JobSpec, mine: PriorityClassInfo, gpus: int,
              gpu_type: str | None, held: Held) -> tuple[int, PreemptionReason] | None:
    """The tier and reason under which ``spec`` (of class ``mine``) may preempt the job of
    ``held``, if any."""
    job = held.job
    victim_types = held.by_type
    if job.borrowed and job.spec.team != spec.team and gpu_type is not None \
            and gpu_type in victim_types:
        q_mine = ctx.ledger.quota.get((spec.team, gpu_type))
        q_theirs = ctx.ledger.quota.get((job.spec.team, gpu_type))
        if q_mine is not None and (
                (q_theirs is not None and q_mine.cohort is not None and q_mine.cohort == q_theirs.cohort)
                or ctx.ledger.overdrawn(job.spec.team, gpu_type)):
            within = ctx.ledger.used_by(spec.team, gpu_type) + gpus <= q_mine.nominal_gpus
            if within:
                return 0, PreemptionReason.RECLAIM_BORROWED
    theirs = ctx.priority.get(job.spec.priority_class)
    if not mine.may_preempt_lower or theirs is None or not theirs.preemptible:
        return None
    if theirs.value >= mine.value:
        return None
    ungoverned = any(not ctx.ledger.governs(t) for t in victim_types)
    if job.spec.team == spec.team or job.borrowed or ungoverned:
        return 1, PreemptionReason.HIGHER_PRIORITY
    return None


def _replica_pieces(ctx: CycleContext, job: RunningJob) -> list[list[Grant]]:
    """The steps an elastic job can shrink by, each as the grant pieces that make it up: down
    through the sizes a bind starts it at (``gang.elastic_sizes``: replica steps, then its
    minimum), so a 2..5 job in pairs gives up 2 GPUs (to 3), then 1 (to 2). What it keeps at
    each size is the shape a fresh bind at that size has (``gang.demand_for``: each member on
    a node of its own; :func:`_kept_shape`), as its growth keeps it; the shrink stops at the
    first size whose shape its GPUs cannot make. Until 5 Dec it gave up whole replicas only
    and stopped at 3, its minimum never reached; until a second fix that day it gave up GPUs
    from its last node by name, and a 4..12 job on n0 (4) and n1 (8) shrank to 8 as 4 + 4 on
    both nodes, a shape a bind of 8 (one node) refuses, where giving up n0's 4 leaves n1's 8."""
    spec = job.spec
    node_size = fleet_node_size(ctx, spec)
    held: dict[int, int] = {}
    for g in _held(ctx, spec.id):
        held[g.node] = held.get(g.node, 0) | g.mask
    total = sum(mask.bit_count() for mask in held.values())
    pieces: list[list[Grant]] = []
    for smaller in (s for s in elastic_sizes(spec) if s < total):
        kept = _kept_shape(ctx, held, demand_for(spec, smaller, node_size))
        if kept is None:
            break
        piece: list[Grant] = []
        for node in sorted(held, key=lambda n: ctx.state.nodes[n].name):
            mask = held[node]
            keep = kept.get(node, 0)
            # the GPUs it keeps on a node are its lowest-numbered ones there
            bits = [b for b in range(ctx.state.nodes[node].gpus) if mask >> b & 1]
            give = sum(1 << b for b in bits[keep:])
            if give:
                gpus = give.bit_count()
                piece.append(Grant(node, give, spec.cpus_per_gpu * gpus, spec.memory_gb_per_gpu * gpus))
                held[node] = mask & ~give
            if not held[node]:
                del held[node]
        pieces.append(piece)
    return pieces


def _kept_shape(ctx: CycleContext, held: dict[int, int], demand: Demand) -> dict[int, int] | None:
    """GPUs to keep per node so that what is kept is ``demand``'s shape: each member, largest
    first, on a node of its own among those the job holds (best fit: the node holding the
    fewest that still holds the member, by name on a tie, so the larger ones stay for the
    larger members); ``None`` if its nodes cannot hold them."""
    names = ctx.state.nodes
    free = sorted(((mask.bit_count(), n) for n, mask in held.items()),
                  key=lambda gn: (gn[0], names[gn[1]].name))
    kept: dict[int, int] = {}
    for member in demand.members:
        found = next((i for i, (gpus, _) in enumerate(free) if gpus >= member.gpus), None)
        if found is None:
            return None
        _, node = free.pop(found)
        kept[node] = member.gpus
    return kept


def _victim_index(ctx: CycleContext) -> VictimIndex:
    if ctx.victims is None:
        ctx.victims = VictimIndex(ctx.running, ctx.priority, ctx.ledger, ctx.state, ctx.snapshot.now)
    return ctx.victims


def _offers(ctx: CycleContext, held: Held, tier: int, reason: PreemptionReason) -> list[Offer]:
    """The ways ``held``'s job frees GPUs: an elastic job's extra replicas one by one (each
    offer shrinking it further), then the whole job."""
    job = held.job
    job_id, team, gpus = held.job_id, job.spec.team, held.gpus
    value = ctx.priority_value(job.spec)
    found: list[Offer] = []
    if is_elastic(job.spec):
        pause = gpus * job.spec.resize_cost_s / 3600.0
        pieces = _replica_pieces(ctx, job)
        for k, piece in enumerate(pieces):
            found.append(Offer(
                VictimCandidate(job_id, tier, reason, value, sum(g.gpus for g in piece),
                                pause, job.started_at,
                                shrink_to=gpus - sum(sum(g.gpus for g in p)
                                                     for p in pieces[:k + 1])),
                team, piece,
            ))
    found.append(Offer(
        VictimCandidate(job_id, tier, reason, value, gpus, lost_gpu_hours(ctx, job, gpus),
                        job.started_at),
        team, None,
    ))
    return found


def _candidates(ctx: CycleContext, spec: JobSpec, gpus_needed: int, gpu_type: str | None,
                classes: frozenset[int]) -> tuple[list[Offer], list[Offer], list[str]]:
    """The ways to free GPUs for ``spec``: without the protected jobs, with them, and why
    those are protected. Only the jobs of the cycle's :class:`VictimIndex` pool for
    ``spec``'s priority are visited (the others can never be its victims)."""
    mine = ctx.priority.get(spec.priority_class)
    if mine is None:
        return [], [], []
    index = _victim_index(ctx)
    options: list[Offer] = []
    every: list[Offer] = []
    protected: list[str] = []
    holdings = ctx.state.holdings
    killed, preempted, resized = ctx.killed, ctx.preempted, ctx.resized
    for held in index.pool(mine, spec.team):
        job_id = held.job_id
        if job_id in killed or job_id in preempted or job_id in resized or job_id == spec.id \
                or (JOB, job_id) not in holdings:
            continue
        job = held.job
        if job.spec.team != spec.team and held.classes.isdisjoint(classes):
            continue
        verdict = _eligible(ctx, spec, mine, gpus_needed, gpu_type, held)
        if verdict is None:
            continue
        why = index.protection(job)
        if why is not None:
            protected.append(why)
        key = (job_id, *verdict)
        found = index.offers.get(key)
        if found is None:
            found = index.offers[key] = _offers(ctx, held, *verdict)
        every += found
        if why is None:
            options += found
    return options, every, protected


def _search(ctx: CycleContext, spec: JobSpec, fit: FitCheck, options: list[Offer],
            budget: int) -> tuple[list[Offer], list[Grant]] | None:
    chooser = ctx.plugins.victims
    order = chooser.order([o.candidate for o in options])
    by_key: dict[tuple[str, int | None], Offer] = {
        (o.candidate.job_id, o.candidate.shrink_to): o for o in options
    }
    what_if = WhatIf(ctx, spec)
    chosen: list[tuple[Offer, Restore]] = []
    removed_whole: set[str] = set()
    touched: dict[tuple[str, int | None], set[int]] = {}
    grants: list[Grant] | None = None
    try:
        for cand in order:
            if len(chosen) >= min(budget, MAX_VICTIMS_PER_SEARCH):
                break
            opt = by_key[(cand.job_id, cand.shrink_to)]
            if cand.job_id in removed_whole:
                continue
            if opt.part is None:
                # A whole-job removal supersedes the replicas already taken from it.
                for k in range(len(chosen) - 1, -1, -1):
                    if chosen[k][0].candidate.job_id == cand.job_id:
                        chosen[k][1]()
                        what_if.undo.remove(chosen[k][1])
                        del chosen[k]
                removed_whole.add(cand.job_id)
            if (cand.job_id, cand.shrink_to) in touched:
                continue  # a shrink step already taken before a later one of its job
            # a shrink's steps are taken in order: the chooser ranks them by size, and a job
            # shrinking 5 -> 3 -> 2 had its 1-GPU step taken without its 2-GPU one (to 4, a
            # size no bind makes, in a shape none makes either)
            steps = [o for o in options if opt.part is not None and o.part is not None
                     and o.candidate.job_id == cand.job_id and o.candidate.shrink_to is not None
                     and cand.shrink_to is not None and o.candidate.shrink_to > cand.shrink_to
                     and (cand.job_id, o.candidate.shrink_to) not in touched]
            for step in sorted(steps, key=lambda o: -(o.candidate.shrink_to or 0)) + [opt]:
                key = (step.candidate.job_id, step.candidate.shrink_to)
                touched[key] = {g.node for g in (step.part if step.part is not None
                                                 else _held(ctx, cand.job_id))}
                chosen.append((step, what_if.remove(cand.job_id, step.team, step.part)))
            grants = fit()
            if grants is not None:
                break
        if grants is None:
            return None
        # Reprieve, first in bulk: victims whose GPUs the placement does not touch were only
        # removed on the way (the chooser's order is fleet-wide); put them all back at once
        # and keep them running if the job still fits (one check instead of one per victim).
        used_nodes = {g.node for g in grants}
        spare = [k for k, (opt, _) in enumerate(chosen)
                 if touched[(opt.candidate.job_id, opt.candidate.shrink_to)].isdisjoint(used_nodes)]
        spare = _keeping_shrink_steps(chosen, spare)
        if spare and len(spare) < len(chosen):
            for k in spare:
                chosen[k][1]()
                what_if.undo.remove(chosen[k][1])
            again = fit()
            if again is not None:
                grants = again
                dropped = set(spare)
                chosen = [c for k, c in enumerate(chosen) if k not in dropped]
            else:
                for k in spare:
                    opt = chosen[k][0]
                    chosen[k] = (opt, what_if.remove(opt.candidate.job_id, opt.team, opt.part))
        # Then one by one: most expensive victims first, keep them running if the job still
        # fits.
        checks = 0
        for k in range(len(chosen) - 1, -1, -1):
            if checks >= MAX_REPRIEVE_CHECKS:
                break
            opt, restore = chosen[k]
            if opt.part is not None and any(
                c[0].candidate.job_id == opt.candidate.job_id and c[0].part is not None
                and c[0].candidate.shrink_to is not None
                and opt.candidate.shrink_to is not None
                and c[0].candidate.shrink_to < opt.candidate.shrink_to
                for c in chosen[k + 1:]
            ):
                continue  # replicas are given back last-taken first
            restore()
            what_if.undo.remove(restore)
            checks += 1
            again = fit()
            if again is not None:
                grants = again
                del chosen[k]
            else:
                chosen[k] = (opt, what_if.remove(opt.candidate.job_id, opt.team, opt.part))
        final = fit()
        if final is None:
            return None
        return [c[0] for c in chosen], final
    finally:
        what_if.rollback()


def _keeping_shrink_steps(chosen: list[tuple[Offer, Restore]], spare: list[int]) -> list[int]:
    """``spare`` less the steps of an elastic job's shrink taken before a step that stays:
    its steps are given back last-taken first, as in the one-by-one reprieve, so what it
    keeps is always one of the sizes and shapes :func:`_replica_pieces` lays out. Before, the
    bulk reprieve gave back a 4..12 job's first step (n0's 4, which the preemptor did not
    use) and kept its second (4 of n1's 8): the job ran on at 8 GPUs as 4 + 4 on two nodes,
    a shape a bind of 8 never makes."""
    kept = set(range(len(chosen))) - set(spare)
    last: dict[str, int] = {}
    for k in kept:
        cand = chosen[k][0].candidate
        if chosen[k][0].part is not None and cand.shrink_to is not None:
            last[cand.job_id] = min(last.get(cand.job_id, cand.shrink_to), cand.shrink_to)
    out = []
    for k in spare:
        cand = chosen[k][0].candidate
        below = last.get(cand.job_id)
        if chosen[k][0].part is not None and cand.shrink_to is not None and below is not None \
                and below < cand.shrink_to:
            continue
        out.append(k)
    return out


def preempt_for(ctx: CycleContext, spec: JobSpec, gpus: int, gpu_type: str | None,
                classes: frozenset[int], fit: FitCheck,
                shapes: tuple[Shape, ...] | None = None) -> Found | Protected | None:
    """Find a way to start ``spec`` by nomination or preemption (steps in the module doc).
    ``shapes`` (its members', ``distinct_nodes.shapes_of``; default: all ``gpus`` on one node of ``classes``)
    describe its gang for the wait estimate of a reclaim (:func:`_cheaper_to_wait`)."""
    if shapes is None:
        shapes = (Shape(gpus, 0, 0, classes, 1),)
    nominated = _nomination(ctx, spec, classes, gpus, fit)
    if nominated is not None:
        return nominated
    options, all_options, protected = _candidates(ctx, spec, gpus, gpu_type, classes)
    used = len(ctx.preempted) + len(ctx.resized)
    budget = ctx.config.max_preemptions_per_cycle - used
    if options and budget > 0:
        found = _search(ctx, spec, fit, options, budget)
        if found is not None:
            victims, grants = found
            if _cheaper_to_wait(ctx, spec, gpus, gpu_type, shapes,
                                [o.candidate for o in victims]):
                return None
            return Found(
                victims=tuple(o.candidate for o in victims),
                claimed=(),
                grants=tuple(grants),
                parts=tuple(tuple(o.part) if o.part is not None else None for o in victims),
            )
    if protected or (options and budget <= 0):
        ignoring = _search(ctx, spec, fit, all_options, MAX_VICTIMS_PER_SEARCH) \
            if all_options else None
        if ignoring:
            return _what_is_in_the_way(ctx, spec, gpus, gpu_type, shapes,
                                       [o.candidate for o in ignoring[0]],
                                       cycle_spent=budget <= 0 and bool(options))
    return None


def _what_is_in_the_way(ctx: CycleContext, spec: JobSpec, gpus: int, gpu_type: str | None,
                        shapes: tuple[Shape, ...], victims: list[VictimCandidate],
                        cycle_spent: bool) -> Protected | None:
    """Why the job does not start by preemption, given the ``victims`` of a search ignoring
    protection: the cycle's spent budget when unprotected candidates exist (``cycle_spent``;
    with every candidate protected, their protection keeps the job out in any cycle, not the
    budget a new cycle renews), else the victims' protection, if any; ``None`` when neither
    is in the way, or when that way in is a reclaim the owner would not make even were its
    victims unprotected, waiting being cheaper: it named a borrower of a class that allows no
    preemption, its budget, when the owner's GPUs were about to free anyway."""
    if cycle_spent:
        cap = ctx.config.max_preemptions_per_cycle
        in_the_way: Protected | None = Protected(
            f"this cycle's preemption budget of {counted(cap, 'victim')} is spent")
    else:
        in_the_way = _protection_in_the_way(ctx, victims)
    if in_the_way is None or _cheaper_to_wait(ctx, spec, gpus, gpu_type, shapes, victims):
        return None
    return in_the_way


def _protection_in_the_way(ctx: CycleContext, victims: list[VictimCandidate]) -> Protected | None:
    """What protects the victims a search ignoring protection would take, or ``None`` when
    none of them is protected: that search only walked further down the chooser's order
    than the first one may (the cycle's preemption budget caps its steps), so protection is
    not what keeps the job waiting and must not be named as its reason."""
    index = _victim_index(ctx)
    why = sorted({reason for v in victims
                  if (reason := index.protection(ctx.running[v.job_id])) is not None})
    if not why:
        return None
    return Protected("; ".join(why[:3]), tuple(sorted({v.job_id for v in victims})))


def capacity_eta(ctx: CycleContext, shapes: tuple[Shape, ...]) -> float:
    """A cheap, conservative start estimate for a gang of members of ``shapes``: when every
    member has a capable ready node of its own with room for it (GPUs, CPUs and memory), as
    holders reach their expected ends (runtime limits; a holder without one never frees what
    it holds; what is held for reservations is not counted free). Nodes of their own are
    counted by Hall's condition over every set of the members' shapes
    (:func:`~scheduler_core.distinct_nodes.node_sets`): exact for a gang on distinct nodes,
    an upper bound for one whose members may share a node. Until 7 Dec only its largest
    members were counted, by their GPUs, on every class any member accepts: a job whose
    node's GPUs freed in 10 min beside CPUs held for 10 h was told it waited 10 min, and an
    owner kept from reclaiming its lent quota; a learner that took any type and workers only
    h100 were counted ready on a100 nodes."""
    state = ctx.state
    node_class, ready = state.node_class, state.ready
    now = ctx.snapshot.now
    where = frozenset().union(*(s.where for s in shapes))
    capable = [n for n in range(len(state.nodes)) if ready[n] and node_class[n] in where]
    if len(capable) < sum(s.members for s in shapes) or not shapes:
        return float("inf")
    releases: dict[int, list[tuple[float, int, int, int]]] = {}
    wanted = set(capable)
    for (kind, job_id), grants in state.holdings.items():
        end = ctx.ends.get(job_id) if kind == JOB else None
        if end is None:
            continue
        for g in grants:
            if g.node in wanted:
                releases.setdefault(g.node, []).append((max(now, end), g.gpus, g.cpus, g.memory_gb))
    sets = node_sets(shapes)
    times: list[list[float]] = [[] for _ in sets]
    for n in capable:
        k = node_class[n]
        gpus, cpus, memory = state.free_gpus[n], state.free_cpus[n], state.free_mem[n]
        # (each set's first time with room here: free resources only grow along the ends)
        left = [j for j, need in enumerate(sets) if k in need.where]
        at = now
        steps = iter(sorted(releases.get(n, ())))
        while left:
            left_now = []
            for j in left:
                if sets[j].room(k, gpus, cpus, memory):
                    times[j].append(at)
                else:
                    left_now.append(j)
            left = left_now
            step = next(steps, None)
            if step is None:
                break
            at, more_gpus, more_cpus, more_memory = step
            gpus, cpus, memory = gpus + more_gpus, cpus + more_cpus, memory + more_memory
    eta = now
    for need, found in zip(sets, times, strict=True):
        if len(found) < need.members:
            return float("inf")
        found.sort()
        eta = max(eta, found[need.members - 1])
    return eta


def _cheaper_to_wait(ctx: CycleContext, spec: JobSpec, gpus: int, gpu_type: str | None,
                     shapes: tuple[Shape, ...], victims: list[VictimCandidate]) -> bool:
    """Reclaim that counts its cost: an owner reclaiming lent GPUs (every victim borrowed, no
    higher-priority need) does not preempt when waiting for capacity that frees by runtime
    limits costs less than the work the victims would lose: ``gpus × (eta − start after the
    grace period)`` against the victims' lost GPU-hours (time since checkpoint plus restart).
    The estimate (:func:`capacity_eta`) is conservative, and as the wait goes on its cost
    shrinks only if capacity really frees, so an owner whose capacity does not come back
    still reclaims."""
    if not victims or any(v.reason is not PreemptionReason.RECLAIM_BORROWED for v in victims):
        return False
    eta = capacity_eta(ctx, shapes)
    if eta == float("inf"):
        return False
    grace = 0
    for v in victims:
        pc = ctx.priority.get(ctx.running[v.job_id].spec.priority_class)
        if pc is not None:
            grace = max(grace, pc.grace_period_s)
    waiting = gpus * max(0.0, eta - (ctx.snapshot.now + grace)) / 3600.0
    lost = sum(v.lost_gpu_hours for v in victims)
    if waiting > lost:
        return False
    # said to the owner: otherwise it read only "holds a reservation …", with its lent quota
    # in other teams' hands and no word of why it was not reclaimed
    cost = (f"{gpu_hours(waiting, about=True)} GPU-hours: its {counted(gpus, 'GPU')} until t={eta:.0f}" if waiting > 0 else
            f"none: they free by t={eta:.0f}, as soon as a reclaim could start it")
    # per GPU type: the job's explanation names one type, and the note must be that type's
    # (one note per job, the last type searched, read 't=1003601' beside an ETA of another)
    ctx.reclaim_waits[(spec.id, gpu_type)] = (
        f"Its team's lent quota is not reclaimed: preempting {counted(len(victims), 'borrowing job')} would "
        f"throw away {gpu_hours(lost, about=True)} GPU-hours of their work, and waiting for capable GPUs to "
        f"free by runtime limits costs less ({cost}).")
    return True


def nominate(ctx: CycleContext, spec: JobSpec, found: Found) -> float:
    """Hold the free part of ``found.grants`` for ``spec``; returns its expected start."""
    state = ctx.state
    holder = (HOLD, spec.id)
    for g in found.grants:
        ctx.nominated[g.node] = ctx.nominated.get(g.node, 0) | g.mask
        free = g.mask & state.free_mask[g.node]
        if free:
            state.take(holder, Grant(g.node, free, 0, 0, g.role))
    ctx.claimed_terminating.update(found.claimed)
    grace = 0
    for job_id in found.claimed:
        pc = ctx.priority.get(ctx.running[job_id].spec.priority_class)
        if pc is not None and job_id not in ctx.killed:
            grace = max(grace, pc.grace_period_s)
    for v in found.victims:
        pc = ctx.priority.get(ctx.running[v.job_id].spec.priority_class)
        if pc is not None:
            grace = max(grace, pc.grace_period_s)
    return ctx.snapshot.now + grace


def preemption_notice(ctx: CycleContext, spec: JobSpec, gpus: int, victim: VictimCandidate) -> Preemption:
    """The notice a job preempted whole for ``spec`` (which needs ``gpus``) receives: why, with
    both jobs' classes or the reclaimed loan, its grace period and the work it may lose."""
    job = ctx.running[victim.job_id]
    pc = ctx.priority[spec.priority_class]
    vpc = ctx.priority[job.spec.priority_class]
    held = gpus_by_type(ctx, [(g.node, g.gpus) for g in ctx.state.holdings.get((JOB, victim.job_id), [])])
    # ("with its 1 H100-80GB GPU"; several types read "4 A100, 2 H100 GPUs")
    kind = ", ".join(f"{n} {t}" for t, n in held.items()) + (" GPU" if sum(held.values()) == 1 else " GPUs")
    if victim.reason is PreemptionReason.RECLAIM_BORROWED:
        # the gang stops whole: its GPUs are the job's size, not what its team borrowed
        why = (f"team {spec.team} reclaims capacity it lent to team {job.spec.team}, for job "
               f"{spec.id}; this job ran beyond team {job.spec.team}'s quota and stops whole, "
               f"with its {kind}")
    else:
        # the preemptor's need and the victim's GPUs apart: "needs its 16 GPUs" read as if
        # the preemptor needed 16 when it needed 8 and the victim's gang stops whole
        why = (f"higher-priority job {spec.id} ({pc.name}, {pc.value}) needs "
               f"{counted(gpus, 'GPU')}, and this job ({vpc.name}, {vpc.value}) stops "
               f"whole to free {verb(gpus, 'it', 'them')}, with its {kind}")
    return Preemption(
        job_id=victim.job_id,
        reason=victim.reason,
        for_job=spec.id,
        grace_period_s=vpc.grace_period_s,
        lost_gpu_hours=round(victim.lost_gpu_hours, 6),
        # what it loses is what it has not saved: a job that checkpoints within its grace
        # period loses only its restart (the demo's jobs did, and lost 0.00 GPU-hours
        # where the notice had said 6.68 were lost)
        message=(
            f"Preempted: {why}. It has {vpc.grace_period_s} s to checkpoint and stop, then "
            f"requeues; without a checkpoint in that time it loses "
            f"{gpu_hours(victim.lost_gpu_hours, about=True)} GPU-hours (its work since its last checkpoint"
            f"{', and its restart' if job.spec.restart_cost_s > 0 else ''})."
        ),
        generation=job.generation,
    )


def shrink_notice(ctx: CycleContext, spec: JobSpec, job_id: str, pieces: list[Grant]) -> Resize:
    """The resize of elastic job ``job_id`` giving up the replicas ``pieces`` to ``spec``:
    the GPUs it keeps, node by node."""
    job = ctx.running[job_id]
    masks: dict[int, int] = {}
    for g in ctx.state.holdings.get((JOB, job_id), []):
        masks[g.node] = masks.get(g.node, 0) | g.mask
    for piece in pieces:
        masks[piece.node] &= ~piece.mask
    remaining = tuple(sorted(
        (GpuPlacement(ctx.state.nodes[n].name, indices_of(m)) for n, m in masks.items() if m),
        key=lambda p: p.node,
    ))
    before = sum(g.gpus for g in ctx.state.holdings.get((JOB, job_id), []))
    after = sum(len(p.gpu_indices) for p in remaining)
    return Resize(
        job_id=job_id,
        placements=remaining,
        from_gpus=before,
        to_gpus=after,
        for_job=spec.id,
        message=(
            f"Shrinks from {before} to {counted(after, 'GPU')} (its minimum is {job.spec.min_gpus}) so "
            f"job {spec.id} can start, instead of being preempted whole."
        ),
        generation=job.generation,
    )
