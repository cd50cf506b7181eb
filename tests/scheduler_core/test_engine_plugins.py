"""Each plugin alone: filters, scores, queue orders and victim choosers, their names and the
validation of their arguments."""

from __future__ import annotations

import pytest

from scheduler_core import ConfigError, JobSpec, PreemptionReason, ReasonCode, SchedulerConfig
from scheduler_core.gang import Member
from scheduler_core.plugins.filters import GpuCapability, NodeReady, ResourceFit
from scheduler_core.plugins.protocols import GangContext, QueueContext, VictimCandidate
from scheduler_core.plugins.queue_order import Fifo, PriorityFairShare, PriorityFifo
from scheduler_core.plugins.registry import build_plugins
from scheduler_core.plugins.scores import Pack, Spread
from scheduler_core.plugins.victims import LeastLostWork, NewestFirst
from scheduler_core.state import JOB, ClusterState, Grant
from scheduler_core.types import GpuTypeInfo, NodeInfo, NodeState


def member(gpus=2, types=(), mem=0, cpus=0, memory=0) -> Member:
    return Member("", gpus, tuple(types), mem, cpus, memory)


def two_nodes() -> ClusterState:
    return ClusterState(
        [NodeInfo("a", "p", "a100-40", 8, 16, 128, "l0", "s0", failure_domain="r1"),
         NodeInfo("b", "p", "a100-40", 8, 16, 128, "l0", "s0", state=NodeState.CORDONED,
                  failure_domain="r2")],
        {"a100-40": GpuTypeInfo("a100-40", 40)},
    )


@pytest.mark.parametrize(
    ("plugin", "m", "capable", "admits_a"),
    [
        (NodeReady(), member(), None, None),
        (GpuCapability(), member(types=("a100-40",)), None, None),
        (GpuCapability(), member(types=("h100",)), ReasonCode.NO_CAPABLE_NODE,
         ReasonCode.NO_CAPABLE_NODE),
        (GpuCapability(), member(mem=41), ReasonCode.NO_CAPABLE_NODE, ReasonCode.NO_CAPABLE_NODE),
        (ResourceFit(), member(gpus=9), ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
         ReasonCode.INSUFFICIENT_GPUS),
        (ResourceFit(), member(cpus=17), ReasonCode.INSUFFICIENT_CPU, ReasonCode.INSUFFICIENT_CPU),
        (ResourceFit(), member(memory=129), ReasonCode.INSUFFICIENT_MEMORY,
         ReasonCode.INSUFFICIENT_MEMORY),
        (ResourceFit(), member(gpus=6, cpus=16, memory=128), None, ReasonCode.INSUFFICIENT_GPUS),
    ],
    ids=["ready-node-admits", "accepted-type", "other-type", "too-little-device-memory",
         "more-gpus-than-the-node", "more-cpus-than-the-node", "more-memory-than-the-node",
         "fits-the-node-but-not-what-is-free"],
)
def test_filter_plugins(plugin, m, capable, admits_a):
    s = two_nodes()
    s.take((JOB, "x"), Grant(0, 0b111, 0, 0))
    assert plugin.capable(s.classes[0], m) == capable
    assert plugin.admits(s, 0, m) == admits_a


def test_node_ready_refuses_a_cordoned_node():
    s = two_nodes()
    assert NodeReady().admits(s, 1, member()) is ReasonCode.NODE_NOT_READY


def test_pack_walks_buckets_up_from_the_request_and_prefers_less_free():
    s = two_nodes()
    assert list(Pack().bucket_order(3, 8)) == [3, 4, 5, 6, 7, 8]
    s.take((JOB, "x"), Grant(0, 0b111, 0, 0))
    assert Pack().score(s, 0, member(2), GangContext()) > Pack().score(s, 1, member(2),
                                                                      GangContext())


def test_spread_walks_buckets_down_and_avoids_used_failure_domains():
    s = two_nodes()
    assert list(Spread().bucket_order(3, 8)) == [8, 7, 6, 5, 4, 3]
    gang = GangContext(domain_counts={"r1": 1})
    assert Spread().score(s, 1, member(), gang) > Spread().score(s, 0, member(), gang)
    assert Spread().enough(Spread().score(s, 1, member(), gang))
    assert not Spread().enough(Spread().score(s, 0, member(), gang))


@pytest.mark.parametrize("factory", [lambda: Pack(candidates=0), lambda: Spread(candidates=-1),
                                     lambda: PriorityFairShare(aging_per_hour=-1.0)],
                         ids=["pack", "spread", "priority-fair-share"])
def test_plugin_constructors_validate_their_arguments(factory):
    with pytest.raises(ConfigError):
        factory()


def job(job_id: str, submitted: float) -> JobSpec:
    return JobSpec(job_id, "t", "normal", 1, submitted)


def test_priority_fair_share_key_orders_priority_then_share_then_age():
    plugin = PriorityFairShare(aging_per_hour=1.0)
    high = plugin.sort_key(job("a", 0.0), QueueContext(100.0, 1000, 0.9))
    low_light = plugin.sort_key(job("b", 0.0), QueueContext(100.0, 10, 0.1))
    low_heavy = plugin.sort_key(job("c", 0.0), QueueContext(100.0, 10, 0.5))
    assert high < low_light < low_heavy
    # two hours of waiting add two points of priority
    assert plugin.sort_key(job("d", 0.0), QueueContext(7200.0, 10, 0.5))[0] == -12


def test_fifo_plugins_ignore_fair_share():
    assert Fifo().sort_key(job("a", 5.0), QueueContext(9.0, 1000, 0.0)) == (5.0,)
    a = PriorityFifo(0.0).sort_key(job("a", 5.0), QueueContext(9.0, 10, 0.0))
    b = PriorityFifo(0.0).sort_key(job("b", 6.0), QueueContext(9.0, 10, 0.9))
    assert a < b


def candidate(job_id, tier=1, value=10, lost=1.0, gpus=8, started=0.0, shrink_to=None):
    reason = (PreemptionReason.RECLAIM_BORROWED if tier == 0
              else PreemptionReason.HIGHER_PRIORITY)
    return VictimCandidate(job_id, tier, reason, value, gpus, lost, started, shrink_to)


def test_least_lost_work_order():
    order = LeastLostWork().order([
        candidate("lower-but-costly", value=5, lost=9.0),
        candidate("borrowed", tier=0, value=500, lost=50.0),
        candidate("cheap", value=10, lost=0.5),
        candidate("dear", value=10, lost=4.0),
        candidate("shrink", value=10, lost=3.0, shrink_to=8),
    ])
    assert [c.job_id for c in order] == ["borrowed", "shrink", "lower-but-costly", "cheap", "dear"]


def test_newest_first_order():
    order = NewestFirst().order([candidate("old", started=0.0), candidate("new", started=50.0)])
    assert [c.job_id for c in order] == ["new", "old"]


def test_registry_builds_the_configured_plugins():
    plugins = build_plugins(SchedulerConfig(victim_chooser="newest_first", queue_order="fifo"))
    assert plugins.victims.NAME == "newest_first"
    assert plugins.queue_order.NAME == "fifo"
    assert [f.NAME for f in plugins.filters] == ["node_ready", "gpu_capability", "resource_fit"]


@pytest.mark.parametrize(
    ("config", "pattern"),
    [
        (SchedulerConfig(filters=("node_ready", "gpu_capability")), "resource_fit.*required"),
        (SchedulerConfig(filters=("node_ready", "gpu_capability", "resource_fit", "vibes")),
         "filters: unknown plugin 'vibes'"),
        (SchedulerConfig(victim_chooser="random"), "victim_chooser: unknown plugin 'random'"),
        (SchedulerConfig(max_preemptions_per_cycle=-1), "max_preemptions_per_cycle must be >= 0"),
        (SchedulerConfig(fair_share_half_life_s=0), "fair_share_half_life_s must be > 0"),
        (SchedulerConfig(max_placement_attempts=0), r"max_placement_attempts must be >= 1 \(0 would never place"),
    ],
    ids=["feasibility-filters-are-required", "unknown-filter", "unknown-victim-chooser",
         "negative-preemption-cap", "zero-half-life", "no-placement-attempts"],
)
def test_invalid_configuration_names_the_field(config, pattern):
    with pytest.raises(ConfigError, match=pattern):
        build_plugins(config)
