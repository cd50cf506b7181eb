"""Rule 8, elastic jobs (min/max GPUs in fixed-size replicas): start at the minimum when the
maximum does not fit; grow into idle capacity only when the gain repays the resize cost;
shrink toward the minimum before being preempted whole."""

from __future__ import annotations

import pytest
from engine_builders import bound, gpu_count, make_cluster, make_job, make_running, preempted

from scheduler_core import SchedulerConfig
from scheduler_core.elastic import growth_gain_s

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
