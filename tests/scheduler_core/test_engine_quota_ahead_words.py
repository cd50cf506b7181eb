"""A job over its quota behind its team's jobs on that quota is told what they hold of it, and
never more GPUs than its team may ever hold at once: those jobs run in turn. Before, a team of
1 a100 GPU with two 1-GPU jobs waiting ahead of a third read "its team's quota goes first to
the 2 a100 GPUs of its jobs ahead of it in the queue", twice what it could ever hold; and a job
behind its team's head reservation read the head's GPUs and then all of its jobs' GPUs as held
beside it, past the team's ceiling. Each test builds the smallest cluster that says it."""

from __future__ import annotations

import re

from tests.scheduler_core.engine_builders import make_cluster, make_job, make_running, why


def _gpus_said(message: str) -> list[int]:
    """The GPU counts a sentence says the team's quota goes to or must hold."""
    return [int(n) for n in re.findall(r"(\d+) a100 GPUs? of its jobs ahead", message)]


def team_of_one_gpu_with_jobs_waiting(waiting: int):
    """Team ml may hold 1 a100 GPU (no cohort) and holds it (r, until t=3600); ``waiting``
    1-GPU jobs of 1 h wait, in submit order. Team cv's 16-GPU head keeps the other node."""
    return (make_cluster().nodes(2).quota("ml", "a100", 1).quota("cv", "a100", 16)
            .running(make_running(make_job("r").gpus(1).limit(3600)).on("n0", 0).started(0),
                     make_running(make_job("x").team("cv").gpus(8).limit(3600)).whole("n1").started(0))
            .pending(make_job("big").team("cv").priority("high").gpus(16).per_node(8).limit(3600),
                     *[make_job(f"w{i}").gpus(1).limit(3600).submitted(i) for i in range(waiting)]))


def test_one_job_ahead_is_said_by_its_gpus():
    plan = team_of_one_gpu_with_jobs_waiting(2).plan()
    assert why(plan, "w1").message.endswith(
        "Estimated start t=10800: its team's quota goes first to the 1 a100 GPU of its jobs ahead of it "
        "in the queue (by runtime limits).")


def test_jobs_ahead_needing_more_than_the_team_may_hold_are_said_by_their_count():
    plan = team_of_one_gpu_with_jobs_waiting(4).plan()
    for job, ahead, eta in (("w2", 2, 14400), ("w3", 3, 18000)):
        told = why(plan, job)
        assert told.eta == eta  # the estimate is as it was: only its words change
        assert _gpus_said(told.message) == [], told.message
        assert told.message.endswith(
            f"Estimated start t={eta}: its team's quota goes first to its {ahead} jobs ahead of it in the "
            "queue, which fill the 1 a100 GPU it may hold, in turn, until the last of them has run "
            "(by runtime limits).")


def test_jobs_behind_a_head_over_its_quota_are_not_said_past_the_ceiling():
    # Team ml may hold 16 a100 GPUs and holds them (m1 until t=1000, m2 until t=5000); its head
    # (16 GPUs, 1 h) holds the reservation from t=5000; s1 and s2 (8 GPUs, 2 h) would outlast
    # its start. s2 read "must also hold job big ... until it has run, and the 8 a100 GPUs of
    # its jobs ahead of it": 24 GPUs held at once of a quota of 16.
    plan = (make_cluster().nodes(4).at(0).quota("ml", "a100", 16, borrowing_limit=0)
            .running(make_running(make_job("m1").team("ml").gpus(8).limit(1000)).whole("n0"),
                     make_running(make_job("m2").team("ml").gpus(8).limit(5000)).whole("n1"))
            .pending(make_job("big").team("ml").gpus(16).limit(3600).submitted(0),
                     make_job("s1").team("ml").gpus(8).limit(7200).submitted(1),
                     make_job("s2").team("ml").gpus(8).limit(7200).submitted(2))
            .plan())
    assert why(plan, "s1").message.endswith(
        "Estimated start t=8600: its team's quota must also hold job big from its reservation at t=5000 "
        "until it has run (by runtime limits).")
    s2 = why(plan, "s2")
    assert s2.eta == 15800  # as it was: only its words change
    assert _gpus_said(s2.message) == [], s2.message
    assert s2.message.endswith(
        "Estimated start t=15800: its team's quota must also hold job big from its reservation at t=5000 "
        "until it has run, and its 1 job ahead of it in the queue in turn (by runtime limits).")


def test_a_team_in_a_cohort_may_hold_its_quota_and_what_it_may_borrow():
    # language may hold 80 h100 GPUs (32 nominal, 48 to borrow from vision); q2..q5 (32 each)
    # wait behind its head q1. q4's 64 GPUs ahead fit under 80 and are said; q5's 96 do not.
    plan = (make_cluster().nodes(16, gpu_type="h100").at(0)
            .quota("language", "h100", 32, borrowing_limit=48, cohort="all")
            .quota("vision", "h100", 96, cohort="all")
            .running(make_running(make_job("held").team("language").gpus(16).types("h100").limit(7200))
                     .whole("n0", "n1").started(0),
                     make_running(make_job("v1").team("vision").gpus(64).types("h100").limit(5400))
                     .whole(*[f"n{i}" for i in range(2, 10)]).started(0),
                     make_running(make_job("v2").team("vision").gpus(48).types("h100").limit(9000))
                     .whole(*[f"n{i}" for i in range(10, 16)]).started(0))
            .pending(*[make_job(f"q{i}").team("language").gpus(32).types("h100").limit(3600).submitted(i)
                       for i in range(1, 6)])
            .plan())
    assert why(plan, "q4").message.endswith(
        "its team's quota goes first to the 64 h100 GPUs of its jobs ahead of it in the queue (by runtime limits).")
    assert why(plan, "q5").message.endswith(
        "Estimated start t=18000: its team's quota goes first to its 3 jobs ahead of it in the queue, which fill "
        "the 80 h100 GPUs it may hold, in turn, until the last of them has run (by runtime limits).")
