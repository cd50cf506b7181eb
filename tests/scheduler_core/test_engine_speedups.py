"""The speed-ups of the cycle benchmark (issue #3, cycle p50 under 70 ms) change no plan.

* *Golden plans.* SHA-256 of ``repr(plan)`` for the benchmark's default snapshots
  (``scheduler_core.bench.build_snapshot``, one second later), under the default config and
  under the loop's config, computed with the engine as it was before these speed-ups (commit
  ee3462c, from a ``git worktree`` of it), and again when only explanations were meant to
  change (ETAs that count promised GPUs as busy until the promise has run, and a quota-bound
  job's busy GPUs and its cohort's lending, a topology gang's leaf, "1 node", when a minimum
  runtime lifts, jobs named "job N", the preemption notice's wording, positions among the
  jobs still waiting, held GPUs named, a job
  behind a head over its quota, preemption once a minimum runtime lifts, quota queues,
  sentences that count ("1 GPU frees up"), 2026-11-29, and a job over its quota on several
  GPU types named type by type, with the cheapest type's remedy and the earliest type's ETA,
  2026-11-30 (only ``QuotaExceeded`` sentences, remedies and ETAs changed), and a reclaim's
  notice saying its victim stops whole with its GPUs instead of calling them all lent,
  2026-11-30: every decision and reason unchanged; and the fleet figures counting the idle
  GPUs held for a reservation as stranded and in the largest free block, 2026-11-30: compared
  field by field (binds, preemptions, resizes, reservations, kills, every explanation's code,
  reason, position, ETA and sentence, the other fleet figures: identical), only
  ``stranded_gpus`` 0 → 22 and 0 → 4 and the h100 largest free block 0 → 3 and 0 → 4 of the
  1,000-GPU loop and 2,000-GPU default snapshots changed; and a higher-priority preemption's
  notice saying the preemptor's need apart from the victim's GPUs, 2026-11-30: compared field
  by field, only preemption messages changed; and a ``same_leaf`` gang waiting for GPUs or
  quota estimated by the first time one leaf switch has its room, not the fleet's counts,
  2026-12-02: compared field by field, decisions, codes, positions and fleet figures
  identical, only ETAs and sentences of 2, 4, 3, 0 and 3 jobs (the ETAs all later); and an
  owner waiting rather than reclaim its lent quota saying why, 2026-12-04: compared field by
  field, only the sentences of 3, 3, 5, 0 and 6 jobs changed ("Its team's lent quota is not
  reclaimed: …" appended);
  and once when decisions were meant to change: a team over its nominal quota in a cohort
  borrows the excess, 2026-11-29, which moves victims and binds in the 1,000-GPU snapshots
  whose synthetic running jobs exceed some teams' quotas; and an owner within its nominal
  reclaiming across cohorts from a side that holds more above nominal than it lends itself,
  2026-11-30: the 1,000-GPU default snapshot's labs cohort becomes so as its lenders bind
  within their nominal, and one victim changes (a higher-priority preemption of run-000059
  instead of the reclaim of run-000131), with the ETAs that follow); and when the plan gained
  a field, ``growth_notes``, 2026-12-02: these snapshots hold no running elastic job, so it
  is empty, and each ``repr`` with ``, growth_notes=()`` taken out hashed to the value before;
  and when an over-quota sentence began to say why a team in a cohort can borrow nothing more,
  2026-12-02: compared field by field, only explanations' messages changed, each by the
  inserted "(cohort c has no unused … GPUs to lend now)" or "(its borrowing limit of N is
  used)": 185, 24, 286, 0 and 1,507 jobs); and when tied gangs that fit the cycle's free
  whole nodes began to be tried widest first (``queue.widest_fitting_gangs_first``),
  2026-12-05: compared field by field against the plans with ``widest_gang_first=False``,
  binds, preemptions, resizes, reservations and kills identical (every gang moved found its
  nodes taken by the jobs ahead of it by its turn); 10, 6, 52, 558 and 558 gangs (in the order
  of GOLDEN) change places, so the positions of those jobs and the ETAs of 59, 6, 70, 799 and
  2,447 jobs estimated in that order change; in the 10,000-GPU loop snapshot one job
  (job-002642) is told ``QuotaExceeded`` instead of ``InsufficientContiguousGpus`` and the
  fleet's count of jobs by reason follows; and an owner's "Its team's lent quota is not
  reclaimed: …" kept per GPU type and told with the explanation of that type, 2026-12-05:
  compared field by field, only messages: in the 2,000-GPU default snapshot one job loses the
  note, in the 10,000-GPU loop snapshot one loses it and one gets its own type's figures; and
  a job that would borrow what its cohort lends, promised to jobs of other teams, told a start
  no earlier than when that lending is free again, 2026-12-05: compared field by field,
  binds, preemptions, resizes, reservations, kills, growth notes and fleet figures identical;
  only such jobs' explanations: in the 1,000-GPU default snapshot 9 "would start if" adding
  "and job ... has run and given back what cohort ... lends", in the 1,000-GPU loop snapshot
  8 ETAs later with the sentence saying why and 29 "would start if" (the others unchanged);
  and a job refused a reservation because its own team's quota is promised to the team's
  jobs that start before it, told a start no earlier than when that quota has room again
  (``quota_promises.quota_promised``), 2026-12-05: compared field by field, binds,
  preemptions, resizes, reservations, kills, growth notes, fleet figures and every
  explanation's code, reason, position, ETA and sentence identical; only "would start if" of
  such jobs, adding "and job ... has run and given back its team's quota" or "and team ...'s
  running jobs release N ... GPUs": 9, 21, 7, 269 and 3 jobs (in the order of GOLDEN); and
  such jobs, and those refused what their cohort lends to other teams' promised jobs, told the
  earliest start the promises let them take from when their GPUs are there
  (``quota_promises.start_beside_promises``), 2026-12-05: compared field by field, binds,
  preemptions, resizes, reservations, kills, growth notes, fleet figures and every
  explanation's code, reason, resolvable and position identical; only the ETA, sentence and
  "would start if" of 8 lending-refused jobs of the 1,000-GPU seed-3 loop snapshot, every ETA
  earlier (t=1007231, t=1259231 and t=1259321 -> their capacity ETAs, t=1005524 to
  t=1154640, with those sentences and no lending clause in "would start if"); and a
  preemption's message naming one GPU in the singular ("with its 1 H100-80GB GPU", was
  "GPUs"), 2026-12-05: each plan's ``repr`` before, with that one substitution made, equals
  the plan after (4, 2 and 2 messages in the first three of GOLDEN); and counts of one said
  in the singular ("1 more is idle", "to free it"; with the array task limit's first-cycle
  ETAs, which no snapshot here has), 2026-12-05: old and new plans from a ``git worktree`` of
  1bd6b00 in one script, compared field by field: binds, preemptions, resizes, reservations,
  kills, growth notes, fleet figures and every explanation's code, position, ETA and "would
  start if" identical; only 2 sentences of the 10,000-GPU loop snapshot ("(1 more are idle"
  -> "is"), and each old ``repr`` with that substitution equals the new one; and a job behind
  its team's jobs on a quota told their count, not more GPUs than the team may ever hold at once
  (``QuotaLedger.most_held``), 2026-12-06: old and new plans from a ``git worktree`` of 8ac6142
  in one script: binds, preemptions, resizes, reservations, kills, growth notes, fleet figures
  and every explanation's code, ETA, position and "would start if" identical; only sentences of
  that kind changed (101, 26, 158, 0 and 935 in the order of GOLDEN); and a gang that no
  node has room for one of its largest members told how many such nodes it needs, not "a node
  with 8 free … GPUs" (``diagnosis.no_block``), 2026-12-07: old and new plans from a ``git
  worktree`` of 64999b7 in one script: binds, preemptions, resizes, reservations, kills,
  growth notes, fleet figures and every explanation's code, reason, resolvable, position and
  ETA identical; only ``InsufficientContiguousGpus`` gangs' sentences ("(largest free block:
  5)." -> "(largest free block: 5); its gang needs 4 such nodes.") and "would start if" ("a
  node with 8 free … GPUs becomes available" -> "4 nodes with 8 free … GPUs become
  available"), 3, 0, 10, 0 and 89 jobs in the order of GOLDEN, each old sentence with that
  substitution equal to the new; and a job over its quota on several GPU types whose sentence
  says "It would start first on its … GPUs." told that type's remedy first in its "would start
  if" (then the cheapest way, as before), 2026-12-07: old and new plans from a ``git
  worktree`` of 1d5664be in one script, compared field by field: binds, preemptions, resizes,
  reservations, kills, growth notes, fleet figures and every explanation's code, reason,
  sentence, position and ETA identical; only "would start if" of 70, 15, 96, 0 and 417 jobs
  in the order of GOLDEN, each exactly the jobs whose sentence names a type to start on first,
  each new one "<that type's remedy>, or <the old one>"; and, 2026-12-07, the plan's
  ``borrowing`` (the running jobs the cycle marks borrowed, their team holding more than its
  nominal: 3, 3, 0, 0 and 0 in the order of GOLDEN): from a ``git worktree`` of 05162f8a in one
  script, the plans are identical with that field left out of their ``repr``; and a job behind
  the head saying its runtime limit as qm and the job page do ("its runtime limit of 2 h ends
  after that", was "7200 s"; ``sentences.span_words``), 2026-12-07: old plans from a ``git
  archive`` of 871dff5f and new ones in one script, each old ``repr`` with every "its runtime
  limit of N s ends after that" respelled equals the new one (0, 0, 11, 0 and 71 sentences in
  the order of GOLDEN; these snapshots hold no kill at a runtime limit and no job kept off a
  node in maintenance, and the full-fleet plans are unchanged); and a job short of room that
  accepts several GPU types told the earliest start over the types its quota admits, its
  sentence naming that type ("... It would start first on its h100-80gb GPUs (it also takes
  a100-40gb)."; ``Outcome.elsewhere``), 2026-12-07: old plans from a ``git worktree`` of
  3bb703e3 and new ones in one script, compared field by field: binds, preemptions, resizes,
  reservations, kills, growth notes and every explanation's position and resolvable identical,
  and the fleet figures but the count of jobs by reason (1,000 GPUs seed 1: 4 jobs
  ``InsufficientGpus`` -> ``InsufficientContiguousGpus``, the reason of the type told); only
  sentence, ETA and "would start if" of 143, 117, 0, 36 and 1,055 jobs in the order of GOLDEN,
  every one a job that accepts several types, its sentence the type-note's, its ETA earlier;
  and such a job also weighing the types its quota refuses now but could admit, 2026-12-07:
  plans from a ``git worktree`` of 3f0a0e92 and new ones in one script, compared field by
  field: binds, preemptions, resizes, reservations, kills, growth notes, borrowing and every
  position identical, and the fleet figures but the count of jobs by reason; only code,
  reason, sentence, ETA and "would start if" of 4, 100, 18, 1,278 and 77 jobs in the order of
  GOLDEN, every one a job that accepts several types, now told ``QuotaExceeded`` on its other
  type ("… It would start first on its … GPUs (it also takes …)."), its ETA earlier (at
  10,000 GPUs by default, 1,278 jobs past the placement budget, "Not tried this cycle", told
  their other type's quota time instead); by::

      snap = build_snapshot(gpus, pending, running, seed)
      plan = schedule(dataclasses.replace(snap, now=snap.now + 1), config)
      hashlib.sha256(repr(plan).encode()).hexdigest()

  ``test_engine_full_fleet.py`` holds the same proof for the full fleet.
* *Cheaper construction.* Values the engine builds without the dataclass ``__init__`` are
  equal to, hash like and print like the ones ``__init__`` builds, and stay frozen.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from scheduler_core import schedule
from scheduler_core.bench import build_snapshot, full_config
from scheduler_core.cycle import _context
from scheduler_core.errors import SnapshotError
from scheduler_core.job_shape import shape_of
from scheduler_core.placement import PlacementRequest
from scheduler_core.plugins.protocols import QueueContext
from scheduler_core.plugins.queue_order import Fifo, PriorityFairShare
from scheduler_core.plugins.registry import build_plugins
from scheduler_core.queue import order_queue
from scheduler_core.state import JOB, ClusterState, Grant, choose_gpus, indices_of
from scheduler_core.types import (
    GpuPlacement,
    JobSpec,
    PendingExplanation,
    ReasonCode,
    SchedulerConfig,
    WorkloadClass,
    gpu_placement,
    pending_explanation,
)

GOLDEN = {
    (1000, 500, 200, 1, "default"): "45003c012cc6079c79dc3670e1ca21d3ed41f71be79198b2161ec9a4daaff749",
    (1000, 500, 200, 3, "loop"): "bbd2fd5d657a7a74b7f11255b5e97b50794ba5559b1db0876924d757bda47ba3",
    (2000, 1000, 400, 4, "default"): "8b7852a963bf87ba0ab481b2fb74965aee2f2ca3493978ac0156736b6d6918ef",
    (10000, 5000, 2000, 7, "default"): "2f4313f3b3d3cb8b9d4ca0e466b6a61ecfd50720a1439f06c797a26d936b390f",
    (10000, 5000, 2000, 7, "loop"): "48facc8ac37ecea9cd31e7080a1219267aa6bd66db6b29b8de369636b05b4418",
}


@pytest.mark.parametrize("case", sorted(GOLDEN), ids=lambda c: f"{c[0]}gpus-seed{c[3]}-{c[4]}")
def test_benchmark_plan_equals_the_plan_of_the_engine_before_the_speedups(case):
    gpus, pending, running, seed, config = case
    snap = build_snapshot(gpus, pending, running, seed)
    plan = schedule(dataclasses.replace(snap, now=snap.now + 1),
                    full_config() if config == "loop" else SchedulerConfig())
    assert hashlib.sha256(repr(plan).encode()).hexdigest() == GOLDEN[case]


@pytest.mark.parametrize("eta", [None, 1234.5])
def test_pending_explanation_built_fast_equals_the_dataclass(eta):
    args = ("job-1", ReasonCode.INSUFFICIENT_GPUS, "InsufficientGpus", "Needs 8 GPUs; 2 are free.",
            True, 7, eta, "6 more GPUs free up")
    fast, slow = pending_explanation(*args), PendingExplanation(*args)
    assert type(fast) is PendingExplanation
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert dataclasses.astuple(fast) == args
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.eta = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("role", ["", "worker"])
def test_gpu_placement_built_fast_equals_the_dataclass(role):
    fast, slow = gpu_placement("node-00003", (2, 3), role), GpuPlacement("node-00003", (2, 3), role)
    assert type(fast) is GpuPlacement
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.role = "x"  # type: ignore[misc]


def test_memoised_index_helpers_match_a_bit_walk():
    for mask in range(1 << 9):
        walked = tuple(i for i in range(9) if mask >> i & 1)
        assert indices_of(mask) == walked
        for count in range(1, 10):
            chosen = choose_gpus(mask, 9, count)
            assert chosen == choose_gpus.__wrapped__(mask, 9, count)
            if mask.bit_count() >= count:
                assert chosen.bit_count() == count and chosen & ~mask == 0


class _RaggedKeys:
    """A queue-order plugin whose keys differ in length: (2,) sorts before (2, 0.5) as a
    prefix, which a flat (key..., submitted_at, id) tuple would not respect."""

    NAME = "ragged"

    def sort_key(self, job: JobSpec, ctx: QueueContext) -> tuple[float, ...]:
        rank = float(int(job.id.rsplit("-", 1)[1]) % 3)
        return (rank,) if job.gpus % 2 else (rank, 1.0 / job.gpus)


@pytest.mark.parametrize("plugin", [_RaggedKeys(), PriorityFairShare(), Fifo()],
                         ids=lambda p: p.NAME)
def test_queue_order_is_key_then_submission_then_id(plugin):
    snap = build_snapshot(1000, 400, 100, seed=5)
    cfg = SchedulerConfig()
    ctx = _context(snap, cfg, dataclasses.replace(build_plugins(cfg), queue_order=plugin), None)
    qctx = {spec.id: QueueContext(snap.now, ctx.priority_value(spec), ctx.shares.get(spec.team, 0.0))
            for spec in snap.pending}
    expected = sorted(snap.pending,
                      key=lambda s: (plugin.sort_key(s, qctx[s.id]), s.submitted_at, s.id))
    assert order_queue(ctx) == expected


def _index_view(state):
    return (state.holdings, state.free_mask, state.free_gpus, state.free_cpus, state.free_mem,
            state.free_sum, {key: [list(bucket) for bucket in buckets]
                             for key, buckets in state.buckets.items()})


def test_a_kept_spread_gang_adopted_leaves_the_state_of_release_and_take_again():
    snap = build_snapshot(1000, 400, 100, seed=5)
    cfg = SchedulerConfig()
    serving = [s for s in snap.pending if s.workload is WorkloadClass.SERVING and s.gpus > 1]
    assert len(serving) >= 3
    views = []
    for keep in (False, True):
        ctx = _context(snap, cfg, build_plugins(cfg), None)
        for spec in serving[:3]:
            shape = shape_of(ctx, spec)
            request = PlacementRequest(shape.smallest, shape.options[0].member_classes,
                                       ctx.plugins.score_by_workload[spec.workload])
            grants = ctx.placer.place(request, keep=keep)
            assert grants is not None and len(grants) > 1
            assert ctx.placer.kept is keep
            if keep:
                ctx.placer.adopt((JOB, spec.id))
            else:
                for g in grants:
                    ctx.state.take((JOB, spec.id), g)
            assert not ctx.placer.kept
        views.append(_index_view(ctx.state))
    assert views[0] == views[1]


def test_a_kept_gang_dropped_leaves_the_state_of_a_plain_place():
    snap = build_snapshot(1000, 400, 100, seed=5)
    cfg = SchedulerConfig()
    spec = next(s for s in snap.pending if s.workload is WorkloadClass.SERVING and s.gpus > 1)
    views = []
    for keep in (False, True):
        ctx = _context(snap, cfg, build_plugins(cfg), None)
        shape = shape_of(ctx, spec)
        request = PlacementRequest(shape.smallest, shape.options[0].member_classes,
                                   ctx.plugins.score_by_workload[spec.workload])
        assert ctx.placer.place(request, keep=keep) is not None
        ctx.placer.drop()
        views.append(_index_view(ctx.state))
    assert views[0] == views[1]


def test_loading_running_jobs_equals_taking_their_grants_one_by_one():
    snap = build_snapshot(1000, 100, 200, seed=3)
    gpu_types = {t.name: t for t in snap.gpu_types}
    loaded, taken = (ClusterState(snap.nodes, gpu_types, indexed=False) for _ in range(2))
    for job in snap.running:
        spec = job.spec
        grants = loaded.grants_of(job.placements, spec.cpus_per_gpu, spec.memory_gb_per_gpu,
                                  spec.id)
        loaded.load((JOB, spec.id), grants)
        for g in grants:
            taken.take((JOB, spec.id), g)
    loaded.build_indexes()
    taken.build_indexes()
    assert _index_view(loaded) == _index_view(taken)


def test_loading_a_gpu_held_twice_fails_like_taking_it():
    s = ClusterState(build_snapshot(16, 0, 0).nodes, {}, indexed=False)
    s.load((JOB, "j"), [Grant(0, 0b11, 0, 0)])
    with pytest.raises(SnapshotError, match=r"GPUs \[1\] of node 'node-00000' are held twice.*'k'.*'j'"):
        s.load((JOB, "k"), [Grant(0, 0b100, 0, 0), Grant(0, 0b10, 0, 0)])
    s.build_indexes()
    with pytest.raises(RuntimeError, match="before build_indexes"):
        s.load((JOB, "m"), [Grant(1, 0b1, 0, 0)])


def test_a_pending_job_twice_or_also_running_is_named():
    snap = build_snapshot(1000, 50, 20, seed=2)
    twice = dataclasses.replace(snap, pending=snap.pending + (snap.pending[7],))
    with pytest.raises(SnapshotError, match=f"pending job '{snap.pending[7].id}' appears twice"):
        schedule(twice)
    running = dataclasses.replace(snap.pending[3], id=snap.running[0].spec.id)
    both = dataclasses.replace(snap, pending=(snap.pending[0], running) + snap.pending[1:])
    with pytest.raises(SnapshotError, match=f"job '{running.id}' is both pending and running"):
        schedule(both)
