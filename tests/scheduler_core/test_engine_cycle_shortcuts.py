"""The shortcuts that made the 10,000-GPU cycle cheaper (2026-12-05) answer as the full
computations they replace. The golden plans (``test_engine_speedups.py``,
``test_engine_full_fleet.py``) pin the whole plan; these pin each shortcut on its own,
on the states where it takes effect."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler_core.backfill import _release_groups
from scheduler_core.bench import build_snapshot
from scheduler_core.cycle import _context
from scheduler_core.gang import Demand, Member
from scheduler_core.maintenance import NO_NODES
from scheduler_core.placement import GrowingRooms, PlacementRequest
from scheduler_core.plugins.registry import build_plugins
from scheduler_core.release_timeline import ReleaseTimeline
from scheduler_core.state import JOB
from scheduler_core.types import SchedulerConfig, TopologyConstraint, WorkloadClass


def _fleet_context(seed: int = 7):
    snap = build_snapshot(2000, 200, 1000, seed)
    cfg = SchedulerConfig()
    ctx = _context(dataclasses.replace(snap, now=snap.now + 1), cfg, build_plugins(cfg), None)
    for job in ctx.running.values():
        end = job.started_at + (job.spec.runtime_limit_s or 0)
        ctx.ends[job.spec.id] = end
    return ctx


@pytest.mark.parametrize("topology", [TopologyConstraint.SAME_LEAF, TopologyConstraint.SAME_SPINE])
@pytest.mark.parametrize("members", [(8,) * 4, (4,) * 12, (8,) * 16])
def test_growing_rooms_answer_as_a_full_pass_after_every_removal(topology, members):
    """A reservation search frees holders one by one; after each removal, plausibility with
    the rooms found so far equals the full pass over every leaf (spine)."""
    ctx = _fleet_context()
    state, placer = ctx.state, ctx.placer
    demand = Demand.of(tuple(Member("", g, (), 0, 4 * g, 32 * g) for g in members), topology)
    classes = tuple(range(len(state.classes)))
    request = PlacementRequest(demand, (classes,) * len(members),
                               ctx.plugins.score_by_workload[WorkloadClass.TRAINING])
    rooms = GrowingRooms()
    answers = []
    for _, job_ids in _release_groups(ctx):
        for job_id in job_ids:
            rooms.freed(g.node for g in state.holdings.get((JOB, job_id), ()))
            state.simulate_removal((JOB, job_id))
            full = placer.plausible(request)
            assert placer.plausible(request, rooms) is full, (job_id, len(answers))
            answers.append(full)
    # the search saw both answers: no room at first, room once enough holders left
    assert answers[0] is False and answers[-1] is True


@pytest.mark.parametrize("topology", [TopologyConstraint.SAME_LEAF, TopologyConstraint.SAME_SPINE])
@pytest.mark.parametrize("members", [(8,) * 4, (4,) * 12, (8,) * 16, (2,) * 6, (8,) * 40])
def test_a_domains_first_frame_is_the_first_frame_a_node_by_node_count_fits(topology, members):
    """ReleaseTimeline.domain_frame stops inside a frame as soon as a domain has the room;
    it answers as the node-by-node test of every frame (``_domain_fits``)."""
    ctx = _fleet_context()
    timeline = ReleaseTimeline(ctx)
    demand = Demand.of(tuple(Member("", g, (), 0, 4 * g, 32 * g) for g in members), topology)
    for classes in ((0,), (1,), (0, 1)):
        fits = timeline._domain_fits(demand, classes)
        expected = next((i for i in range(len(timeline.times)) if fits(i, NO_NODES)), None)
        assert timeline.domain_frame(demand, classes) == expected


@pytest.mark.parametrize("topology", [TopologyConstraint.SAME_LEAF, TopologyConstraint.SAME_SPINE,
                                      TopologyConstraint.ANY])
@pytest.mark.parametrize("members", [(8, 4, 2), (4,) * 6, (8, 8, 8, 1), (2,) * 12])
def test_a_distinct_nodes_gangs_frames_count_room_as_node_by_node(topology, members):
    """For a gang on distinct nodes the timeline counts nodes with room beside the GPUs (CPUs
    and memory) frame by frame from the recorded changes (``room_row``, ``domain_frame``); each
    count answers as the node-by-node one from every node's own frames (``room_at``,
    ``_domain_fits``)."""
    ctx = _fleet_context()
    timeline = ReleaseTimeline(ctx)
    state = ctx.state
    demand = Demand.of(tuple(Member("", g, (), 0, 12 * g, 100 * g) for g in members), topology, True)
    for classes in ((0,), (1,), (0, 1)):
        if topology is TopologyConstraint.ANY:
            sets = timeline.node_sets(demand, classes)
            assert sets
            frames = range(0, len(timeline.times), max(1, len(timeline.times) // 40))
            for need in sets:
                row = timeline.room_row(need)
                for i in frames:
                    assert row[i] == sum(
                        1 for n in range(len(state.nodes))
                        if state.ready[n] and need.room(state.node_class[n], *timeline.room_at(n, i))), i
        else:
            fits = timeline._domain_fits(demand, classes)
            expected = next((i for i in range(len(timeline.times)) if fits(i, NO_NODES)), None)
            assert timeline.domain_frame(demand, classes) == expected
