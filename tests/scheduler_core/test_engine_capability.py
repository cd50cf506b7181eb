"""Rule 1, the public capability check: ``never_runs(spec, nodes, gpu_types)`` refuses at submit
time exactly what the engine would call ``CanNeverRun`` on the empty fleet (no quotas), and
never refuses a job the engine would place."""

from __future__ import annotations

import pytest
from engine_builders import DEFAULT_TYPES, make_cluster, make_job, role, why
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_core import (
    GangRole,
    GpuTypeInfo,
    Infeasible,
    NodeInfo,
    NodeShape,
    ReasonCode,
    TopologyConstraint,
    never_runs,
)

TYPES = {t.name: t for t in DEFAULT_TYPES}


def fleet(*groups: tuple[int, str, int, str]) -> list[NodeInfo]:
    """(count, gpu type, GPUs per node, leaf) groups of nodes with 64 CPUs and 512 GB."""
    nodes = []
    for count, gpu_type, gpus, leaf in groups:
        for _ in range(count):
            nodes.append(NodeInfo(f"n{len(nodes)}", "main", gpu_type, gpus, 64, 512, leaf, "s0"))
    return nodes


SMALL = fleet((2, "a100", 8, "l0"), (2, "a100-40", 8, "l1"))


@pytest.mark.parametrize(
    ("job", "field", "words"),
    [
        (make_job("j").gpus(1).types("b200"), "gpu_types", "no node carries b200"),
        (make_job("j").gpus(1).min_memory(141), "min_gpu_memory_gb", "at least 141 GB"),
        (make_job("j").gpus(64), "gpus", "can never give more than 32 capable GPUs"),
        (make_job("j").gpus(24).types("a100"), "gpus", "can never give more than 16 a100 GPUs"),
        (make_job("j").gpus(32), "gpus", "a gang does not mix GPU types"),
        (make_job("j").gpus(16).per_node(16), "gpus_per_node", "asks 16 GPUs on one node"),
        (make_job("j").gpus(16).topology("same_node"), "gpus", "the largest node has 8"),
        (make_job("j").gpus(8).per_node(8).cpus_per_gpu(16), "cpus_per_gpu", "asks 128 CPUs"),
        (make_job("j").gpus(8).per_node(8).memory_per_gpu(80), "memory_gb_per_gpu", "640 GB"),
        (make_job("j").gpus(24).topology("same_leaf"), "topology", "largest leaf switch has 16"),
        (make_job("j").gpus(64).elastic(48, 64), "min_gpus", "asks 48 GPUs"),
        (make_job("j").roles(role("ps", 1, 1, "t4"), role("w", 2, 8)), "roles.0.gpu_types",
         "role ps asks t4 GPUs, which no node carries"),
        (make_job("j").roles(role("ps", 1, 1), role("w", 1, 16)), "roles.1.gpus_per_member",
         "role w asks 16 GPUs on one node; the largest node has 8"),
        (make_job("j").types("t4").roles(role("ps", 1, 1), role("w", 1, 8)), "gpu_types",
         "role ps asks t4 GPUs, which no node carries"),
        (make_job("j").roles(role("a", 1, 4, "a100"), role("b", 1, 8, "a100")).topology("same_node"),
         "topology", "12 GPUs on one node"),
    ],
    ids=["unknown-type", "memory-nobody-has", "larger-than-the-fleet", "larger-than-its-type",
         "larger-than-any-one-type",
         "member-wider-than-any-node", "same-node-wider-than-any-node", "cpus-beyond-any-node",
         "memory-beyond-any-node", "same-leaf-beyond-any-leaf", "elastic-minimum-too-large",
         "role-type-nobody-has", "role-member-wider-than-any-node", "roles-take-the-jobs-unknown-type",
         "heterogeneous-same-node-too-wide"],
)
def test_never_runs_names_the_field_and_the_engine_agrees(job, field, words):
    spec = job.obj()
    found = never_runs(spec, SMALL, TYPES)
    assert isinstance(found, Infeasible)
    assert found.field == field and words in found.message, found
    plan = _plan(spec, SMALL)
    assert not plan.binds
    assert why(plan, "j").reason == ReasonCode.CAN_NEVER_RUN


# Members of one shape that the fleet cannot all hold at once are counted as members, as the
# engine's CanNeverRun says them: several may share a node. 20 members of 4 GPUs and 20 CPUs,
# three to each of five 16-GPU nodes, were refused with "asks 20 nodes ...; the fleet has room
# for 15" (it has 5 nodes).
@pytest.mark.parametrize(("nodes", "job", "words"), [
    (fleet((1, "a100", 2, "l0")), make_job("j").gpus(2).per_node(1).cpus_per_gpu(40),
     "asks 2 members of 1 GPU, 40 CPUs each at once; the fleet has room for 1"),
    (fleet((5, "a100", 16, "l0")), make_job("j").gpus(80).per_node(4).cpus_per_gpu(5),
     "asks 20 members of 4 GPUs, 20 CPUs each at once; the fleet has room for 15"),
    (fleet((2, "a100", 8, "l0")), make_job("j").cpus_per_gpu(12).roles(role("w", 5, 2)),
     "role w asks 5 members of 2 GPUs, 24 CPUs each at once; the fleet has room for 4"),
], ids=["one-member-a-node", "three-members-a-node", "a-role-two-members-a-node"])
def test_never_runs_counts_members_of_a_gang_not_nodes(nodes, job, words):
    spec = job.obj()
    found = never_runs(spec, nodes, TYPES)
    assert isinstance(found, Infeasible)
    assert found.message == words
    plan = _plan(spec, nodes)
    assert why(plan, "j").reason == ReasonCode.CAN_NEVER_RUN
    # the engine counts them alike: "it needs 20 members of …; the capable nodes have room for 15"
    members, room = words.split("asks ")[1].split("; the fleet has room for ")
    assert f"needs {members}; the capable nodes have room for {room}." in why(plan, "j").message


def _plan(spec, nodes):
    cluster = make_cluster()
    for n in nodes:
        cluster.node(n.name, gpu_type=n.gpu_type, gpus=n.gpus, cpus=n.cpus,
                     memory_gb=n.memory_gb, leaf=n.leaf, spine=n.spine, state=n.state)
    return cluster.pending(spec).plan()


@pytest.mark.parametrize(
    "job",
    [
        make_job("j").gpus(16),
        make_job("j").gpus(16).types("a100"),
        make_job("j").gpus(4).min_memory(35),
        make_job("j").gpus(16).topology("same_leaf"),
        make_job("j").roles(role("ps", 1, 1), role("w", 2, 8)),
        make_job("j").gpus(64).elastic(8, 64),
    ],
    ids=["all-of-one-type", "whole-type", "35gb-on-40gb", "one-leaf", "heterogeneous", "elastic-min-fits"],
)
def test_never_runs_passes_what_the_empty_fleet_can_place(job):
    spec = job.obj()
    assert never_runs(spec, SMALL, TYPES) is None
    assert [b.job_id for b in _plan(spec, SMALL).binds] == ["j"]


def test_node_shapes_count_like_nodes():
    shapes = [NodeShape(TYPES["a100"], 8, 64, 512, "l0", "s0", 2),
              NodeShape(TYPES["a100-40"], 8, 64, 512, "l1", "s0", 2)]
    for job in (make_job("j").gpus(64), make_job("j").gpus(24).topology("same_leaf"),
                make_job("j").gpus(16).types("a100")):
        assert never_runs(job.obj(), shapes, TYPES) == never_runs(job.obj(), SMALL, TYPES)


def test_empty_fleet_rejects_nothing():
    assert never_runs(make_job("j").gpus(10_000).obj(), [], TYPES) is None


node_groups = st.lists(
    st.tuples(st.integers(1, 3), st.sampled_from(["a100", "a100-40", "t4"]),
              st.sampled_from([4, 8]), st.sampled_from(["l0", "l1"])),
    min_size=1, max_size=3,
)


@st.composite
def specs(draw):
    b = make_job("j").gpus(draw(st.sampled_from([1, 2, 4, 8, 12, 16, 24, 32, 48])))
    if draw(st.booleans()):
        b = b.per_node(draw(st.sampled_from([2, 4, 8, 16])))
    if draw(st.booleans()):
        b = b.types(*draw(st.lists(st.sampled_from(["a100", "a100-40", "t4", "h100"]),
                                   min_size=1, max_size=2, unique=True)))
    b = b.min_memory(draw(st.sampled_from([0, 0, 20, 41])))
    b = b.cpus_per_gpu(draw(st.sampled_from([0, 4, 10])))
    topology = draw(st.sampled_from(list(TopologyConstraint)))
    b = b.topology(topology)
    if topology is not TopologyConstraint.SAME_NODE and draw(st.booleans()):
        b = b.distinct_nodes()  # a gang on distinct nodes needs a capable node per member
    return b.obj()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=node_groups, spec=specs())
def test_never_runs_agrees_with_the_engine_on_an_empty_fleet(groups, spec):
    """A job the check refuses is never placed and the engine says CanNeverRun; a job the
    engine calls CanNeverRun (no quotas) is refused by the check."""
    nodes = fleet(*groups)
    found = never_runs(spec, nodes, TYPES)
    plan = _plan(spec, nodes)
    engine_never = (not plan.binds and why(plan, "j").reason == ReasonCode.CAN_NEVER_RUN)
    if found is not None:
        assert not plan.binds, (found, plan.binds)
    if engine_never:
        assert found is not None, why(plan, "j").message
    if plan.binds:
        assert found is None


def test_unknown_gpu_type_of_a_node_counts_as_no_memory():
    nodes = [NodeInfo("x0", "main", "mystery", 8, 64, 512, "l0", "s0")]
    found = never_runs(make_job("j").gpus(1).min_memory(1).obj(), nodes, {})
    assert isinstance(found, Infeasible) and found.field == "min_gpu_memory_gb"
    assert never_runs(make_job("j").gpus(1).obj(), nodes, {"x": GpuTypeInfo("x", 1)}) is None


@st.composite
def distinct_role_gangs(draw):
    """Heterogeneous gangs on distinct nodes: roles of their own size, count, GPU type (or
    any), CPUs and memory per GPU, whose smaller members may take fewer nodes than larger."""
    roles = [GangRole(f"r{i}", draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 4, 8])),
                      draw(st.sampled_from([(), ("a100",), ("a100-40",), ("t4",)])), 0,
                      draw(st.sampled_from([0, 4, 16])), draw(st.sampled_from([0, 32, 128])))
             for i in range(draw(st.integers(1, 3)))]
    return make_job("j").roles(*roles).distinct_nodes().obj()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=node_groups, spec=distinct_role_gangs())
def test_never_runs_agrees_with_the_engine_on_distinct_role_gangs(groups, spec):
    """As above for heterogeneous gangs on distinct nodes, whose sets of members (a role that
    takes only one type, or more CPUs or memory than most nodes have) need nodes of their own:
    the check refuses exactly what the empty fleet can never place and the engine calls
    CanNeverRun."""
    nodes = fleet(*groups)
    found = never_runs(spec, nodes, TYPES)
    plan = _plan(spec, nodes)
    engine_never = (not plan.binds and why(plan, "j").reason == ReasonCode.CAN_NEVER_RUN)
    assert (found is not None) is engine_never, (found, plan.binds, why(plan, "j") if not plan.binds else None)
    assert (found is None) is bool(plan.binds), (found, why(plan, "j") if not plan.binds else None)
