"""The replay refuses plans that cannot take effect, and counts elastic progress by GPU-seconds.

These use hand-written plans, not the engine: they test the simulator's own bookkeeping."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from scheduler_core.sim import FleetShape, SimulationError, Simulator, TraceJob, simulate
from scheduler_core.types import Bind, FleetFigures, GpuPlacement, Plan, Resize, SchedulerConfig, Snapshot

HOUR = 3600.0
TWO_NODES = FleetShape(nodes=2, gpus_per_node=8)


def plan(binds: tuple[Bind, ...] = (), resizes: tuple[Resize, ...] = ()) -> Plan:
    return Plan(binds=binds, preemptions=(), resizes=resizes, reservations=(), pending=(), kills=(),
                fleet=FleetFigures(0, 0, 0, 0, {}, {}, {}), epoch=1)


def on(node: str, *gpus: int) -> GpuPlacement:
    return GpuPlacement(node, tuple(gpus))


def run(trace: list[TraceJob], decide: Callable[[Snapshot], Plan]) -> Simulator:
    sim = Simulator(trace, TWO_NODES, lambda snapshot, config: decide(snapshot), SchedulerConfig(), horizon_s=4 * HOUR)
    sim.run()
    return sim


def first_cycle_only(binds: tuple[Bind, ...]) -> Callable[[Snapshot], Plan]:
    return lambda snapshot: plan(binds) if snapshot.now == 0 else plan()


@pytest.mark.parametrize(
    ("binds", "message"),
    [
        ((Bind("a", (on("n0000", 0, 1),)), Bind("b", (on("n0000", 1, 2),))), "GPU n0000/1 is held by a"),
        ((Bind("a", (on("n0000", 0),)),), "got 1 GPUs, needs between 2 and 2"),
        ((Bind("a", (on("n0000", 0), on("n0001", 0))),), "must sit on one node"),
        ((Bind("w", (on("n0000", *range(8)), on("n0001", 0, 1, 2, 3))),), "needs whole nodes"),
        ((Bind("t", (on("n0000", 0, 1, 2, 3, 4, 5), on("n0001", 0, 1, 2, 3, 4, 5))),), "needs whole nodes \\(12 GPUs: 1 whole"),
        ((Bind("a", (on("n0009", 0, 1),)),), "unknown node"),
        ((Bind("a", (on("n0000", 7, 8),)),), "GPU 8 does not exist"),
        ((Bind("ghost", (on("n0000", 0, 1),)),), "ghost, which is unknown, not pending"),
    ],
    ids=["gpu-held-twice", "partial-gang", "small-job-split", "whole-node-job-on-part-of-a-node",
         "twelve-gpu-job-split-six-and-six", "unknown-node", "gpu-out-of-range", "unknown-job"],
)
def test_plan_that_cannot_take_effect_is_refused(binds: tuple[Bind, ...], message: str) -> None:
    trace = [TraceJob("a", 0, 2, HOUR, None, "u"), TraceJob("b", 0, 2, HOUR, None, "u"), TraceJob("w", 0, 16, HOUR, None, "u"),
             TraceJob("t", 0, 12, HOUR, None, "u")]
    with pytest.raises(SimulationError, match=message):
        run(trace, first_cycle_only(binds))


def test_job_of_more_than_a_node_not_a_multiple_takes_whole_nodes_and_its_remainder_on_one_more() -> None:
    # 12 GPUs on 8-GPU nodes: the engine's split (gang.demand_for) is a whole node and 4 more
    binds = (Bind("t", (on("n0000", *range(8)), on("n0001", 0, 1, 2, 3))),)
    sim = Simulator([TraceJob("t", 0, 12, HOUR, None, "u")], TWO_NODES,
                    lambda snapshot, config: first_cycle_only(binds)(snapshot), SchedulerConfig(), horizon_s=4 * HOUR)
    assert sim.run().as_dict()["jobs_done"] == 1


def test_engine_replays_a_twelve_gpu_job_as_the_live_scheduler_places_it() -> None:
    result = simulate([TraceJob("t", 0, 12, 600, HOUR, "u", team="t")], FleetShape(nodes=4, gpus_per_node=8),
                      horizon_s=2 * HOUR)
    assert result.as_dict()["jobs_done"] == 1


def test_job_with_its_own_layout_may_share_nodes_in_members_of_that_size() -> None:
    # 12 GPUs in members of 4 (gpus_per_node): one member on a half-used node is a valid bind
    trace = [TraceJob("s", 0, 4, HOUR, None, "u"), TraceJob("g", 0, 12, HOUR, None, "u", gpus_per_node=4)]
    binds = (Bind("s", (on("n0000", 0, 1, 2, 3),)),
             Bind("g", (on("n0000", 4, 5, 6, 7), on("n0001", *range(8)))))
    sim = Simulator(trace, TWO_NODES, lambda snapshot, config: first_cycle_only(binds)(snapshot),
                    SchedulerConfig(), horizon_s=4 * HOUR)
    assert sim.run().as_dict()["jobs_done"] == 2


def test_engine_replays_a_laid_out_gang_on_partly_used_nodes() -> None:
    # two 6-GPU jobs leave 2 GPUs free on each node; 4 GPUs in members of 2 start at once,
    # where a 4-GPU job without a layout would wait 2 h for one node to have 4 free
    laid_out = [TraceJob("s1", 0, 6, 2 * HOUR, 3 * HOUR, "u", team="t"), TraceJob("s2", 0, 6, 2 * HOUR, 3 * HOUR, "u", team="t"),
                TraceJob("g", 60, 4, 600, HOUR, "u", team="t", gpus_per_node=2)]
    got = simulate(laid_out, TWO_NODES, horizon_s=4 * HOUR).as_dict()
    assert got["jobs_done"] == 3 and got["wait_max_min"] == 0
    plain = [*laid_out[:2], dataclasses.replace(laid_out[2], gpus_per_node=None)]
    assert simulate(plain, TWO_NODES, horizon_s=4 * HOUR).as_dict()["wait_max_min"] == pytest.approx(119)


def test_stale_generation_is_refused() -> None:
    trace = [TraceJob("e", 0, 8, HOUR, None, "u", min_gpus=4), TraceJob("tick", 600, 1, 60, None, "u")]

    def decide(snapshot: Snapshot) -> Plan:
        if snapshot.now == 0:
            return plan((Bind("e", (on("n0000", *range(8)),)),))
        return plan(resizes=(Resize("e", (on("n0000", 0, 1, 2, 3),), generation=99),))

    with pytest.raises(SimulationError, match="generation 99, the allocation is at 1"):
        run(trace, decide)


def test_shrunk_elastic_job_progresses_at_the_rate_of_the_gpus_it_holds() -> None:
    # 8 GPUs for 1800 s does half the work; shrunk to 4 GPUs, the other half takes 3600 s
    trace = [TraceJob("e", 0, 8, HOUR, None, "u", min_gpus=4), TraceJob("tick", 1800, 1, 60, None, "u")]

    def decide(snapshot: Snapshot) -> Plan:
        if snapshot.now == 0:
            return plan((Bind("e", (on("n0000", *range(8)),)),))
        if snapshot.now == 1800:
            (running,) = snapshot.running
            return plan(resizes=(Resize("e", (on("n0000", 0, 1, 2, 3),), generation=running.generation),))
        return plan()

    sim = run(trace, decide)
    assert sim.jobs["e"].end_s == 1800 + 3600
    assert sim.allocated.area() == 8 * 1800 + 4 * 3600


def test_engine_is_not_called_when_nothing_changed() -> None:
    calls: list[float] = []

    def decide(snapshot: Snapshot) -> Plan:
        calls.append(snapshot.now)
        return plan((Bind("a", (on("n0000", 0),)),)) if snapshot.now == 0 else plan()

    run([TraceJob("a", 0, 1, 600, 1200, "u"), TraceJob("b", 60, 16, 600, None, "u")], decide)
    # arrival of a, arrival of b, completion of a; the runtime-limit wake-up of a never comes
    assert calls == [0, 60, 600]
