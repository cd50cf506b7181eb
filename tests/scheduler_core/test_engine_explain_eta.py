"""ETAs that hold when the fleet evolves as the runtime limits say: every running job ends
exactly at its limit, and the engine is asked again at every end and every promised start.

A job behind the head's reservation on the head's GPUs starts when the head has run, not when
the GPUs it runs on now free up; a job over its quota whose GPUs are busy starts when both its
quota and the GPUs are there."""

from __future__ import annotations

import dataclasses

import pytest
from engine_builders import make_cluster, make_job, make_running, why

from scheduler_core import Plan, ReasonCode, RunningJob, SchedulerConfig, Snapshot, schedule

NO_BACKFILL = SchedulerConfig(backfill=False)


def evolve(snap: Snapshot, config: SchedulerConfig | None = None,
           also_at: tuple[float, ...] = ()) -> tuple[Plan, dict[str, float]]:
    """The first plan, and when each pending job started as time moves from one runtime-limit
    end (or promised start, or ETA, or a time in ``also_at``) to the next. Preempted jobs stop
    after their grace period; they are not requeued."""
    first = schedule(snap, config)
    plan = first
    starts: dict[str, float] = {}
    pending = list(snap.pending)
    running = list(snap.running)
    stopping: dict[str, float] = {}
    now = snap.now
    for _ in range(200):
        by_id = {j.id: j for j in pending}
        for b in plan.binds:
            starts[b.job_id] = now
            pending.remove(by_id[b.job_id])
            running.append(RunningJob(spec=by_id[b.job_id], placements=b.placements,
                                      started_at=now))
        for p in plan.preemptions:
            stopping.setdefault(p.job_id, now + p.grace_period_s)
        running = [dataclasses.replace(r, terminating=True) if r.spec.id in stopping else r
                   for r in running]
        ends = [r.started_at + r.spec.runtime_limit_s for r in running
                if r.spec.runtime_limit_s is not None]
        ends += list(stopping.values()) + [r.start_at for r in plan.reservations]
        ends += [p.eta for p in plan.pending if p.eta is not None]  # the loop cycles often
        ends += also_at
        future = [t for t in ends if t > now]
        if not pending or not future:
            break
        now = min(future)
        running = [r for r in running
                   if not (r.spec.runtime_limit_s is not None
                           and r.started_at + r.spec.runtime_limit_s <= now)
                   and not stopping.get(r.spec.id, now + 1) <= now]
        plan = schedule(dataclasses.replace(snap, now=now, pending=tuple(pending),
                                            running=tuple(running)), config)
    return first, starts


def behind_a_partly_free_head():
    """n0: r0 holds 4 GPUs until t=3600 (4 free); n1: r1 holds all 8 until t=7200. The head
    (16 GPUs, 1 h) is promised both nodes from t=7200 and holds n0's 4 free GPUs; j1 (8 GPUs,
    too long to backfill) can only run after it, at t=10800."""
    return (
        make_cluster().nodes(2).at(0)
        .running(make_running(make_job("r0").gpus(4).limit(3600)).on("n0", 0, 1, 2, 3),
                 make_running(make_job("r1").gpus(8).limit(7200)).whole("n1"))
        .pending(make_job("head").gpus(16).limit(3600).submitted(0),
                 make_job("j1").gpus(8).limit(10000).submitted(1))
    )


def test_a_job_behind_the_head_is_not_promised_the_heads_gpus():
    # Before: 9600 (n0's 4 GPUs from t=3600 were counted as running the head's work before
    # the head could start; the head needs both nodes at once, from t=7200).
    first, starts = evolve(behind_a_partly_free_head().snapshot())
    head, j1 = why(first, "head"), why(first, "j1")
    assert head.code is ReasonCode.WAITING_FOR_RESERVATION and head.eta == 7200.0
    assert j1.eta == 10800.0
    assert "Estimated start t=10800" in j1.message
    assert starts == {"head": 7200.0, "j1": 10800.0}


def test_a_job_that_can_run_beside_the_head_is_estimated_at_the_heads_start():
    # Three nodes: the head is promised n0 and n1 from t=7200; n2 frees at t=7200 too, so j1
    # may start beside the head then, not after it. (Next cycle, when n0 is whole at t=3600,
    # the head's promise moves to n1 and n2 and j1 starts on n0, earlier than told.)
    snap = (
        behind_a_partly_free_head()
        .nodes(1, start=2)
        .running(make_running(make_job("r2").gpus(8).limit(7200)).whole("n2"))
        .snapshot()
    )
    first, starts = evolve(snap)
    assert why(first, "head").eta == 7200.0
    assert why(first, "j1").eta == 7200.0
    assert starts["head"] == 7200.0 and starts["j1"] <= 7200.0


def over_quota_on_busy_gpus():
    """One h100 node: ml (quota 8) runs m on 4 GPUs until t=1000, cv runs c on the other 4
    until t=5000. ml's j1 (8 GPUs) takes the reservation at t=5000; ml's j2 (8 GPUs) has its
    quota back at t=1000 but the node is j1's from 5000 to 8000."""
    return (
        make_cluster().nodes(1).nodes(1, gpu_type="h100", prefix="h").at(0)
        .quota("ml", "h100", 8).quota("cv", "h100", 8)
        .running(
            make_running(make_job("m").team("ml").gpus(4).types("h100").limit(1000))
            .on("h0", 0, 1, 2, 3),
            make_running(make_job("c").team("cv").gpus(4).types("h100").limit(5000))
            .on("h0", 4, 5, 6, 7),
            make_running(make_job("d").team("cv").gpus(8).types("a100").limit(9000)).whole("n0"),
        )
        .pending(make_job("j1").team("ml").gpus(8).types("h100").limit(3000).submitted(1),
                 make_job("j2").team("ml").gpus(8).types("h100").limit(3000).submitted(2))
    )


def test_a_job_over_quota_waits_for_its_gpus_too():
    # Before: t=1000, its quota's time alone, although its GPUs were busy until t=8000 and it
    # was behind the head (ETA 5000) in the queue.
    first, starts = evolve(over_quota_on_busy_gpus().snapshot())
    j1, j2 = why(first, "j1"), why(first, "j2")
    assert j1.code is ReasonCode.WAITING_FOR_RESERVATION and j1.eta == 5000.0
    assert j2.code is ReasonCode.QUOTA_EXCEEDED
    assert j2.eta == 8000.0
    assert j2.message.endswith(
        "Estimated start t=8000: its quota has room from t=1000, but the capable GPUs are busy "
        "until then (by runtime limits).")
    assert j2.would_start_if == "team ml frees 4 h100 GPUs"
    assert starts == {"j1": 5000.0, "j2": 8000.0}


def test_a_job_over_quota_whose_gpus_free_first_keeps_its_quota_time():
    plan = (
        make_cluster().nodes(2).at(0)
        .quota("ml", "a100", 8)
        .running(make_running(make_job("a").team("ml").gpus(8).limit(1000)).whole("n0"))
        .pending(make_job("j").team("ml").gpus(4))
        .plan(SchedulerConfig(backfill=False))
    )
    j = why(plan, "j")
    assert j.code is ReasonCode.QUOTA_EXCEEDED and j.eta == 1000.0
    assert j.message.endswith("Estimated start t=1000 from runtime limits.")


def test_a_job_over_quota_whose_gpus_never_free_by_runtime_limits_has_no_eta():
    # The only capable node is held by a job without a runtime limit: nothing says when its
    # GPUs free, so the quota's time (t=1000) is not an answer.
    plan = (
        make_cluster().nodes(1).nodes(1, gpu_type="h100", prefix="h").at(0)
        .quota("ml", "h100", 8).quota("cv", "h100", 8)
        .running(
            make_running(make_job("m").team("ml").gpus(4).types("h100").limit(1000))
            .on("h0", 0, 1, 2, 3),
            make_running(make_job("c").team("cv").gpus(4).types("h100")).on("h0", 4, 5, 6, 7),
        )
        .pending(make_job("j").team("ml").gpus(8).types("h100"))
        .plan(SchedulerConfig(backfill=False))
    )
    j = why(plan, "j")
    assert j.code is ReasonCode.QUOTA_EXCEEDED
    assert j.eta is None
    assert "Estimated start" not in j.message


@pytest.mark.parametrize("snapshot", [
    lambda: behind_a_partly_free_head().snapshot(),
    lambda: over_quota_on_busy_gpus().snapshot(),
    lambda: (make_cluster().nodes(1).at(0)
             .running(make_running(make_job("r").gpus(8).limit(3600)).whole("n0"))
             .pending(*(make_job(f"j{i}").gpus(8).limit(3600).submitted(i) for i in range(3)))
             .snapshot()),
], ids=["behind-a-partly-free-head", "over-quota-on-busy-gpus", "three-one-hour-jobs-in-a-row"])
def test_etas_are_never_in_the_past_never_before_the_head_and_kept(snapshot):
    snap = snapshot()
    first, starts = evolve(snap)
    heads = [p for p in first.pending if p.code is ReasonCode.WAITING_FOR_RESERVATION]
    assert len(heads) == 1
    head = heads[0]
    for p in first.pending:
        assert p.eta is not None and p.eta >= snap.now, p
        if p.queue_position > head.queue_position:
            assert p.eta >= head.eta, p  # none of these backfills: each starts at or after it
        assert starts[p.job_id] <= p.eta, (p, starts[p.job_id])


def cohort_lends_when_its_job_ends():
    """Cohort c on two nodes: ml (nominal 8) runs nothing and asks 12, so it must borrow 4;
    team lend (nominal 8) uses all 8 of its own until t=2000 and lends nothing before then.
    ml's own jobs free nothing: the lender's job ending is what lets it start."""
    return (
        make_cluster().nodes(2).at(0)
        .quota("ml", "a100", 8, cohort="c").quota("lend", "a100", 8, cohort="c")
        .running(make_running(make_job("l").team("lend").gpus(8).limit(2000)).whole("n0"))
        .pending(make_job("j").team("ml").gpus(12).per_node(4).limit(3600))
    )


def test_a_job_over_quota_waits_for_its_cohort_to_lend():
    # Before: no ETA, since only ml's own jobs were asked when they free the quota it lacks.
    first, starts = evolve(cohort_lends_when_its_job_ends().snapshot(),
                           SchedulerConfig(backfill=False))
    j = why(first, "j")
    assert j.code is ReasonCode.QUOTA_EXCEEDED
    # (its borrowing limit would allow more: it is the cohort that has nothing to lend now)
    assert ("team ml uses 0 of 8 nominal a100 GPUs and can borrow 0 more (cohort c has no unused a100 "
            "GPUs to lend now); this job needs 12") in j.message
    assert j.would_start_if == "its cohort lends 4 more a100 GPUs"
    assert j.eta == 2000.0
    assert starts == {"j": 2000.0}


def test_a_job_over_quota_waits_for_the_later_of_its_team_and_its_cohort():
    # ml also runs 4 GPUs until t=5000 and asks 16: 4 + 16 = 20 needs 12 beyond nominal, and
    # the lender can lend at most 8 (from t=2000): ml must also free its 4, at t=5000.
    snap = (
        make_cluster().nodes(3).at(0)
        .quota("ml", "a100", 8, cohort="c").quota("lend", "a100", 8, cohort="c")
        .running(make_running(make_job("l").team("lend").gpus(8).limit(2000)).whole("n0"),
                 make_running(make_job("m").team("ml").gpus(4).limit(5000)).on("n2", 0, 1, 2, 3))
        .pending(make_job("k").team("ml").gpus(16).per_node(4).limit(3600))
        .snapshot()
    )
    first, starts = evolve(snap, SchedulerConfig(backfill=False))
    k = why(first, "k")
    assert k.code is ReasonCode.QUOTA_EXCEEDED
    assert k.would_start_if == "team ml frees 4 a100 GPUs and its cohort lends 8 more"
    assert k.eta == 5000.0
    assert starts == {"k": 5000.0}


def protected_by_its_minimum_runtime(min_runtime_s: int = 3600, limit: float = 20000):
    """v (low, grace 30 s) started at t=600 and may not be preempted before t=600 +
    min_runtime_s; h (high) needs its node at t=1000. v's runtime limit ends it at 600 +
    limit."""
    return (
        make_cluster().nodes(1).at(1000)
        .priority("low", 10, grace_period_s=30, min_runtime_s=min_runtime_s)
        .running(make_running(make_job("v").priority("low").gpus(8).limit(limit))
                 .whole("n0").started(600))
        .pending(make_job("h").priority("high").gpus(8).limit(3600))
    )


def test_a_job_waiting_for_a_minimum_runtime_is_told_when_it_lifts():
    # Before: "Estimated start t=20600 from runtime limits" (v's limit); it started at 4230.
    first, starts = evolve(protected_by_its_minimum_runtime().snapshot(), NO_BACKFILL,
                           also_at=(4200.0,))  # a cycle when the minimum runtime is over
    h = why(first, "h")
    assert h.code is ReasonCode.MINIMUM_RUNTIME_PROTECTED
    assert h.would_start_if == "the protected jobs pass their minimum runtime, or GPUs free up"
    assert h.message == (
        "It could start by preemption, but the candidate is protected: job v has run 400 s of its "
        "3600 s minimum runtime; it may preempt it from t=4200 and start once it has "
        "stopped, by t=4230.")
    assert h.eta == 4230.0
    assert starts == {"h": 4230.0}


def test_a_job_whose_gpus_free_before_the_protection_lifts_gets_the_earlier_time():
    first, starts = evolve(protected_by_its_minimum_runtime(limit=2000).snapshot(), NO_BACKFILL)
    h = why(first, "h")
    assert h.code is ReasonCode.MINIMUM_RUNTIME_PROTECTED
    assert h.eta == 2600.0  # v's runtime limit ends it before its minimum runtime is over
    assert h.message.endswith("by t=4230. Estimated start t=2600 from runtime limits.")
    assert starts == {"h": 2600.0}


def test_a_job_waiting_for_a_preemption_budget_keeps_the_runtime_limit_estimate():
    # The snapshot says how often v was preempted in its window, not when the window moves on.
    snap = (
        make_cluster().nodes(1).at(1000)
        .priority("low", 10, grace_period_s=30, preemption_budget=1)
        .running(make_running(make_job("v").priority("low").gpus(8).limit(20000)
                              .preempted_times(1)).whole("n0").started(600))
        .pending(make_job("h").priority("high").gpus(8).limit(3600))
        .snapshot()
    )
    h = why(schedule(snap, NO_BACKFILL), "h")
    assert h.code is ReasonCode.PREEMPTION_BUDGET_EXHAUSTED
    assert "it may preempt it from" not in h.message
    assert h.eta == 20600.0


def a_team_head_over_its_quota(small_limit: float, *, cohort: str | None = None):
    """Team ml (nominal 16) holds all 16 GPUs (m1 until t=1000, m2 until t=5000); its big job
    (16 GPUs, 1 h) holds the reservation from t=5000, when its quota is back. Its small job
    (8 GPUs) is behind it on the same quota."""
    cluster = make_cluster().nodes(4).at(0).quota("ml", "a100", 16, borrowing_limit=0,
                                                  cohort=cohort)
    if cohort is not None:
        cluster.quota("lend", "a100", 0, cohort=cohort)
    return (
        cluster
        .running(make_running(make_job("m1").team("ml").gpus(8).limit(1000)).whole("n0"),
                 make_running(make_job("m2").team("ml").gpus(8).limit(5000)).whole("n1"))
        .pending(make_job("big").team("ml").gpus(16).limit(3600).submitted(0),
                 make_job("small").team("ml").gpus(8).limit(small_limit).submitted(1))
    )


@pytest.mark.parametrize("cohort", [None, "c"], ids=["no-cohort", "in-a-cohort"])
def test_a_job_that_would_outlast_the_heads_start_waits_for_the_head_on_its_quota(cohort):
    # Before: t=1000, when m1 frees 8 of the quota; but started then, small would still hold
    # them at t=5000 and the head would not fit its quota, so the cycle holds it back until
    # the head has run (t=8600).
    first, starts = evolve(a_team_head_over_its_quota(7200, cohort=cohort).snapshot())
    big, small = why(first, "big"), why(first, "small")
    assert big.code is ReasonCode.WAITING_FOR_RESERVATION and big.eta == 5000.0
    assert small.code is ReasonCode.QUOTA_EXCEEDED
    assert small.eta == 8600.0
    assert small.message.endswith(
        "Estimated start t=8600: its team's quota must also hold job big from its reservation "
        "at t=5000 until it has run (by runtime limits).")
    assert starts == {"big": 5000.0, "small": 8600.0}


def test_a_job_that_ends_before_the_heads_start_keeps_its_quota_time():
    first, starts = evolve(a_team_head_over_its_quota(3600).snapshot())
    small = why(first, "small")
    assert small.eta == 1000.0  # it ends at 4600, before the head's start
    assert starts == {"big": 5000.0, "small": 1000.0}


def over_quota_behind_its_own_protected_job(config: SchedulerConfig | None = None):
    """Team ml (nominal 8) runs v (low, minimum runtime 3600 s, started at t=600) on all 8 of
    its GPUs; its high job h (8 GPUs) is over quota, and would preempt v if v's minimum
    runtime were over (at t=4200)."""
    return (
        make_cluster().nodes(1).at(1000).quota("ml", "a100", 8)
        .priority("low", 10, grace_period_s=30, min_runtime_s=3600)
        .running(make_running(make_job("v").priority("low").gpus(8).limit(20000))
                 .whole("n0").started(600))
        .pending(make_job("h").priority("high").gpus(8).limit(3600))
        .snapshot()
    )


@pytest.mark.parametrize("config", [None, NO_BACKFILL], ids=["holds-the-reservation",
                                                          "no-backfill"])
def test_a_job_over_quota_that_may_preempt_its_own_teams_job_later_is_told_when(config):
    # Before: t=20600 (v's runtime limit, when the quota frees by itself), although the cycle
    # preempts v as soon as its minimum runtime is over and h starts at t=4230.
    first, starts = evolve(over_quota_behind_its_own_protected_job(), config, also_at=(4200.0,))
    h = why(first, "h")
    assert h.code in (ReasonCode.WAITING_FOR_RESERVATION, ReasonCode.QUOTA_EXCEEDED)
    assert (" It could also start by preemption, but the candidate is protected: job v has run "
            "400 s of its 3600 s minimum runtime; it may preempt it from t=4200 and start once "
            "it has stopped, by t=4230.") in h.message
    assert h.eta == 4230.0
    assert starts == {"h": 4230.0}


def test_jobs_over_quota_queue_for_it_in_order():
    # Before: both t=1000, when m frees the quota; the second starts only when the first has
    # run on it (t=4600).
    snap = (
        make_cluster().nodes(2).at(0).quota("ml", "a100", 8)
        .running(make_running(make_job("m").team("ml").gpus(8).limit(1000)).whole("n0"))
        .pending(make_job("j1").team("ml").gpus(8).limit(3600).submitted(1),
                 make_job("j2").team("ml").gpus(8).limit(3600).submitted(2))
        .snapshot()
    )
    first, starts = evolve(snap, NO_BACKFILL)
    j1, j2 = why(first, "j1"), why(first, "j2")
    assert (j1.code, j2.code) == (ReasonCode.QUOTA_EXCEEDED, ReasonCode.QUOTA_EXCEEDED)
    assert (j1.eta, j2.eta) == (1000.0, 4600.0)
    assert j2.message.endswith(
        "Estimated start t=4600: its team's quota goes first to the 8 a100 GPUs of its jobs ahead "
        "of it in the queue (by runtime limits).")
    assert starts == {"j1": 1000.0, "j2": 4600.0}


def test_the_quota_what_if_of_the_etas_answers_as_a_ledger_charged_that_way():
    import random

    from scheduler_core import QuotaInfo
    from scheduler_core.quota import QuotaLedger

    rnd = random.Random(7)
    for _ in range(500):
        quotas = [QuotaInfo(t, "a100", rnd.choice([0, 4, 8, 16]),
                            rnd.choice([None, 0, 4, 8]), rnd.choice([None, 0, 4]),
                            rnd.choice(["c", "c", None]))
                  for t in ("ml", "cv", "nlp")]
        now = {q.team: rnd.choice([0, 2, 4, 8, 12, 20]) for q in quotas}
        ledger = QuotaLedger(quotas)
        for team, used in now.items():
            ledger.charge(team, "a100", used)
        then = {q.team: rnd.choice([0, 2, 4, 8, 12]) for q in quotas if rnd.random() < 0.8}
        trial = QuotaLedger(quotas)
        for team in now:
            trial.charge(team, "a100", then.get(team, now[team]))
        team, gpus = rnd.choice(["ml", "cv", "nlp"]), rnd.choice([1, 2, 4, 8, 16])
        assert ledger.admits_with(then, team, "a100", gpus) == \
            trial.check(team, "a100", gpus).admitted, (quotas, now, then, team, gpus)


def test_a_packed_gang_of_two_members_too_wide_to_share_a_node_waits_for_two_roomy_nodes():
    # 14 GPUs on 8-GPU nodes: members of 8 and 6, which never share a node. At t=1000 n0 has 8
    # free and n1, n2 5 each (18 GPUs, one node with room for the 8); the 6 needs a second node
    # with 6 free, n1 at t=2000. Until 7 Dec only the largest member was counted: t=1000.
    def busy(name: str, node: str, gpus: int, limit: float):
        return make_running(make_job(name).gpus(gpus).limit(limit)).on(node, *range(gpus))

    snap = (make_cluster().nodes(3).at(0)
            .running(busy("a", "n0", 8, 1000), busy("b", "n1", 3, 2000), busy("c", "n2", 3, 3000))
            .pending(make_job("j").gpus(14).limit(600))
            .snapshot())
    first, starts = evolve(snap, NO_BACKFILL)
    assert why(first, "j").eta == 2000.0 == starts["j"]
