"""Rule 6, EASY backfill: the highest-priority job that cannot start gets a GPU-granular
reservation from running jobs' runtime limits; other jobs start now only if they cannot delay
it; runtime limits are enforced."""

from __future__ import annotations

import pytest
from engine_builders import bound, bound_nodes, gpu_count, make_cluster, make_job, make_running, why

from scheduler_core import PreemptionReason, ReasonCode, SchedulerConfig


def busy_pair():
    """Two nodes: n0 busy until t=3600 (8 GPUs), n1 has 4 GPUs busy until t=7200."""
    return (
        make_cluster().nodes(2).at(0)
        .running(make_running(make_job("r0").gpus(8).limit(3600)).whole("n0").started(0),
                 make_running(make_job("r1").gpus(4).limit(7200)).on("n1", 0, 1, 2, 3)
                 .started(0))
    )


def test_head_job_gets_a_reservation_from_running_runtime_limits():
    plan = busy_pair().pending(make_job("head").gpus(8).submitted(0)).plan()
    [reservation] = plan.reservations
    assert reservation.job_id == "head"
    assert reservation.start_at == 3600.0
    assert [p.node for p in reservation.placements] == ["n0"]
    explanation = why(plan, "head")
    assert explanation.code is ReasonCode.WAITING_FOR_RESERVATION
    assert explanation.eta == 3600.0
    assert "t=3600" in explanation.message


def test_reservation_is_gpu_granular_not_whole_node():
    # head needs 12 GPUs: all of n0 (free at 3600) would not do; n1's 4 free GPUs plus n0
    plan = busy_pair().pending(make_job("head").gpus(12).per_node(4).submitted(0)).plan()
    [reservation] = plan.reservations
    assert reservation.start_at == 3600.0
    assert gpu_count(reservation.placements) == 12
    on_n1 = [p for p in reservation.placements if p.node == "n1"]
    assert on_n1 and all(len(p.gpu_indices) == 4 for p in on_n1)


@pytest.mark.parametrize(
    ("limit", "starts"),
    [(1800, True), (3600, True), (3601, False), (None, False)],
    ids=["ends-well-before-the-reservation", "ends-exactly-at-the-reservation",
         "would-delay-the-reservation-by-a-second", "no-runtime-limit-cannot-promise"],
)
def test_backfill_only_what_cannot_delay_the_reservation(limit, starts):
    # head wants n1's 4 free GPUs plus all of n0 at t=3600; "small" wants 4 GPUs now:
    # the only free GPUs are the 4 on n1, which the head's reservation holds.
    plan = (
        busy_pair()
        .pending(make_job("head").gpus(12).per_node(4).limit(600).submitted(0),
                 make_job("small").gpus(4).limit(limit).submitted(1))
        .plan()
    )
    assert ("small" in bound(plan)) == starts
    if not starts:
        explanation = why(plan, "small")
        assert explanation.code is ReasonCode.BEHIND_HIGHER_PRIORITY
        assert "reserved for job head" in explanation.message
    assert plan.reservations[0].start_at == 3600.0


def test_backfill_freely_on_gpus_the_reservation_does_not_need():
    # head needs the whole of n0 at 3600; n1's four free GPUs are not part of its reservation
    plan = (
        busy_pair()
        .pending(make_job("head").gpus(8).submitted(0),
                 make_job("small").gpus(4).submitted(1))
        .plan()
    )
    assert bound_nodes(plan, "small") == ["n1"]
    assert plan.reservations[0].job_id == "head"


def test_only_the_head_job_holds_a_reservation():
    plan = (
        busy_pair()
        .pending(make_job("head").gpus(8).submitted(0),
                 make_job("second").gpus(8).submitted(1))
        .plan()
    )
    assert [r.job_id for r in plan.reservations] == ["head"]
    assert why(plan, "second").code is not ReasonCode.WAITING_FOR_RESERVATION


def test_backfill_off_makes_no_reservation_and_lets_smaller_jobs_take_the_gpus():
    plan = (
        busy_pair()
        .pending(make_job("head").gpus(12).per_node(4).submitted(0),
                 make_job("small").gpus(4).submitted(1))
        .plan(SchedulerConfig(backfill=False))
    )
    assert plan.reservations == ()
    assert "small" in bound(plan)


def test_reservation_counts_gpus_of_killed_jobs_as_free_now():
    plan = (
        make_cluster().nodes(1).at(5000)
        .running(make_running(make_job("late").gpus(8).limit(3600)).whole("n0").started(0))
        .pending(make_job("next").gpus(8))
        .plan(SchedulerConfig(preemption=False))
    )
    assert [k.job_id for k in plan.kills] == ["late"]
    assert plan.reservations[0].start_at == 5000.0


@pytest.mark.parametrize(
    ("now", "killed"),
    [(3599, False), (3600, True), (9000, True)],
    ids=["one-second-before-the-limit-runs-on", "at-the-limit-is-killed",
         "past-the-limit-is-killed"],
)
def test_runtime_limit_is_enforced(now, killed):
    plan = (
        make_cluster().nodes(1).at(now)
        .running(make_running(make_job("j").gpus(8).limit(3600)).whole("n0").started(0)
                 .generation(4))
        .plan()
    )
    assert [k.job_id for k in plan.kills] == (["j"] if killed else [])
    if killed:
        kill = plan.kills[0]
        assert kill.reason is PreemptionReason.RUNTIME_LIMIT
        assert kill.generation == 4
        assert "runtime limit of 1 h (started " in kill.message


def test_a_short_runtime_limits_kill_says_its_seconds() -> None:
    # Found by QA: `qm submit --time 8s` was killed "at its runtime limit of 0.0 h (started 0.0 h ago)".
    plan = (
        make_cluster().nodes(1).at(9)
        .running(make_running(make_job("j").gpus(1).limit(8)).whole("n0").started(0))
        .plan()
    )
    assert plan.kills[0].message == "Job j reached its runtime limit of 8 s (started 9 s ago) and is stopped."


def test_job_without_runtime_limit_is_never_killed():
    plan = (
        make_cluster().nodes(1).at(10**7)
        .running(make_running(make_job("j").gpus(8)).whole("n0").started(0))
        .plan()
    )
    assert plan.kills == ()


def test_terminating_job_is_not_killed_again():
    plan = (
        make_cluster().nodes(1).at(9000)
        .running(make_running(make_job("j").gpus(8).limit(3600)).whole("n0").started(0)
                 .terminating())
        .plan()
    )
    assert plan.kills == ()



def own_quota_full(nodes=2, quota=16):
    """Team ml's quota is the whole 2-node fleet (16 a100); its own jobs hold 12 of it: r0 all
    of n0 until t=3600, r1 4 GPUs of n1 until t=7200. n1's other 4 GPUs are free."""
    return (
        make_cluster().nodes(nodes).at(0)
        .quota("ml", "a100", quota)
        .running(make_running(make_job("r0").team("ml").gpus(8).limit(3600)).whole("n0")
                 .started(0),
                 make_running(make_job("r1").team("ml").gpus(4).limit(7200))
                 .on("n1", 0, 1, 2, 3).started(0))
    )


def test_head_job_over_quota_from_own_running_jobs_still_gets_a_reservation():
    # big needs 8: the quota lacks 4 now (12 + 8 > 16) but r0's end at t=3600 lifts it,
    # and n0 is whole then: big holds the reservation instead of waiting on quota forever.
    plan = own_quota_full().pending(make_job("big").team("ml").gpus(8).submitted(0)).plan()
    [reservation] = plan.reservations
    assert reservation.job_id == "big"
    assert reservation.start_at == 3600.0
    explanation = why(plan, "big")
    assert explanation.code is ReasonCode.WAITING_FOR_RESERVATION
    assert explanation.eta == 3600.0
    assert "quota" in explanation.message and "t=3600" in explanation.message


def test_over_quota_reservation_starts_when_the_quota_lifts_not_before():
    # quota 14: big (12, 4 per node) lacks 10 of quota now (12 + 12 > 14); the GPUs are there
    # at t=3600 (n0 plus n1's free 4), the quota only once r1 also ends at t=7200.
    plan = own_quota_full(quota=14).pending(
        make_job("big").team("ml").gpus(12).per_node(4).submitted(0)).plan()
    [reservation] = plan.reservations
    assert reservation.start_at == 7200.0
    assert why(plan, "big").eta == 7200.0


def test_no_reservation_over_quota_when_own_jobs_have_no_runtime_limit():
    plan = (
        make_cluster().nodes(2).at(0)
        .quota("ml", "a100", 16)
        .running(make_running(make_job("r0").team("ml").gpus(8)).whole("n0").started(0),
                 make_running(make_job("r1").team("ml").gpus(4)).on("n1", 0, 1, 2, 3)
                 .started(0))
        .pending(make_job("big").team("ml").gpus(8).submitted(0))
        .plan()
    )
    assert plan.reservations == ()
    assert why(plan, "big").code is ReasonCode.QUOTA_EXCEEDED


@pytest.mark.parametrize(
    ("limit", "starts"),
    [(3600, True), (3601, False), (None, False)],
    ids=["ends-by-the-reservation", "would-hold-quota-past-it", "no-runtime-limit"],
)
def test_small_jobs_of_the_same_team_do_not_delay_the_over_quota_head(limit, starts):
    # Three nodes, quota 16, ml holds 12: big (12, 4 per node) lacks 8 of quota until r0 ends
    # at t=3600, when it needs all of ml's room. small (4) fits now, on GPUs big does not hold,
    # and within quota (12 + 4 <= 16), but if it still ran at t=3600 ml would be at
    # 4 + 4 + 12 > 16 and big would have to wait.
    plan = own_quota_full(nodes=3).pending(
        make_job("big").team("ml").gpus(12).per_node(4).limit(600).submitted(0),
        make_job("small").team("ml").gpus(4).limit(limit).submitted(1),
    ).plan()
    assert [r.job_id for r in plan.reservations] == ["big"]
    assert plan.reservations[0].start_at == 3600.0
    assert ("small" in bound(plan)) == starts
    if not starts:
        explanation = why(plan, "small")
        assert explanation.code is ReasonCode.BEHIND_HIGHER_PRIORITY
        assert "big" in explanation.message and "quota" in explanation.message


def test_other_teams_are_not_held_back_by_an_over_quota_head():
    plan = (
        own_quota_full(nodes=3)
        .quota("cv", "a100", 4)
        .pending(make_job("big").team("ml").gpus(12).per_node(4).submitted(0),
                 make_job("other").team("cv").gpus(4).limit(None).submitted(1))
        .plan()
    )
    assert [r.job_id for r in plan.reservations] == ["big"]
    assert "other" in bound(plan)


def test_head_past_the_placement_budget_still_gets_the_reservation():
    # The budget of one placement attempt goes to "small"; "big" (16 GPUs, 4 free) is past it
    # but still gets the cycle's reservation, and jobs after it still share their outcome.
    plan = (
        make_cluster().nodes(2).at(0)
        .running(make_running(make_job("r0").gpus(8).limit(3600)).whole("n0").started(0),
                 make_running(make_job("r1").gpus(4).limit(7200)).on("n1", 0, 1, 2, 3)
                 .started(0))
        .pending(make_job("small").gpus(2).limit(600).submitted(0),
                 make_job("big").gpus(16).limit(3600).submitted(1),
                 make_job("later").gpus(16).limit(3600).submitted(2))
        .plan(SchedulerConfig(max_placement_attempts=1))
    )
    assert [b.job_id for b in plan.binds] == ["small"]
    [reservation] = plan.reservations
    assert (reservation.job_id, reservation.start_at) == ("big", 7200.0)
    assert why(plan, "big").code is ReasonCode.WAITING_FOR_RESERVATION
    assert why(plan, "later").code is ReasonCode.INSUFFICIENT_GPUS
    assert why(plan, "later").eta == 7200.0 + 3600.0


def two_draining_nodes(b_rest_limit: float, *more):
    """n0: 4 GPUs busy until t=3600, 4 free. n1: 4 GPUs busy until t=3600 and 2 until
    ``b_rest_limit``, 2 free. A whole-node head (first in the queue: its runtime limit is the
    shortest) reserves n0, whose job comes first among those ending at t=3600."""
    return (
        make_cluster().nodes(2).at(0)
        .running(make_running(make_job("ra").gpus(4).limit(3600)).on("n0", 0, 1, 2, 3).started(0),
                 make_running(make_job("rb").gpus(4).limit(3600)).on("n1", 0, 1, 2, 3).started(0),
                 make_running(make_job("rc").gpus(2).limit(b_rest_limit)).on("n1", 4, 5)
                 .started(0))
        .pending(make_job("head").gpus(8).limit(3600).submitted(0),
                 make_job("small").gpus(4).limit(7200).submitted(1), *more)
    )


@pytest.mark.parametrize(
    ("b_rest_limit", "moves", "small_starts", "head_node"),
    [(3600, None, True, "n1"), (3600, 0, False, "n0"), (7200, None, False, "n0")],
    ids=["head-still-starts-on-time-on-the-other-node-so-the-reservation-moves",
         "classic-easy-with-no-moves-keeps-small-waiting",
         "the-other-node-frees-too-late-so-small-would-delay-the-head"],
)
def test_backfill_past_the_head_start_only_when_the_head_still_starts_on_time_elsewhere(
        b_rest_limit, moves, small_starts, head_node):
    # "small" (4 GPUs, limit 2 h) fits only on n0's 4 free GPUs, which the head's reservation
    # (8 GPUs at t=3600) holds, and would run past t=3600. It may start only if the head can
    # still start at t=3600 on other GPUs: n1, once rb and rc are gone by then.
    config = SchedulerConfig() if moves is None else SchedulerConfig(max_reservation_moves=moves)
    plan = two_draining_nodes(b_rest_limit).plan(config)
    assert ("small" in bound(plan)) == small_starts
    [reservation] = plan.reservations
    assert reservation.job_id == "head"
    assert reservation.start_at == 3600.0
    assert [p.node for p in reservation.placements] == [head_node]
    assert why(plan, "head").eta == 3600.0
    if small_starts:
        assert bound_nodes(plan, "small") == ["n0"]
        assert "on 1 node from t=3600" in why(plan, "head").message
    else:
        assert why(plan, "small").code is ReasonCode.BEHIND_HIGHER_PRIORITY


def test_a_moved_reservation_holds_its_new_gpus_for_the_head():
    # after "small" takes n0, n1's 2 free GPUs are held for the head: a 2-GPU job of 2 h
    # cannot take them, a 2-GPU job that ends by t=3600 can
    plan = two_draining_nodes(3600, make_job("long2").gpus(2).limit(7200).submitted(2)).plan()
    assert "small" in bound(plan)
    assert "long2" not in bound(plan)
    assert plan.fleet.reserved_gpus == 2


def _head_behind_a_stopping_job_and_a_long_one():
    # n1's 8 GPUs are held by "stop", already told to stop (30 s grace); n0's by "long" until
    # t=3600. "head" needs 16 GPUs: its reservation is n0 and n1 from t=3600.
    return (make_cluster().nodes(2).at(100)
            .running(make_running(make_job("long").gpus(8).limit(3600)).whole("n0").started(0),
                     make_running(make_job("stop").gpus(8)).whole("n1").started(0).terminating())
            .pending(make_job("head").gpus(16).submitted(0)))


@pytest.mark.parametrize(("limit", "claims"), [(None, False), (1800.0, True)],
                         ids=["would-run-past-the-heads-start", "ends-before-the-heads-start"])
def test_a_later_job_claims_a_stopping_jobs_gpus_promised_to_the_head_only_if_it_ends_by_its_start(
        limit, claims):
    # "later" (8 GPUs, behind the head in the queue) claimed stop's GPUs, which the head is
    # promised at t=3600: it was told it starts on n1 at t=130, and without a runtime limit it
    # would hold n1 when the head's reservation starts, delaying the head for ever.
    plan = (_head_behind_a_stopping_job_and_a_long_one()
            .pending(make_job("later").priority("low").gpus(8).limit(limit).submitted(1))
            .plan())
    head = {r.job_id: r for r in plan.reservations}["head"]
    assert (head.start_at, sorted(p.node for p in head.placements)) == (3600.0, ["n0", "n1"])
    assert (why(plan, "later").code is ReasonCode.WAITING_FOR_PREEMPTION) is claims
    assert ("later" in {r.job_id for r in plan.reservations}) is claims


def test_the_head_is_never_promised_gpus_a_job_ahead_of_it_claimed_from_a_stopping_job():
    # "first" (high priority) claims stop's GPUs on n1 and starts there at t=130. "second" then
    # becomes the head: it was promised the same GPUs of n1 at t=130 (stop's end), which
    # "first" takes; the GPUs it will get are n0's, at t=3600.
    plan = (make_cluster().nodes(2).at(100)
            .running(make_running(make_job("long").gpus(8).limit(3600)).whole("n0").started(0),
                     make_running(make_job("stop").gpus(8)).whole("n1").started(0).terminating())
            .pending(make_job("first").priority("high").gpus(8).submitted(0),
                     make_job("second").gpus(8).submitted(1))
            .plan())
    reserved = {r.job_id: r for r in plan.reservations}
    assert why(plan, "first").code is ReasonCode.WAITING_FOR_PREEMPTION
    assert [p.node for p in reserved["first"].placements] == ["n1"]
    assert (reserved["second"].start_at, [p.node for p in reserved["second"].placements]) == (3600.0, ["n0"])
