"""`queue_factors_of`: the queue order from only what it reads (a `QueueSnapshot`: the waiting
jobs' fields the keys read, the priority values, the fleet's capacity and what each team holds,
summed, and the teams' past usage) must give exactly `queue_factors` of the whole snapshot:
the same jobs, in the same order, with the same factors, under every queue-order plugin.
`qm sprio` reads the queue that way (controlplane/services/job_priority.py)."""

from __future__ import annotations

import random

import pytest
from engine_builders import make_cluster, make_job, make_running

from scheduler_core import (
    QueuedJob,
    QueueSnapshot,
    SchedulerConfig,
    Snapshot,
    queue_factors,
    queue_factors_of,
)
from scheduler_core.fairshare import fair_shares, fair_shares_of, held_resources

HOUR = 3600.0
NOW = 30 * HOUR
ORDERS = ("priority_fair_share", "priority_fifo", "fifo")


def queue_of(snapshot: Snapshot) -> QueueSnapshot:
    """What a reader of the queue alone would read: the sums a database gives."""
    return QueueSnapshot(
        now=snapshot.now,
        pending=tuple(QueuedJob(j.id, j.team, j.priority_class, j.submitted_at, j.runtime_limit_s, j.held_by,
                                j.waits_on) for j in snapshot.pending),
        priority_values={pc.name: pc.value for pc in snapshot.priority_classes},
        capacity=(float(sum(n.gpus for n in snapshot.nodes)), float(sum(n.cpus for n in snapshot.nodes)),
                  float(sum(n.memory_gb for n in snapshot.nodes))),
        held=held_resources(snapshot.running),
        team_usage=snapshot.team_usage,
    )


def varied(seed: int) -> Snapshot:
    """Three classes, five teams with past usage and running jobs (CPUs and memory too), and
    a queue with holds, dependencies, array tasks (ids 9 and 10 submitted together), equal
    submission times, runtime limits and none, jobs waiting for days (aging)."""
    rng = random.Random(seed)
    teams = [f"t{k}" for k in range(5)]
    cluster = make_cluster().at(NOW).nodes(6, cpus=96, memory_gb=1024).nodes(3, prefix="b", gpus=4, cpus=48,
                                                                             memory_gb=256)
    for k, team in enumerate(teams[:4]):
        cluster.usage(team, gpu_seconds=rng.random() * 40 * HOUR, cpu_seconds=rng.random() * 4000 * HOUR,
                      memory_gb_seconds=rng.random() * 9000 * HOUR, as_of=NOW - k * 600)
    for k in range(5):
        job = (make_job(f"r{k}").team(rng.choice(teams)).gpus(2).cpus_per_gpu(rng.choice((0, 8, 12)))
               .memory_per_gpu(rng.choice((0, 64, 100))))
        cluster.running(make_running(job).on(f"n{k}", 0, 1).started(NOW - HOUR))
    same_time = NOW - 2 * HOUR
    pending = []
    for k in range(60):
        job = (make_job(str(100 + k)).team(rng.choice(teams)).priority(rng.choice(("low", "normal", "high")))
               .gpus(rng.choice((1, 2, 8))).limit(rng.choice((None, 600, 3600, 4 * HOUR)))
               .submitted(same_time if k % 7 == 0 else NOW - rng.random() * 50 * HOUR))
        if k % 11 == 3:
            job.held(rng.choice(("alice", "admin root")))
        if k % 13 == 5:
            job.after(str(100 + k - 1))
        pending.append(job)
    for index in (8, 9, 10, 11):  # an array's tasks: one submission time, ids in numeric order
        pending.append(make_job(str(index)).team("t1").priority("normal").array("a1").submitted(same_time))
    rng.shuffle(pending)
    return cluster.pending(*pending).snapshot()


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("seed", range(6))
def test_the_same_jobs_order_and_factors_as_from_the_whole_snapshot(seed, order):
    snapshot = varied(seed)
    config = SchedulerConfig(queue_order=order)

    whole = queue_factors(snapshot, config)

    assert queue_factors_of(queue_of(snapshot), config) == whole
    in_line = {j.id for j in snapshot.pending if not j.held_by and not j.waits_on}
    assert {f.job_id for f in whole} == in_line and len(in_line) < len(snapshot.pending)
    ids = [f.job_id for f in whole]
    assert ids.index("8") < ids.index("9") < ids.index("10") < ids.index("11")  # tied: numeric id order


def test_the_shares_from_sums_are_the_shares_from_nodes_and_running_jobs():
    snapshot = varied(3)
    half_life = SchedulerConfig().fair_share_half_life_s
    queue = queue_of(snapshot)

    whole = fair_shares(snapshot.now, snapshot.nodes, snapshot.running, snapshot.team_usage, half_life)

    assert fair_shares_of(queue.now, queue.capacity, queue.held, queue.team_usage, half_life) == whole
    assert any(share.held[1] and share.held[2] for share in whole.values())  # CPUs and memory counted


def test_a_held_or_waiting_job_is_out_of_line_and_a_team_without_usage_has_no_share():
    queue = QueueSnapshot(
        now=NOW,
        pending=(QueuedJob("1", "a", "normal", NOW - 60), QueuedJob("2", "a", "normal", NOW - 60, held_by="alice"),
                 QueuedJob("3", "b", "normal", NOW - 120, 600.0)),
        priority_values={"normal": 100}, capacity=(8.0, 64.0, 512.0), held={"a": (4.0, 0.0, 0.0)})

    factors = queue_factors_of(queue)

    assert [(f.job_id, f.order, f.team_share) for f in factors] == [("3", 1, 0.0), ("1", 2, 0.5)]
