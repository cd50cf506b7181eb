"""The working cluster state: free-capacity indexes, reversible what-ifs, GPU choice within a
node, and snapshot validation."""

from __future__ import annotations

import dataclasses

import pytest
from engine_builders import make_cluster, make_job, make_running

from scheduler_core import SnapshotError, schedule
from scheduler_core.state import FLEET, JOB, LEAF, SPINE, ClusterState, Grant, choose_gpus
from scheduler_core.types import GpuTypeInfo, NodeInfo, NodeState, PriorityClassInfo, QuotaInfo

TYPES = {"a100": GpuTypeInfo("a100", 80), "h100": GpuTypeInfo("h100", 80)}


def state() -> ClusterState:
    nodes = [
        NodeInfo("a0", "p", "a100", 8, 64, 512, "l0", "s0"),
        NodeInfo("a1", "p", "a100", 8, 64, 512, "l0", "s0"),
        NodeInfo("a2", "p", "a100", 8, 64, 512, "l1", "s0"),
        NodeInfo("h0", "p", "h100", 8, 64, 512, "l2", "s1"),
        NodeInfo("down", "p", "a100", 8, 64, 512, "l1", "s0", state=NodeState.DOWN),
    ]
    return ClusterState(nodes, TYPES)


def bucket_nodes(s: ClusterState, key, free) -> list[str]:
    return [s.nodes[n].name for n in s.buckets[key][free]]


def test_ready_nodes_are_bucketed_by_free_gpus_per_fleet_spine_and_leaf():
    s = state()
    a100 = s.node_class[s.index_of["a0"]]
    assert bucket_nodes(s, (FLEET, 0, a100), 8) == ["a0", "a1", "a2"]
    assert s.free_in(FLEET, 0, [a100]) == 24
    assert s.free_in(LEAF, s.leaf[s.index_of["a0"]], [a100]) == 16
    assert s.free_in(SPINE, s.spine[s.index_of["a2"]], [a100]) == 24
    assert "down" not in {s.nodes[n].name for b in s.buckets[(FLEET, 0, a100)] for n in b}


def test_take_and_release_move_nodes_between_buckets():
    s = state()
    a100 = s.node_class[0]
    s.take((JOB, "j"), Grant(s.index_of["a1"], 0b111, 3, 30))
    assert bucket_nodes(s, (FLEET, 0, a100), 5) == ["a1"]
    assert s.free_in(FLEET, 0, [a100]) == 21
    assert s.free_cpus[s.index_of["a1"]] == 61
    assert s.largest_free_block([a100]) == 8
    assert s.nodes_with_free([a100], 6) == 2
    s.release((JOB, "j"))
    assert bucket_nodes(s, (FLEET, 0, a100), 8) == ["a0", "a2", "a1"]
    assert s.free_in(FLEET, 0, [a100]) == 24


def test_simulated_removal_is_undone_by_its_restore_function():
    s = state()
    s.take((JOB, "j"), Grant(0, 0xFF, 8, 80))
    s.take((JOB, "k"), Grant(1, 0x0F, 4, 40))
    before = (list(s.free_mask), list(s.free_cpus), dict(s.free_sum))
    restore = s.simulate_removal((JOB, "j"))
    assert s.free_mask[0] == 0xFF and (JOB, "j") not in s.holdings
    restore()
    assert (list(s.free_mask), list(s.free_cpus), dict(s.free_sum)) == before
    assert s.holdings[(JOB, "j")] == [Grant(0, 0xFF, 8, 80)]


def test_partial_removal_gives_back_only_the_part():
    s = state()
    s.take((JOB, "e"), Grant(0, 0xFF, 8, 80))
    restore = s.simulate_partial_removal((JOB, "e"), [Grant(0, 0xF0, 4, 40)])
    assert s.free_mask[0] == 0xF0
    assert s.holdings[(JOB, "e")] == [Grant(0, 0x0F, 4, 40)]
    restore()
    assert s.free_mask[0] == 0


def test_a_gpu_cannot_be_taken_twice():
    s = state()
    s.take((JOB, "j"), Grant(0, 0b11, 0, 0))
    with pytest.raises(SnapshotError, match=r"GPUs \[1\] of node 'a0' are held twice.*'k'.*'j'"):
        s.take((JOB, "k"), Grant(0, 0b10, 0, 0))


@pytest.mark.parametrize(
    ("free_mask", "count", "expected"),
    [
        (0b11111111, 2, 0b00000011),
        (0b11110011, 2, 0b00000011),   # the 2-run is the best fit, not the 4-run
        (0b11110110, 3, 0b01110000),
        (0b10101010, 2, 0b00001010),   # no run is long enough: lowest free GPUs
        (0b11111110, 4, 0b00011110),
    ],
    ids=["empty-node-lowest-indices", "best-fit-run", "best-fit-run-of-three",
         "scattered-lowest", "skips-the-busy-gpu"],
)
def test_gpu_choice_within_a_node_keeps_long_runs_whole(free_mask, count, expected):
    assert choose_gpus(free_mask, 8, count) == expected


@pytest.mark.parametrize(
    ("running", "message"),
    [
        ([make_running(make_job("a").gpus(2)).on("n0", 0, 1),
          make_running(make_job("b").gpus(2)).on("n0", 1, 2)], "held twice"),
        ([make_running(make_job("a").gpus(1)).on("ghost", 0)], "unknown node 'ghost'"),
        ([make_running(make_job("a").gpus(1)).on("n0", 8)], "GPU indices [8]"),
        ([make_running(make_job("a").gpus(1)).on("n0", 0),
          make_running(make_job("a").gpus(1)).on("n0", 1)], "appears twice"),
    ],
    ids=["gpu-held-by-two-jobs", "unknown-node", "gpu-index-out-of-range", "duplicate-job"],
)
def test_contradicting_snapshot_is_refused_with_context(running, message):
    snapshot = make_cluster().nodes(1).running(*running).snapshot()
    with pytest.raises(SnapshotError) as err:
        schedule(snapshot)
    assert message in str(err.value)


def test_job_both_pending_and_running_is_refused():
    snapshot = (
        make_cluster().nodes(1)
        .running(make_running(make_job("a").gpus(1)).on("n0", 0))
        .pending(make_job("a"))
        .snapshot()
    )
    with pytest.raises(SnapshotError, match="both pending and running"):
        schedule(snapshot)


@pytest.mark.parametrize(("twice", "named"), [
    ("quota", "quota of team and GPU type 'ml/a100'"),
    ("priority", "priority class 'normal'"),
    ("gpu_type", "GPU type 'a100'"),
], ids=["quota", "priority-class", "gpu-type"])
def test_a_quota_priority_class_or_gpu_type_given_twice_is_a_snapshot_error(twice, named):
    # given twice, the one listed last counted: the same snapshot listed in another order
    # gave another plan (a 2-GPU ml quota or an 8-GPU one)
    cluster = make_cluster().nodes(1).quota("ml", "a100", 2).pending(make_job("j").gpus(4))
    snap = cluster.snapshot()
    if twice == "quota":
        snap = dataclasses.replace(snap, quotas=snap.quotas + (QuotaInfo("ml", "a100", 8),))
    elif twice == "priority":
        snap = dataclasses.replace(snap, priority_classes=snap.priority_classes
                                   + (PriorityClassInfo("normal", 5),))
    else:
        snap = dataclasses.replace(snap, gpu_types=snap.gpu_types + (GpuTypeInfo("a100", 40),))
    with pytest.raises(SnapshotError, match=f"{named} appears twice"):
        schedule(snap)


def _node(name: str, gpus: int = 8) -> NodeInfo:
    return NodeInfo(name, "p", "a100", gpus, 64, 512, "l0", "s0")


@pytest.mark.parametrize(("nodes", "message"), [
    ([_node("b"), _node("a"), _node("b")], "node 'b' appears twice in the snapshot"),
    ([_node("a"), _node("b", gpus=-1)], "node 'b' has -1 GPUs; expected 0..4096"),
    ([_node("c"), _node("a", gpus=5000), _node("c")], "node 'a' has 5000 GPUs; expected 0..4096"),
    ([_node("a"), _node("a"), _node("b", gpus=-2)], "node 'a' appears twice in the snapshot"),
    ([_node("a"), _node("a", gpus=-3)], "node 'a' appears twice in the snapshot"),
    ([_node("a", gpus=-3), _node("a")], "node 'a' has -3 GPUs; expected 0..4096"),
], ids=["twice", "negative", "bad-gpus-first-by-name", "twice-first-by-name", "second-listing-twice",
        "first-listing-bad"])
def test_the_first_bad_node_by_name_is_named(nodes, message):
    # the state checks its nodes in name order, a name given twice before a GPU count out of
    # range on the same node (its second listing): the same snapshot always names the same node
    with pytest.raises(SnapshotError) as err:
        ClusterState(nodes, TYPES)
    assert str(err.value) == message
