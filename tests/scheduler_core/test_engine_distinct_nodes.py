"""A gang asked with ``members_on_distinct_nodes`` puts each member on a node of its own
(Slurm's ``--ntasks-per-node=1``, a Kubernetes pod anti-affinity), still all or nothing; its
wait names the distinct nodes it needs, and a fleet with fewer capable nodes than members can
never run it. Without the option members are packed, two on one node when it has room."""

from __future__ import annotations

from collections import Counter

from engine_builders import (
    DEFAULT_TYPES,
    bound,
    bound_nodes,
    make_cluster,
    make_job,
    make_running,
    preempted,
    why,
)

from scheduler_core import Infeasible, NodeInfo, ReasonCode, never_runs

TYPES = {t.name: t for t in DEFAULT_TYPES}


def test_packed_gang_shares_a_node_but_distinct_one_takes_a_node_per_member():
    packed = make_cluster().nodes(2).pending(make_job("p").gpus(8).per_node(4)).plan()
    assert len(bound_nodes(packed, "p")) == 1
    spread = make_cluster().nodes(2).pending(
        make_job("d").gpus(8).per_node(4).distinct_nodes()).plan()
    assert bound_nodes(spread, "d") == ["n0", "n1"]
    assert sorted(len(p.gpu_indices) for p in bound(spread)["d"]) == [4, 4]


def test_distinct_nodes_gang_is_all_or_nothing_when_one_node_has_room_for_two_members():
    # n0 is empty (room for two members of 4), n1 is full: packed it would start on n0 alone
    plan = (
        make_cluster().nodes(2)
        .running(make_running(make_job("r").gpus(8)).on("n1", *range(8)))
        .pending(make_job("d").gpus(8).per_node(4).distinct_nodes())
        .plan()
    )
    assert "d" not in bound(plan)
    assert plan.fleet.allocated_gpus == 8


def test_distinct_nodes_wait_names_the_distinct_nodes_it_needs():
    # 12 GPUs free, on 2 nodes with 4 or more free: three members of 4 need three such nodes
    plan = (
        make_cluster().nodes(3)
        .running(make_running(make_job("r").gpus(8)).on("n2", *range(8)))
        .pending(make_job("d").gpus(12).per_node(4).distinct_nodes())
        .plan()
    )
    t = why(plan, "d")
    assert t.code is ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS
    assert ("16 a100 GPUs free, but its members go on distinct nodes: it needs 3 distinct nodes "
            "with 4 free GPUs each, and only 2 nodes have 4 free.") in t.message


def test_distinct_nodes_gang_with_more_members_than_capable_nodes_can_never_run():
    plan = make_cluster().nodes(2).pending(
        make_job("d").gpus(12).per_node(4).distinct_nodes()).plan()
    t = why(plan, "d")
    assert t.code is ReasonCode.CAN_NEVER_RUN
    assert "needs 3 distinct nodes with 4 GPUs each; the fleet has 2 capable nodes" in t.message
    # the same gang packed runs: two members share a node
    packed = make_cluster().nodes(2).pending(make_job("p").gpus(12).per_node(4)).plan()
    assert sum(len(p.gpu_indices) for p in bound(packed)["p"]) == 12


def test_submit_check_refuses_more_members_than_capable_nodes_on_the_field():
    nodes = [NodeInfo(f"n{i}", "main", "a100", 8, 64, 512, "l0", "s0") for i in range(2)]
    found = never_runs(make_job("d").gpus(10).per_node(4).distinct_nodes().obj(), nodes, TYPES)
    assert isinstance(found, Infeasible)
    assert found.field == "members_on_distinct_nodes"
    assert found.message == ("asks 3 distinct nodes with 4 GPUs each (one with 2), its members "
                             "on distinct nodes; the fleet has 2 capable nodes")
    assert never_runs(make_job("p").gpus(10).per_node(4).obj(), nodes, TYPES) is None


def test_elastic_distinct_nodes_gang_grows_onto_nodes_it_does_not_hold():
    # it holds 4 GPUs on n0, which has 4 more free; growing by one member must go to n1
    plan = (
        make_cluster().nodes(2)
        .running(make_running(make_job("e").gpus(4).per_node(4).elastic(4, 8).distinct_nodes())
                 .on("n0", 0, 1, 2, 3))
        .plan()
    )
    grown = [r for r in plan.resizes if r.job_id == "e"]
    assert grown, plan
    nodes = Counter(p.node for p in grown[0].placements)
    assert set(nodes) == {"n0", "n1"}


def test_distinct_nodes_job_does_not_share_a_failed_shape_with_a_packed_twin():
    # the packed twin fits on n0 alone; the distinct one cannot: each is judged by its own shape
    plan = (
        make_cluster().nodes(2)
        .running(make_running(make_job("r").gpus(8)).on("n1", *range(8)))
        .pending(make_job("d").gpus(8).per_node(4).distinct_nodes().submitted(0),
                 make_job("p").gpus(8).per_node(4).submitted(1))
        .plan()
    )
    assert "d" not in bound(plan)
    assert bound_nodes(plan, "p") == ["n0"]


def test_same_node_and_distinct_nodes_together_is_an_invalid_request():
    plan = make_cluster().nodes(2).pending(
        make_job("x").gpus(8).topology("same_node").distinct_nodes()).plan()
    t = why(plan, "x")
    assert t.code is ReasonCode.INVALID_REQUEST
    assert "topology same_node and members_on_distinct_nodes ask opposite things" in t.message


def test_higher_priority_distinct_nodes_gang_preempts_for_a_second_node_only_one_job():
    # n0 is empty, n1 holds two low jobs of 4: packed, the gang starts on n0 and preempts
    # nothing; on distinct nodes it needs 4 GPUs on n1 too, so it preempts one of them
    def cluster():
        return (
            make_cluster().nodes(2).at(10_000.0)
            .running(make_running(make_job("lo0").priority("low").gpus(4)).on("n1", 0, 1, 2, 3).started(0),
                     make_running(make_job("lo1").priority("low").gpus(4)).on("n1", 4, 5, 6, 7).started(0))
        )

    spread = cluster().pending(make_job("hi").priority("high").gpus(8).per_node(4).distinct_nodes()).plan()
    assert preempted(spread) == ["lo0"]
    assert why(spread, "hi").code is ReasonCode.WAITING_FOR_PREEMPTION
    packed = cluster().pending(make_job("hi").priority("high").gpus(8).per_node(4)).plan()
    assert preempted(packed) == []
    assert bound_nodes(packed, "hi") == ["n0"]
