"""The full fleet (the control loop's steady state, ``scheduler_core.bench --full``): the
per-cycle victim index (``scheduler_core.victims``) and the other speed-ups of that round
change no decision.

Two independent proofs:

* *Golden plans.* The SHA-256 of ``repr(plan)`` for full-fleet snapshots, computed with the
  engine as it was before the index (commit d2a9bfd, run from ``git archive d2a9bfd``) by the
  lines below, and computed again, the same way, when a fix was meant to change plans (the
  quota shortage that counts the borrowing room freed GPUs give back, 2026-11-29: binds,
  preemptions and resizes unchanged; quota-bound jobs' remedies, ETAs and one reservation
  moved earlier; and ETAs that count promised GPUs as busy until the promise has run and a
  quota-bound job's busy GPUs and its cohort's lending, a topology gang's leaf, "1 node",
  when a minimum runtime lifts, jobs named "job N", a preemption notice that says a checkpoint
  in the grace period saves the work, queue positions among the jobs still waiting,
  idle GPUs held for a reservation named, a job on the quota of a head over its quota, a job
  over quota that may preempt once a minimum runtime lifts, a team's jobs over quota queueing
  for it in order, sentences that count ("1 GPU", "the only node", "preempted 1 time") and
  a short runtime limit's kill in seconds, 2026-11-29: binds, preemptions, resizes, reservations, kills,
  reasons and fleet figures unchanged, only ETAs, sentences and positions; and a team holding
  more than its nominal quota in a cohort borrows the excess whatever its jobs' marks, so its
  latest jobs become borrowers, 2026-11-29: the synthetic 1,000-GPU snapshots, whose running
  jobs hold more than some teams' quotas, preempt other victims; the others are unchanged;
  and a job over its quota on every GPU type it accepts named with each type's numbers, the
  remedy of the type lacking the fewest GPUs, the ETA of the type that starts it first, and
  an elastic job described at its smallest size, 2026-11-30: compared field by field against
  the plans before, only ``QuotaExceeded`` jobs' sentences, remedies and ETAs changed; and a
  reclaim's notice saying the victim stops whole with its GPUs instead of calling them all
  lent, 2026-11-30: decisions identical, one message per changed snapshot; and the fleet
  figures counting the idle GPUs held for a reservation as stranded and in the largest free
  block, 2026-11-30: compared field by field against the plans before (binds, preemptions,
  resizes, reservations, kills, every explanation's code, reason, position and ETA, every
  sentence, and the other fleet figures identical), only seed 3's ``stranded_gpus`` 0 → 17
  and its h100 largest free block 0 → 3 changed); and a higher-priority preemption's notice
  saying the preemptor's need apart from the victim's GPUs ("needs 8 GPUs, and this job stops
  whole to free them, with its 16 … GPUs"), 2026-11-30: compared field by field against the
  plans before, only preemption messages changed; and a job of the head's team behind a head
  over its quota counting the head and its own jobs ahead together, and asking whether it ends
  before the head's start from its ETA rather than from now, 2026-11-30: compared field by
  field, only ``QuotaExceeded`` jobs' ETAs and sentences changed (1,000 GPUs seed 7: 40 ETAs,
  37 later; seed 1: 1; 10,000 GPUs: 520, 460 later); and a job whose victims are protected
  only by their minimum runtime waiting ``MinimumRuntimeProtected`` instead of
  ``PreemptionBudgetExhausted``, 2026-11-30: compared field by field, only those jobs' code,
  reason and "would start if" (1,000 GPUs seed 1: 2 jobs; 2,000: 6; 10,000: 4) and the fleet's
  count of jobs by reason changed; and, meant to change decisions, an owner within its
  nominal reclaiming across cohorts from a side holding more above nominal than it lends
  itself (the synthetic running jobs leave cohort labs so, 40 A100 GPUs above nominal against
  16 lent in seed 1), 2026-11-30: seed 1's two preemptions become one, seed 3's victims
  change, the 2,000-GPU fleet gains a reclaim, the 10,000-GPU one moves two jobs' reasons
  (``InsufficientGpus``), with the ETAs and sentences that follow; and a ``same_leaf`` gang's
  estimate asking for one leaf switch with the room (not the fleet's counts) also when it
  waits for GPUs or quota, 2026-12-02: compared field by field against the plans before,
  binds, preemptions, resizes, reservations, kills and fleet figures identical, only ETAs and
  sentences changed (same_leaf jobs' estimates later, and the jobs of their teams behind them
  whose quota they now hold on another GPU type: 1,000 GPUs seed 7: 43; 10,000 GPUs: 534);
  and when the plan gained a field, ``growth_notes``, 2026-12-02: these fleets hold no running
  elastic job, so it is empty, and each ``repr`` with ``, growth_notes=()`` taken out hashed
  to the value before; and when an over-quota sentence began to say why a team in a cohort
  can borrow nothing more, 2026-12-02: compared field by field, only explanations' messages
  changed, each by the inserted "(cohort c has no unused … GPUs to lend now)" or "(its
  borrowing limit of N is used)": 163, 189, 24, 304 and 1,620 jobs); and a job told that
  protected jobs stand in its way only when one of the victims a way in needs is protected,
  2026-12-04: compared field by field against the plans before, binds, preemptions, resizes,
  reservations, kills and growth notes identical; 1,000 GPUs seed 1: 3 jobs
  ``MinimumRuntimeProtected`` → ``InsufficientGpus``, 2 over-quota jobs lose a preemption
  they could not make; 2,000: 5 → ``InsufficientGpus``, 1 over quota; 10,000: 6 →
  ``InsufficientGpus`` (their ETAs from t=+90 s to runtime limits), 1 over quota, and the
  sentences (for 10 of them the ETAs too) of 526 jobs whose count of GPUs ahead of them in
  their team's quota now includes those jobs; the fleet's count of jobs by reason follows);
  and an owner that waits rather than reclaim its lent quota says why, 2026-12-04 (later):
  compared field by field, only the sentences of 5, 2, 1, 2 and 3 jobs changed (in the
  order of GOLDEN), each by the appended "Its team's lent quota is not reclaimed: …";
  and, meant to change decisions, no two jobs promised the same GPUs for overlapping runs,
  2026-12-04: the head's reservation no longer counts as freed the GPUs of stopping jobs or
  victims that a job nominated earlier in the cycle will start on, and a job behind the head
  no longer claims or preempts its way onto the head's GPUs unless its runtime limit ends it
  by the head's start. Compared field by field against the plans before: 1,000 GPUs seed 7,
  the head (job-000178, 64 GPUs at t=1030844) was promised node-00001 and node-00015, which
  job-000420 and job-000141 (ahead of it, nominated) start on; it is promised nodes 8-13, 17
  and 19 at the same start. Seed 3, the head (job-000143) was promised 4 GPUs of node-00035
  at t=1000091 that job-000364 (nominated, first in line) starts on; it is promised GPUs of
  node-00031 and node-00035 at t=1000181. Seed 1, job-000186 (behind the head, no runtime
  limit) preempted two jobs to start on node-00081's GPUs, promised to the head (job-000168)
  at t=1006603; it preempts three (run-000097 too) on node-00093. Binds, kills, resizes and
  fleet figures identical; explanations only by ETAs and sentences of the jobs behind those
  reservations (181, 77 and 192 jobs, most ETAs later); the 2,000- and 10,000-GPU plans
  unchanged); and a job promised GPUs (the head, a nominated preemptor) promised its team's
  quota at its start too (``quota_promises``), asked once a job has found GPUs, 2026-12-05:
  the 1,000-GPU snapshots change (the snapshots themselves are built by running the engine,
  so the change runs through them): seed 1, a job of team nlp no longer preempts six jobs
  for 1 GPU its quota would refuse beside an nlp job nominated before it (now
  ``QuotaExceeded``), and 18 jobs told to wait behind an over-quota head's quota are told
  instead that no GPUs are free, which also holds; the 2,000- and 10,000-GPU plans and all 18
  seed weeks unchanged; and an owner's "Its team's lent quota is not reclaimed: …" kept per
  GPU type and told with the explanation of that type, 2026-12-05 (it was the last type
  searched, with another type's figures): compared field by field, only messages: seed 1, one
  job loses the note (it waits on a100-40gb, where no reclaim was weighed); seed 7, four jobs'
  notes give the a100-40gb figures instead of another type's; and a job that would borrow
  what its cohort lends, promised to jobs of other teams (``quota_promises.lending_promised``),
  told a start no earlier than when that lending is free again, 2026-12-05: compared field by
  field, binds, preemptions, resizes, reservations, kills, growth notes and fleet figures
  identical; only such jobs' explanations: seed 1, 2 ETAs later with the sentence saying why
  ("... what cohort product lends of h100-80gb GPUs is promised to job job-000125 of team
  infra from t=1000091 ..."), and 38 "would start if" adding "and job ... has run and given
  back what cohort ... lends"; seed 3, 6 and 63; the 10,000-GPU fleet, 0 and 39 (seed 7 and
  the 2,000-GPU fleet unchanged); and a job refused a reservation because its own team's
  quota is promised to the team's jobs that start before it (``quota_promises.quota_promised``)
  told a start no earlier than when that quota has room again, 2026-12-05: compared field by
  field against the plans before, binds, preemptions, resizes, reservations, kills, growth
  notes, fleet figures and every explanation's code, reason, position, ETA and sentence
  identical (no such job's quota frees later than its GPUs in these snapshots); only "would
  start if" of such jobs, adding "and job ... has run and given back its team's quota" (with
  "and team ...'s running jobs release N ... GPUs" when both are needed) or the latter alone:
  seed 7, 60 jobs; seed 1, 13; seed 3, 46 (8 both, 38 releases alone); the 2,000-GPU fleet,
  31 (the 10,000-GPU fleet unchanged); and such jobs, and those refused what their cohort lends
  to other teams' promised jobs, told the earliest start the promises let them take from when
  their GPUs are there (``quota_promises.start_beside_promises``: the lending read as the
  cohort's jobs release it by runtime limits, not as it is now), 2026-12-05: compared field by
  field against the plans before, binds, preemptions, resizes, reservations, kills, growth
  notes, fleet figures and every explanation's code, reason, resolvable and position
  identical; only ETA, sentence and "would start if" of lending-refused jobs, every ETA
  earlier: seed 1, 2 jobs (t=1014491 -> t=1006971 and t=1007707, now their capacity ETAs and
  sentences, "would start if" without the lending clause); seed 3, 6 (t=1007291 -> from
  t=1003600, one of them "... leaves room for this job only from then (by runtime limits)", the
  others their capacity ETAs); the other snapshots unchanged; and that search counting the jobs
  preempted this cycle as giving their quota back when they stop, and a job that would break
  several promises told the one that has run last, searched the same way
  (``quota_promises.last_broken``), 2026-12-05: compared field by field against the plans
  before, only seed 3's job-000222 changed: t=1003600 -> t=1000091, its capacity ETA and
  sentence, "would start if" without the promise clause (the other snapshots, and the
  ``test_engine_speedups.py`` plans, unchanged); and a preemption's message naming one GPU
  in the singular ("with its 1 H100-80GB GPU", was "GPUs"), 2026-12-05: each plan's ``repr``
  before, with that one substitution made, equals the plan after (seeds 1, 3 and 7 at 1,000
  GPUs: 6, 1 and 1 messages; the others unchanged); and counts of one said in the singular
  (a preemptor that "needs 1 GPU" has its victim stop "to free it", was "them"; with the array
  task limit's first-cycle ETAs, which no snapshot here has), 2026-12-05: old and new plans
  from a ``git worktree`` of 1bd6b00 in one script, compared field by field: binds,
  preemptions but their messages, resizes, reservations, kills, growth notes, fleet figures
  and every explanation identical; only 6 preemption messages of seed 1 at 1,000 GPUs, and
  each old ``repr`` with that substitution equals the new one; and a job behind its team's
  jobs on a quota told their count, not more GPUs than the team may ever hold at once
  ("…goes first to its 10 jobs ahead of it in the queue, which fill the 150 h100-80gb GPUs it
  may hold, in turn, …", was "…to the 163 h100-80gb GPUs of its jobs ahead of it…"),
  2026-12-06: old and new plans from a ``git worktree`` of 8ac6142 in one script: binds,
  preemptions, resizes, reservations, kills, growth notes and fleet figures identical, and
  every explanation's code, ETA, position and "would start if"; only sentences of that kind
  changed (103, 26, 62 of seeds 1, 3, 7 at 1,000 GPUs; 167 at 2,000; 942 at 10,000); and a
  job over its quota on several GPU types whose sentence says "It would start first on its …
  GPUs." told that type's remedy first in its "would start if" (then the cheapest way, as
  before), 2026-12-07: old and new plans from a ``git worktree`` of 1d5664be in one script,
  compared field by field: binds, preemptions, resizes, reservations, kills, growth notes,
  fleet figures and every explanation's code, reason, sentence, position and ETA identical;
  only "would start if" of exactly the jobs whose sentence names a type to start on first (72,
  15, 74 of seeds 1, 3, 7 at 1,000 GPUs; 108 at 2,000; 491 at 10,000), each new one "<that
  type's remedy>, or <the old one>"; and, 2026-12-07, the plan's ``borrowing`` (the running
  jobs the cycle marks borrowed, their team holding more than its nominal: 8, 2 and 1 of
  seeds 7, 1, 3 at 1,000 GPUs, none at 2,000 and 10,000): from a ``git worktree`` of 05162f8a
  in one script, the plans are identical with that field left out of their ``repr``; and a
  job short of room that accepts several GPU types told the earliest start over the types its
  quota admits (``Outcome.elsewhere``), 2026-12-07: old plans from a ``git worktree`` of
  3bb703e3 and new ones in one script, compared field by field: binds, preemptions, resizes,
  reservations, kills, growth notes, fleet figures and every explanation's code, reason,
  position and resolvable identical; only sentence, ETA and "would start if" of 74, 149, 115,
  4 and 1,674 jobs in the order of GOLDEN, every one a job that accepts several types, its
  sentence ending in "It would start first on its … GPUs (it also takes …)." before its
  estimate, its ETA earlier; and a job kept out by protected victims that accepts several
  GPU types judged on each type (the protection met there, else why it found no room),
  2026-12-07: old plans from a ``git worktree`` of 610c3f6b and new ones in one script,
  compared field by field: binds, preemptions, resizes, reservations, kills, growth notes
  and borrowing identical; only job-000396 of the 2,000-GPU snapshot, which accepts
  a100-40gb or h100-80gb, changed: told ``InsufficientGpus`` ("Needs 8 h100-80gb GPUs; 4 are
  free.", its h100-80gb GPUs) instead of the protection its search met on a100-40gb, which
  had been judged by the h100-80gb GPUs' release times; its ETA t=1000091 unchanged, and the
  fleet's count by reason follows (MinimumRuntimeProtected 1 → 0, InsufficientGpus 528 →
  529); and an owner waiting rather than reclaim its lent quota, told another type than its
  first, with that type's "Its team's lent quota is not reclaimed: …", 2026-12-07: compared
  field by field against the plans of 70e1788d, only the messages of 4 jobs of seed 7 and 1
  of seed 1 at 1,000 GPUs changed, each by that note inserted after "It would start first on
  its h100-80gb GPUs (it also takes a100-40gb)."; and such a job also weighing the types its
  quota refuses now but could admit, 2026-12-07: compared field by field against the plans
  of 3f0a0e92, decisions, borrowing and positions identical, the fleet figures but the count
  by reason; only code, reason, sentence, ETA and "would start if" of 16, 3, 99, 7 and 0 jobs
  in the order of GOLDEN, every one a job that accepts several types, now told
  ``QuotaExceeded`` on its other type, its ETA earlier::

      snap = build_full_snapshot(gpus, pending, running, seed)
      plan = schedule(dataclasses.replace(snap, now=snap.now + 1), full_config())
      hashlib.sha256(repr(plan).encode()).hexdigest()

  The plan's ``repr`` carries every bind, preemption (reason, grace, lost GPU-hours, message),
  resize, reservation, explanation (reason, message, ETA) and the fleet figures.
* *Reference search.* The victim search of before the index, kept below as the plain walk
  over every running job, is swapped in for ``preemption._candidates``; the plans must be
  equal.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from scheduler_core import preemption, schedule
from scheduler_core.bench import build_full_snapshot, full_config
from scheduler_core.context import CycleContext
from scheduler_core.gang import is_elastic
from scheduler_core.plugins.protocols import VictimCandidate
from scheduler_core.state import JOB
from scheduler_core.types import JobSpec, Plan, PreemptionReason, RunningJob, Snapshot
from scheduler_core.victims import Offer

GOLDEN = {
    (1000, 500, 200, 7): "c4071559878fcc796129b84e140b85b7b77c9961ba2be19676c3d0ed58e875c2",
    (1000, 500, 200, 1): "2f159df6a81b338cb1fc09617895138332dbc7cf7090562139c210a0fef46b5a",
    (1000, 500, 200, 3): "78c649840d9474694a98eec32bb498cd71767009c4ea21e26469663ee8ecdbb0",
    (2000, 1000, 400, 4): "ef79dbcf1715535059afadcbe18d05d4c79d462931d33dbcb958d55ecf27ee2b",
    (10000, 5000, 2000, 7): "f5cb3d83301031d1e34d38334234b2794bbbf71798e2b710c5644c78190dff67",
}


def full(gpus: int, pending: int, running: int, seed: int) -> Snapshot:
    snap = build_full_snapshot(gpus, pending, running, seed)
    return dataclasses.replace(snap, now=snap.now + 1)


@pytest.mark.parametrize("size", sorted(GOLDEN), ids=lambda s: f"{s[0]}gpus-seed{s[3]}")
def test_full_fleet_plan_equals_the_plan_of_the_engine_before_the_index(size):
    plan = schedule(full(*size), full_config())
    assert hashlib.sha256(repr(plan).encode()).hexdigest() == GOLDEN[size]


def test_full_fleet_snapshot_is_the_loops_steady_state():
    snap = full(1000, 500, 200, 7)
    held = sum(len(p.gpu_indices) for job in snap.running for p in job.placements)
    assert held >= 0.95 * sum(n.gpus for n in snap.nodes)
    assert any(job.terminating for job in snap.running)  # last cycle's victims draining
    assert full_config().max_placement_attempts == 4096


# ---------------------------------------------------------------- the reference search


def _ref_by_type(ctx: CycleContext, job_id: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for g in ctx.state.holdings.get((JOB, job_id), []):
        t = ctx.state.nodes[g.node].gpu_type
        out[t] = out.get(t, 0) + g.gpus
    return out


def _ref_eligible(ctx: CycleContext, spec: JobSpec, gpus: int, gpu_type: str | None,
                  job: RunningJob) -> tuple[int, PreemptionReason] | None:
    mine = ctx.priority.get(spec.priority_class)
    theirs = ctx.priority.get(job.spec.priority_class)
    if mine is None:
        return None
    victim_types = _ref_by_type(ctx, job.spec.id)
    if job.borrowed and job.spec.team != spec.team and gpu_type is not None \
            and gpu_type in victim_types:
        q_mine = ctx.ledger.quota.get((spec.team, gpu_type))
        q_theirs = ctx.ledger.quota.get((job.spec.team, gpu_type))
        if q_mine is not None \
                and ((q_theirs is not None and q_mine.cohort is not None and q_mine.cohort == q_theirs.cohort)
                     or ctx.ledger.overdrawn(job.spec.team, gpu_type)) \
                and ctx.ledger.used_by(spec.team, gpu_type) + gpus <= q_mine.nominal_gpus:
            return 0, PreemptionReason.RECLAIM_BORROWED
    if not mine.may_preempt_lower or theirs is None or not theirs.preemptible:
        return None
    if theirs.value >= mine.value:
        return None
    ungoverned = any(not ctx.ledger.governs(t) for t in victim_types)
    if job.spec.team == spec.team or job.borrowed or ungoverned:
        return 1, PreemptionReason.HIGHER_PRIORITY
    return None


def _ref_protection(ctx: CycleContext, job: RunningJob) -> str | None:
    pc = ctx.priority.get(job.spec.priority_class)
    if pc is None:
        return None
    ran = ctx.snapshot.now - job.started_at
    young = ran < pc.min_runtime_s
    n = job.spec.preemptions_in_window
    spent = n >= pc.preemption_budget
    if not young and not spent:
        return None
    why = f"job {job.spec.id}"
    if young:
        why += f" has run {ran:.0f} s of its {pc.min_runtime_s} s minimum runtime"
    if spent:
        w = pc.budget_window_s
        window = (f"{w // 3600} h" if w >= 3600 and w % 3600 == 0
                  else f"{w // 60} min" if w >= 60 and w % 60 == 0 else f"{w} s")
        budget = "its budget" if n == pc.preemption_budget else f"over its budget of {pc.preemption_budget}"
        frees = job.spec.preemption_budget_frees_at
        again = (f", and may be preempted again from t={frees:.0f}"
                 if frees is not None and frees > ctx.snapshot.now else "")
        why += (f"{' and' if young else ''} was preempted {n} time{'' if n == 1 else 's'} in the "
                f"last {window}, {budget}{again}")
    return why


def _ref_walk(ctx: CycleContext, spec: JobSpec, gpus_needed: int, gpu_type: str | None,
              classes: frozenset[int], include_protected: bool) -> tuple[list, list[str]]:
    options: list = []
    protected: list[str] = []
    for job_id, job in ctx.running.items():
        if job.terminating or job_id in ctx.killed or job_id in ctx.preempted \
                or job_id in ctx.resized or job_id == spec.id:
            continue
        held = list(ctx.state.holdings.get((JOB, job_id), []))
        if not held:
            continue
        if job.spec.team != spec.team \
                and not any(ctx.state.node_class[g.node] in classes for g in held):
            continue
        verdict = _ref_eligible(ctx, spec, gpus_needed, gpu_type, job)
        if verdict is None:
            continue
        why = _ref_protection(ctx, job)
        if why is not None:
            protected.append(why)
            if not include_protected:
                continue
        tier, reason = verdict
        value = ctx.priority_value(job.spec)
        gpus = sum(g.gpus for g in held)
        if is_elastic(job.spec):
            pause = gpus * job.spec.resize_cost_s / 3600.0
            pieces = preemption._replica_pieces(ctx, job)
            for k, piece in enumerate(pieces):
                options.append(Offer(
                    VictimCandidate(job_id, tier, reason, value, sum(g.gpus for g in piece),
                                    pause, job.started_at,
                                    shrink_to=gpus - sum(sum(g.gpus for g in p)
                                                         for p in pieces[:k + 1])),
                    job.spec.team, piece))
        options.append(Offer(
            VictimCandidate(job_id, tier, reason, value, gpus,
                            preemption.lost_gpu_hours(ctx, job, gpus), job.started_at),
            job.spec.team, None))
    return options, protected


def reference_candidates(ctx, spec, gpus_needed, gpu_type, classes):
    options, protected = _ref_walk(ctx, spec, gpus_needed, gpu_type, classes, False)
    every, _ = _ref_walk(ctx, spec, gpus_needed, gpu_type, classes, True)
    return options, every, protected


@pytest.mark.parametrize("size", [(1000, 500, 200, 7), (1000, 500, 200, 3),
                                  (2000, 1000, 400, 4), (1000, 500, 200, 5)])
def test_indexed_victim_search_gives_the_reference_walks_plan(monkeypatch, size):
    snap = full(*size)
    indexed: Plan = schedule(snap, full_config())
    calls: list[int] = []

    def walk(*args):
        found = reference_candidates(*args)
        calls.append(len(found[1]))
        return found

    monkeypatch.setattr(preemption, "_candidates", walk)
    reference = schedule(snap, full_config())
    assert calls and sum(calls) > 0  # the searches ran and found candidates
    assert indexed == reference
    assert indexed.preemptions == reference.preemptions
