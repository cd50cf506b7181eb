"""Rule 7, preemption that counts its cost: borrowed work first, then lower priority; the
cheapest victims (GPUs x time since last checkpoint, plus restart); whole gangs; minimum runtime
and preemption budget honoured; no cascades; grace period, reason and lost GPU-hours."""

from __future__ import annotations

import pytest
from engine_builders import bound, make_cluster, make_job, make_running, preempted, why

from scheduler_core import PreemptionReason, ReasonCode, SchedulerConfig

NOW = 10_000.0


def full_node_of_low_jobs(*checkpoints: float):
    """One 8-GPU node held by 2-GPU low-priority jobs lo0..lo3 started at t=0, with the given
    last checkpoints, and nothing else free."""
    cluster = make_cluster().nodes(1).at(NOW)
    for k, ckpt in enumerate(checkpoints):
        cluster.running(
            make_running(make_job(f"lo{k}").priority("low").gpus(2))
            .on("n0", 2 * k, 2 * k + 1).started(0).checkpointed(ckpt)
        )
    return cluster


def test_higher_priority_job_preempts_lower_priority_work():
    plan = (
        full_node_of_low_jobs(9000, 9000, 9000, 9000)
        .pending(make_job("hi").priority("high").gpus(2))
        .plan()
    )
    assert len(plan.preemptions) == 1
    victim = plan.preemptions[0]
    assert victim.reason is PreemptionReason.HIGHER_PRIORITY
    assert victim.for_job == "hi"
    assert why(plan, "hi").code is ReasonCode.WAITING_FOR_PREEMPTION


@pytest.mark.parametrize(
    ("checkpoints", "expected"),
    [((9000, 5000, 9900, 9500), "lo2"), ((100, 200, 300, 9999), "lo3"),
     ((5000, 5000, 5000, 5000), "lo0")],
    ids=["most-recent-checkpoint-loses-least", "just-checkpointed-victim",
         "equal-cost-ties-break-by-id"],
)
def test_cheapest_victim_by_lost_work_is_chosen(checkpoints, expected):
    plan = (
        full_node_of_low_jobs(*checkpoints)
        .pending(make_job("hi").priority("high").gpus(2))
        .plan()
    )
    assert preempted(plan) == [expected]


def test_preemption_carries_grace_period_reason_and_lost_gpu_hours():
    plan = (
        make_cluster().nodes(1).at(NOW)
        .priority("low", 10, grace_period_s=120)
        .running(make_running(make_job("victim").priority("low").gpus(8).restart_cost(360))
                 .whole("n0").started(0).checkpointed(NOW - 1800).generation(7))
        .pending(make_job("hi").priority("high").gpus(8))
        .plan()
    )
    [p] = plan.preemptions
    assert p.grace_period_s == 120
    # 8 GPUs x (30 min since checkpoint + 6 min restart) = 4.8 GPU-hours
    assert p.lost_gpu_hours == pytest.approx(4.8)
    assert p.generation == 7
    assert "4.80 GPU-hours" in p.message and "120 s" in p.message
    [reservation] = plan.reservations
    assert reservation.job_id == "hi" and reservation.start_at == NOW + 120


def test_gang_is_preempted_whole():
    plan = (
        make_cluster().nodes(2).at(NOW)
        .running(make_running(make_job("gang").priority("low").gpus(16)).whole("n0", "n1")
                 .started(0))
        .pending(make_job("hi").priority("high").gpus(4))
        .plan()
    )
    assert preempted(plan) == ["gang"]
    assert plan.resizes == ()  # a rigid gang is never cut down


def test_preemptor_over_nominal_frees_its_quota_by_preempting_its_own_lower_priority_work():
    plan = (
        make_cluster().nodes(1).at(NOW)
        .quota("ml", "a100", 4, cohort="c").quota("cv", "a100", 4, cohort="c")
        .running(
            make_running(make_job("own-low").team("ml").priority("low").gpus(4))
            .on("n0", 0, 1, 2, 3).started(0).checkpointed(NOW - 1),
            make_running(make_job("cv-borrowed").team("cv").priority("normal").gpus(4))
            .on("n0", 4, 5, 6, 7).started(0).borrowed(),
        )
        .pending(make_job("hi").team("ml").priority("high").gpus(4))
        .plan()
    )
    # ml is at its nominal 4 with own-low; hi (4 more) would exceed it and the cohort has
    # nothing to lend, so only preempting ml's own lower-priority job makes room in quota.
    assert preempted(plan) == ["own-low"]


def test_owner_within_nominal_reclaims_borrowed_work_before_its_own_lower_priority_work():
    plan = (
        make_cluster().nodes(1).at(NOW)
        .quota("ml", "a100", 8, cohort="c").quota("cv", "a100", 0, cohort="c")
        .running(
            make_running(make_job("own-low").team("ml").priority("low").gpus(4))
            .on("n0", 0, 1, 2, 3).started(0).checkpointed(NOW - 1),
            make_running(make_job("cv-borrowed").team("cv").priority("high").gpus(4))
            .on("n0", 4, 5, 6, 7).started(0).borrowed(),
        )
        .pending(make_job("mine").team("ml").priority("normal").gpus(4))
        .plan()
    )
    [p] = plan.preemptions
    assert p.job_id == "cv-borrowed"
    assert p.reason is PreemptionReason.RECLAIM_BORROWED


def test_a_reclaimed_gang_is_told_it_stops_whole_not_that_all_its_gpus_were_lent():
    """cv borrows 2 of the 6 GPUs its gang holds; the notice said "ml reclaims the 6 a100
    GPUs it lent to team cv", three times what ml lent."""
    plan = (
        make_cluster().nodes(1).at(NOW)
        .quota("ml", "a100", 4, cohort="c").quota("cv", "a100", 4, cohort="c")
        .running(make_running(make_job("cv-gang").team("cv").priority("normal").gpus(6))
                 .on("n0", *range(6)).started(0).borrowed())
        .pending(make_job("mine").team("ml").priority("normal").gpus(4))
        .plan()
    )
    [p] = plan.preemptions
    assert p.message.startswith(
        "Preempted: team ml reclaims capacity it lent to team cv, for job mine; this job ran beyond "
        "team cv's quota and stops whole, with its 6 a100 GPUs.")


@pytest.mark.parametrize(
    ("preemptor", "victim"),
    [("normal", "normal"), ("low", "normal")],
    ids=["equal-priority-does-not-preempt", "lower-priority-does-not-preempt"],
)
def test_preemption_needs_a_strictly_higher_priority(preemptor, victim):
    plan = (
        make_cluster().nodes(1).at(NOW)
        .running(make_running(make_job("r").priority(victim).gpus(8)).whole("n0"))
        .pending(make_job("p").priority(preemptor).gpus(8))
        .plan()
    )
    assert plan.preemptions == ()


def test_non_preemptible_class_is_never_a_victim():
    plan = (
        make_cluster().nodes(1).at(NOW)
        .priority("serving", 50, preemptible=False)
        .running(make_running(make_job("svc").priority("serving").gpus(8)).whole("n0"))
        .pending(make_job("hi").priority("high").gpus(8))
        .plan()
    )
    assert plan.preemptions == ()


def test_class_that_may_not_preempt_waits():
    plan = (
        make_cluster().nodes(1).at(NOW)
        .priority("polite", 5000, may_preempt_lower=False)
        .running(make_running(make_job("r").priority("low").gpus(8)).whole("n0"))
        .pending(make_job("p").priority("polite").gpus(8))
        .plan()
    )
    assert plan.preemptions == ()


@pytest.mark.parametrize(
    ("klass", "preempted_times", "started", "phrase", "code"),
    [
        (dict(min_runtime_s=3600), 0, NOW - 600, "600 s of its 3600 s minimum runtime",
         ReasonCode.MINIMUM_RUNTIME_PROTECTED),
        (dict(preemption_budget=2), 2, 0.0, "preempted 2 times", ReasonCode.PREEMPTION_BUDGET_EXHAUSTED),
        # both: the budget is the longer-lived protection, and the code says so
        (dict(min_runtime_s=3600, preemption_budget=2), 2, NOW - 600, "minimum runtime and was preempted 2 times",
         ReasonCode.PREEMPTION_BUDGET_EXHAUSTED),
    ],
    ids=["minimum-runtime-protects-a-young-job", "budget-protects-a-often-preempted-job",
         "budget-and-minimum-runtime-both"],
)
def test_protected_victims_are_not_preempted_and_the_wait_says_why(klass, preempted_times,
                                                                   started, phrase, code):
    plan = (
        make_cluster().nodes(1).at(NOW)
        .priority("low", 10, **klass)
        .running(make_running(make_job("r").priority("low").gpus(8)
                              .preempted_times(preempted_times)).whole("n0").started(started))
        .pending(make_job("hi").priority("high").gpus(8))
        .plan()
    )
    assert plan.preemptions == ()
    explanation = why(plan, "hi")
    assert explanation.code is code
    assert explanation.reason == code.value
    assert phrase in explanation.message


def test_cycle_preemption_budget_caps_victims():
    cluster = make_cluster().nodes(3).at(NOW)
    for k in range(3):
        cluster.running(make_running(make_job(f"lo{k}").priority("low").gpus(8))
                        .whole(f"n{k}").started(0))
    cluster.pending(*[make_job(f"hi{k}").priority("high").gpus(8).submitted(k)
                      for k in range(3)])
    plan = cluster.plan(SchedulerConfig(max_preemptions_per_cycle=2))
    assert len(plan.preemptions) == 2
    assert why(plan, "hi2").code is ReasonCode.PREEMPTION_BUDGET_EXHAUSTED
    assert "budget of 2" in why(plan, "hi2").message


def test_a_job_whose_every_candidate_is_protected_is_told_their_protection_not_the_cycles_budget():
    # hi0 takes the cycle's one victim (old); hi1's only candidate, young, is inside its
    # minimum runtime until t=13000, so the next cycle's fresh budget would not start hi1
    # either. It read "this cycle's preemption budget of 1 victims is spent"
    # (PreemptionBudgetExhausted), with an ETA of t=24430 from runtime limits.
    plan = (
        make_cluster().nodes(2).at(NOW)
        .priority("low", 10, min_runtime_s=3600)
        .running(make_running(make_job("old").priority("low").gpus(8)).whole("n0").started(0),
                 make_running(make_job("young").priority("low").gpus(8)).whole("n1")
                 .started(NOW - 600))
        .pending(make_job("hi0").priority("high").gpus(8).submitted(0),
                 make_job("hi1").priority("high").gpus(8).submitted(1))
        .plan(SchedulerConfig(max_preemptions_per_cycle=1))
    )
    assert preempted(plan) == ["old"]
    hi1 = why(plan, "hi1")
    assert hi1.code is ReasonCode.MINIMUM_RUNTIME_PROTECTED
    assert hi1.message == (
        "It could start by preemption, but the candidate is protected: job young has run "
        "600 s of its 3600 s minimum runtime; it may preempt it from t=13000 and start once "
        "it has stopped, by t=13030.")
    assert hi1.eta == 13030.0


def test_the_cycles_spent_budget_is_said_in_words():
    cluster = make_cluster().nodes(2).at(NOW)
    for k in range(2):
        cluster.running(make_running(make_job(f"lo{k}").priority("low").gpus(8))
                        .whole(f"n{k}").started(0))
    cluster.pending(*[make_job(f"hi{k}").priority("high").gpus(8).submitted(k) for k in range(2)])
    plan = cluster.plan(SchedulerConfig(max_preemptions_per_cycle=1))
    assert why(plan, "hi1").code is ReasonCode.PREEMPTION_BUDGET_EXHAUSTED
    # it read "this cycle's preemption budget of 1 victims is spent"
    assert "this cycle's preemption budget of 1 victim is spent" in why(plan, "hi1").message


def test_reprieve_keeps_victims_that_are_not_needed():
    # Freeing n0 needs lo0 and lo1 (4 GPUs each). The cheapest candidate, cheap, sits on n1,
    # where it alone frees nothing useful for an 8-GPU job: it must be reprieved.
    plan = (
        make_cluster().nodes(2).at(NOW)
        .running(
            make_running(make_job("cheap").priority("low").gpus(4)).on("n1", 0, 1, 2, 3)
            .started(0).checkpointed(NOW - 1),
            make_running(make_job("keep").priority("normal").gpus(4)).on("n1", 4, 5, 6, 7)
            .started(0),
            make_running(make_job("lo0").priority("low").gpus(4)).on("n0", 0, 1, 2, 3)
            .started(0).checkpointed(NOW - 60),
            make_running(make_job("lo1").priority("low").gpus(4)).on("n0", 4, 5, 6, 7)
            .started(0).checkpointed(NOW - 60),
        )
        .pending(make_job("hi").priority("high").gpus(8))
        .plan()
    )
    assert preempted(plan) == ["lo0", "lo1"]


def test_no_cascade_the_nominated_job_waits_for_its_victims_instead_of_preempting_again():
    # Next cycle: the victim is terminating; the preemptor must not pick a fresh victim.
    plan = (
        make_cluster().nodes(2).at(NOW)
        .running(
            make_running(make_job("victim").priority("low").gpus(8)).whole("n0").started(0)
            .terminating(),
            make_running(make_job("other").priority("low").gpus(8)).whole("n1").started(0),
        )
        .pending(make_job("hi").priority("high").gpus(8))
        .plan()
    )
    assert plan.preemptions == ()
    explanation = why(plan, "hi")
    assert explanation.code is ReasonCode.WAITING_FOR_PREEMPTION
    assert "victim" in explanation.message


def test_a_nominated_job_does_not_let_others_take_its_gpus():
    # hi is nominated for n0 (4 free + lo's 4); a later small job must not take the free 4.
    plan = (
        make_cluster().nodes(1).at(NOW)
        .running(make_running(make_job("lo").priority("low").gpus(4)).on("n0", 0, 1, 2, 3)
                 .started(0))
        .pending(make_job("hi").priority("high").gpus(8).submitted(0),
                 make_job("small").priority("low").gpus(4).submitted(1))
        .plan()
    )
    assert preempted(plan) == ["lo"]
    assert "small" not in bound(plan)


def test_preemption_off_preempts_nothing():
    plan = (
        full_node_of_low_jobs(1, 1, 1, 1)
        .pending(make_job("hi").priority("high").gpus(2))
        .plan(SchedulerConfig(preemption=False))
    )
    assert plan.preemptions == ()


def test_borrowed_work_of_a_non_preemptible_class_is_still_reclaimed():
    plan = (
        make_cluster().nodes(1).at(NOW)
        .priority("serving", 5000, preemptible=False)
        .quota("ml", "a100", 8, cohort="c").quota("svc", "a100", 0, cohort="c")
        .running(make_running(make_job("lent").team("svc").priority("serving").gpus(8))
                 .whole("n0").started(0).borrowed())
        .pending(make_job("owner").team("ml").priority("low").gpus(8))
        .plan()
    )
    [p] = plan.preemptions
    assert (p.job_id, p.reason) == ("lent", PreemptionReason.RECLAIM_BORROWED)


def _reclaim_cluster(other_ends_in_s: float, lent_ran_s: float, *, lent_class: str = "normal",
                     lent_preempted: int = 0):
    # ml owns both nodes (16 GPUs) and runs 8 on n0 until now + other_ends_in_s; cv borrowed
    # n1 lent_ran_s ago (a job of lent_class, preempted lent_preempted times lately) and never
    # checkpointed.
    return (
        make_cluster().nodes(2).at(NOW)
        .quota("ml", "a100", 16, cohort="c").quota("cv", "a100", 0, cohort="c")
        .running(
            make_running(make_job("own").team("ml").gpus(8).limit(other_ends_in_s + 3600))
            .whole("n0").started(NOW - 3600),
            make_running(make_job("lent").team("cv").priority(lent_class).gpus(8).limit(86400)
                         .preempted_times(lent_preempted))
            .whole("n1").started(NOW - lent_ran_s).borrowed(),
        )
        .pending(make_job("owner").team("ml").gpus(8).limit(3600))
    )


def test_reclaim_waits_when_its_own_capacity_frees_before_waiting_costs_more_than_the_lost_work():
    # Waiting 10 min for n0 costs 8 GPUs x 1/6 h = 1.3 GPU-hours; preempting "lent" would
    # throw away 8 GPUs x 2 h = 16 GPU-hours: the owner waits, with an ETA.
    plan = _reclaim_cluster(other_ends_in_s=600, lent_ran_s=7200).plan()
    assert plan.preemptions == ()
    assert why(plan, "owner").eta == NOW + 600


def test_reclaim_that_waits_says_why_its_lent_quota_is_not_reclaimed():
    # The owner read only "Needs 8 a100 GPUs; 0 are free", with its 8 lent GPUs in cv's hands
    # and no word of why they were not taken back. (The borrower's team is not named: a count.)
    plan = _reclaim_cluster(other_ends_in_s=600, lent_ran_s=7200).plan()
    message = why(plan, "owner").message
    assert ("Its team's lent quota is not reclaimed: preempting 1 borrowing job would throw away "
            "about 16.00 GPU-hours of their work, and waiting for capable GPUs to free by runtime "
            f"limits costs less (about 1.27 GPU-hours: its 8 GPUs until t={NOW + 600:.0f}).") in message
    assert "lent" not in message.replace("lent quota", "")
    # a reclaim made says nothing of the kind
    plan = _reclaim_cluster(other_ends_in_s=36000, lent_ran_s=7200).plan()
    assert all("not reclaimed" not in p.message for p in plan.pending)


def _reclaim_on_two_types(a100_own_ends_in_s: float, h100_own_ends_in_s: float):
    # _reclaim_cluster on a100 (n0, n1) and on h100 (h0, h1); the owner may run on either
    return (
        make_cluster().nodes(2).nodes(2, gpu_type="h100", prefix="h").gpu_type("h100", 80)
        .at(NOW)
        .quota("ml", "a100", 16, cohort="c").quota("cv", "a100", 0, cohort="c")
        .quota("ml", "h100", 16, cohort="c").quota("cv", "h100", 0, cohort="c")
        .running(*(
            run
            for t, node, ends in (("a100", "n", a100_own_ends_in_s), ("h100", "h", h100_own_ends_in_s))
            for run in (
                make_running(make_job(f"own-{t}").team("ml").types(t).gpus(8).limit(ends + 3600))
                .whole(f"{node}0").started(NOW - 3600),
                make_running(make_job(f"lent-{t}").team("cv").types(t).gpus(8).limit(86400))
                .whole(f"{node}1").started(NOW - 7200).borrowed(),
            )
        ))
        .pending(make_job("owner").team("ml").types("a100", "h100").gpus(8).limit(3600))
    )


@pytest.mark.parametrize(("a100_ends", "h100_ends"), [(600, 1200), (1200, 600)],
                         ids=["reserved-on-a100", "reserved-on-h100"])
def test_reclaim_that_waits_tells_the_figures_of_the_type_it_is_reserved_on(a100_ends, h100_ends):
    # Both types' reclaims wait (cheaper); the owner is reserved on the type that frees first.
    # Before, the note was the first admitted option's (a100): reserved on h0 from t=10600,
    # it read "its 8 GPUs until t=11200", a100's wait.
    plan = _reclaim_on_two_types(a100_ends, h100_ends).plan()
    [reservation] = plan.reservations
    assert reservation.placements[0].node == ("n0" if a100_ends < h100_ends else "h0")
    explanation = why(plan, "owner")
    assert explanation.eta == NOW + 600
    assert explanation.message.endswith(
        f"(about 1.27 GPU-hours: its 8 GPUs until t={NOW + 600:.0f}).")


@pytest.mark.parametrize(("a100_ends", "h100_ends", "told"), [(600, 1200, "a100"), (1200, 600, "h100")],
                         ids=["first-type-told", "other-type-told"])
def test_reclaim_that_waits_unreserved_tells_the_figures_of_the_type_it_is_told(a100_ends, h100_ends, told):
    # Backfill off: nothing is reserved, and the owner is told the earliest start over its
    # types. Until 7 Dec the note was added to its first type's words alone: told h100's start,
    # it said nothing of its lent quota.
    plan = _reclaim_on_two_types(a100_ends, h100_ends).plan(SchedulerConfig(backfill=False))
    assert plan.preemptions == () and plan.reservations == ()
    explanation = why(plan, "owner")
    assert explanation.eta == NOW + 600
    assert explanation.message.startswith(f"Needs 8 {told} GPUs; 0 are free.")
    assert (f"Its team's lent quota is not reclaimed: preempting 1 borrowing job would throw away "
            f"about 16.00 GPU-hours of their work, and waiting for capable GPUs to free by runtime "
            f"limits costs less (about 1.27 GPU-hours: its 8 GPUs until t={NOW + 600:.0f}).") in explanation.message


def _reclaim_with_a_movable_reservation():
    # ml's "owner" (8 GPUs) waits for n0 (4 busy, 4 free) or n1 (6 busy, 2 free), both free
    # by t=10600, rather than reclaim n2 from cv; it is reserved n0, whose job comes first
    # among those ending then (as test_engine_backfill's two_draining_nodes). ml's "small" (4 GPUs,
    # 2 h) fits only on n0's 4 free GPUs and would run past t=10600: it may start there
    # only by moving the reservation to n1, where the owner still starts at t=10600.
    return (
        make_cluster().nodes(3).at(NOW)
        .quota("ml", "a100", 24, cohort="c").quota("cv", "a100", 0, cohort="c")
        .running(
            make_running(make_job("ra").team("ml").gpus(4).limit(4200)).on("n0", 0, 1, 2, 3)
            .started(NOW - 3600),
            make_running(make_job("rb").team("ml").gpus(4).limit(4200)).on("n1", 0, 1, 2, 3)
            .started(NOW - 3600),
            make_running(make_job("rc").team("ml").gpus(2).limit(4200)).on("n1", 4, 5)
            .started(NOW - 3600),
            make_running(make_job("lent").team("cv").gpus(8).limit(86400)).whole("n2")
            .started(NOW - 7200).borrowed(),
        )
        .pending(make_job("owner").team("ml").gpus(8).limit(3600).submitted(0),
                 make_job("small").team("ml").gpus(4).limit(7200).submitted(1))
    )


@pytest.mark.parametrize(("moves", "reserved_on"), [(None, "n1"), (0, "n0")],
                         ids=["reservation-moved", "no-moves"])
def test_reclaim_that_waits_keeps_saying_why_when_its_reservation_moves(moves, reserved_on):
    # The note was added when the owner was decided; "small" moving its reservation to n1
    # later in the cycle worded its reason afresh, and the note was lost: it read only "Holds a
    # reservation ... from t=10600", its lent GPUs in cv's hands and no word of why.
    config = SchedulerConfig() if moves is None else SchedulerConfig(max_reservation_moves=moves)
    plan = _reclaim_with_a_movable_reservation().plan(config)
    [reservation] = plan.reservations
    assert [p.node for p in reservation.placements] == [reserved_on]
    assert ("small" in bound(plan)) is (moves is None)
    explanation = why(plan, "owner")
    assert explanation.eta == NOW + 600
    assert explanation.message.startswith("Holds a reservation for 8 GPUs on 1 node from t=10600")
    assert explanation.message.endswith(
        f"Its team's lent quota is not reclaimed: preempting 1 borrowing job would throw away "
        f"about 16.00 GPU-hours of their work, and waiting for capable GPUs to free by runtime "
        f"limits costs less (about 1.27 GPU-hours: its 8 GPUs until t={NOW + 600:.0f}).")


def test_reclaim_counts_the_wait_for_the_cpus_beside_the_gpus():
    # n0's 6 GPUs under ml's "own" free in 10 min, but its "hog" (2 GPUs) holds 60 of its 64
    # CPUs for 10 h, and the owner asks 48: it can only start on n0 in 10 h (6 GPUs x 10 h =
    # 60 GPU-hours of waiting), against 16 GPU-hours lost: reclaim. Until 7 Dec the wait was
    # counted by the GPUs alone: it waited, told "its 6 GPUs until t=10600".
    plan = (
        make_cluster().nodes(2).at(NOW)
        .quota("ml", "a100", 16, cohort="c").quota("cv", "a100", 0, cohort="c")
        .running(
            make_running(make_job("own").team("ml").gpus(6).limit(4200)).on("n0", *range(6))
            .started(NOW - 3600),
            make_running(make_job("hog").team("ml").gpus(2).cpus_per_gpu(30).limit(46000))
            .on("n0", 6, 7).started(NOW - 10000),
            make_running(make_job("lent").team("cv").gpus(8).limit(86400)).whole("n1")
            .started(NOW - 7200).borrowed(),
        )
        .pending(make_job("owner").team("ml").gpus(6).cpus_per_gpu(8).limit(3600))
        .plan()
    )
    assert [(p.job_id, p.reason) for p in plan.preemptions] == [("lent", PreemptionReason.RECLAIM_BORROWED)]
    assert "not reclaimed" not in why(plan, "owner").message


def test_reclaim_still_preempts_when_waiting_would_cost_more():
    # n0 frees only in 10 h (80 GPU-hours of waiting) against 16 GPU-hours lost: reclaim.
    plan = _reclaim_cluster(other_ends_in_s=36000, lent_ran_s=7200).plan()
    [p] = plan.preemptions
    assert (p.job_id, p.reason) == ("lent", PreemptionReason.RECLAIM_BORROWED)
    # and a cheap victim (ran 5 min) is reclaimed even when capacity frees in 10 min
    plan = _reclaim_cluster(other_ends_in_s=600, lent_ran_s=300).plan()
    assert [p.job_id for p in plan.preemptions] == ["lent"]


def test_reclaim_preempts_only_victims_on_the_nodes_it_lands_on():
    # 24 borrowed one-GPU jobs on three nodes, cheapest first in an order that alternates
    # nodes: the greedy pass removes 22 before a node is whole, more than the one-by-one
    # reprieve can re-check; only the 8 on the chosen node may go.
    running = []
    for k in range(24):
        node = f"n{k % 3}"
        running.append(
            make_running(make_job(f"b{k:02d}").team("cv").gpus(1)).on(node, k // 3)
            .started(NOW - 60 * (k + 1)).borrowed()
        )
    plan = (
        make_cluster().nodes(3).at(NOW)
        .quota("ml", "a100", 24, cohort="c").quota("cv", "a100", 0, cohort="c")
        .running(*running)
        .pending(make_job("owner").team("ml").gpus(8))
        .plan(SchedulerConfig(max_preemptions_per_cycle=64))
    )
    victims = preempted(plan)
    assert len(victims) == 8
    nodes = {next(p.node for r in running if r.obj().spec.id == v for p in r.obj().placements)
             for v in victims}
    assert len(nodes) == 1


def test_protection_is_named_only_when_a_protected_job_stands_in_the_way():
    # The victim chooser ranks fleet-wide: the cheap one-GPU jobs a0 and a1 (on nodes the
    # high-priority jobs keep) come first and use up the cycle's budget of 2 steps, so the
    # search finds nothing. A search ignoring protection walks on and needs only "big" (cheaper
    # than "young": checkpointed a minute ago), which is not protected. "young", inside its
    # minimum runtime, is no part of that way in, so the job must not be told that a
    # protected job blocks it.
    cluster = (
        make_cluster().nodes(4, gpus=4).at(NOW)
        .priority("low", 10, min_runtime_s=3600)
        .running(
            make_running(make_job("a0").priority("low").gpus(1)).on("n0", 0).started(0)
            .checkpointed(NOW - 1),
            make_running(make_job("h0").priority("high").gpus(3)).on("n0", 1, 2, 3).started(0),
            make_running(make_job("a1").priority("low").gpus(1)).on("n1", 0).started(0)
            .checkpointed(NOW - 2),
            make_running(make_job("h1").priority("high").gpus(3)).on("n1", 1, 2, 3).started(0),
            make_running(make_job("big").priority("low").gpus(4)).whole("n2", width=4)
            .started(0).checkpointed(NOW - 60),
        )
        .pending(make_job("hi").priority("high").gpus(4))
    )
    config = SchedulerConfig(max_preemptions_per_cycle=2)
    young = make_running(make_job("young").priority("low").gpus(4)).whole("n3", width=4) \
        .started(NOW - 600)
    plan = cluster.running(young).plan(config)
    assert plan.preemptions == ()
    explanation = why(plan, "hi")
    assert explanation.code is not ReasonCode.MINIMUM_RUNTIME_PROTECTED
    assert "young" not in explanation.message and "minimum runtime" not in explanation.message


def test_protection_named_is_that_of_the_victims_a_way_in_needs():
    # Only n3 can host the job: "young" (protected) must go, and its protection is what is
    # named; "old", protected as well but on a node the way in does not use, is not.
    plan = (
        make_cluster().nodes(2, gpus=4).at(NOW)
        .node("n3", gpus=4, gpu_type="h100")
        .priority("low", 10, min_runtime_s=3600)
        .running(
            make_running(make_job("old").priority("low").gpus(4)).whole("n0", width=4)
            .started(NOW - 900),
            make_running(make_job("h1").priority("high").gpus(4)).whole("n1", width=4),
            make_running(make_job("young").priority("low").gpus(4)).whole("n3", width=4)
            .started(NOW - 600),
        )
        .pending(make_job("hi").priority("high").gpus(4).types("h100"))
        .plan()
    )
    explanation = why(plan, "hi")
    assert explanation.code is ReasonCode.MINIMUM_RUNTIME_PROTECTED
    assert "job young has run 600 s of its 3600 s minimum runtime" in explanation.message
    assert "job old" not in explanation.message


@pytest.mark.parametrize(
    ("klass", "preempted_times"),
    [(dict(preemptible=False, preemption_budget=0), 0), (dict(preemption_budget=2), 2)],
    ids=["a-class-that-allows-no-preemption", "a-spent-budget"],
)
def test_a_protected_borrower_is_not_named_when_its_reclaim_would_wait_anyway(klass,
                                                                              preempted_times):
    # "lent" (of the higher class serving) borrows n1 and is protected by its budget; the
    # owner's 8 GPUs free on n0 in 10 min, so reclaiming "lent" (16 GPU-hours of work lost)
    # would not be done even if it were allowed: its budget is not what keeps the owner out.
    # It read "the candidates are protected: job lent is of class serving, whose preemption
    # budget of 0 allows none" (PreemptionBudgetExhausted), a job it would not have reclaimed
    # anyway, and held no reservation. Now it waits as an owner that does not reclaim: the
    # head's reservation on n0, and why its lent quota is not reclaimed.
    plan = _reclaim_cluster(other_ends_in_s=600, lent_ran_s=7200, lent_class="serving",
                            lent_preempted=preempted_times).priority("serving", 5000, **klass).plan()
    owner = why(plan, "owner")
    assert plan.preemptions == ()
    assert owner.code is ReasonCode.WAITING_FOR_RESERVATION
    assert [(r.job_id, r.start_at) for r in plan.reservations] == [("owner", NOW + 600)]
    assert "protected" not in owner.message and "lent is of class" not in owner.message
    assert "Its team's lent quota is not reclaimed" in owner.message
    assert owner.eta == NOW + 600
