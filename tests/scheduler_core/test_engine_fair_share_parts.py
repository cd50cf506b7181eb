"""Rule 5's fair share, shown as Slurm's sshare shows it: each team's holding now, its decayed
past usage as an average holding, each resource's share of the fleet and the dominant one,
the very number the queue is ordered by."""

from __future__ import annotations

import math

import pytest

from scheduler_core import SchedulerConfig, Snapshot, TeamUsage, snapshot_fair_shares
from scheduler_core.fairshare import dominant_shares, fair_shares
from scheduler_core.types import GpuPlacement, JobSpec, NodeInfo, RunningJob

NODE = NodeInfo("n0", "p", "a100", 8, 32, 256, "l0", "s0")


def test_fair_share_parts_name_the_dominant_resource_and_agree_with_the_queues_share():
    cpu_heavy = RunningJob(JobSpec("c", "C", "normal", 1, 0.0, cpus_per_gpu=24),
                           (GpuPlacement("n0", (0,)),), 0.0)
    gpu_heavy = RunningJob(JobSpec("g", "G", "normal", 4, 0.0, cpus_per_gpu=1, memory_gb_per_gpu=8),
                           (GpuPlacement("n0", (1, 2, 3, 4)),), 0.0)
    usage = [TeamUsage("P", gpu_seconds=3600.0, memory_gb_seconds=3600.0 * 128, as_of=0.0)]
    parts = fair_shares(0.0, [NODE], [cpu_heavy, gpu_heavy], usage, half_life_s=3600.0)
    assert list(parts) == ["C", "G", "P"]
    c, g, p = parts["C"], parts["G"], parts["P"]
    assert c.held == (1.0, 24.0, 0.0) and c.past == (0.0, 0.0, 0.0)
    assert c.shares == pytest.approx((1 / 8, 24 / 32, 0.0))
    assert (c.dominant_share, c.dominant_resource) == (pytest.approx(0.75), "cpus")
    assert (g.dominant_share, g.dominant_resource) == (pytest.approx(0.5), "gpus")
    to_average = math.log(2) / 3600.0
    assert p.held == (0.0, 0.0, 0.0)
    assert p.past == pytest.approx((3600.0 * to_average, 0.0, 3600.0 * 128 * to_average))
    assert p.dominant_resource == "memory"
    assert p.dominant_share == pytest.approx(3600.0 * 128 * to_average / 256)
    idle = fair_shares(0.0, [NODE], [], [TeamUsage("I", as_of=0.0)], half_life_s=3600.0)["I"]
    assert (idle.dominant_share, idle.dominant_resource) == (0.0, "")
    assert dominant_shares(0.0, [NODE], [cpu_heavy, gpu_heavy], usage, half_life_s=3600.0) == {
        team: share.dominant_share for team, share in parts.items()}


def test_fair_share_of_a_snapshot_uses_the_configured_half_life():
    usage = (TeamUsage("t", gpu_seconds=1000.0, as_of=0.0),)
    snapshot = Snapshot(now=3600.0, nodes=(NODE,), gpu_types=(), priority_classes=(), quotas=(), running=(),
                        pending=(), team_usage=usage)
    day = snapshot_fair_shares(snapshot, SchedulerConfig(fair_share_half_life_s=3600.0))["t"]
    week = 7 * 86400.0
    default = snapshot_fair_shares(snapshot)["t"]  # the default half-life: a week
    assert day.dominant_share == pytest.approx(1000.0 * 0.5 * math.log(2) / 3600.0 / 8)
    assert default.dominant_share == pytest.approx(1000.0 * 0.5 ** (3600.0 / week) * math.log(2) / week / 8)
