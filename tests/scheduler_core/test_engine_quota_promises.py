"""Rules 4 and 6 together: a job promised GPUs at a later start (the head's EASY reservation,
a nominated preemptor) is promised its team's quota then too. A later job of its team may
start now only if its quota still admits the promised job at its start: the job ends before
then by its runtime limit, or the quota has room for both. Other teams are not held back."""

from __future__ import annotations

import pytest
from engine_builders import bound, make_cluster, make_job, make_running, why
from test_engine_explain_eta import evolve

from scheduler_core import ReasonCode, SchedulerConfig

NOW = 10_000.0


def head_within_its_quota(ml_quota: int = 8):
    """Two nodes held by team cv: n0 whole until t=3600, n1's GPUs 0-3 until t=7200. Team ml
    (quota ``ml_quota``, nothing running) has room for an 8-GPU head now: the GPUs are what
    it waits for, n0 from t=3600."""
    return _cv_holds_the_gpus(make_cluster().nodes(2).at(0).quota("ml", "a100", ml_quota))


def _cv_holds_the_gpus(cluster):
    """Team cv (quota 12) holds n0 whole until t=3600 and n1's GPUs 0-3 until t=7200."""
    return cluster.quota("cv", "a100", 12).running(
        make_running(make_job("r0").team("cv").gpus(8).limit(3600)).whole("n0").started(0),
        make_running(make_job("r1").team("cv").gpus(4).limit(7200)).on("n1", 0, 1, 2, 3).started(0))


def _waits_for_big(plan, job_id: str, message: str) -> None:
    """``job_id`` waits for big (reserved from t=3600, 600 s), told ``message``."""
    explanation = why(plan, job_id)
    assert explanation.code is ReasonCode.BEHIND_HIGHER_PRIORITY
    assert explanation.message == message
    # its quota is free again once big has run, not when big starts
    assert explanation.eta == 4200.0
    assert explanation.would_start_if.startswith("job big has run and given the quota back")


@pytest.mark.parametrize(
    ("limit", "starts"),
    [(3600, True), (3601, False), (None, False)],
    ids=["ends-by-the-reservation", "would-hold-quota-past-it", "no-runtime-limit"],
)
def test_a_later_job_of_the_heads_team_leaves_the_quota_its_reservation_needs(limit, starts):
    # small (4) fits on n1's free GPUs, which big does not need, and within ml's quota now
    # (0 + 4 <= 8); but still running at t=3600 it would leave ml 4 + 8 > 8 for big.
    plan = head_within_its_quota().pending(
        make_job("big").team("ml").gpus(8).limit(600).submitted(0),
        make_job("small").team("ml").gpus(4).limit(limit).submitted(1),
    ).plan()
    [reservation] = plan.reservations
    assert (reservation.job_id, reservation.start_at) == ("big", 3600.0)
    assert ("small" in bound(plan)) == starts
    if not starts:
        _waits_for_big(plan, "small", (
            "Team ml's quota must have room for job big when it starts at t=3600; this job "
            "would still hold a100 GPUs then, so starting now would delay it. Estimated start "
            "t=4200, when job big has run (by its runtime limit)."))


def test_a_later_job_of_the_heads_team_starts_when_the_quota_holds_both():
    plan = head_within_its_quota(ml_quota=12).pending(
        make_job("big").team("ml").gpus(8).limit(600).submitted(0),
        make_job("small").team("ml").gpus(4).limit(None).submitted(1),
    ).plan()
    assert [r.job_id for r in plan.reservations] == ["big"]
    assert "small" in bound(plan)


def test_a_promise_is_charged_by_each_start_of_its_team():
    # quota 12: room for big and 4 more past t=3600; the first 2-GPU job takes 2 of them,
    # the second the other 2, the third would take big's.
    plan = head_within_its_quota(ml_quota=12).pending(
        make_job("big").team("ml").gpus(8).limit(600).submitted(0),
        *(make_job(f"s{k}").team("ml").gpus(2).limit(None).submitted(1 + k) for k in range(2)),
    ).plan()
    assert {"s0", "s1"} <= set(bound(plan))
    plan = head_within_its_quota(ml_quota=10).pending(
        make_job("big").team("ml").gpus(8).limit(600).submitted(0),
        *(make_job(f"s{k}").team("ml").gpus(2).limit(None).submitted(1 + k) for k in range(2)),
    ).plan()
    assert "s0" in bound(plan) and "s1" not in bound(plan)
    assert why(plan, "s1").code is ReasonCode.BEHIND_HIGHER_PRIORITY


def test_other_teams_start_beside_a_head_within_its_quota():
    plan = head_within_its_quota().quota("nlp", "a100", 4).pending(
        make_job("big").team("ml").gpus(8).limit(600).submitted(0),
        make_job("other").team("nlp").gpus(4).limit(None).submitted(1),
    ).plan()
    assert [r.job_id for r in plan.reservations] == ["big"]
    assert "other" in bound(plan)


def preemptor_and_its_team(cohort: str | None = "lab"):
    """Teams ml and cv share cohort lab (or, ``cohort=None``, none), 8 a100 GPUs of quota
    each. cv runs 12: lo0 on n0 (8, borrowed) and lo1 on n1's GPUs 0-3. ml's urgent (8, within
    ml's 8) reclaims ml's lent quota (cv's excess) by preempting lo0; n1's free 4 GPUs fit
    another job of ml now."""
    return (
        make_cluster().nodes(2).at(NOW)
        .quota("ml", "a100", 8, cohort=cohort).quota("cv", "a100", 8, cohort=cohort)
        .running(make_running(make_job("lo0").team("cv").gpus(8)).whole("n0").started(0)
                 .borrowed(),
                 make_running(make_job("lo1").team("cv").gpus(4)).on("n1", 0, 1, 2, 3)
                 .started(0))
        .pending(make_job("urgent").team("ml").gpus(8).submitted(0))
    )


def test_a_later_job_of_a_preemptors_team_leaves_the_quota_it_preempts_for():
    # small fits ml's quota now (0 + 4 <= 8) but not beside urgent once lo0 has stopped (in
    # no cohort, ml borrows nothing)
    plan = preemptor_and_its_team(cohort=None).pending(
        make_job("small").team("ml").gpus(4).limit(None).submitted(1)).plan()
    assert [p.job_id for p in plan.preemptions] == ["lo0"]
    assert why(plan, "urgent").code is ReasonCode.WAITING_FOR_PREEMPTION
    assert "small" not in bound(plan)
    explanation = why(plan, "small")
    assert explanation.code is ReasonCode.BEHIND_HIGHER_PRIORITY
    assert "room for job urgent when it starts" in explanation.message
    # urgent has no runtime limit: its GPUs and quota are estimated back after the default
    # runtime estimate (4 h), as the release timeline estimates them
    assert explanation.eta == NOW + 30 + 4 * 3600  # urgent starts once lo0 has stopped (30 s)
    assert "if it runs the 4 h assumed for a job without a runtime limit" in explanation.message


def test_no_second_preemption_for_a_job_its_quota_refuses_beside_a_preemptor():
    # with n1 full, small finds no free GPUs and could reclaim lo1's; beside urgent it would
    # leave ml's quota 8 + 4 > 8, so lo1 would stop for nothing
    plan = (
        preemptor_and_its_team()
        .running(make_running(make_job("lo2").team("cv").gpus(4)).on("n1", 4, 5, 6, 7)
                 .started(0).borrowed())
        .pending(make_job("small").team("ml").gpus(4).limit(None).submitted(1))
        .plan()
    )
    assert [p.job_id for p in plan.preemptions] == ["lo0"]
    assert why(plan, "small").code is not ReasonCode.WAITING_FOR_PREEMPTION


def test_a_preemptors_own_victims_give_its_team_quota_back():
    # ml (quota 12) preempts its own low-priority lo0 for urgent: at urgent's start ml holds
    # 8 + 4, within 12, so small starts now beside it
    plan = (
        make_cluster().nodes(2).at(NOW).quota("ml", "a100", 12).quota("cv", "a100", 12)
        .running(make_running(make_job("lo0").team("ml").priority("low").gpus(8)).whole("n0")
                 .started(0),
                 make_running(make_job("lo1").team("cv").priority("low").gpus(4))
                 .on("n1", 0, 1, 2, 3).started(0))
        .pending(make_job("urgent").team("ml").priority("high").gpus(8).submitted(0),
                 make_job("small").team("ml").priority("high").gpus(4).limit(None).submitted(1))
        .plan()
    )
    assert [p.job_id for p in plan.preemptions] == ["lo0"]
    assert "small" in bound(plan)


def test_a_head_over_its_quota_waits_for_the_quota_promised_to_its_team_ahead_of_it():
    # r passed its runtime limit and is stopped this cycle: first (2 GPUs) claims its GPUs
    # and its team's whole quota of 2 from t=1930. second (1 GPU) is over quota until r is
    # gone, but the quota r gives back is first's: before, second was reserved GPUs from
    # t=1930 "when team B's running jobs have released the 1 GPU its quota lacks", and the
    # two promises would have held 3 of 2.
    plan = (
        make_cluster().nodes(2).at(1900).quota("B", "a100", 2)
        .running(make_running(make_job("r").team("B").gpus(2).limit(600)).on("n0", 0, 1)
                 .started(1000))
        .pending(make_job("first").team("B").gpus(2).submitted(0),
                 make_job("second").team("B").gpus(1).submitted(1))
        .plan()
    )
    assert why(plan, "first").code is ReasonCode.WAITING_FOR_PREEMPTION
    assert [r.job_id for r in plan.reservations] == ["first"]
    assert why(plan, "second").code is ReasonCode.QUOTA_EXCEEDED


def test_a_stopping_jobs_quota_is_promised_once():
    # r (4 GPUs) passed its runtime limit and is stopped: team A's quota of 7 (3 held by keep)
    # has room again once it is gone. one (1 GPU, on a free GPU) is promised 1 of it; four would
    # claim r's 4 GPUs, and r's quota counted a second time let both be promised: 3 + 1 + 4 of 7.
    plan = (
        make_cluster().nodes(2, gpus=4).at(1900).quota("A", "a100", 7)
        .running(make_running(make_job("keep").team("A").gpus(3)).on("n1", 0, 1, 2).started(1000),
                 make_running(make_job("r").team("A").gpus(4).limit(600)).on("n0", 0, 1, 2, 3)
                 .started(1000))
        .pending(make_job("one").team("A").gpus(1).submitted(0),
                 make_job("four").team("A").gpus(4).submitted(1))
        .plan()
    )
    assert [r.job_id for r in plan.reservations] == ["one"]
    one = why(plan, "one")
    assert one.code is ReasonCode.WAITING_FOR_PREEMPTION
    # its GPU is free: it waits for the quota (it read "Waits for jobs , already stopping")
    assert one.message == "Waits for its team's stopping jobs to give back the quota it needs, by t=1900."
    assert why(plan, "four").code is not ReasonCode.WAITING_FOR_PREEMPTION


def test_no_reservation_on_quota_promised_to_a_job_of_the_team_ahead():
    # c (team C) passed its runtime limit and is stopped: b1 claims its 4 GPUs for team B's
    # whole quota of 3. b2 (3 more) is admitted by B's quota now, as nothing of B runs; it was
    # given the head's reservation from when GPUs free up, the same 3 GPUs of quota as b1's.
    plan = (
        make_cluster().nodes(1).at(1900).quota("B", "a100", 3).quota("C", "a100", 4)
        .quota("A", "a100", 3)
        .running(make_running(make_job("c").team("C").gpus(4).limit(600)).on("n0", 0, 1, 2, 3)
                 .started(1000),
                 make_running(make_job("a").team("A").gpus(3).limit(600)).on("n0", 4, 5, 6)
                 .started(1800))
        .pending(make_job("b1").team("B").gpus(3).submitted(0),
                 make_job("b2").team("B").gpus(3).submitted(1))
        .plan()
    )
    assert why(plan, "b1").code is ReasonCode.WAITING_FOR_PREEMPTION
    assert [r.job_id for r in plan.reservations] == ["b1"]
    assert why(plan, "b2").code is not ReasonCode.WAITING_FOR_RESERVATION


# ------------------------------------------------------------------ promises of a cohort


def head_borrowing_from_its_cohort(lent: int = 4):
    """Team cv holds n0 whole until t=3600 and n1's GPUs 0-3 until t=7200. In cohort lab, ml
    (nominal 4) needs ``lent`` GPUs that idle (nominal ``lent``, nothing running) lends for an
    8-GPU head: its quota admits it now, the GPUs come at t=3600 (n0). nlp (nominal 0)
    borrows whatever it runs."""
    return _cv_holds_the_gpus(
        make_cluster().nodes(2).at(0)
        .quota("ml", "a100", 4, cohort="lab").quota("idle", "a100", lent, cohort="lab")
        .quota("nlp", "a100", 0, cohort="lab"))


@pytest.mark.parametrize(
    ("limit", "starts"),
    [(3600, True), (3601, False), (None, False)],
    ids=["ends-by-the-reservation", "would-borrow-past-it", "no-runtime-limit"],
)
def test_a_cohort_mate_borrowing_past_the_heads_start_leaves_what_the_head_borrows(limit, starts):
    # other (nlp, 4) fits on n1's free GPUs and borrows the 4 idle lends; big needs those 4
    # at t=3600. Before 5 Dec other started, and at t=3600 the quota refused big (cohort lab
    # lent nothing more): its reservation slid while a later job of its cohort ran.
    plan = head_borrowing_from_its_cohort().pending(
        make_job("big").team("ml").gpus(8).limit(600).submitted(0),
        make_job("other").team("nlp").gpus(4).limit(limit).submitted(1),
    ).plan()
    [reservation] = plan.reservations
    assert (reservation.job_id, reservation.start_at) == ("big", 3600.0)
    assert ("other" in bound(plan)) == starts
    if not starts:
        _waits_for_big(plan, "other", (
            "Job big of team ml borrows a100 GPUs from cohort lab when it starts at t=3600; "
            "this job would still borrow what the cohort lends then, so starting now would "
            "delay it. Estimated start t=4200, when job big has run (by its runtime limit)."))


def test_a_cohort_mate_borrows_what_the_cohort_lends_beside_the_heads_share():
    # idle lends 8: big borrows 4 of them at t=3600, so nlp may borrow the other 4 for as
    # long as it likes, and no more
    plan = head_borrowing_from_its_cohort(lent=8).pending(
        make_job("big").team("ml").gpus(8).limit(600).submitted(0),
        make_job("a").team("nlp").gpus(2).limit(None).submitted(1),
        make_job("b").team("nlp").gpus(2).limit(None).submitted(2),
    ).plan()
    assert {"a", "b"} <= set(bound(plan))
    plan = head_borrowing_from_its_cohort(lent=7).pending(
        make_job("big").team("ml").gpus(8).limit(600).submitted(0),
        make_job("a").team("nlp").gpus(2).limit(None).submitted(1),
        make_job("b").team("nlp").gpus(2).limit(None).submitted(2),
    ).plan()
    assert "a" in bound(plan) and "b" not in bound(plan)
    assert why(plan, "b").code is ReasonCode.BEHIND_HIGHER_PRIORITY


def test_a_lender_within_its_nominal_quota_is_not_held_back_by_a_borrowers_promise():
    # idle takes back the quota it lends: its own, whatever big was promised (big then
    # waits for the quota at t=3600, as any borrower whose lender needs its GPUs back)
    plan = head_borrowing_from_its_cohort().pending(
        make_job("big").team("ml").gpus(8).limit(600).submitted(0),
        make_job("mine").team("idle").gpus(4).limit(None).submitted(1),
    ).plan()
    assert "mine" in bound(plan)


def test_borrowers_preempted_for_a_promise_give_back_what_the_next_one_borrows():
    # idle lends 16, all borrowed by team bor's low-priority v1 and v2 (a node each). nlp's
    # p1 and ml's p2 (8 each, high priority) each preempt one of them, and each is promised
    # a start at t=NOW+30 borrowing 8. p1's promise must count v1, and p2's search v2, as
    # stopped by then: counting them as still borrowing, p2 read "can borrow 0 more".
    plan = (
        make_cluster().nodes(3).at(NOW)
        .quota("idle", "a100", 16, cohort="lab").quota("bor", "a100", 0, cohort="lab")
        .quota("nlp", "a100", 0, cohort="lab").quota("ml", "a100", 0, cohort="lab")
        .quota("third", "a100", 0, cohort="lab").quota("cv", "a100", 6)
        .running(make_running(make_job("v1").team("bor").priority("low").gpus(8)).whole("n0")
                 .started(0).borrowed(),
                 make_running(make_job("v2").team("bor").priority("low").gpus(8)).whole("n1")
                 .started(0).borrowed(),
                 make_running(make_job("keep").team("cv").gpus(6))
                 .on("n2", 0, 1, 2, 3, 4, 5).started(0))
        .pending(make_job("p1").team("nlp").priority("high").gpus(8).limit(3600).submitted(0),
                 make_job("p2").team("ml").priority("high").gpus(8).limit(3600).submitted(1),
                 make_job("c").team("third").gpus(2).limit(None).submitted(2))
        .plan()
    )
    assert sorted(p.job_id for p in plan.preemptions) == ["v1", "v2"]
    assert sorted(r.job_id for r in plan.reservations) == ["p1", "p2"]
    assert why(plan, "p2").code is ReasonCode.WAITING_FOR_PREEMPTION
    # and c, which would borrow 2 more, is refused by the quota now (bor still holds 16)
    assert why(plan, "c").code is ReasonCode.QUOTA_EXCEEDED


def test_two_teams_promised_at_once_share_what_their_cohort_lends():
    # idle lends 16 to cohort lab. nlp's p1 and ml's p2 (8 each, high priority) each preempt
    # a node of team cv's borrowed low-priority work (cv is in no cohort), so both are
    # promised a start at t=NOW+30 borrowing 8 from lab: all it lends. c (team third of lab)
    # finds n2's 2 free GPUs and would borrow 2 more past that start; each promise measured
    # alone saw 8 of the 16 lent left for it, and c started.
    plan = (
        make_cluster().nodes(3).at(NOW)
        .quota("idle", "a100", 16, cohort="lab").quota("nlp", "a100", 0, cohort="lab")
        .quota("ml", "a100", 0, cohort="lab").quota("third", "a100", 0, cohort="lab")
        .quota("cv", "a100", 0).quota("own", "a100", 6)
        .running(make_running(make_job("v1").team("cv").priority("low").gpus(8)).whole("n0")
                 .started(0).borrowed(),
                 make_running(make_job("v2").team("cv").priority("low").gpus(8)).whole("n1")
                 .started(0).borrowed(),
                 make_running(make_job("keep").team("own").gpus(6))
                 .on("n2", 0, 1, 2, 3, 4, 5).started(0))
        .pending(make_job("p1").team("nlp").priority("high").gpus(8).limit(3600).submitted(0),
                 make_job("p2").team("ml").priority("high").gpus(8).limit(3600).submitted(1),
                 make_job("c").team("third").gpus(2).limit(None).submitted(2))
        .plan()
    )
    assert sorted(p.job_id for p in plan.preemptions) == ["v1", "v2"]
    assert sorted(r.job_id for r in plan.reservations) == ["p1", "p2"]
    assert "c" not in bound(plan)
    explanation = why(plan, "c")
    assert explanation.code is ReasonCode.BEHIND_HIGHER_PRIORITY
    assert "from cohort lab when it starts at t=10030" in explanation.message


def test_no_head_reservation_on_what_its_cohort_lends_to_jobs_promised_before_it():
    # nlp's p1 and ml's p2 are promised all 16 GPUs idle lends from t=10030 to t=13630; h
    # (team third, borrowing its 8) was reserved n2 from t=12000, when the cohort would lend
    # it nothing: a reservation no cycle could keep, draining n2 for nothing
    plan = (
        make_cluster().nodes(3).at(NOW)
        .quota("idle", "a100", 16, cohort="lab").quota("nlp", "a100", 0, cohort="lab")
        .quota("ml", "a100", 0, cohort="lab").quota("third", "a100", 0, cohort="lab")
        .quota("cv", "a100", 0).quota("own", "a100", 8)
        .running(make_running(make_job("v1").team("cv").priority("low").gpus(8)).whole("n0")
                 .started(0).borrowed(),
                 make_running(make_job("v2").team("cv").priority("low").gpus(8)).whole("n1")
                 .started(0).borrowed(),
                 make_running(make_job("keep").team("own").gpus(8).limit(12000)).whole("n2")
                 .started(0))
        .pending(make_job("p1").team("nlp").priority("high").gpus(8).limit(3600).submitted(0),
                 make_job("p2").team("ml").priority("high").gpus(8).limit(3600).submitted(1),
                 make_job("h").team("third").gpus(8).limit(600).submitted(2))
        .plan()
    )
    assert sorted(r.job_id for r in plan.reservations) == ["p1", "p2"]
    assert "h" not in bound(plan)
    # and it starts no earlier than when the cohort lends it 8 again: it was told t=12000
    # (n2 frees), the promised jobs' whole run too early
    explanation = why(plan, "h")
    assert explanation.eta == 13630.0
    assert explanation.message == (
        "Needs 8 a100 GPUs; 0 are free. Estimated start t=13630: what cohort lab lends of a100 "
        "GPUs is promised to 2 jobs of other teams that start before it, and this job can "
        "borrow enough of it only once job p1 of team nlp (from t=10030) has run (by its "
        "runtime limit).")


def _head_beside_a_promised_borrower(promised_limit: float | None, keep_limit: float, *,
                                     typed: bool = False):
    """Cohort lab: team idle lends its 16, nlp and third borrow. nlp's high-priority p1
    preempts team cv's borrowed v1 (n0) and is promised a start at t=10030 borrowing 8;
    third's h (16 GPUs, two nodes) waits for n1 and n2, held by team own until
    ``keep_limit``, and is refused a reservation: lab lends it 8 beside p1, not 16. With
    ``typed``, p1 and h ask for a100 (for fleets with other types)."""
    types = ("a100",) if typed else ()
    return (
        make_cluster().nodes(3).at(NOW)
        .quota("idle", "a100", 16, cohort="lab").quota("nlp", "a100", 0, cohort="lab")
        .quota("third", "a100", 0, cohort="lab").quota("cv", "a100", 0).quota("own", "a100", 16)
        .running(make_running(make_job("v1").team("cv").priority("low").gpus(8)).whole("n0")
                 .started(0).borrowed(),
                 *(make_running(make_job(f"keep{k}").team("own").gpus(8).limit(keep_limit))
                   .whole(f"n{k}").started(0) for k in (1, 2)))
        .pending(make_job("p1").team("nlp").priority("high").types(*types).gpus(8)
                 .limit(promised_limit).submitted(0),
                 make_job("h").team("third").types(*types).gpus(16).limit(600).submitted(1))
    )


@pytest.mark.parametrize(
    ("promised_limit", "keep_limit", "eta", "why_then"),
    [(3600, 12000, 13630.0, "by its runtime limit"),
     (None, 12000, 24430.0, "if it runs the 4 h assumed for a job without a runtime limit"),
     (3600, 20000, 20000.0, None)],
    ids=["lending-free-when-the-promised-job-has-run", "promised-job-without-a-limit",
         "the-gpus-free-later-than-the-lending"])
def test_a_head_refused_the_lending_promised_to_another_team_starts_no_earlier_than_it_is_free(
        promised_limit, keep_limit, eta, why_then):
    # h was explained as any job without a reservation: "Estimated start t=12000 from runtime
    # limits" (n1 and n2 free), while lab lent it too little until p1 had run
    plan = _head_beside_a_promised_borrower(promised_limit, keep_limit).plan()
    assert [p.job_id for p in plan.preemptions] == ["v1"]
    assert [r.job_id for r in plan.reservations] == ["p1"]
    explanation = why(plan, "h")
    assert explanation.code is ReasonCode.INSUFFICIENT_GPUS
    assert explanation.eta == eta
    if why_then is None:
        assert explanation.message == (
            f"Needs 16 a100 GPUs; 0 are free. Estimated start t={eta:.0f} from runtime limits.")
    else:
        assert explanation.message == (
            f"Needs 16 a100 GPUs; 0 are free. Estimated start t={eta:.0f}: what cohort lab lends "
            f"of a100 GPUs is promised to job p1 of team nlp from t=10030, and this job can "
            f"borrow enough of it only once job p1 has run ({why_then}).")
    assert explanation.would_start_if == (
        "16 more a100 GPUs free up, and job p1 has run and given back what cohort lab lends")




def test_a_head_past_the_placement_budget_refused_the_promised_lending_is_told_the_same():
    # f1 (h100, high priority) spends the cycle's one placement attempt before h's turn: h is
    # explained from the indexes (reserve_untried refuses it the reservation the same way),
    # and was told t=12000 from runtime limits
    plan = (_head_beside_a_promised_borrower(3600, 12000, typed=True)
            .nodes(1, gpu_type="h100", prefix="h").gpu_type("h100", 80)
            .pending(make_job("f1").team("own").priority("high").types("h100").gpus(8)
                     .limit(3600).submitted(1))
            .plan(SchedulerConfig(max_placement_attempts=1)))
    assert bound(plan).keys() == {"f1"}
    assert [r.job_id for r in plan.reservations] == ["p1"]
    explanation = why(plan, "h")
    assert explanation.code is ReasonCode.INSUFFICIENT_GPUS
    assert explanation.eta == 13630.0
    assert explanation.message.endswith(
        "Estimated start t=13630: what cohort lab lends of a100 GPUs is promised to job p1 of "
        "team nlp from t=10030, and this job can borrow enough of it only once job p1 has run "
        "(by its runtime limit).")

def test_a_preemptor_starting_a_grace_period_late_is_judged_by_when_it_would_end():
    # big (over team B's quota of 8 now) is reserved n1 from t=13600, when r1 and r2 have
    # released the 7 GPUs it lacks. pre (4, limit 3600) could preempt r2 and start at
    # t=10030, once r2 has stopped: it would hold its 4 GPUs until t=13630, past big's start.
    # Judged as if it started now (ending at t=13600), it preempted r2 for a promise it broke.
    plan = (
        make_cluster().nodes(2).at(NOW).quota("B", "a100", 8)
        .running(make_running(make_job("r1").team("B").priority("high").gpus(4).limit(600))
                 .on("n0", 0, 1, 2, 3).started(NOW),
                 make_running(make_job("r2").team("B").priority("low").gpus(3).limit(3600))
                 .on("n0", 4, 5, 6).started(NOW))
        .pending(make_job("big").team("B").priority("high").gpus(8).limit(600).submitted(0),
                 make_job("pre").team("B").priority("high").gpus(4).limit(3600).submitted(1))
        .plan()
    )
    assert [(r.job_id, r.start_at) for r in plan.reservations] == [("big", NOW + 3600)]
    assert plan.preemptions == ()
    assert why(plan, "pre").eta == NOW + 3600 + 600  # once big has run


def _ml_promised_big(ml_quota: int = 16, ml_running_until: float | None = None, j_types: tuple[str, ...] = ()):
    """Team ml (quota ``ml_quota``, no cohort) and cv (24) on three nodes, cv's jobs holding
    n0 until t=3600, n1 until t=7200 and n2 until t=10800; with ``ml_running_until``, a
    fourth node n3 held by ml's m (8 GPUs) until then. ml's big (16 GPUs, 2 h) is reserved
    n0 and n1 from t=7200, promised 16 of ml's quota until t=14400; ml's j (8 GPUs, 2 h)
    fits that quota alone, not beside big (of the GPU types ``j_types``, any when empty)."""
    cluster = (make_cluster().nodes(3 if ml_running_until is None else 4).at(0)
               .quota("ml", "a100", ml_quota).quota("cv", "a100", 24)
               .running(make_running(make_job("c0").team("cv").gpus(8).limit(3600)).whole("n0"),
                        make_running(make_job("c1").team("cv").gpus(8).limit(7200)).whole("n1"),
                        make_running(make_job("c2").team("cv").gpus(8).limit(10800)).whole("n2")))
    if ml_running_until is not None:
        cluster = cluster.running(
            make_running(make_job("m").team("ml").gpus(8).limit(ml_running_until)).whole("n3"))
    return cluster.pending(make_job("big").team("ml").gpus(16).limit(7200).submitted(0),
                           make_job("j").team("ml").gpus(8).types(*j_types).limit(7200).submitted(1))


def _ml_preempts_for_urgent(urgent_limit: float | None, cohort: str | None = None):
    """preemptor_and_its_team with lo0 started a minute ago (reclaiming it is cheap) and n1
    held by cv until t=13000: urgent (8, ml's whole quota) preempts lo0 and is promised ml's
    8 GPUs from t=10030; small (4) fits ml's quota alone, not beside urgent, and finds no free
    GPUs: it is the first job without room, refused the reservation for that quota. In
    ``cohort``, cv lends ml 8 once lo1 and lo2 end at t=13000."""
    return (
        make_cluster().nodes(2).at(NOW)
        .quota("ml", "a100", 8, cohort=cohort).quota("cv", "a100", 8, cohort=cohort)
        .running(make_running(make_job("lo0").team("cv").gpus(8)).whole("n0").started(NOW - 60)
                 .borrowed(),
                 make_running(make_job("lo1").team("cv").gpus(4).limit(13000)).on("n1", 0, 1, 2, 3)
                 .started(0),
                 make_running(make_job("lo2").team("cv").gpus(4).limit(13000)).on("n1", 4, 5, 6, 7)
                 .started(0).borrowed())
        .pending(make_job("urgent").team("ml").gpus(8).limit(urgent_limit).submitted(0),
                 make_job("small").team("ml").gpus(4).limit(None).submitted(1))
    )


def _ml_promised_twice():
    """Team ml (16, no cohort) and cv (16). cv's lo0 (low priority, started a minute ago)
    holds n0, c1 n1 until t=13000, c2 n2 until t=13500. ml's pre (8, 1 h) preempts lo0 and is
    promised 8 of ml's quota from t=10030 until t=13630; ml's head (8, high priority, 2 h) is
    reserved n1 from t=13000, 8 more until t=20200; ml's late (8, 2 h) fits ml's quota alone,
    not beside both."""
    return (make_cluster().nodes(3).at(NOW)
            .quota("ml", "a100", 16).quota("cv", "a100", 16)
            .priority("high", 100).priority("low", 0)
            .running(make_running(make_job("lo0").team("cv").priority("low").gpus(8)).whole("n0")
                     .started(NOW - 60),
                     make_running(make_job("c1").team("cv").gpus(8).limit(NOW + 3000)).whole("n1")
                     .started(0),
                     make_running(make_job("c2").team("cv").gpus(8).limit(NOW + 3500)).whole("n2")
                     .started(0))
            .pending(make_job("head").team("ml").priority("high").gpus(8).limit(7200).submitted(0),
                     make_job("late").team("ml").gpus(8).limit(7200).submitted(1),
                     make_job("pre").team("ml").gpus(8).limit(3600).submitted(2)))


@pytest.mark.parametrize(("cluster", "job", "eta", "words", "would"), [
    (_ml_promised_big(), "j", 14400,
     "Estimated start t=14400: its team's quota of a100 GPUs is promised to job big from "
     "t=7200 (16 GPUs), and has room for this job only once job big has run (by its runtime "
     "limit).",
     ", and job big has run and given back its team's quota"),
    (_ml_preempts_for_urgent(None), "small", NOW + 30 + 4 * 3600,
     f"Estimated start t={NOW + 30 + 4 * 3600:.0f}: its team's quota of a100 GPUs is promised "
     f"to job urgent from t={NOW + 30:.0f} (8 GPUs), and has room for this job only once job "
     f"urgent has run (if it runs the 4 h assumed for a job without a runtime limit).",
     ", and job urgent has run and given back its team's quota"),
    (_ml_preempts_for_urgent(7200), "small", NOW + 30 + 7200,
     f"Estimated start t={NOW + 30 + 7200:.0f}: its team's quota of a100 GPUs is promised "
     f"to job urgent from t={NOW + 30:.0f} (8 GPUs), and has room for this job only once job "
     f"urgent has run (by its runtime limit).",
     ", and job urgent has run and given back its team's quota"),
    # ml's m gives back 8 at t=12000, before big has run: room beside big then
    (_ml_promised_big(ml_quota=24, ml_running_until=12000), "j", 12000,
     "Estimated start t=12000: its team's quota of a100 GPUs is promised to job big from "
     "t=7200 (16 GPUs), and has room for this job beside them only once its team's running "
     "jobs have released 8 a100 GPUs (by runtime limits).",
     ", and team ml's running jobs release 8 a100 GPUs"),
    # n2 frees at t=13500, but ml's quota has room only once pre, the first to end, has run
    (_ml_promised_twice(), "late", NOW + 30 + 3600,
     f"Estimated start t={NOW + 30 + 3600:.0f}: its team's quota of a100 GPUs is promised to 2 "
     f"jobs of its team that start before it (16 GPUs), and has room for this job only once "
     f"job pre (from t={NOW + 30:.0f}) has run (by its runtime limit).",
     ", and job pre has run and given back its team's quota"),
], ids=["head-with-a-runtime-limit", "preemptor-without-one", "preemptor-with-one",
        "its-teams-running-jobs-release-enough-first", "two-promises-the-first-to-end-frees-it"])
def test_a_job_refused_its_teams_quota_promised_to_its_jobs_ahead_starts_no_earlier_than_it_is_free(
        cluster, job, eta, words, would):
    # Refused a reservation (room_beside_promises) because its own team's quota is promised to
    # the team's jobs that start before it, it was explained as any job short of GPUs, its ETA
    # from runtime limits alone: j was told t=10800 (n2 frees) while big held ml's quota until
    # t=14400; small t=13000 while urgent held it until t=24430.
    plan = cluster.plan()
    assert not bound(plan)
    assert job not in {r.job_id for r in plan.reservations}
    explanation = why(plan, job)
    assert explanation.code is ReasonCode.INSUFFICIENT_GPUS
    assert explanation.eta == eta
    assert explanation.message.startswith("Needs ")
    assert explanation.message.endswith(words)
    assert explanation.would_start_if.endswith(would)


def _past_the_budget(j_types: tuple[str, ...]):
    return (_ml_promised_big(j_types=j_types).nodes(1, gpu_type="h100", prefix="h").gpu_type("h100", 80)
            .pending(make_job("f1").team("cv").priority("high").types("h100").gpus(8)
                     .limit(3600).submitted(1)))


def test_a_job_past_the_placement_budget_refused_its_teams_promised_quota_is_told_the_same():
    # f1 (h100, high priority) spends the cycle's one placement attempt: big is reserved
    # untried (reserve_untried), and j (a100 only), explained from the indexes
    # (cycle._decide_untried), was told t=10800 from runtime limits as well
    plan = _past_the_budget(("a100",)).plan(SchedulerConfig(max_placement_attempts=1))
    assert bound(plan).keys() == {"f1"}
    assert [r.job_id for r in plan.reservations] == ["big"]
    explanation = why(plan, "j")
    assert explanation.eta == 14400
    assert explanation.message.endswith(
        "Estimated start t=14400: its team's quota of a100 GPUs is promised to job big from "
        "t=7200 (16 GPUs), and has room for this job only once job big has run (by its runtime "
        "limit).")


def test_a_job_past_the_placement_budget_taking_either_type_is_told_the_start_on_its_other_type():
    # The same j taking any type: ml has no quota on h100 (none governs it), and h0 frees when
    # f1 has run, at t=3600, where j starts. Until 7 Dec it was told its a100 start, t=14400.
    snap = _past_the_budget(()).snapshot()
    config = SchedulerConfig(max_placement_attempts=1)
    first, starts = evolve(snap, config)
    explanation = why(first, "j")
    assert explanation.message == ("Needs 8 h100 GPUs; 0 are free. It would start first on its h100 "
                                   "GPUs (it also takes a100). Estimated start t=3600 from runtime limits.")
    assert (explanation.eta, starts.get("j")) == (3600.0, 3600.0)


def _ml_promised_big_beside_a_small_node(j_limit: float, ml_quota: int = 16,
                                         ml_running_until: float | None = None):
    """Team ml (quota ``ml_quota``) and cv (40): cv's jobs hold n0 and n1 until t=7200, n2
    until t=10800 and the 4-GPU node s0 until t=4000. ml's big (16 GPUs, one node per 8, 2 h)
    is reserved n0 and n1 from t=7200; ml's j (4 GPUs, ``j_limit``) fits ml's quota alone, not
    beside big, and finds its GPUs on s0 at t=4000, which big cannot use. With
    ``ml_running_until``, ml's m holds the 4-GPU node s1 until then."""
    cluster = (make_cluster().nodes(3).nodes(1 if ml_running_until is None else 2, gpus=4,
                                             prefix="s").at(0)
               .quota("ml", "a100", ml_quota).quota("cv", "a100", 40)
               .running(make_running(make_job("c0").team("cv").gpus(8).limit(7200)).whole("n0"),
                        make_running(make_job("c1").team("cv").gpus(8).limit(7200)).whole("n1"),
                        make_running(make_job("c2").team("cv").gpus(8).limit(10800)).whole("n2"),
                        make_running(make_job("c3").team("cv").gpus(4).limit(4000))
                        .whole("s0", width=4)))
    if ml_running_until is not None:
        cluster = cluster.running(make_running(make_job("m").team("ml").gpus(4)
                                               .limit(ml_running_until)).whole("s1", width=4))
    return cluster.pending(
        make_job("big").team("ml").gpus(16).per_node(8).limit(7200).submitted(0),
        make_job("j").team("ml").priority("low").gpus(4).limit(j_limit).submitted(1))


def _nlp_promised_labs_lending(j_limit: float, idle_until: float | None = None):
    """Cohort lab: idle (16 nominal) lends 8 while its i0 holds n1 (until ``idle_until``;
    without it, nothing runs there and idle lends 8 of 8), nlp and third own nothing. cv (40,
    no cohort) holds n0 until t=7200 and the 4-GPU node s0 until t=4000. nlp's h (8 GPUs, one
    node, 1 h) is reserved n0 from t=7200, promised the 8 lab lends; third's j (4 GPUs,
    ``j_limit``) would borrow 4 of them and finds its GPUs on s0 at t=4000."""
    idle = 16 if idle_until is not None else 8
    running = [make_running(make_job("c0").team("cv").gpus(8).limit(7200)).whole("n0"),
               make_running(make_job("c3").team("cv").gpus(4).limit(4000)).whole("s0", width=4)]
    if idle_until is not None:
        running.append(make_running(make_job("i0").team("idle").gpus(8).limit(idle_until))
                       .whole("n1"))
    else:
        running.append(make_running(make_job("c1").team("cv").gpus(8).limit(10800)).whole("n1"))
    return (make_cluster().nodes(2).nodes(1, gpus=4, prefix="s").at(0)
            .quota("idle", "a100", idle, cohort="lab").quota("nlp", "a100", 0, cohort="lab")
            .quota("third", "a100", 0, cohort="lab").quota("cv", "a100", 40)
            .running(*running)
            .pending(make_job("h").team("nlp").gpus(8).per_node(8).limit(3600).submitted(0),
                     make_job("j").team("third").priority("low").gpus(4).limit(j_limit)
                     .submitted(1)))


def _told_and_started(cluster, job: str):
    snap = cluster.snapshot()
    first, starts = evolve(snap)
    return why(first, job), starts.get(job)


@pytest.mark.parametrize(("cluster", "promised", "promised_end"), [
    (_ml_promised_big_beside_a_small_node, "job big has run and given back its team's quota",
     14400),
    (_nlp_promised_labs_lending, "job h has run and given back what cohort lab lends", 10800),
], ids=["its-teams-quota", "its-cohorts-lending"])
def test_a_job_that_ends_before_the_promised_job_starts_is_told_when_its_gpus_free(
        cluster, promised, promised_end):
    # j, started at t=4000 when s0 frees, ends by t=7200: no promise refuses it, and the
    # engine starts it then (broken_promise asks only of jobs still running at the start).
    # Its ETA was held to the promised job's end: t=14400 (big), t=10800 (h).
    explanation, started = _told_and_started(cluster(3200), "j")
    assert explanation.eta == started == 4000
    assert explanation.message == (
        "Needs 4 a100 GPUs; 0 are free. Estimated start t=4000 from runtime limits.")
    whom = promised.split()[1]
    assert explanation.would_start_if == (
        f"4 more a100 GPUs free up by t=4000, so that it ends before job {whom} starts at "
        f"t=7200; or 4 more a100 GPUs free up, and {promised}")
    # a second longer, it would still run at t=7200: it waits until the promised job has run
    explanation, started = _told_and_started(cluster(3201), "j")
    assert explanation.eta == started == promised_end
    assert explanation.message.endswith("has run (by its runtime limit).")


def test_a_job_whose_teams_releases_leave_the_promised_job_its_quota_starts_when_its_gpus_free():
    # ml (20) holds 4 (m, until t=6000): beside big's 16 and j's 4 it lacks 4 now, but m
    # gives them back before big starts at t=7200, so big's promise has room for j (slack 4)
    # and the engine starts j when s0 frees. It was told t=6000, when m ends.
    cluster = _ml_promised_big_beside_a_small_node(7200, ml_quota=20, ml_running_until=6000)
    explanation, started = _told_and_started(cluster, "j")
    assert explanation.eta == started == 4000
    assert explanation.message == (
        "Needs 4 a100 GPUs; 0 are free. Estimated start t=4000 from runtime limits.")
    assert explanation.would_start_if == "4 more a100 GPUs free up"


def test_a_job_refused_the_promised_lending_starts_when_its_cohort_lends_enough_again():
    # h borrows all lab lends from t=7200 (idle's 8 unused); when idle's i0 ends at t=9000, lab
    # lends 16, 8 beside h, and the engine starts j (holding past t=7200, it could not start
    # at t=4000). It was told t=10800, when h has run: the lending was read as it is now.
    explanation, started = _told_and_started(_nlp_promised_labs_lending(7200, idle_until=9000),
                                             "j")
    assert explanation.eta == started == 9000
    assert explanation.message == (
        "Needs 4 a100 GPUs; 0 are free. Estimated start t=9000: what cohort lab lends of a100 "
        "GPUs, promised to job h of team nlp from t=7200, leaves room for this job only from "
        "then (by runtime limits).")
    assert explanation.would_start_if == (
        "4 more a100 GPUs free up, and what cohort lab lends of a100 GPUs, promised to job h "
        "of team nlp from t=7200, leaves it room (from t=9000)")


def test_a_job_refused_its_teams_promised_quota_keeps_a_capacity_eta_that_is_later():
    # ml's quota (32) has room for j (24) once big (16) has run, at t=14400; j's 24 GPUs are
    # three whole nodes, and n2 frees only at t=20000: that ETA stands.
    plan = (make_cluster().nodes(3).at(0)
            .quota("ml", "a100", 32).quota("cv", "a100", 24)
            .running(make_running(make_job("c0").team("cv").gpus(8).limit(3600)).whole("n0"),
                     make_running(make_job("c1").team("cv").gpus(8).limit(7200)).whole("n1"),
                     make_running(make_job("c2").team("cv").gpus(8).limit(20000)).whole("n2"))
            .pending(make_job("big").team("ml").gpus(16).limit(7200).submitted(0),
                     make_job("j").team("ml").gpus(24).limit(7200).submitted(1))
            .plan())
    assert [(r.job_id, r.start_at) for r in plan.reservations] == [("big", 7200)]
    explanation = why(plan, "j")
    assert explanation.eta == 20000
    assert explanation.message == (
        "Needs 24 a100 GPUs; 0 are free. Estimated start t=20000 from runtime limits.")
    # the quota's condition holds all the same: it is needed, only not last
    assert explanation.would_start_if == (
        "24 more a100 GPUs free up, and job big has run and given back its team's quota")


@pytest.mark.parametrize(("cluster", "eta", "message"), [
    (preemptor_and_its_team().pending(
        make_job("small").team("ml").gpus(4).limit(None).submitted(1)), NOW + 30,
     "Team ml's quota must have room for job urgent when it starts at t=10030; this job would "
     "still hold a100 GPUs then, so starting now would delay it. Estimated start t=10030, when "
     "its quota has room for it beside the jobs promised GPUs (by runtime limits)."),
    (_ml_preempts_for_urgent(None, cohort="lab"), 13000,
     "Needs 4 a100 GPUs; 0 are free. Estimated start t=13000 from runtime limits."),
], ids=["its-gpus-free-now-lo0-stops", "its-gpus-free-when-lo1-and-lo2-end"])
def test_a_job_behind_a_preemptor_starts_when_its_cohort_lends_enough_beside_it(
        cluster, eta, message):
    # urgent takes ml's 8 from t=10030; small (4, no runtime limit) borrows the 4 more cv
    # lends once its lo0 has stopped (cv 4 of 8: n1's free GPUs), or the 8 once lo1 and lo2
    # end at t=13000. It was told t=24430, when urgent has run, by the 4 h assumed for it:
    # the cohort's lending was read as it is now, with lo0 (no runtime limit) held forever.
    explanation, started = _told_and_started(cluster, "small")
    assert explanation.eta == started == eta
    assert explanation.message == message


def test_a_job_breaking_two_promises_is_told_the_one_that_has_run_last():
    # ml (16, no cohort) promises p1 (8, 600 s) and p2 (8, 2 h) its quota from t=10030, each
    # preempting one of cv's borrowed jobs; small (9, one GPU per node) fits the free GPUs of
    # n2 and n3 and ml's quota alone, but beside p2 only once p2 has run. It was told the
    # promise found first: "t=10630, when job p1 has run", and started at t=17230.
    cluster = (
        make_cluster().nodes(4).at(NOW).quota("ml", "a100", 16).quota("cv", "a100", 8)
        .running(make_running(make_job("lo0").team("cv").gpus(8)).whole("n0").started(NOW - 60)
                 .borrowed(),
                 make_running(make_job("lo1").team("cv").gpus(8)).whole("n1").started(NOW - 60)
                 .borrowed(),
                 make_running(make_job("c2").team("cv").gpus(4).limit(NOW + 20000))
                 .on("n2", 0, 1, 2, 3),
                 make_running(make_job("c3").team("cv").gpus(3).limit(NOW + 20000))
                 .on("n3", 0, 1, 2))
        .pending(make_job("p1").team("ml").gpus(8).per_node(8).limit(600).submitted(0),
                 make_job("p2").team("ml").gpus(8).per_node(8).limit(7200).submitted(1),
                 make_job("small").team("ml").priority("low").gpus(9).per_node(1).limit(None)
                 .submitted(2)))
    explanation, started = _told_and_started(cluster, "small")
    assert explanation.eta == started == NOW + 30 + 7200
    assert explanation.message == (
        "Team ml's quota must have room for job p2 when it starts at t=10030; this job would "
        "still hold a100 GPUs then, so starting now would delay it. Estimated start t=17230, "
        "when job p2 has run (by its runtime limit).")
    assert explanation.would_start_if == (
        "job p2 has run and given the quota back, or the job asks for a runtime limit that ends "
        "it by t=10030")


def test_a_head_over_quota_waiting_for_its_cohorts_lenders_is_promised_the_quota_too():
    """Found by QA (7 Dec, the demo): vision's 16-GPU job, over its quota, needed its own 5 GPUs
    back and 7 more lent by language, whose jobs held them. Only a head its own team's
    releases could admit got a reservation, so nothing promised it the quota: vision's later
    notebooks started on A100 with 10-minute limits, cycle after cycle, and its ETA slid with
    each (11:24:50, 11:25:00, 11:26:04, … 11:27:27) while it stayed first in line."""
    plan = (
        make_cluster().nodes(4).nodes(2, gpu_type="h100", prefix="h").at(100)
        .quota("vision", "a100", 8, borrowing_limit=8, cohort="c").quota("language", "a100", 24, cohort="c")
        .quota("vision", "h100", 40, cohort="c").quota("language", "h100", 40, cohort="c")
        .running(make_running(make_job("r0").team("vision").gpus(5).limit(600)).on("n0", 0, 1, 2, 3, 4).started(0),
                 make_running(make_job("l0").team("language").gpus(16).limit(900)).whole("n1", "n2").started(0),
                 make_running(make_job("l1").team("language").gpus(4).limit(900)).on("n3", 0, 1, 2, 3).started(0))
        .pending(make_job("big").team("vision").gpus(16).per_node(4).distinct_nodes().types("a100").limit(600)
                 .submitted(0),
                 make_job("later").team("vision").gpus(1).types("a100").limit(1200).submitted(1))
    ).plan()

    assert [(r.job_id, r.start_at) for r in plan.reservations] == [("big", 900.0)]
    assert "later" not in bound(plan)
    big = why(plan, "big")
    assert big.message.startswith(
        "Holds a reservation for 16 GPUs on 4 nodes from t=900, when the jobs of team vision's cohort "
        "have released the 9 a100 GPUs its quota lacks now")
    assert big.eta == 900.0
    assert big.would_start_if == ("the jobs of team vision's cohort on the quota it needs and its reserved "
                                  "GPUs end (at the latest by their runtime limits)")
