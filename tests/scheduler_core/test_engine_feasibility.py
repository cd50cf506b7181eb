"""Rule 1, feasibility first: multi-dimensional fit, capability by GPU type and by device
memory, ready nodes only, topology constraints; a job that can never run is reported as such."""

from __future__ import annotations

import pytest
from engine_builders import bound, bound_nodes, make_cluster, make_job, make_running, why

from scheduler_core import NodeState, ReasonCode


def mixed_fleet():
    # one node per device kind: 16 GB, 40 GB and 80 GB devices
    return (
        make_cluster()
        .node("t4-0", gpu_type="t4")
        .node("a40-0", gpu_type="a100-40")
        .node("a80-0", gpu_type="a100")
    )


@pytest.mark.parametrize(
    ("min_memory", "expected_nodes"),
    [
        (35, {"a40-0", "a80-0"}),  # seed 001 example 8.2: 35 GB runs on 40 or 80 GB devices
        (41, {"a80-0"}),
        (0, {"t4-0", "a40-0", "a80-0"}),
        (16, {"t4-0", "a40-0", "a80-0"}),
    ],
    ids=["35gb-runs-on-40-or-80gb", "41gb-needs-80gb", "no-memory-need-any-device",
         "16gb-fits-the-smallest"],
)
def test_capability_by_device_memory(min_memory, expected_nodes):
    jobs = [make_job(f"j{i}").gpus(8).min_memory(min_memory) for i in range(3)]
    plan = mixed_fleet().pending(*jobs).plan()
    used = {node for job_id in bound(plan) for node in bound_nodes(plan, job_id)}
    assert used == expected_nodes
    assert len(plan.binds) == len(expected_nodes)


def test_smallest_sufficient_device_is_used_first():
    plan = mixed_fleet().pending(make_job("j").gpus(8).min_memory(35)).plan()
    assert bound_nodes(plan, "j") == ["a40-0"]


@pytest.mark.parametrize(
    ("types", "expected"),
    [(("a100",), ["a80-0"]), (("t4",), ["t4-0"]), (("t4", "a100"), ["t4-0"])],
    ids=["only-a100", "only-t4", "first-listed-type-preferred"],
)
def test_capability_by_declared_gpu_types(types, expected):
    plan = mixed_fleet().pending(make_job("j").gpus(4).types(*types)).plan()
    assert bound_nodes(plan, "j") == expected


@pytest.mark.parametrize(
    ("cpus_per_gpu", "memory_per_gpu", "expected"),
    [(4, 0, ["big"]), (0, 40, ["big"]), (1, 10, ["small"])],
    ids=["cpu-does-not-fit-the-fuller-node", "memory-does-not-fit-the-fuller-node",
         "both-fit-so-best-fit-wins"],
)
def test_multi_dimensional_fit(cpus_per_gpu, memory_per_gpu, expected):
    # "small" has 4 free GPUs but only 8 CPUs and 64 GB left; "big" is empty.
    cluster = (
        make_cluster()
        .node("small", cpus=16, memory_gb=128)
        .node("big", cpus=64, memory_gb=512)
        .running(make_running(make_job("r").gpus(4).cpus_per_gpu(2).memory_per_gpu(16))
                 .on("small", 0, 1, 2, 3))
        .pending(make_job("j").gpus(4).cpus_per_gpu(cpus_per_gpu).memory_per_gpu(memory_per_gpu))
    )
    plan = cluster.plan()
    assert bound_nodes(plan, "j") == expected


@pytest.mark.parametrize(
    "state",
    [NodeState.SUSPECT, NodeState.CORDONED, NodeState.DRAINING, NodeState.DOWN,
     NodeState.QUARANTINED],
    ids=lambda s: f"{s.value}-node-gets-no-work",
)
def test_only_ready_nodes_receive_work(state):
    plan = (
        make_cluster()
        .node("sick", state=state)
        .node("well")
        .pending(make_job("a").gpus(8), make_job("b").gpus(8))
        .plan()
    )
    assert bound(plan).keys() == {"a"}
    assert bound_nodes(plan, "a") == ["well"]
    assert why(plan, "b").code is ReasonCode.INSUFFICIENT_GPUS


def test_job_whose_capable_nodes_are_all_down_waits_for_them():
    plan = (
        make_cluster()
        .node("h0", gpu_type="h100", state=NodeState.DOWN)
        .node("a0")
        .pending(make_job("j").gpus(2).types("h100"))
        .plan()
    )
    explanation = why(plan, "j")
    assert explanation.code is ReasonCode.NODE_NOT_READY
    assert explanation.resolvable
    assert "the only node that could host it is not ready" in explanation.message


@pytest.mark.parametrize(
    ("topology", "gpus", "per_node", "expected_leaves"),
    [("same_leaf", 16, 8, 1), ("same_node", 4, None, 1), ("any", 24, 8, 2)],
    ids=["same-leaf-gang-stays-in-one-leaf", "same-node-job-on-one-node",
         "any-topology-may-span-leaves"],
)
def test_topology_constraint(topology, gpus, per_node, expected_leaves):
    # leaf A has 2 free nodes, leaf B has 1 free node and 1 busy one
    cluster = (
        make_cluster()
        .nodes(2, prefix="a", leaf="A")
        .nodes(2, prefix="b", leaf="B")
        .running(make_running(make_job("r").gpus(8)).whole("b1"))
    )
    job = make_job("j").gpus(gpus).topology(topology)
    if per_node:
        job = job.per_node(per_node)
    plan = cluster.pending(job).plan()
    nodes = bound_nodes(plan, "j")
    leaves = {name[0] for name in nodes}
    assert len(leaves) == expected_leaves


def test_same_leaf_gang_waits_rather_than_spanning_leaves():
    plan = (
        make_cluster()
        .nodes(2, prefix="a", leaf="A")
        .nodes(2, prefix="b", leaf="B")
        .running(make_running(make_job("r1").gpus(8)).whole("a1"),
                 make_running(make_job("r2").gpus(8)).whole("b1"))
        .pending(make_job("j").gpus(16).per_node(8).topology("same_leaf"))
        .plan()
    )
    assert "j" not in bound(plan)
    assert why(plan, "j").code is ReasonCode.TOPOLOGY_UNSATISFIED


@pytest.mark.parametrize(
    ("job", "phrase"),
    [
        (make_job("j").gpus(2).types("b200"), "type b200"),
        (make_job("j").gpus(2).min_memory(90), "at least 90 GB"),
        (make_job("j").gpus(12).per_node(12), "12 GPUs on one node"),
        (make_job("j").gpus(4).cpus_per_gpu(32), "128 CPUs"),
        (make_job("j").gpus(40), "needs 40 capable GPUs; the whole fleet has 32"),
        (make_job("j").gpus(24).per_node(8).topology("same_leaf"), "one leaf switch"),
        # 5 members of 2 GPUs and 48 CPUs: one a node (64 CPUs), 4 nodes. It was told it waits
        # for contiguous GPUs, resolvable, where a submit is refused for it.
        (make_job("j").gpus(10).per_node(2).cpus_per_gpu(24),
         "needs 5 members of 2 GPUs, 48 CPUs each at once; the capable nodes have room for 4"),
    ],
    ids=["unknown-gpu-type", "more-memory-than-any-device", "more-gpus-per-node-than-any-node",
         "more-cpus-than-any-node", "more-gpus-than-the-fleet", "bigger-than-any-leaf",
         "more-members-than-the-nodes-hold-by-cpus"],
)
def test_job_that_can_never_run_is_reported_can_never_run(job, phrase):
    cluster = make_cluster().nodes(2, prefix="a", leaf="A").nodes(2, prefix="b", leaf="B")
    plan = cluster.pending(job).plan()
    explanation = why(plan, "j")
    assert explanation.code is ReasonCode.CAN_NEVER_RUN
    assert explanation.reason == "CanNeverRun"
    assert not explanation.resolvable
    assert phrase in explanation.message


def test_job_beyond_its_quota_ceiling_can_never_run():
    plan = (
        make_cluster().nodes(4)
        .quota("ml", "a100", 8, borrowing_limit=8, cohort="c")
        .quota("cv", "a100", 24, cohort="c")
        .pending(make_job("j").team("ml").gpus(24).per_node(8))
        .plan()
    )
    explanation = why(plan, "j")
    assert explanation.code is ReasonCode.CAN_NEVER_RUN
    assert "may hold at most 16 a100 GPUs (8 nominal and 8 borrowed at most); this job needs 24" \
        in explanation.message


def test_down_node_does_not_make_a_job_never_runnable():
    plan = (
        make_cluster().nodes(1).nodes(1, prefix="d", state=NodeState.DOWN)
        .pending(make_job("j").gpus(16).per_node(8))
        .plan()
    )
    explanation = why(plan, "j")
    assert explanation.code is not ReasonCode.CAN_NEVER_RUN
    assert explanation.resolvable


def test_a_job_is_not_told_it_can_never_run_by_the_memory_of_the_job_ahead_of_it():
    # one node of 8 GPUs and 256 GB; "a" and "b" are both 2 members of 4 GPUs, but a asks
    # 64 GB per GPU (256 GB a member: the node holds one) and b no memory. b was told a's
    # "Can never run on this fleet: it needs 2 members of 4 GPUs, 256 GB each at once" (the
    # verdict was shared by requests differing only in CPUs or memory) and never started.
    plan = (make_cluster().nodes(1, memory_gb=256)
            .pending(make_job("a").gpus(8).per_node(4).memory_per_gpu(64).submitted(0),
                     make_job("b").gpus(8).per_node(4).submitted(1))
            .plan())
    assert why(plan, "a").code is ReasonCode.CAN_NEVER_RUN
    assert "b" in bound(plan)
