"""Rule 5, order: priority classes first; within a class, fair share by dominant resource share
(DRF over GPU/CPU/memory, seed 001 table 1) with usage decayed over a configurable half-life;
age raises priority so nothing starves."""

from __future__ import annotations

import math

import pytest
from engine_builders import bound, make_cluster, make_job, make_running, why

from scheduler_core import SchedulerConfig, TeamUsage
from scheduler_core.fairshare import decay, dominant_shares
from scheduler_core.types import GpuPlacement, JobSpec, NodeInfo, RunningJob


def one_slot_cluster():
    """One free 8-GPU node: whoever is first in the queue gets it."""
    return make_cluster().nodes(1).at(7200)


def winner(plan) -> str:
    [job_id] = bound(plan)
    return job_id


@pytest.mark.parametrize(
    ("a_class", "b_class", "expected"),
    [("high", "low", "a"), ("low", "high", "b"), ("normal", "normal", "a")],
    ids=["higher-class-first", "lower-class-waits-even-if-older", "same-class-older-first"],
)
def test_priority_class_orders_the_queue(a_class, b_class, expected):
    plan = (
        one_slot_cluster()
        .pending(make_job("a").priority(a_class).gpus(8).submitted(7000),
                 make_job("b").priority(b_class).gpus(8).submitted(7100))
        .plan(SchedulerConfig(aging_per_hour=0.0))
    )
    assert winner(plan) == expected


def test_seed_001_table_1_dominant_shares_are_equal():
    # 8 GPUs, 32 cores, 256 GB; A: 4 replicas of (1 GPU, 4 cores, 32 GB);
    # B: 2 workers of (2 GPUs, 2 cores, 16 GB). Both reach a dominant share of 0.5.
    node = NodeInfo("n0", "p", "a100", 8, 32, 256, "l0", "s0")
    a = RunningJob(JobSpec("a", "A", "normal", 4, 0.0, cpus_per_gpu=4, memory_gb_per_gpu=32),
                   (GpuPlacement("n0", (0, 1, 2, 3)),), 0.0)
    b = RunningJob(JobSpec("b", "B", "normal", 4, 0.0, cpus_per_gpu=1, memory_gb_per_gpu=8),
                   (GpuPlacement("n0", (4, 5, 6, 7)),), 0.0)
    shares = dominant_shares(0.0, [node], [a, b], [], half_life_s=3600.0)
    assert shares == {"A": pytest.approx(0.5), "B": pytest.approx(0.5)}


def test_dominant_share_takes_the_largest_resource_share():
    node = NodeInfo("n0", "p", "a100", 8, 32, 256, "l0", "s0")
    cpu_heavy = RunningJob(JobSpec("c", "C", "normal", 1, 0.0, cpus_per_gpu=24),
                           (GpuPlacement("n0", (0,)),), 0.0)
    shares = dominant_shares(0.0, [node], [cpu_heavy], [], half_life_s=3600.0)
    assert shares["C"] == pytest.approx(24 / 32)


def test_lower_dominant_share_goes_first_within_a_class():
    plan = (
        one_slot_cluster().nodes(1, prefix="busy")
        .running(make_running(make_job("r").team("heavy").gpus(8)).whole("busy0"))
        .pending(make_job("h").team("heavy").gpus(8).submitted(7000),
                 make_job("l").team("light").gpus(8).submitted(7100))
        .plan(SchedulerConfig(aging_per_hour=0.0))
    )
    assert winner(plan) == "l"


def test_past_usage_counts_toward_the_share():
    plan = (
        one_slot_cluster()
        .usage("heavy", gpu_seconds=8 * 3600 * 10)
        .pending(make_job("h").team("heavy").gpus(8).submitted(7000),
                 make_job("l").team("light").gpus(8).submitted(7100))
        .plan(SchedulerConfig(aging_per_hour=0.0))
    )
    assert winner(plan) == "l"


def test_usage_decays_with_the_configured_half_life():
    assert decay(100.0, 3600.0, 3600.0) == pytest.approx(50.0)
    assert decay(100.0, 7200.0, 3600.0) == pytest.approx(25.0)
    assert decay(100.0, 0.0, 3600.0) == 100.0
    node = NodeInfo("n0", "p", "a100", 8, 32, 256, "l0", "s0")
    fresh = dominant_shares(0.0, [node], [], [TeamUsage("t", gpu_seconds=1000.0, as_of=0.0)],
                            half_life_s=3600.0)
    aged = dominant_shares(3600.0, [node], [], [TeamUsage("t", gpu_seconds=1000.0, as_of=0.0)],
                           half_life_s=3600.0)
    assert aged["t"] == pytest.approx(fresh["t"] / 2)
    # decayed seconds become an average holding: ln 2 / half-life
    assert fresh["t"] == pytest.approx(1000.0 * math.log(2) / 3600.0 / 8)


@pytest.mark.parametrize(
    ("half_life_h", "expected"),
    [(1.0, "h"), (1000.0, "l")],
    ids=["short-half-life-forgets-old-usage", "long-half-life-remembers-it"],
)
def test_half_life_decides_whether_old_usage_still_counts(half_life_h, expected):
    # heavy used a lot, 48 h ago; light used a little, just now
    plan = (
        make_cluster().nodes(1).at(48 * 3600)
        .usage("heavy", gpu_seconds=8 * 3600 * 40, as_of=0)
        .usage("light", gpu_seconds=8 * 3600, as_of=48 * 3600)
        .pending(make_job("h").team("heavy").gpus(8).submitted(48 * 3600 - 10),
                 make_job("l").team("light").gpus(8).submitted(48 * 3600 - 5))
        .plan(SchedulerConfig(aging_per_hour=0.0, fair_share_half_life_s=half_life_h * 3600))
    )
    assert winner(plan) == expected


@pytest.mark.parametrize(
    ("aging_per_hour", "expected"),
    [(0.0, "fresh-high"), (100.0, "old-low")],
    ids=["without-aging-a-low-job-waits-behind-every-high-job",
         "with-aging-a-long-wait-overtakes-a-higher-class"],
)
def test_aging_lets_nothing_starve(aging_per_hour, expected):
    # low (10) waited 20 h; high (1000) just arrived: 20 h x 100/h = 2000 points > 990
    plan = (
        make_cluster().nodes(1).at(20 * 3600)
        .pending(make_job("old-low").priority("low").gpus(8).submitted(0),
                 make_job("fresh-high").priority("high").gpus(8).submitted(20 * 3600))
        .plan(SchedulerConfig(aging_per_hour=aging_per_hour))
    )
    assert winner(plan) == expected


def test_queue_positions_follow_the_order_and_ties_break_by_submission_then_id():
    plan = (
        make_cluster().nodes(1)
        .running(make_running(make_job("r").gpus(8)).whole("n0"))
        .pending(make_job("b").gpus(8).submitted(5), make_job("a").gpus(8).submitted(5),
                 make_job("c").gpus(8).submitted(1), make_job("z").priority("high").gpus(8)
                 .submitted(9))
        .plan(SchedulerConfig(aging_per_hour=0.0))
    )
    positions = {p.job_id: p.queue_position for p in plan.pending}
    assert positions == {"z": 1, "c": 2, "a": 3, "b": 4}


def test_unknown_queue_order_plugin_is_rejected():
    from scheduler_core import ConfigError

    with pytest.raises(ConfigError, match="queue_order.*'lottery'"):
        make_cluster().nodes(1).plan(SchedulerConfig(queue_order="lottery"))


def test_unknown_priority_class_is_explained_not_guessed():
    plan = make_cluster().nodes(1).pending(make_job("j").priority("urgent")).plan()
    explanation = why(plan, "j")
    assert explanation.reason == "UnknownPriorityClass"
    assert "'urgent'" in explanation.message
    assert not explanation.resolvable


def test_among_equal_priority_age_and_share_the_shorter_runtime_limit_goes_first():
    # Same class, same team, same aging point: shortest runtime limit first (no limit counts
    # as default_runtime_estimate_s, 4 h); a job one aging point older still goes before all.
    plan = (
        make_cluster().nodes(1).at(3 * 3600)
        .running(make_running(make_job("r").gpus(8).limit(7 * 3600)).whole("n0"))
        .pending(make_job("old-long").gpus(1).limit(9 * 3600).submitted(0),
                 make_job("long").gpus(1).limit(8 * 3600).submitted(2 * 3600 + 10),
                 make_job("none").gpus(1).submitted(2 * 3600 + 20),
                 make_job("short").gpus(1).limit(2 * 3600).submitted(2 * 3600 + 30))
        .plan()
    )
    order = sorted(plan.pending, key=lambda p: p.queue_position)
    assert [p.job_id for p in order] == ["old-long", "short", "none", "long"]
