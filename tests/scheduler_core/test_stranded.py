"""The stranded-GPU rule's one home (scheduler_core/stranded.py): the rule alone, table-driven;
a waiting request cut into its gang as the cycle cuts it; and one pool of mixed nodes built both
ways, as the cycle's snapshot and as the rows the live figures read, stranding the same GPUs."""

from __future__ import annotations

import random

import pytest
from engine_builders import ClusterBuilder, JobBuilder, make_cluster, make_job, make_running, role, why

from scheduler_core import Plan, SchedulerConfig
from scheduler_core.capability import NodeShape, node_shapes
from scheduler_core.stranded import (
    LiveFleet,
    NodeKind,
    NodeUse,
    WaitingJob,
    WaitingMember,
    WaitingShape,
    kind_of,
    members_of,
    stranded,
)
from scheduler_core.types import GangRole, GpuTypeInfo, JobSpec, NodeState, TopologyConstraint

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


def shapes(*nodes: tuple[str, int, int, int, int, int]) -> list[NodeShape]:
    """Nodes by (GPU type, device memory, GPUs, CPUs, memory, how many), all under one leaf."""
    return [NodeShape(GpuTypeInfo(t, mem), gpus, cpus, memory, "l0", "s0", n) for t, mem, gpus, cpus, memory, n in nodes]


FLEET_SHAPES = shapes(("a100", 80, 8, 64, 512, 2), ("h100", 80, 8, 64, 512, 2), ("h100", 80, 4, 64, 512, 2),
                      ("a100-40", 40, 8, 64, 512, 2), ("h100", 80, 8, 128, 1024, 1), ("t4", 16, 4, 64, 512, 4))
A100, H100, H100_SMALL, A100_40, H100_WIDE, T4 = (kind_of(s) for s in FLEET_SHAPES)
MEMBERS = {
    # name: (shape, {member GPUs: the kinds it may run on})
    "one_member_of_its_size": (WaitingShape(6), {6: {A100, H100, A100_40, H100_WIDE}}),
    "whole_nodes_of_the_largest_node_and_a_remainder":
        (WaitingShape(10, gpu_types=("h100",)), {8: {H100, H100_WIDE}, 2: {H100, H100_SMALL, H100_WIDE}}),
    "gpus_per_node_each": (WaitingShape(12, gpus_per_node=4, gpu_types=("h100",)),
                           {4: {H100, H100_SMALL, H100_WIDE}}),
    "memory_leaves_out_a_type": (WaitingShape(8, min_gpu_memory_gb=80), {8: {A100, H100, H100_WIDE}}),
    "an_elastic_job_at_its_smallest": (WaitingShape(8, min_gpus=4, max_gpus=8, gpu_types=("h100",)),
                                       {4: {H100, H100_SMALL, H100_WIDE}}),
    "a_gang_that_can_never_run_has_no_members": (WaitingShape(12, topology=TopologyConstraint.SAME_NODE), {}),
    "cpus_leave_out_the_nodes_without_them": (WaitingShape(8, cpus_per_gpu=12), {8: {H100_WIDE}}),
    "memory_leaves_out_the_nodes_without_it": (WaitingShape(4, memory_gb_per_gpu=200), {4: {H100_WIDE}}),
    "each_role_its_own_members": (
        WaitingShape(10, roles=(role("trainer", 1, 8, "h100"), role("worker", 2, 1, "a100"))),
        {8: {H100, H100_WIDE}, 1: {A100}}),
    "a_roles_own_cpus_and_memory_and_the_jobs_where_it_gives_none": (
        WaitingShape(12, cpus_per_gpu=16, roles=(GangRole("learner", 1, 4, ("h100",), 0, 0, 0),
                                                 GangRole("worker", 1, 8, (), 0, 1, 100))),
        {4: {H100, H100_SMALL, H100_WIDE}, 8: {H100_WIDE}}),
    # members of 8 and 2 of any type: the 2 fits a t4 node, but a gang does not mix types, and
    # no t4 node holds the member of 8
    "a_gang_runs_on_one_type_every_member_may_use": (
        WaitingShape(10), {8: {A100, H100, A100_40, H100_WIDE}, 2: {A100, H100, H100_SMALL, A100_40, H100_WIDE}}),
    # 24 GPUs of 80 GB: the two a100 nodes hold 16, the three 8-GPU h100 nodes 24
    "a_type_whose_nodes_can_never_hold_the_gang_is_left_out": (
        WaitingShape(24, min_gpu_memory_gb=80), {8: {H100, H100_WIDE}}),
}


@pytest.mark.parametrize("case", sorted(MEMBERS))
def test_a_waiting_request_is_cut_as_the_cycle_cuts_its_gang(case: str) -> None:
    shape, expected = MEMBERS[case]
    found: dict[int, set[NodeKind]] = {}
    for m in members_of(shape, LiveFleet(FLEET_SHAPES)):
        found.setdefault(m.gpus, set()).update(m.runs_on)
    assert found == expected


def live_stranded(cluster: ClusterBuilder, waiting: JobSpec) -> int:
    """The stranded GPUs as the live figures count them: ``cluster``'s nodes with the GPUs its
    running jobs hold, and ``waiting`` read as its row (`fleet_figures._waiting_jobs`)."""
    snapshot = cluster.snapshot()
    types = {t.name: t for t in snapshot.gpu_types}
    used: dict[str, int] = {}
    for job in snapshot.running:
        for p in job.placements:
            used[p.node] = used.get(p.node, 0) + len(p.gpu_indices)
    fleet = node_shapes(snapshot.nodes, types)
    uses = []
    for node in snapshot.nodes:
        kind = NodeKind(node.gpu_type, types[node.gpu_type].memory_gb, node.gpus, node.cpus, node.memory_gb)
        uses.append(NodeUse(node.pool, kind, used.get(node.name, 0), node.gpus - used.get(node.name, 0),
                            node.state is NodeState.READY))
    row = WaitingShape(
        waiting.gpus, waiting.gpus_per_node, waiting.gpu_types, waiting.min_gpu_memory_gb, waiting.cpus_per_gpu,
        waiting.memory_gb_per_gpu, waiting.topology, waiting.min_gpus, waiting.max_gpus, waiting.roles,
        waiting.members_on_distinct_nodes)
    return stranded(uses, {u.kind: u.kind.gpus for u in uses}, [WaitingJob(members_of(row, LiveFleet(fleet)))]).gpus


BOTH_WAYS = {
    "6_gpus": make_job("w").gpus(6).types("h100"),
    "10_gpus": make_job("w").gpus(10).types("h100"),
    "elastic_6_to_8": make_job("w").gpus(8).elastic(6, 8).types("h100"),
    "12_at_4_per_node": make_job("w").gpus(12).per_node(4).types("h100"),
    "8_any_type": make_job("w").gpus(8),
    "4_per_node_any_type": make_job("w").gpus(8).per_node(4),
    "8_with_cpus_only_the_wide_node_has": make_job("w").gpus(8).cpus_per_gpu(12),
    "8_with_memory_only_the_wide_node_has": make_job("w").gpus(8).memory_per_gpu(100),
    "a_learner_that_fills_the_small_node": make_job("w").roles(role("learner", 1, 4, "h100"),
                                                               role("worker", 1, 2, "h100")),
    "roles_that_fill_no_node": make_job("w").roles(role("learner", 1, 6, "h100"), role("worker", 1, 2, "h100")),
    "a_trainer_of_a_whole_h100_node": make_job("w").roles(role("trainer", 1, 8, "h100"),
                                                          role("worker", 1, 1, "h100")),
    "a_trainer_and_a100_workers": make_job("w").roles(role("trainer", 1, 8, "h100"), role("worker", 2, 1, "a100")),
    "10_any_type": make_job("w").gpus(10),
    "12_any_type": make_job("w").gpus(12),
}
# (case, with ``more`` nodes) where the waiting job starts, or can never run: nothing to compare
NOT_WAITING = {("8_with_cpus_only_the_wide_node_has", False), ("8_with_memory_only_the_wide_node_has", False),
               ("4_per_node_any_type", True), ("a_learner_that_fills_the_small_node", True)}


def mixed_pool(waiting: JobBuilder, *, more: bool = True) -> ClusterBuilder:
    """One pool of an 8-GPU A100 node, an 8-GPU H100 node and a 4-GPU H100 node, with 5, 3 and
    3 GPUs used, and ``waiting``; with ``more``, an 8-GPU H100 node of 128 CPUs and 1024 GB with
    3 used and a 4-GPU T4 node with 1 used."""
    cluster = (
        make_cluster().nodes(1, prefix="a").nodes(1, gpu_type="h100", prefix="h")
        .nodes(1, gpu_type="h100", gpus=4, prefix="hs").at(600)
        .running(make_running(make_job("ra").gpus(5).types("a100")).on("a0", *range(5)).started(0),
                 make_running(make_job("rh").gpus(3).types("h100")).on("h0", 0, 1, 2).started(0),
                 make_running(make_job("rs").gpus(3).types("h100")).on("hs0", 0, 1, 2).started(0))
        .pending(waiting)
    )
    if more:
        cluster.nodes(1, gpu_type="h100", prefix="hw", cpus=128, memory_gb=1024).nodes(
            1, gpu_type="t4", gpus=4, prefix="t").running(
            make_running(make_job("rw").gpus(3).types("h100")).on("hw0", 0, 1, 2).started(0),
            make_running(make_job("rt").gpus(1).types("t4")).on("t0", 0).started(0))
    return cluster


def mixed_pool_plan(waiting: JobBuilder) -> Plan:
    return mixed_pool(waiting, more=False).plan(SchedulerConfig(backfill=False))


@pytest.mark.parametrize(("case", "more"), sorted(
    (case, more) for case in BOTH_WAYS for more in (False, True) if (case, more) not in NOT_WAITING))
def test_a_mixed_pool_built_both_ways_strands_the_same_gpus(case: str, more: bool) -> None:
    """The cycle's figure and the live figures' reading of the same nodes and waiting job agree."""
    cluster = mixed_pool(BOTH_WAYS[case], more=more)
    plan = cluster.plan(SchedulerConfig(backfill=False))
    assert not plan.binds and why(plan, "w").resolvable  # it waits
    assert live_stranded(cluster, BOTH_WAYS[case].obj()) == plan.fleet.stranded_gpus


def test_a_job_that_would_fill_a_node_of_a_type_it_accepts_but_does_not_prefer_needs_whole_nodes() -> None:
    """A job of 8 GPUs, 4 per node, of any type: its preferred type (A100, the smaller device)
    has nodes of 8, where a member of 4 leaves room; the H100 node of 4 it would fill. Until
    7 Dec the cycle judged it on its preferred type alone and counted nothing stranded, where the
    live figures (metrics/fragmentation/) counted the 9 idle GPUs of the three partly used nodes
    it may use."""
    plan = mixed_pool_plan(make_job("w").gpus(8).per_node(4))
    assert not plan.binds
    assert plan.fleet.stranded_gpus == 3 + 5 + 1


def random_case(seed: int) -> tuple[ClusterBuilder, JobBuilder]:
    """A fleet of 2 to 7 nodes of three GPU types, sizes, CPUs and memory under three leaves and
    two spines, some not ready, each partly used or not, and one waiting job: a heterogeneous
    gang, or a job with GPUs per node, types, CPUs and memory per GPU, a switch or the same
    node, an elastic range, its members on distinct nodes."""
    r = random.Random(seed)
    types = ["a100", "h100", "a100-40"]
    cluster = make_cluster().at(600)
    for i in range(r.randint(2, 7)):
        gpu_type, gpus, leaf = r.choice(types), r.choice([4, 8, 8]), r.choice(["l0", "l1", "l2"])
        state = NodeState.READY if r.random() < 0.85 else r.choice(list(NodeState))
        cluster.node(f"n{i}", gpu_type=gpu_type, gpus=gpus, cpus=r.choice([32, 64, 128]),
                     memory_gb=r.choice([256, 512, 1024]), leaf=leaf, spine="s1" if leaf == "l2" else "s0",
                     state=state)
        used = r.randint(0, gpus)
        if used:
            cluster.running(make_running(make_job(f"r{i}").gpus(used).types(gpu_type)).on(f"n{i}", *range(used)))
    waiting = make_job("w")
    if r.random() < 0.35:
        waiting.roles(*(GangRole(f"r{i}", r.randint(1, 2), r.choice([1, 2, 4, 6, 8]),
                                 tuple(r.sample(types, r.randint(0, 2))), 0, r.choice([0, 0, 8, 16]),
                                 r.choice([0, 0, 64])) for i in range(r.randint(1, 3))))
    else:
        waiting.gpus(r.choice([2, 4, 6, 8, 10, 12, 16, 24]))
        if r.random() < 0.3:
            waiting.per_node(r.choice([2, 4, 8]))
        if r.random() < 0.4:
            waiting.types(*r.sample(types, r.randint(1, 2)))
        if r.random() < 0.3:
            waiting.cpus_per_gpu(r.choice([4, 8, 16]))
        if r.random() < 0.3:
            waiting.memory_per_gpu(r.choice([32, 64, 128]))
        if r.random() < 0.2:
            gpus = waiting.obj().gpus
            waiting.elastic(max(1, gpus // 2), gpus)
    if r.random() < 0.25:
        waiting.topology(r.choice(["same_leaf", "same_spine", "same_node"]))
    if r.random() < 0.15:
        waiting.distinct_nodes()
    return cluster.pending(waiting), waiting


def test_random_fleets_and_waiting_jobs_built_both_ways_strand_the_same_gpus() -> None:
    """Of 3,000 random fleets and waiting jobs, every one where the job waits in line (neither
    starts nor can never run; about 900) strands the same GPUs read live as in the cycle. Found
    apart before the live figures judged a job on the GPU types the cycle tries it on, as the
    cycle judges them: a gang of members of 8 and 4 kept on one spine, whose 8 fits on an a100
    node alone on its spine, was left off the a100 nodes live (0 stranded) and kept on them by
    the cycle (2)."""
    compared = 0
    for seed in range(3000):
        cluster, waiting = random_case(seed)
        plan = cluster.plan(SchedulerConfig(backfill=False))
        if plan.binds or not why(plan, "w").resolvable:
            continue
        compared += 1
        assert live_stranded(cluster, waiting.obj()) == plan.fleet.stranded_gpus, seed
    assert compared > 600
