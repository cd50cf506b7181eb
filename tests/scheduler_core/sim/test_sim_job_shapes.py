"""A trace job's whole shape reaches the engine in a replay: members on distinct nodes, a
topology constraint, heterogeneous roles, several accepted GPU types and an array's task limit
each change where or when the replayed job runs, so a replay that dropped one (the what-if page's
until 7 Dec) replayed another job. Each test replays the job as asked and with that one field
left at its default, and shows the two differ."""

from __future__ import annotations

import dataclasses

from scheduler_core import schedule as engine_schedule
from scheduler_core.sim import FleetShape, TraceJob, simulate
from scheduler_core.sim.fleet import build_nodes
from scheduler_core.types import GangRole, GpuPlacement, Plan, SchedulerConfig, Snapshot, TopologyConstraint

HOUR = 3600.0


def job(job_id: str, submit: float, gpus: int, **extra: object) -> TraceJob:
    return TraceJob(job_id, submit, gpus, HOUR, 2 * HOUR, "u", **extra)  # type: ignore[arg-type]


def starts(jobs: list[TraceJob], shape: FleetShape) -> dict[str, tuple[float, tuple[GpuPlacement, ...]]]:
    """Each job's first start in the replay: when, and on which GPUs."""
    seen: dict[str, tuple[float, tuple[GpuPlacement, ...]]] = {}

    def recording(snapshot: Snapshot, config: SchedulerConfig) -> Plan:
        plan = engine_schedule(snapshot, config)
        for bind in plan.binds:
            seen.setdefault(bind.job_id, (snapshot.now, bind.placements))
        return plan

    result = simulate(jobs, shape, schedule=recording, horizon_s=6 * HOUR)
    assert result.metrics["jobs_done"] == len(jobs)
    return seen


def node_types(shape: FleetShape) -> dict[str, str]:
    return {node.name: node.gpu_type for node in build_nodes(shape)}


def test_members_on_distinct_nodes_are_replayed_one_a_node() -> None:
    shape = FleetShape(nodes=4, gpus_per_node=8, nodes_per_leaf=2)
    spread = job("spread", 0, 4, gpus_per_node=1, members_on_distinct_nodes=True)
    asked = starts([spread], shape)["spread"][1]
    packed = starts([dataclasses.replace(spread, members_on_distinct_nodes=False)], shape)["spread"][1]
    assert len({p.node for p in asked}) == 4
    assert len({p.node for p in packed}) < 4


def test_a_topology_constraint_is_replayed_and_can_make_a_job_wait() -> None:
    # The first job takes half of every node; the second's four members of 4 then fit across
    # both leaves at once, but within one leaf only once the first has ended.
    shape = FleetShape(nodes=4, gpus_per_node=8, nodes_per_leaf=2)
    first = job("first", 0, 16, gpus_per_node=4, members_on_distinct_nodes=True)
    leaf = job("leaf", 60, 16, gpus_per_node=4, topology=TopologyConstraint.SAME_LEAF)
    asked = starts([first, leaf], shape)["leaf"][0]
    anywhere = starts([first, dataclasses.replace(leaf, topology=TopologyConstraint.ANY)], shape)["leaf"][0]
    assert anywhere == 60
    assert asked >= HOUR


def test_a_gang_of_roles_is_replayed_role_by_role() -> None:
    shape = FleetShape(nodes=4, gpus_per_node=8, gpu_types=("H100", "A100"))
    # Smaller than a node, yet on two nodes: a homogeneous job so small would sit on one.
    roles = (GangRole("learner", 1, 4, gpu_types=("A100",)), GangRole("actor", 2, 1, gpu_types=("H100",)))
    gang = job("gang", 0, 6, roles=roles)
    types = node_types(shape)
    asked = starts([gang], shape)["gang"][1]
    homogeneous = starts([dataclasses.replace(gang, roles=())], shape)["gang"][1]
    held: dict[tuple[str, str], int] = {}
    for p in asked:
        held[p.role, types[p.node]] = held.get((p.role, types[p.node]), 0) + len(p.gpu_indices)
    assert held == {("learner", "A100"): 4, ("actor", "H100"): 2}
    assert {p.role for p in homogeneous} == {""}


def test_several_accepted_gpu_types_are_replayed() -> None:
    shape = FleetShape(nodes=3, gpus_per_node=8, gpu_types=("H100", "A100", "L40S"))
    picky = job("picky", 0, 8, gpu_types=("H100", "L40S"))
    types = node_types(shape)
    asked = starts([picky], shape)["picky"][1]
    assert {types[p.node] for p in asked} <= {"H100", "L40S"}
    anywhere = starts([dataclasses.replace(picky, gpu_types=())], shape)["picky"][1]
    assert {types[p.node] for p in anywhere} == {"A100"}


def test_an_arrays_task_limit_is_replayed() -> None:
    shape = FleetShape(nodes=1, gpus_per_node=8)
    tasks = [job(f"t{i}", 0, 1, array_id="a", array_task_limit=1) for i in range(3)]
    asked = sorted(at for at, _ in starts(tasks, shape).values())
    unlimited = sorted(at for at, _ in starts([dataclasses.replace(t, array_task_limit=None) for t in tasks],
                                              shape).values())
    assert asked == [0, HOUR, 2 * HOUR]
    assert unlimited == [0, 0, 0]
