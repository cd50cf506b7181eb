"""A job blocked only by a victim that has spent its preemption budget is told when the budget
window lets the victim go (``JobSpec.preemption_budget_frees_at``), and that time, plus the
victim's grace period, is its ETA, as for a victim inside its minimum runtime. A snapshot
that does not know the time (``None``), or has it in the past while still counting the
victim over its budget, gives none, as before."""

from __future__ import annotations

import dataclasses

from engine_builders import make_cluster, make_job, make_running, preempted, why

from scheduler_core import ReasonCode, SchedulerConfig, schedule

NO_BACKFILL = SchedulerConfig(backfill=False)


def a_victim_that_spent_its_budget(*, times: int = 1, budget: int = 1,
                                   frees_at: float | None = 5000.0, min_runtime_s: int = 0,
                                   started: float = 600.0):
    """n0: v (class low: grace 30 s, ``budget`` preemptions a day) holds all 8 GPUs until its
    runtime limit at t=200600; h (high, 8 GPUs) waits for them at t=1000."""
    return (
        make_cluster().nodes(1).at(1000)
        .priority("low", 10, grace_period_s=30, preemption_budget=budget,
                  min_runtime_s=min_runtime_s)
        .running(make_running(make_job("v").priority("low").gpus(8).limit(200000)
                              .preempted_times(times, budget_frees_at=frees_at))
                 .whole("n0").started(started))
        .pending(make_job("h").priority("high").gpus(8).limit(3600))
    )


def test_a_victims_spent_budget_says_when_it_may_be_preempted_again_and_sets_the_eta():
    h = why(a_victim_that_spent_its_budget().plan(NO_BACKFILL), "h")
    assert h.code is ReasonCode.PREEMPTION_BUDGET_EXHAUSTED
    assert h.message == (
        "It could start by preemption, but the candidate is protected: job v was preempted "
        "1 time in the last 24 h, its budget, and may be preempted again from t=5000; it may "
        "preempt it from t=5000 and start once it has stopped, by t=5030.")
    assert h.eta == 5030.0


def test_the_time_a_spent_budget_lifts_is_kept_when_the_window_moves_on():
    snap = a_victim_that_spent_its_budget().snapshot()
    assert why(schedule(snap, NO_BACKFILL), "h").eta == 5030.0
    # at t=5000 the snapshot no longer counts v's preemption: h preempts it and starts once
    # it has stopped, at the time it was told
    (v,) = snap.running
    later = dataclasses.replace(snap, now=5000.0, running=(dataclasses.replace(
        v, spec=dataclasses.replace(v.spec, preemptions_in_window=0,
                                    preemption_budget_frees_at=None)),))
    plan = schedule(later, NO_BACKFILL)
    assert preempted(plan) == ["v"]
    assert why(plan, "h").code is ReasonCode.WAITING_FOR_PREEMPTION
    assert why(plan, "h").eta == 5030.0


def test_a_spent_budget_without_a_time_gives_none():
    for frees_at in (None, 900.0):  # unknown, or past while the count still protects v
        h = why(a_victim_that_spent_its_budget(frees_at=frees_at).plan(NO_BACKFILL), "h")
        assert h.code is ReasonCode.PREEMPTION_BUDGET_EXHAUSTED
        assert h.message.startswith(
            "It could start by preemption, but the candidate is protected: job v was "
            "preempted 1 time in the last 24 h, its budget.")
        assert "may be preempted again" not in h.message
        assert "it may preempt it from" not in h.message
        assert h.eta == 200600.0  # v's runtime limit, as before


def test_a_victim_over_its_budget_says_so():
    h = why(a_victim_that_spent_its_budget(times=4, budget=3).plan(NO_BACKFILL), "h")
    assert ("job v was preempted 4 times in the last 24 h, over its budget of 3, and may be "
            "preempted again from t=5000") in h.message


def test_a_victim_inside_its_minimum_runtime_and_over_its_budget_lifts_at_the_later():
    # v's minimum runtime ends at t=2600, its budget at t=5000: h may preempt it from t=5000
    # (before, it was told t=2600, when the budget still protected v)
    h = why(a_victim_that_spent_its_budget(min_runtime_s=2000).plan(NO_BACKFILL), "h")
    assert ("job v has run 400 s of its 2000 s minimum runtime and was preempted 1 time in the "
            "last 24 h, its budget, and may be preempted again from t=5000; it may preempt it "
            "from t=5000") in h.message
    assert h.eta == 5030.0


def test_a_victims_budget_lifting_after_its_gpus_free_keeps_the_earlier_time():
    # v's runtime limit ends it at t=3600, before its budget frees at t=5000
    snap = a_victim_that_spent_its_budget().snapshot()
    (v,) = snap.running
    short = dataclasses.replace(v, spec=dataclasses.replace(v.spec, runtime_limit_s=3000.0))
    h = why(schedule(dataclasses.replace(snap, running=(short,)), NO_BACKFILL), "h")
    assert h.code is ReasonCode.PREEMPTION_BUDGET_EXHAUSTED
    assert "may be preempted again from t=5000" in h.message
    assert h.eta == 3600.0


def test_a_job_over_quota_that_may_preempt_a_victim_with_a_spent_budget_is_told_when():
    # team ml (nominal 8) runs v on all 8; its high job h is over quota until it preempts v
    # (its own team's lower-priority job), which it may from t=5000
    plan = (
        a_victim_that_spent_its_budget()
        .quota("ml", "a100", 8, borrowing_limit=0)
        .plan(NO_BACKFILL)
    )
    h = why(plan, "h")
    assert h.code is ReasonCode.QUOTA_EXCEEDED
    assert ("It could also start by preemption, but the candidate is protected: job v was "
            "preempted 1 time in the last 24 h, its budget, and may be preempted again from "
            "t=5000; it may preempt it from t=5000 and start once it has stopped, by "
            "t=5030.") in h.message
    assert h.eta == 5030.0


def _production_borrower_and_owner(preempted: int = 0):
    """The demo's production class (not preemptible by priority, budget 0): its job p runs on
    quota borrowed from ml, whose job h wants it back."""
    p = make_job("p").team("sv").priority("production").gpus(8)
    if preempted:
        p = p.preempted_times(preempted, budget_frees_at=5000.0)
    return (
        make_cluster().nodes(1).at(1000)
        .priority("production", 1000, preemptible=False, preemption_budget=0)
        .quota("ml", "a100", 8, cohort="lab").quota("sv", "a100", 0, cohort="lab")
        .running(make_running(p).whole("n0").started(0).borrowed())
        .pending(make_job("h").team("ml").gpus(8).limit(3600))
        .plan(NO_BACKFILL)
    )


def _told_class_allows_none(plan) -> None:
    h = why(plan, "h")
    assert h.code is ReasonCode.PREEMPTION_BUDGET_EXHAUSTED
    assert h.message == (
        "It could start by preemption, but the candidate is protected: job p is of class "
        "production, whose preemption budget of 0 allows none.")
    assert h.eta is None


def test_a_class_whose_budget_allows_no_preemption_is_named_as_such():
    # not even an owner's reclaim stops its borrowed jobs; "was preempted 0 times in the
    # last 24 h, its budget" read as if the job had used something up
    _told_class_allows_none(_production_borrower_and_owner())


def test_a_class_whose_budget_allows_no_preemption_never_lets_its_job_go():
    # p was reclaimed once inside the window (before its class's budget was lowered to 0),
    # so the snapshot says when that preemption leaves the window, t=5000; but a budget of 0
    # protects p then too: h was told "it may preempt them from t=5000 and start once they
    # have stopped, by t=5030", with that ETA, a start no cycle would give it
    _told_class_allows_none(_production_borrower_and_owner(preempted=1))
