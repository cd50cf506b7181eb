"""Rule 8, elastic jobs (min/max GPUs in fixed-size replicas): start at the minimum when the
maximum does not fit; grow into idle capacity only when the gain repays the resize cost;
shrink toward the minimum before being preempted whole."""

from __future__ import annotations

import pytest
from engine_builders import bound, gpu_count, make_cluster, make_job, make_running, preempted

from scheduler_core import NodeState, SchedulerConfig
from scheduler_core.elastic import growth_gain_s
from scheduler_core.types import GrowthCode

NOW = 10_000.0


@pytest.mark.parametrize(
    ("free_nodes", "expected_gpus"),
    [(4, 32), (3, 24), (2, 16), (1, 0)],
    ids=["max-fits-starts-at-max", "starts-at-the-largest-size-that-fits",
         "starts-at-the-minimum", "below-the-minimum-waits"],
)
def test_elastic_job_starts_at_the_largest_size_that_fits(free_nodes, expected_gpus):
    plan = (
        make_cluster().nodes(free_nodes)
        .pending(make_job("e").gpus(32).per_node(8).elastic(16, 32))
        .plan()
    )
    if expected_gpus:
        assert gpu_count(bound(plan)["e"]) == expected_gpus
    else:
        assert "e" not in bound(plan)


def test_growth_gain_is_remaining_work_spread_over_more_gpus():
    # 8 GPUs with 1 h left; adding 8 halves the rest: 1800 s saved
    assert growth_gain_s(3600.0, 8, 8) == pytest.approx(1800.0)
    assert growth_gain_s(3600.0, 8, 0) == 0.0
    assert growth_gain_s(0.0, 8, 8) == 0.0


@pytest.mark.parametrize(
    ("resize_cost", "grows"),
    [(60.0, True), (1799.0, True), (1800.0, False), (7200.0, False)],
    ids=["cheap-resize-grows", "gain-just-above-cost-grows", "gain-equal-to-cost-stays",
         "expensive-resize-stays"],
)
def test_elastic_job_grows_only_when_the_gain_repays_the_resize_cost(resize_cost, grows):
    # e has 8 GPUs and 1 h left (limit 2 h, started 1 h ago); one more 8-GPU replica is free
    plan = (
        make_cluster().nodes(2).at(NOW)
        .running(make_running(make_job("e").gpus(8).per_node(8).elastic(8, 16)
                              .resize_cost(resize_cost).limit(7200)).whole("n0")
                 .started(NOW - 3600).generation(3))
        .plan()
    )
    if grows:
        [resize] = plan.resizes
        assert (resize.job_id, resize.from_gpus, resize.to_gpus) == ("e", 8, 16)
        assert {p.node for p in resize.placements} == {"n0", "n1"}
        assert resize.generation == 3
        assert resize.for_job is None
    else:
        assert plan.resizes == ()


def test_elastic_job_does_not_grow_past_its_maximum_or_quota():
    plan = (
        make_cluster().nodes(4).at(NOW)
        .quota("ml", "a100", 16)
        .running(make_running(make_job("e").gpus(8).per_node(8).elastic(8, 32).limit(86400))
                 .whole("n0").started(NOW - 60))
        .plan()
    )
    [resize] = plan.resizes
    assert resize.to_gpus == 16


def test_elastic_growth_that_moves_the_job_is_charged_only_its_new_gpus_against_quota():
    # Found by the invariant machine with more examples. Team ml (12 A100 GPUs, no cohort)
    # runs "e" (2 of 2..4 GPUs, in replicas of 2) on n0, a 4-GPU node, and binds "t" (8 GPUs)
    # on n5. Growing e to 4 takes the shape of a fresh bind: it moves to two other 4-GPU
    # nodes. The team then holds 8 + 4 = 12, its nominal quota: the 2 GPUs e leaves on n0 are
    # not counted as well (that would make 14 and refuse the growth).
    plan = (
        make_cluster().nodes(5, gpus=4).at(NOW).node("n5", gpus=8)
        .quota("ml", "a100", 12)
        .running(make_running(make_job("e").gpus(2).per_node(2).elastic(2, 4).serving()
                              .priority("low").limit(86400)).on("n0", 0, 1).started(NOW - 60))
        .pending(make_job("t").gpus(8))
        .plan()
    )
    assert gpu_count(bound(plan)["t"]) == 8
    [resize] = plan.resizes
    assert (resize.from_gpus, resize.to_gpus) == (2, 4)
    assert {p.node for p in resize.placements}.isdisjoint({"n5"})
    held = gpu_count(bound(plan)["t"]) + gpu_count(resize.placements)
    assert held == 12


def test_elastic_growth_never_takes_gpus_another_growing_job_moves_off_this_cycle():
    # Found by the invariant machine with more examples. "a" grows from 2 to 4 GPUs by moving
    # from n0 to n1 (a fresh bind's shape); its old replicas still run on n0's GPUs 0 and 1
    # until the control loop has stopped them. "b" must not grow onto those GPUs in the same
    # plan (it did: 4 -> 6 on n0 0, 1, 4-7, a GPU handed out while its owner still ran).
    plan = (
        make_cluster().nodes(1).node("n1", gpus=4).node("n2", gpus=4).at(NOW)
        .running(
            make_running(make_job("a").gpus(2).per_node(2).elastic(2, 4).limit(86400))
            .on("n0", 0, 1).started(NOW - 60),
            make_running(make_job("b").gpus(4).per_node(2).elastic(2, 8).limit(86400))
            .on("n0", 4, 5, 6, 7).started(NOW - 30),
            make_running(make_job("c").gpus(2)).on("n0", 2, 3).started(NOW - 60),
            make_running(make_job("d").gpus(4)).on("n2", 0, 1, 2, 3).started(NOW - 60),
        )
        .plan()
    )
    [resize] = plan.resizes
    assert (resize.job_id, resize.to_gpus) == ("a", 4)
    assert [(p.node, p.gpu_indices) for p in resize.placements] == [("n1", (0, 1, 2, 3))]
    [note] = plan.growth_notes
    assert note.job_id == "b" and note.code is GrowthCode.NO_ROOM
    assert "those a job growing this cycle moves off" in note.message


def test_elastic_job_grows_only_into_what_the_queue_left():
    plan = (
        make_cluster().nodes(2).at(NOW)
        .running(make_running(make_job("e").gpus(8).per_node(8).elastic(8, 16).limit(86400))
                 .whole("n0").started(NOW - 60))
        .pending(make_job("waiting").gpus(8))
        .plan()
    )
    assert "waiting" in bound(plan)
    assert plan.resizes == ()


def test_elastic_growth_off_by_configuration():
    plan = (
        make_cluster().nodes(2).at(NOW)
        .running(make_running(make_job("e").gpus(8).per_node(8).elastic(8, 16).limit(86400))
                 .whole("n0").started(NOW - 60))
        .plan(SchedulerConfig(elastic_growth=False))
    )
    assert plan.resizes == ()


def test_elastic_job_shrinks_toward_its_minimum_before_being_preempted_whole():
    # e holds 16 GPUs (min 8) on n0 and n1; a high job needs 8: e gives up one replica.
    plan = (
        make_cluster().nodes(2).at(NOW)
        .running(make_running(make_job("e").priority("low").gpus(16).per_node(8).elastic(8, 16))
                 .whole("n0", "n1").started(0).generation(2))
        .pending(make_job("hi").priority("high").gpus(8))
        .plan()
    )
    assert preempted(plan) == []
    [resize] = plan.resizes
    assert (resize.job_id, resize.from_gpus, resize.to_gpus, resize.for_job) == ("e", 16, 8, "hi")
    assert len(resize.placements) == 1 and len(resize.placements[0].gpu_indices) == 8
    assert resize.generation == 2
    [reservation] = plan.reservations
    assert {p.node for p in reservation.placements}.isdisjoint(
        {p.node for p in resize.placements})


def test_elastic_job_shrinks_through_the_sizes_a_bind_starts_it_at_down_to_its_minimum():
    # e runs 2..5 in pairs at 5 (a bind starts it at 5, 3 or 2); x holds the node's other 3.
    # hi needs 3: e gives up 2 (to 3), then 1 (to 2). Until 5 Dec it gave up whole pairs only,
    # stopped at 3, and a whole job was preempted instead.
    plan = (
        make_cluster().nodes(1).at(NOW)
        .running(make_running(make_job("e").priority("low").gpus(5).elastic(2, 5))
                 .on("n0", 0, 1, 2, 3, 4).started(0))
        .running(make_running(make_job("x").priority("low").gpus(3)).on("n0", 5, 6, 7).started(0))
        .pending(make_job("hi").priority("high").gpus(3))
        .plan()
    )
    assert preempted(plan) == []
    [resize] = plan.resizes
    assert (resize.job_id, resize.from_gpus, resize.to_gpus, resize.for_job) == ("e", 5, 2, "hi")
    assert sum(len(p.gpu_indices) for p in resize.placements) == 2


def test_elastic_job_shrinks_to_the_shape_a_fresh_bind_at_the_smaller_size_would_give():
    # e runs 4..12 (in fours) as 4 GPUs on n0 and 8 on n1; x holds n0's other 4. hi needs 4:
    # e shrinks to 8 on n1 alone, the shape a bind of 8 has (one node), giving up n0's 4. It
    # gave up 4 of n1's (its last node by name) and kept 4 + 4 on two nodes, which a bind of
    # 8 never makes (the restart loop the shape rule keeps growth out of).
    plan = (
        make_cluster().nodes(2).at(NOW)
        .running(make_running(make_job("e").priority("low").gpus(12).elastic(4, 12))
                 .on("n0", 0, 1, 2, 3).on("n1", *range(8)).started(0))
        .running(make_running(make_job("x").priority("low").gpus(4)).on("n0", 4, 5, 6, 7).started(0))
        .pending(make_job("hi").priority("high").gpus(4))
        .plan()
    )
    assert preempted(plan) == []
    [resize] = plan.resizes
    assert (resize.from_gpus, resize.to_gpus) == (12, 8)
    assert [(p.node, p.gpu_indices) for p in resize.placements] == [("n1", tuple(range(8)))]
    [reservation] = plan.reservations
    assert [(p.node, p.gpu_indices) for p in reservation.placements] == [("n0", (0, 1, 2, 3))]


def test_elastic_job_gives_back_only_its_last_shrink_steps_when_the_preemptor_leaves_earlier_ones_unused():
    # As above, with n0 cordoned: hi can use only n1. e's first step (n0's 4) frees nothing
    # hi can use, its second (4 of n1's) does; e keeps 4 on n1. The reprieve gave the first
    # step back and kept the second: e ran on at 8 as 4 + 4 on n0 and n1.
    plan = (
        make_cluster().node("n0", state=NodeState.CORDONED).node("n1").at(NOW)
        .running(make_running(make_job("e").priority("low").gpus(12).elastic(4, 12))
                 .on("n0", 0, 1, 2, 3).on("n1", *range(8)).started(0))
        .pending(make_job("hi").priority("high").gpus(4))
        .plan()
    )
    [resize] = plan.resizes
    assert (resize.from_gpus, resize.to_gpus) == (12, 4)
    assert [p.node for p in resize.placements] == ["n1"]


def test_elastic_job_shrinks_only_to_sizes_a_bind_starts_it_at_when_its_last_step_is_smallest():
    # e runs 2..5 in pairs at 5 (sizes 5, 3, 2: steps of 2 GPUs, then 1); x holds the node's
    # other 3. hi needs 1: e shrinks to 3. The victim order ranks a shrink's steps by size, and
    # the search took the 1-GPU step alone: e went to 4, a size no bind starts it at.
    plan = (
        make_cluster().nodes(1).at(NOW)
        .running(make_running(make_job("e").priority("low").gpus(5).elastic(2, 5))
                 .on("n0", 0, 1, 2, 3, 4).started(0))
        .running(make_running(make_job("x").priority("low").gpus(3)).on("n0", 5, 6, 7).started(0))
        .pending(make_job("hi").priority("high").gpus(1))
        .plan()
    )
    assert preempted(plan) == []
    [resize] = plan.resizes
    assert (resize.job_id, resize.from_gpus, resize.to_gpus) == ("e", 5, 3)


def test_elastic_job_at_its_minimum_is_preempted_whole():
    plan = (
        make_cluster().nodes(1).at(NOW)
        .running(make_running(make_job("e").priority("low").gpus(8).per_node(8).elastic(8, 16))
                 .whole("n0").started(0))
        .pending(make_job("hi").priority("high").gpus(8))
        .plan()
    )
    assert preempted(plan) == ["e"]
    assert plan.resizes == ()


def _four_busy_nodes():
    # n0: a holds 6; n1: b holds 4-7; n2: c holds 0-3; n3: d holds 0-3; 8 GPUs free, none
    # of them a whole node.
    return (
        make_cluster().nodes(4, gpus=8).quota("ml", "a100", 32)
        .running(make_running(make_job("a").gpus(6).limit(14400)).on("n0", 0, 1, 2, 3, 4, 5).started(0),
                 make_running(make_job("b").gpus(4).limit(14400)).on("n1", 4, 5, 6, 7).started(0),
                 make_running(make_job("c").gpus(4).limit(14400)).on("n2", 0, 1, 2, 3).started(0),
                 make_running(make_job("d").gpus(4).limit(14400)).on("n3", 0, 1, 2, 3).started(0))
    )


def test_elastic_growth_keeps_the_shape_a_fresh_bind_would_give():
    # e (2..8 GPUs in pairs, no gpus_per_node) runs 4 on n1. Growing to 8 as 4 + 4 on two nodes
    # is a shape no bind makes (a job of a node's GPUs takes a whole node): where a resize
    # restarts the job, its next bind started it at 4 again, and the cycle after grew it again,
    # a restart every cycle for ever.
    grown = (_four_busy_nodes()
             .running(make_running(make_job("e").gpus(4).elastic(2, 8).limit(14400)).on("n1", 0, 1, 2, 3)
                      .started(0))
             .at(10).plan())
    for resize in grown.resizes:
        sizes = [len(p.gpu_indices) for p in resize.placements]
        assert len(sizes) == 1, f"grown to {resize.to_gpus} as {sizes}: a bind would never place that"
    requeued = _four_busy_nodes().pending(make_job("e").gpus(4).elastic(2, 8).limit(14400)).at(20).plan()
    rebound = gpu_count(bound(requeued)["e"])
    assert all(resize.to_gpus == rebound for resize in grown.resizes), (grown.resizes, rebound)


@pytest.mark.parametrize(("other_half_free", "grows_on"), [(True, "n0"), (False, "n1")],
                         ids=["grows-in-place", "moves-to-a-whole-free-node"])
def test_elastic_job_grows_to_a_whole_node_where_one_is_free(other_half_free, grows_on):
    cluster = make_cluster().nodes(2, gpus=8).at(NOW)
    if not other_half_free:
        cluster = cluster.running(make_running(make_job("x").gpus(4).limit(86400)).on("n0", 4, 5, 6, 7)
                                  .started(NOW - 60))
    plan = (cluster.running(make_running(make_job("e").gpus(4).elastic(2, 8).limit(86400)).on("n0", 0, 1, 2, 3)
                            .started(NOW - 60))
            .plan())
    [resize] = plan.resizes
    assert resize.to_gpus == 8
    assert [(p.node, len(p.gpu_indices)) for p in resize.placements] == [(grows_on, 8)]


@pytest.mark.parametrize(("checkpointed_ago", "grows"), [(600.0, True), (3000.0, False)],
                         ids=["recent-checkpoint-grows", "work-lost-since-checkpoint-outweighs-the-gain"])
def test_elastic_growth_that_restarts_the_job_repays_the_work_since_its_checkpoint(checkpointed_ago, grows):
    # 8 GPUs with 1 h left; 8 more save 1800 s. Where a resize restarts the job (the control
    # plane), the work since its last checkpoint is lost and the restart paid too (300 s).
    cluster = (make_cluster().nodes(2).at(NOW)
               .running(make_running(make_job("e").gpus(8).per_node(8).elastic(8, 16).limit(7200)
                                     .restart_cost(300)).whole("n0").started(NOW - 3600)
                        .checkpointed(NOW - checkpointed_ago)))
    assert len(cluster.plan().resizes) == 1  # resizing in place, nothing is lost
    plan = cluster.plan(SchedulerConfig(resize_restarts=True))
    if grows:
        [resize] = plan.resizes
        assert resize.message == ("Grows from 8 to 16 GPUs: finishes about 30 min sooner, more than the 15 min a "
                                  "restart costs it (10 min of work since its last checkpoint and 5 min to resize).")
    else:
        assert plan.resizes == ()


def test_elastic_growth_takes_the_whole_node_shape_by_the_fleets_largest_node_as_a_bind_does():
    # e (2..6 GPUs in pairs, no gpus_per_node) runs 2 on n0, a node of 4. A bind of 6 is one
    # member of 6 (the fleet's largest a100 node has 8), which fits nowhere: n0 has 4 GPUs, n1
    # has 5 free. Growth counted whole nodes by n0's width instead and grew e to 6 as 4 + 2 on
    # two nodes, a shape no bind makes: restarted for the resize, e binds at 4 and grows again.
    def fleet():
        return (make_cluster().node("n0", gpus=4).node("n1", gpus=8).at(10)
                .running(make_running(make_job("x").gpus(3).limit(86400)).on("n1", 0, 1, 2).started(0)))
    grown = (fleet()
             .running(make_running(make_job("e").gpus(2).elastic(2, 6).limit(14400)).on("n0", 0, 1).started(0))
             .plan())
    rebound = bound(fleet().pending(make_job("e").gpus(6).elastic(2, 6).limit(14400)).plan())["e"]
    assert gpu_count(rebound) == 4
    [resize] = grown.resizes
    assert resize.to_gpus == 4
    assert len(resize.placements) == 1, resize.placements


def test_elastic_growth_reaches_only_sizes_a_bind_would_start_the_job_at():
    # e (2..5 GPUs, replicas of its minimum, 2) starts at 5, 3 or 2: from the maximum down in
    # replica steps, then the minimum. Growth counted replicas up from what e holds and grew it
    # from 2 to 4, a size no bind starts it at, from which it could never reach its maximum.
    plan = (make_cluster().nodes(1).at(10)
            .running(make_running(make_job("e").gpus(2).elastic(2, 5).limit(14400)).on("n0", 0, 1).started(0))
            .plan())
    [resize] = plan.resizes
    assert (resize.from_gpus, resize.to_gpus) == (2, 5)
    fresh = make_cluster().nodes(1).pending(make_job("e").gpus(5).elastic(2, 5).limit(14400)).plan()
    assert gpu_count(bound(fresh)["e"]) == resize.to_gpus
