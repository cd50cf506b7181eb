"""The stranded-GPU rule's one home (scheduler_core/stranded.py): the rule alone, table-driven;
a waiting request cut into its gang as the cycle cuts it; and one pool of mixed nodes built both
ways, as the cycle's snapshot and as the rows the live figures read, stranding the same GPUs."""

from __future__ import annotations

import pytest
from engine_builders import JobBuilder, make_cluster, make_job, make_running

from scheduler_core import Plan, SchedulerConfig
from scheduler_core.stranded import (
    NodeKind,
    NodeUse,
    WaitingJob,
    WaitingMember,
    WaitingShape,
    members_of,
    stranded,
)

# kinds by name, their GPUs: "s" small (4), "b" big (8), "o" other type (8)
GPUS = {"s": 4, "b": 8, "o": 8}


def node(kind: str, used: int, *, pool: str = "p", takes_work: bool = True) -> NodeUse[str]:
    return NodeUse(pool, kind, used, GPUS[kind] - used, takes_work)


def job(*members: tuple[int, str], jobs: int = 1) -> WaitingJob[str]:
    return WaitingJob(tuple(WaitingMember(gpus, frozenset(kinds)) for gpus, kinds in members), jobs)


FLEET = [node("s", 3), node("b", 6), node("b", 0), node("b", 8), node("o", 5)]
RULE = {
    # name: (nodes, waiting jobs, stranded GPUs)
    "nothing_waits_nothing_stranded": (FLEET, [], 0),
    "a_job_beside_room_on_every_node_it_may_use_strands_nothing": (FLEET, [job((6, "b"))], 0),
    "a_whole_node_job_strands_the_idle_gpus_of_partly_used_nodes_of_its_kinds": (FLEET, [job((8, "b"))], 2),
    "a_member_reaching_one_kind_strands_every_kind_the_gang_may_use": (FLEET, [job((8, "b"), (2, "sb"))], 3),
    "a_member_of_4_fills_a_small_node_and_strands_big_ones_too": (FLEET, [job((4, "sb"))], 3),
    "two_jobs_strand_the_union": (FLEET, [job((8, "b")), job((8, "o"))], 5),
    "a_node_that_takes_no_work_strands_nothing": ([node("b", 6, takes_work=False)], [job((8, "b"))], 0),
    "a_kind_with_no_node_decides_nothing": ([node("b", 6)], [job((4, "s"))], 0),
}


@pytest.mark.parametrize("case", sorted(RULE))
def test_the_stranded_rule(case: str) -> None:
    nodes, waiting, gpus = RULE[case]
    assert stranded(nodes, GPUS, waiting).gpus == gpus
    # the cycle's shortcuts (only the partly used nodes that take work handed over; the queue
    # read until every kind that could strand is wanted) agree
    partly_used = [n for n in nodes if n.takes_work and n.used > 0 and n.idle > 0]
    assert stranded(partly_used, GPUS, iter(waiting), count_waiting=False).gpus == gpus


def test_stranded_gpus_and_waiting_jobs_per_pool() -> None:
    nodes = [node("b", 6, pool="x"), node("s", 1, pool="y"), node("o", 4, pool="y")]
    figures = stranded(nodes, GPUS, [job((8, "b"), jobs=3), job((4, "s")), job((2, "o"))])
    assert figures.gpus_by_pool == {"x": 2, "y": 3}
    assert figures.waiting_by_pool == {"x": 3, "y": 1}
    assert figures.gpus == 5
    assert stranded(nodes, GPUS, [], count_waiting=False).waiting_by_pool is None


A100 = NodeKind("a100", 80, 8)
H100 = NodeKind("h100", 80, 8)
H100_SMALL = NodeKind("h100", 80, 4)
A100_40 = NodeKind("a100-40", 40, 8)
KINDS = (A100, H100, H100_SMALL, A100_40)
MEMBERS = {
    # name: (shape, {member GPUs: the kinds it may run on})
    "one_member_of_its_size": (WaitingShape(6), {6: {A100, H100, A100_40}}),
    "whole_nodes_of_the_largest_node_and_a_remainder":
        (WaitingShape(10, gpu_types=("h100",)), {8: {H100}, 2: {H100, H100_SMALL}}),
    "gpus_per_node_each": (WaitingShape(12, gpus_per_node=4, gpu_types=("h100",)), {4: {H100, H100_SMALL}}),
    "memory_leaves_out_a_type": (WaitingShape(8, min_gpu_memory_gb=80), {8: {A100, H100}}),
    "an_elastic_job_at_its_smallest": (WaitingShape(8, min_gpus=4, max_gpus=8, gpu_types=("h100",)),
                                       {4: {H100, H100_SMALL}}),
    "same_node_is_one_member": (WaitingShape(12, same_node=True), {12: set()}),
}


@pytest.mark.parametrize("case", sorted(MEMBERS))
def test_a_waiting_request_is_cut_as_the_cycle_cuts_its_gang(case: str) -> None:
    shape, expected = MEMBERS[case]
    assert {m.gpus: set(m.runs_on) for m in members_of(shape, KINDS)} == expected


BOTH_WAYS = {
    # name: (the waiting job as the cycle reads it, as the live figures read it)
    "6_gpus": (make_job("w").gpus(6).types("h100"), WaitingShape(6, gpu_types=("h100",))),
    "10_gpus": (make_job("w").gpus(10).types("h100"), WaitingShape(10, gpu_types=("h100",))),
    "elastic_6_to_8": (make_job("w").gpus(8).elastic(6, 8).types("h100"),
                       WaitingShape(8, gpu_types=("h100",), min_gpus=6, max_gpus=8)),
    "12_at_4_per_node": (make_job("w").gpus(12).per_node(4).types("h100"),
                         WaitingShape(12, gpus_per_node=4, gpu_types=("h100",))),
    "8_any_type": (make_job("w").gpus(8), WaitingShape(8)),
    "4_per_node_any_type": (make_job("w").gpus(8).per_node(4), WaitingShape(8, gpus_per_node=4)),
}


def mixed_pool_plan(waiting: JobBuilder) -> Plan:
    """One pool of an 8-GPU A100 node, an 8-GPU H100 node and a 4-GPU H100 node, with 5, 3 and
    3 GPUs used (``USED``), and ``waiting``."""
    return (
        make_cluster().nodes(1, prefix="a").nodes(1, gpu_type="h100", prefix="h")
        .nodes(1, gpu_type="h100", gpus=4, prefix="hs").at(600)
        .running(make_running(make_job("ra").gpus(5).types("a100")).on("a0", *range(5)).started(0),
                 make_running(make_job("rh").gpus(3).types("h100")).on("h0", 0, 1, 2).started(0),
                 make_running(make_job("rs").gpus(3).types("h100")).on("hs0", 0, 1, 2).started(0))
        .pending(waiting)
        .plan(SchedulerConfig(backfill=False))
    )


USED = {"a0": 5, "h0": 3, "hs0": 3}


@pytest.mark.parametrize("case", sorted(BOTH_WAYS))
def test_a_mixed_pool_built_both_ways_strands_the_same_gpus(case: str) -> None:
    """The cycle's figure and the live figures' reading of the same nodes and waiting job agree."""
    waiting, shape = BOTH_WAYS[case]
    plan = mixed_pool_plan(waiting)
    assert not plan.binds  # it waits
    kinds = {"a0": A100, "h0": H100, "hs0": H100_SMALL}
    live = stranded(
        [NodeUse("main", kind, USED[name], kind.gpus - USED[name], True) for name, kind in kinds.items()],
        {kind: kind.gpus for kind in kinds.values()},
        [WaitingJob(members_of(shape, kinds.values()))],
    )
    assert live.gpus == plan.fleet.stranded_gpus


def test_a_job_that_would_fill_a_node_of_a_type_it_accepts_but_does_not_prefer_needs_whole_nodes() -> None:
    """A job of 8 GPUs, 4 per node, of any type: its preferred type (A100, the smaller device)
    has nodes of 8, where a member of 4 leaves room; the H100 node of 4 it would fill. Until
    7 Dec the cycle judged it on its preferred type alone and counted nothing stranded, where the
    live figures (metrics/fragmentation/) counted the 9 idle GPUs of the three partly used nodes
    it may use."""
    plan = mixed_pool_plan(make_job("w").gpus(8).per_node(4))
    assert not plan.binds
    assert plan.fleet.stranded_gpus == 3 + 5 + 1
