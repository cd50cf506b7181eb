"""A gang asked with ``members_on_distinct_nodes`` puts each member on a node of its own
(Slurm's ``--ntasks-per-node=1``, a Kubernetes pod anti-affinity), still all or nothing; its
wait names the distinct nodes it needs, and a fleet with fewer capable nodes than members can
never run it. Without the option members are packed, two on one node when it has room."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from engine_builders import (
    DEFAULT_TYPES,
    bound,
    bound_nodes,
    make_cluster,
    make_job,
    make_running,
    preempted,
    role,
    why,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_engine_explain_eta import NO_BACKFILL, evolve

from scheduler_core import GangRole, Infeasible, NodeInfo, ReasonCode, never_runs, schedule
from scheduler_core.admission import capable_classes
from scheduler_core.cycle import _context
from scheduler_core.distinct_nodes import shapes_of
from scheduler_core.gang import demand_for, spec_gpus
from scheduler_core.placement import PlacementRequest
from scheduler_core.plugins.registry import build_plugins
from scheduler_core.preemption import capacity_eta
from scheduler_core.state import JOB
from scheduler_core.types import SchedulerConfig, Snapshot

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


# ETAs of a gang on distinct nodes whose members differ in size: every member needs a node of
# its own with room for its size, not only the largest ones. n0, n1 and n2 are full until
# t=1000, 2000 and 3000 (runtime limits); the gang's members are 4, 4 and 2. Until 7 Dec the
# release timeline counted nodes only for the two members of 4, so it was told t=2000 (16 free
# GPUs on two nodes) and started at t=3000, when a third node frees. (Without backfill: a head
# holds a reservation, whose start the placer finds, so the timeline's count is not asked.)
def three_nodes_freeing_one_by_one(job, n2_busy: int = 8, n1_busy: int = 8):
    def busy(name: str, node: str, gpus: int, limit: float):
        return make_running(make_job(name).gpus(gpus).limit(limit)).on(node, *range(gpus))

    return (
        make_cluster().nodes(3).at(0)
        .running(busy("a", "n0", 8, 1000), busy("b", "n1", n1_busy, 2000),
                 busy("c", "n2", n2_busy, 3000))
        .pending(job)
    )


def eta_and_start(snap):
    first, starts = evolve(snap, NO_BACKFILL)
    d = next(p for p in first.pending if p.job_id == "d")
    return d.eta, starts["d"]


@pytest.mark.parametrize("job", [
    make_job("d").gpus(10).per_node(4).limit(600).distinct_nodes(),
    make_job("d").roles(role("learner", 2, 4), role("server", 1, 2)).limit(600).distinct_nodes(),
], ids=["last-member-smaller", "roles-4-4-2"])
@pytest.mark.parametrize(("n2_busy", "expected"), [(8, 3000.0), (6, 2000.0)],
                         ids=["third-node-frees-last", "third-node-has-room-for-the-2"])
def test_distinct_nodes_eta_counts_a_node_for_every_member(job, n2_busy, expected):
    assert eta_and_start(three_nodes_freeing_one_by_one(job, n2_busy).snapshot()) == (
        expected, expected)


def test_distinct_nodes_eta_counts_a_node_for_a_middle_sized_member():
    # members 6, 4 and 2; at t=1000 n0 has 8 free, n1 3 and n2 2: 13 GPUs, a node for the 6
    # and three for the 2, but only one with room for the 4 until n1 frees at t=2000
    job = make_job("d").roles(role("a", 1, 6), role("b", 1, 4), role("c", 1, 2)).limit(600)
    snap = three_nodes_freeing_one_by_one(job.distinct_nodes(), n2_busy=6, n1_busy=5).snapshot()
    assert eta_and_start(snap) == (2000.0, 2000.0)


# The wait of a gang on distinct nodes counts the nodes with room for a member in every
# dimension placement checks, not by GPUs alone. n1's GPUs are free but job h holds 60 of its
# 64 CPUs (or 500 of its 512 GB); members of 4 GPUs ask 32 CPUs and 128 GB each. Until 7 Dec
# the gang was told "only 2 nodes have 4 free" (and would start with "1 more node with 4 free
# a100 GPUs") when one node had room; with n2 free too it was told only that n1 lacks CPUs.
def one_node_short_beside_its_gpus(short: str, n2_full: bool):
    hog = make_job("h").gpus(2)
    hog = hog.cpus_per_gpu(30) if short == "cpus" else hog.memory_per_gpu(250)
    cluster = make_cluster().nodes(3).running(make_running(hog).on("n1", 0, 1))
    if n2_full:
        cluster = cluster.running(make_running(make_job("r").gpus(8)).on("n2", *range(8)))
    return cluster.pending(
        make_job("d").gpus(12).per_node(4).cpus_per_gpu(8).memory_per_gpu(32).distinct_nodes())


@pytest.mark.parametrize(("short", "n2_full", "code", "said", "would"), [
    ("cpus", True, ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
     "14 a100 GPUs free, but its members go on distinct nodes: it needs 3 distinct nodes with "
     "4 free GPUs each, and only 1 node has room for one: 1 more has 4 free GPUs but fewer than "
     "32 free CPUs.",
     "2 more nodes with room for a member (4 free a100 GPUs, 32 free CPUs, 128 GB of free memory)"),
    ("memory", True, ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
     "14 a100 GPUs free, but its members go on distinct nodes: it needs 3 distinct nodes with "
     "4 free GPUs each, and only 1 node has room for one: 1 more has 4 free GPUs but less than "
     "128 GB of free memory.",
     "2 more nodes with room for a member (4 free a100 GPUs, 32 free CPUs, 128 GB of free memory)"),
    ("cpus", False, ReasonCode.INSUFFICIENT_CPU,
     "22 a100 GPUs free, but its members go on distinct nodes: it needs 3 distinct nodes with "
     "4 free GPUs each, and only 2 nodes have room for one: 1 more has 4 free GPUs but fewer "
     "than 32 free CPUs.",
     "32 CPUs free up next to 4 free GPUs for each of 1 more member"),
    ("memory", False, ReasonCode.INSUFFICIENT_MEMORY,
     "22 a100 GPUs free, but its members go on distinct nodes: it needs 3 distinct nodes with "
     "4 free GPUs each, and only 2 nodes have room for one: 1 more has 4 free GPUs but less "
     "than 128 GB of free memory.",
     "128 GB of memory frees up next to free GPUs for each of 1 more member"),
], ids=["cpus-and-gpus-short", "memory-and-gpus-short", "cpus-short", "memory-short"])
def test_distinct_nodes_wait_counts_nodes_with_room_beside_the_gpus(short, n2_full, code, said, would):
    t = why(one_node_short_beside_its_gpus(short, n2_full).plan(), "d")
    assert (t.code, t.would_start_if) == (code, would)
    assert said in t.message


def test_distinct_nodes_wait_names_the_member_size_short_of_nodes():
    # members 4, 2, 2 and 2: n0 has 8 free, n1 and n2 are full, n3 has 3 free. Enough nodes
    # with 4 free for the 4, but the four members need four nodes with 2 free and there are 2
    plan = (
        make_cluster().nodes(4)
        .running(make_running(make_job("r").gpus(16)).on("n1", *range(8)).on("n2", *range(8)),
                 make_running(make_job("s").gpus(5)).on("n3", *range(5)))
        .pending(make_job("d").roles(role("a", 1, 4), role("b", 3, 2)).distinct_nodes())
        .plan()
    )
    t = why(plan, "d")
    assert t.code is ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS
    assert ("11 a100 GPUs free, but its members go on distinct nodes: it needs 4 distinct nodes "
            "with 4 free GPUs each (3 with 2), and only 2 nodes have 2 free.") in t.message
    assert t.would_start_if == "2 more nodes with 2 free a100 GPUs"


# On small fleets whose running jobs end at their runtime limits, a lone gang on distinct nodes
# (members of random sizes) is told the time it then starts: never earlier (its members'
# nodes are all counted), never later (the count asks no more than placement does). Running
# jobs and the gang ask CPUs and memory per GPU too, up to a whole node's (64 CPUs, 512 GB):
# a node's GPUs may free before the CPUs or memory beside them (until 7 Dec the gang was then
# told a time too early).
node_jobs = st.lists(st.tuples(st.integers(2, 8), st.sampled_from((1000, 2000, 3000, 4000)),
                               st.sampled_from((0, 0, 8, 30)), st.sampled_from((0, 0, 64, 250))),
                     min_size=1, max_size=2)
busy_nodes = st.lists(node_jobs, min_size=2, max_size=6)
member_sizes = st.lists(st.integers(1, 8), min_size=2, max_size=5)
per_gpu = st.tuples(st.sampled_from((0, 4, 8)), st.sampled_from((0, 32, 64)))


def run_on(cluster, node: str, jobs, gpu_type: str = "a100"):
    """The running jobs ``jobs`` (GPUs, runtime limit, CPUs and GB per GPU) side by side on
    ``node`` (8 GPUs, 64 CPUs, 512 GB), each cut to what the node has left."""
    first = cpus = memory = 0
    for k, (gpus, limit, cpus_per_gpu, memory_per_gpu) in enumerate(jobs):
        gpus = min(gpus, 8 - first)
        if gpus:
            cpus_per_gpu = min(cpus_per_gpu, (64 - cpus) // gpus)
            memory_per_gpu = min(memory_per_gpu, (512 - memory) // gpus)
            cluster.running(make_running(make_job(f"r-{node}-{k}").types(gpu_type).gpus(gpus).limit(limit)
                                         .cpus_per_gpu(cpus_per_gpu).memory_per_gpu(memory_per_gpu))
                            .on(node, *range(first, first + gpus)))
            cpus += gpus * cpus_per_gpu
            memory += gpus * memory_per_gpu
        first += gpus
    return cluster


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=busy_nodes, sizes=member_sizes, asks=per_gpu)
def test_lone_distinct_nodes_gang_starts_at_its_eta(nodes, sizes, asks):
    cluster = make_cluster().nodes(len(nodes)).at(0)
    for n, jobs in enumerate(nodes):
        run_on(cluster, f"n{n}", jobs)
    roles = [role(f"m{i}", 1, size) for i, size in enumerate(sizes)]
    cluster.pending(make_job("d").roles(*roles).cpus_per_gpu(asks[0]).memory_per_gpu(asks[1])
                    .limit(600).distinct_nodes())
    snap = cluster.snapshot()
    first_plan, starts = evolve(snap, NO_BACKFILL)
    if "d" in bound(first_plan):
        return
    d = why(first_plan, "d")
    if len(sizes) > len(nodes):
        assert d.code is ReasonCode.CAN_NEVER_RUN
        return
    event(d.code.value)
    assert d.eta is not None, d
    assert starts["d"] == d.eta, (d, starts["d"])


# The ETA of a gang on distinct nodes counts a node as ready for a member only with room for
# it beside the GPUs: CPUs and memory, as placement and the waiting words count them. n0 and
# n2 are full until t=1000 and t=2000; n1 has 6 GPUs busy until t=1000, and its last 2 until
# t=3000 under job h, which holds 60 of its 64 CPUs (or 500 of its 512 GB). Members of 4 GPUs
# ask 32 CPUs and 128 GB each. Until 7 Dec the timeline counted n1 ready at t=1000 by its GPUs
# and told t=2000; the gang started at t=3000, when h ends.
@pytest.mark.parametrize("hog", ["cpus", "memory"])
def test_distinct_nodes_eta_waits_for_cpus_and_memory_beside_the_gpus(hog):
    def busy(job, node: str, first: int, limit: float):
        gpus = job.obj().gpus
        return make_running(job.limit(limit)).on(node, *range(first, first + gpus))

    h = make_job("h").gpus(2)
    h = h.cpus_per_gpu(30) if hog == "cpus" else h.memory_per_gpu(250)
    snap = (
        make_cluster().nodes(3).at(0)
        .running(busy(make_job("a").gpus(8), "n0", 0, 1000), busy(make_job("b").gpus(6), "n1", 0, 1000),
                 busy(h, "n1", 6, 3000), busy(make_job("c").gpus(8), "n2", 0, 2000))
        .pending(make_job("d").gpus(12).per_node(4).cpus_per_gpu(8).memory_per_gpu(32)
                 .limit(600).distinct_nodes())
        .snapshot()
    )
    assert eta_and_start(snap) == (3000.0, 3000.0)


# A heterogeneous gang on distinct nodes whose smaller members take fewer nodes than its
# larger ones (a GPU type, CPUs or memory that fewer nodes have) needs that many nodes for
# those members alone. n0 and n1 (a100) and h0 (h100) are free, h1 (h100) is full until
# t=1000; the learner takes any type, its two workers only h100. Until 7 Dec the checks
# counted the workers' nodes among all the gang's (three free nodes for three members): the
# gang was told its 24 free GPUs were "spread too thinly" (would start if "the free GPUs
# consolidate"), with no ETA; and once h1 freed, the learner placed first could take an h100
# node the workers needed, so it did not start.
def learner_and_h100_workers():
    return (
        make_cluster().nodes(2).nodes(2, gpu_type="h100", prefix="h").at(0)
        .running(make_running(make_job("r").types("h100").gpus(8).limit(1000)).on("h1", *range(8)))
        .pending(make_job("d").roles(role("learner", 1, 4), role("w", 2, 1, "h100")).limit(600)
                 .distinct_nodes())
    )


def test_distinct_nodes_wait_counts_the_nodes_its_smaller_members_take():
    first, starts = evolve(learner_and_h100_workers().snapshot(), NO_BACKFILL)
    t = why(first, "d")
    assert t.code is ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS
    assert ("24 a100/h100 GPUs free, but its members go on distinct nodes: it needs 3 distinct "
            "nodes with 4 free GPUs each (2 with 1), and only 1 h100 node has 1 free.") in t.message
    assert t.would_start_if == "1 more node with 1 free h100 GPU"
    assert (t.eta, starts.get("d")) == (1000.0, 1000.0)


def test_distinct_nodes_gang_starts_where_its_smaller_members_need_the_nodes_the_larger_would_take():
    # all four nodes free: the learner must leave both h100 nodes to the workers
    plan = learner_and_h100_workers().at(1000).snapshot()
    plan = schedule(dataclasses.replace(plan, running=()))
    nodes = {p.role: set() for p in bound(plan)["d"]}
    for p in bound(plan)["d"]:
        nodes[p.role].add(p.node)
    assert nodes["w"] == {"h0", "h1"}
    assert nodes["learner"] <= {"n0", "n1"}


def test_distinct_nodes_gang_whose_smaller_members_outnumber_their_nodes_can_never_run():
    # workers of 1 and 2 h100 GPUs (two roles, so no shape has two members) and one h100 node
    job = make_job("d").roles(role("learner", 1, 4), role("w1", 1, 1, "h100"),
                              role("w2", 1, 2, "h100")).distinct_nodes()
    t = why(make_cluster().nodes(2).nodes(1, gpu_type="h100", prefix="h").pending(job).plan(), "d")
    assert t.code is ReasonCode.CAN_NEVER_RUN
    assert ("it needs 3 distinct nodes with 4 GPUs each (one with 2, one with 1); 2 of its "
            "members have room on only 1 node (h100)") in t.message
    nodes = [NodeInfo(f"n{i}", "main", "a100", 8, 64, 512, "l0", "s0") for i in range(2)] + [
        NodeInfo("h0", "main", "h100", 8, 64, 512, "l0", "s0")]
    found = never_runs(job.obj(), nodes, TYPES)
    assert found == Infeasible(
        "members_on_distinct_nodes",
        "asks 3 distinct nodes with 4 GPUs each (one with 2, one with 1), its members on distinct "
        "nodes; 2 of its members have room on only 1 node (h100)")


# On small fleets of a100 and h100 nodes whose running jobs end at their runtime limits, a lone
# heterogeneous gang on distinct nodes, each member of one type or of either, with CPUs and
# memory per GPU of its own (shapes that need not nest), is told the time it then starts; one
# told it can never run is not placed even on the empty fleet. (Until 7 Dec members that take
# either type were left out: such a gang was explained on its first one-type option, whose
# start may come after the one mixing types, see
# test_role_gang_taking_either_type_is_told_the_start_mixing_types.)
typed_members = st.lists(st.tuples(st.integers(1, 8),
                                   st.sampled_from((("a100",), ("h100",), ("a100", "h100"))),
                                   st.sampled_from((0, 4, 8)), st.sampled_from((0, 32, 64))),
                         min_size=2, max_size=4)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(st.tuples(st.sampled_from(("a100", "h100")), node_jobs), min_size=2, max_size=6),
       members=typed_members)
def test_lone_heterogeneous_distinct_nodes_gang_starts_at_its_eta(nodes, members):
    def fleet():
        cluster = make_cluster().at(0)
        for n, (gpu_type, _) in enumerate(nodes):
            cluster.nodes(1, gpu_type=gpu_type, start=n)
        return cluster

    roles = [GangRole(f"m{i}", 1, gpus, types, 0, cpus, memory)
             for i, (gpus, types, cpus, memory) in enumerate(members)]
    job = make_job("d").roles(*roles).limit(600).distinct_nodes()
    cluster = fleet()
    for n, (gpu_type, jobs) in enumerate(nodes):
        run_on(cluster, f"n{n}", jobs, gpu_type)
    first_plan, starts = evolve(cluster.pending(job).snapshot(), NO_BACKFILL)
    if "d" in bound(first_plan):
        return
    d = why(first_plan, "d")
    event(d.code.value)
    if d.code is ReasonCode.CAN_NEVER_RUN:
        assert "d" not in bound(fleet().pending(job).plan()), d
        return
    assert d.eta is not None, d
    assert starts.get("d") == d.eta, (d, starts.get("d"))


def _told_the_start_it_gets(snapshot: Snapshot) -> None:
    """Gang "d", alone in line on `snapshot`: started now, or never runnable, or told (before
    the cycles that follow) exactly the start those cycles give it, or no start if they give none."""
    first_plan, starts = evolve(snapshot, NO_BACKFILL)
    if "d" in bound(first_plan):
        return
    d = why(first_plan, "d")
    event(d.code.value)
    if d.code is ReasonCode.CAN_NEVER_RUN:
        return
    event("told its start" if d.eta is not None else "told no start")
    assert d.eta == starts.get("d"), (d, starts.get("d"))


# The same lone gangs packed (members may share a node), under one leaf switch or two, of any
# topology and packed or spread by their workload, are told the start they get, or no start
# when they get none: their start is found by placing them along the release timeline. Until
# 7 Dec the counts on the classes of all their members pooled told about one in eight of them
# a start before their own (a member's GPU type, CPUs, memory and size not counted node by
# node), and one in twelve a start that never came.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(st.tuples(st.sampled_from(("a100", "h100")), node_jobs, st.sampled_from(("l0", "l1"))),
                      min_size=2, max_size=6),
       members=typed_members, topology=st.sampled_from(("any", "same_leaf", "same_spine")),
       workload=st.sampled_from(("training", "serving")))
def test_lone_packed_heterogeneous_gang_is_told_the_start_it_gets(nodes, members, topology, workload):
    cluster = make_cluster().at(0)
    for n, (gpu_type, _, leaf) in enumerate(nodes):
        cluster.nodes(1, gpu_type=gpu_type, start=n, leaf=leaf)
    for n, (gpu_type, jobs, _) in enumerate(nodes):
        run_on(cluster, f"n{n}", jobs, gpu_type)
    roles = [GangRole(f"m{i}", 1, gpus, types, 0, cpus, memory)
             for i, (gpus, types, cpus, memory) in enumerate(members)]
    job = make_job("d").roles(*roles).topology(topology).workload(workload).limit(600)
    _told_the_start_it_gets(cluster.pending(job).snapshot())


# A heterogeneous gang whose members each take a100 or h100 may start with its members on
# different types (its mixed option, tried after the one-type ones). n0 (a100) is free, h0
# (h100) is full until t=1000 and n1 (a100) until t=3000: the learner starts on n0 and the
# worker on h0 at t=1000. Until 7 Dec it was explained on its first one-type option, a100 alone
# ("Needs 16 a100 GPUs; 8 are free."), and told t=3000, when n1 frees; packed or on distinct
# nodes alike.
def learner_and_worker_of_either_type(distinct: bool):
    job = make_job("d").roles(role("learner", 1, 8, "a100", "h100"), role("w", 1, 8, "a100", "h100")).limit(600)
    return (
        make_cluster().nodes(2).nodes(1, gpu_type="h100", prefix="h").at(0)
        .running(make_running(make_job("a").gpus(8).limit(3000)).whole("n1"),
                 make_running(make_job("b").types("h100").gpus(8).limit(1000)).whole("h0"))
        .pending(job.distinct_nodes() if distinct else job)
        .snapshot()
    )


@pytest.mark.parametrize("distinct", [False, True], ids=["packed", "distinct-nodes"])
def test_role_gang_taking_either_type_is_told_the_start_mixing_types(distinct):
    first, starts = evolve(learner_and_worker_of_either_type(distinct), NO_BACKFILL)
    d = why(first, "d")
    assert d.code is ReasonCode.INSUFFICIENT_GPUS
    assert d.message == "Needs 16 a100/h100 GPUs; 8 are free. Estimated start t=1000 from runtime limits."
    assert (d.eta, starts.get("d")) == (1000.0, 1000.0)


# As the head, the same gang reserves n0 and h0 from t=1000 (until 7 Dec its reservation was
# planned on one type only: n0 and n1 from t=3000, two hours after it started).
@pytest.mark.parametrize("distinct", [False, True], ids=["packed", "distinct-nodes"])
def test_role_gang_taking_either_type_reserves_the_start_mixing_types(distinct):
    first, starts = evolve(learner_and_worker_of_either_type(distinct))
    d = why(first, "d")
    assert d.code is ReasonCode.WAITING_FOR_RESERVATION
    assert {p.node for p in first.reservations[0].placements} == {"n0", "h0"}
    assert (d.eta, starts.get("d")) == (1000.0, 1000.0)


# Members of a gang on distinct nodes are placed largest first by GPUs (then by role); of
# equal GPUs, one that asks more memory (or CPUs, or fewer node classes) than the member placed
# before it needs the matching too. n0's 2 busy GPUs hold 500 of its 512 GB; role a asks no
# memory, role b 32 GB: only n1 has room for b. Until 7 Dec a could take n1, and the gang that
# fits now was reserved n0 and n1 from t=1000 instead (with backfill off: told its 12 free
# GPUs were "spread too thinly", with no ETA, and never started).
def test_distinct_nodes_gang_places_a_member_asking_more_memory_after_an_equal_one():
    cluster = make_cluster().nodes(2).at(0)
    run_on(cluster, "n0", [(2, 1000, 0, 250)])
    run_on(cluster, "n1", [(2, 2000, 0, 0)])
    job = make_job("d").roles(GangRole("a", 1, 1, ("a100",), 0, 0, 0),
                              GangRole("b", 1, 1, ("a100",), 0, 0, 32)).limit(600).distinct_nodes()
    plan = cluster.pending(job).plan()
    assert {p.role: p.node for p in bound(plan)["d"]} == {"a": "n0", "b": "n1"}


def test_placement_precheck_counts_the_nodes_its_smaller_members_take():
    """The placer's index-only check (``Placer.plausible``) counts the nodes of every set of
    a gang on distinct nodes, not only those of its largest members: with one h100 node free
    the learner-and-two-h100-workers gang is not worth a search (until 7 Dec it was, and
    every attempt failed member by member); with both free it is."""
    snap = learner_and_h100_workers().snapshot()
    cfg = SchedulerConfig()
    ctx = _context(snap, cfg, build_plugins(cfg), None)
    spec = snap.pending[0]
    demand = demand_for(spec, spec_gpus(spec), 8)
    request = PlacementRequest(demand, tuple(capable_classes(ctx, m) for m in demand.members),
                               ctx.plugins.score_by_workload[spec.workload])
    assert ctx.placer.plausible(request) is False
    ctx.state.release((JOB, "r"))
    assert ctx.placer.plausible(request) is True


def test_distinct_nodes_eta_clear_of_a_window_counts_cpus_beside_the_gpus():
    """The ETA moved past a maintenance window counts the nodes left open by their CPUs too.
    n0 is free but under a window from t=500 to t=5000; n1's GPUs are free but job h holds 60
    of its 64 CPUs until t=3000; n2 and n3 are full until t=1000 and t=2000. Three members of
    4 GPUs and 32 CPUs: at t=2000 the nodes open are n2 and n3 and n1 without the CPUs, so it
    starts at t=3000 (until 7 Dec it was told t=2000, n1 counted by its GPUs)."""
    def busy(job, node: str, limit: float):
        gpus = job.obj().gpus
        return make_running(job.limit(limit)).on(node, *range(gpus))

    snap = (
        make_cluster().nodes(4).at(0)
        .maintenance("w", "n0", start=500, end=5000)
        .running(busy(make_job("h").gpus(2).cpus_per_gpu(30), "n1", 3000),
                 busy(make_job("b").gpus(8), "n2", 1000), busy(make_job("c").gpus(8), "n3", 2000))
        .pending(make_job("d").gpus(12).per_node(4).cpus_per_gpu(8).limit(600).distinct_nodes())
        .snapshot()
    )
    assert eta_and_start(snap) == (3000.0, 3000.0)


def test_same_leaf_distinct_nodes_eta_counts_cpus_beside_the_gpus():
    """A ``same_leaf`` gang on distinct nodes needs one leaf with a node with room for each
    member, CPUs too. Leaf l0: a0 free, a1's GPUs free but job h holds 60 of its 64 CPUs until
    t=3000; leaf l1: b0 and b1 full until t=2000. Two members of 4 GPUs and 32 CPUs start on
    l1 at t=2000 (until 7 Dec l0 was counted as having room now, and no ETA was told)."""
    snap = (
        make_cluster().nodes(2, prefix="a", leaf="l0").nodes(2, prefix="b", leaf="l1").at(0)
        .running(make_running(make_job("h").gpus(2).cpus_per_gpu(30).limit(3000)).on("a1", 0, 1),
                 make_running(make_job("r").gpus(16).limit(2000)).on("b0", *range(8)).on("b1", *range(8)))
        .pending(make_job("d").gpus(8).per_node(4).cpus_per_gpu(8).topology("same_leaf").limit(600)
                 .distinct_nodes())
        .snapshot()
    )
    assert eta_and_start(snap) == (2000.0, 2000.0)


def test_reclaim_wait_estimate_counts_the_nodes_its_smaller_members_take():
    """The wait a reclaim weighs (``preemption.capacity_eta``) counts a node of its own for
    every set of a gang's members, each on the classes it accepts: the learner-and-two-h100-
    workers gang starts when h1 frees, at t=1000. (Until 7 Dec it counted only its largest
    member's GPUs on every class any member takes: three nodes with 4 free, n0, n1 and h0, so
    "now".)"""
    snap = learner_and_h100_workers().snapshot()
    cfg = SchedulerConfig()
    ctx = _context(snap, cfg, build_plugins(cfg), None)
    ctx.ends["r"] = 1000.0  # (as the cycle reads it from the runtime limit)
    spec = snap.pending[0]
    demand = demand_for(spec, spec_gpus(spec), 8)
    member_classes = tuple(capable_classes(ctx, m) for m in demand.members)
    assert capacity_eta(ctx, shapes_of(demand, member_classes)) == 1000.0
    ctx.state.release((JOB, "r"))
    assert capacity_eta(ctx, shapes_of(demand, member_classes)) == 0.0


# The same lone gangs, packed or on distinct nodes, of a team whose quota on each GPU type may
# hold fewer GPUs than the gang: the cycle then tries each member on one type
# (admission.quota_split), and the gang is told the start it gets on that split. Until 7 Dec
# its estimate took each member on every class among the split's it is capable of, a start
# before its own (test_role_gang_split_by_its_quota_is_told_the_start_of_the_split_it_is_tried_on).
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(st.tuples(st.sampled_from(("a100", "h100")), node_jobs), min_size=2, max_size=6),
       members=typed_members, quotas=st.tuples(st.integers(4, 20), st.integers(4, 20)),
       distinct=st.booleans())
def test_lone_heterogeneous_gang_split_by_its_quota_is_told_the_start_it_gets(nodes, members, quotas, distinct):
    cluster = make_cluster().at(0).quota("q", "a100", quotas[0], borrowing_limit=0) \
        .quota("q", "h100", quotas[1], borrowing_limit=0)
    for n, (gpu_type, _) in enumerate(nodes):
        cluster.nodes(1, gpu_type=gpu_type, start=n)
    for n, (gpu_type, jobs) in enumerate(nodes):
        run_on(cluster, f"n{n}", jobs, gpu_type)
    roles = [GangRole(f"m{i}", 1, gpus, types, 0, cpus, memory)
             for i, (gpus, types, cpus, memory) in enumerate(members)]
    job = make_job("d").team("q").roles(*roles).limit(600)
    _told_the_start_it_gets(cluster.pending(job.distinct_nodes() if distinct else job).snapshot())
