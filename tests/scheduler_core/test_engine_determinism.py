"""Plans are deterministic: the same snapshot gives an equal plan, and so does the same
snapshot with its tuples in another order (no set or input-order leaks)."""

from __future__ import annotations

import dataclasses
import random

from engine_builders import make_cluster, make_job, make_running, role

from scheduler_core import Snapshot, schedule


def busy_snapshot() -> Snapshot:
    cluster = (
        make_cluster()
        .nodes(6, per_leaf=2, leaf="L", leaves_per_spine=2, spine="S")
        .nodes(2, prefix="h", gpu_type="h100", leaf="H", spine="S-9")
        .at(50_000)
        .quota("ml", "a100", 16, cohort="c").quota("cv", "a100", 16, cohort="c")
        .quota("ml", "h100", 8)
        .usage("ml", gpu_seconds=1e6).usage("cv", gpu_seconds=3e5)
    )
    cluster.running(
        make_running(make_job("r0").team("cv").priority("low").gpus(4).limit(60_000))
        .on("n0", 0, 1, 2, 3).started(1000).borrowed(),
        make_running(make_job("r1").team("ml").gpus(8).limit(40_000)).whole("n2").started(0),
        make_running(make_job("r2").team("ml").gpus(2).per_node(2).elastic(2, 6))
        .on("n3", 0, 1).started(49_000),
        make_running(make_job("r3").team("cv").gpus(8)).whole("h0").started(100),
    )
    jobs = []
    for k, (gpus, klass, team) in enumerate([
        (1, "normal", "ml"), (8, "high", "cv"), (16, "normal", "ml"), (3, "low", "cv"),
        (2, "normal", "ml"), (24, "low", "cv"), (4, "high", "ml"), (8, "normal", "cv"),
    ]):
        jobs.append(make_job(f"p{k}").team(team).priority(klass).gpus(gpus)
                    .submitted(40_000 + 7 * k).limit(3600 * (k + 1)))
    jobs.append(make_job("het").roles(role("ps", 1, 1, "h100"), role("w", 2, 4, "a100")))
    jobs.append(make_job("svc").serving().gpus(3).per_node(1).priority("high"))
    return cluster.pending(*jobs).snapshot()


def shuffled(snapshot: Snapshot, seed: int) -> Snapshot:
    rng = random.Random(seed)

    def mix(items):
        items = list(items)
        rng.shuffle(items)
        return tuple(items)

    return dataclasses.replace(
        snapshot,
        nodes=mix(snapshot.nodes), pending=mix(snapshot.pending), running=mix(snapshot.running),
        quotas=mix(snapshot.quotas), priority_classes=mix(snapshot.priority_classes),
        gpu_types=mix(snapshot.gpu_types), team_usage=mix(snapshot.team_usage),
    )


def test_same_snapshot_same_plan():
    snapshot = busy_snapshot()
    first = schedule(snapshot)
    assert first.binds, "the scenario should bind something"
    for _ in range(3):
        assert schedule(snapshot) == first


def test_input_order_does_not_change_the_plan():
    snapshot = busy_snapshot()
    expected = schedule(snapshot)
    for seed in range(5):
        assert schedule(shuffled(snapshot, seed)) == expected


def test_plan_echoes_the_scheduler_epoch():
    snapshot = dataclasses.replace(busy_snapshot(), epoch=42)
    assert schedule(snapshot).epoch == 42


def test_phase_durations_need_a_clock_and_do_not_change_equality():
    snapshot = busy_snapshot()
    ticks = iter(range(10**6))
    timed = schedule(snapshot, clock=lambda: float(next(ticks)))
    assert {"order", "admit", "explain", "snapshot"} <= timed.phase_durations.keys()
    assert schedule(snapshot).phase_durations == {}
    assert timed == schedule(snapshot)
