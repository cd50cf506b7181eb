"""Chaos drills: the whole control plane in real processes, broken at random points, while an
independent checker reads PostgreSQL (see chaos_cluster.py for what it asserts).

Each drill starts a web server, three Celery workers, beat and simulated agents against the test
database and Redis, runs a job stream through them, breaks things, then lets the loop drain and
requires every job to have succeeded: chaos may cost work (fenced jobs rerun), never a job.
Run them alone with `make test ARGS="-k 'chaos or fencing or partition'"`.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Node
from tests.controlplane.loop.chaos_cluster import (
    Cluster,
    InvariantChecker,
    flush_redis,
    job_states,
    services_known,
    submit_jobs,
    wait_until_finished,
)
from tests.controlplane.loop_fixtures import LoopFleet, build_loop_fleet

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not services_known(), reason="needs the servers `make test` starts (QM_TEST_* variables)"),
]


@pytest.fixture
def cluster(tmp_path: Path, transactional_db: Any) -> Iterator[Cluster]:
    flush_redis()
    cluster = Cluster(tmp_path / "cluster")
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.ensure_postgresql()
        if subprocess.run(["redis-cli", "-p", os.environ["QM_TEST_REDIS_PORT"], "ping"],
                          capture_output=True).returncode != 0:
            cluster.restart_redis()
        connection.close()


def wait_for(condition: Any, timeout: float, what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:  # noqa: BLE001 - PostgreSQL restarting under us
            connection.close()
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached in {timeout:.0f} s; actions: {cluster.actions[-10:]}\n"
                         + "\n".join(f"--- {n}\n{cluster.tail(n, 12)}" for n in cluster.procs))


def start_plane(cluster: Cluster, *agent_groups: tuple[str, int, tuple[str, ...]]) -> LoopFleet:
    fleet = build_loop_fleet()
    cluster.web()
    cluster.workers(3)
    cluster.beat()
    for name, nodes, extra in agent_groups:
        cluster.agents(name, nodes, *extra)
    cluster.wait_web()
    expected = sum(n for _, n, _ in agent_groups)
    wait_for(lambda: Node.objects.filter(state=NodeState.READY).count() == expected, 40, "all nodes ready", cluster)
    return fleet


def assert_drill_passed(checker: InvariantChecker, cluster: Cluster, submitted: list[int]) -> None:
    checker.stop()
    fenced = Event.objects.filter(kind=EventKind.ALLOCATION_FENCED).count()
    print(f"\ndrill: {len(submitted)} jobs, {len(cluster.actions)} actions, {checker.polls} checker polls "
          f"({checker.failed_polls} failed while PostgreSQL was away), {checker.status_reads} agent status reads, "
          f"epochs {sorted(checker.epochs_seen)}, {fenced} allocations fenced")
    assert not checker.violations, "\n".join(checker.violations + ["actions:"] + cluster.actions)
    assert checker.polls >= 50, f"the checker read the database only {checker.polls} times"
    assert checker.status_reads > 0
    states = job_states(submitted)
    assert states == {JobState.SUCCEEDED: len(submitted)}, f"{states}; actions: {cluster.actions}"


def test_chaos_workers_agents_and_beat_killed_at_random_points_keep_every_invariant(cluster: Cluster) -> None:
    rng = random.Random(20261129)
    fleet = start_plane(cluster, ("a", 4, ()), ("b", 4, ()))
    submitted: list[int] = []
    checker = InvariantChecker(cluster, lambda: set(submitted))
    checker.start()
    submitted += submit_jobs(fleet, 50, rng)

    end = time.monotonic() + 25
    while time.monotonic() < end:
        action = rng.choice(["worker", "worker", "agents", "agents", "beat", "submit"])
        if action == "worker":
            cluster.kill(rng.choice([n for n in cluster.procs if n.startswith("worker-")]))
        elif action == "agents":
            cluster.kill(rng.choice(["a", "b"]))
        elif action == "beat":
            cluster.kill("beat")
        else:
            submitted += submit_jobs(fleet, 10, rng, prefix=f"late{len(submitted)}")
        # Dead processes come back after a random while: sometimes within an agent's lease
        # (its abandoned work is fenced when it registers again), sometimes after it.
        time.sleep(rng.uniform(0.5, 2.5))
        if rng.random() < 0.7:
            cluster.ensure_running()
    cluster.ensure_running()
    wait_until_finished(submitted, cluster, timeout=75)

    assert_drill_passed(checker, cluster, submitted)
    assert len(checker.epochs_seen) >= 2, "no leader was ever replaced"
    assert Event.objects.filter(kind=EventKind.ALLOCATION_FENCED).exists(), "nothing was ever fenced"


def test_chaos_redis_and_postgresql_restarts_mid_cycle_lose_nothing(cluster: Cluster) -> None:
    rng = random.Random(7)
    fleet = start_plane(cluster, ("a", 4, ()), ("b", 4, ()))
    submitted: list[int] = []
    checker = InvariantChecker(cluster, lambda: set(submitted))
    checker.start()
    submitted += submit_jobs(fleet, 40, rng)

    for breakage in ["postgresql", "redis", "postgresql", "redis", "worker"]:
        time.sleep(rng.uniform(1.0, 3.0))
        try:
            submitted += submit_jobs(fleet, 8, rng, prefix=f"wave{len(submitted)}")
        except Exception:  # noqa: BLE001 - the previous restart's reconnect; the next wave goes through
            connection.close()
        if breakage == "postgresql":
            cluster.restart_postgresql()
        elif breakage == "redis":
            cluster.restart_redis()
        else:
            cluster.kill(rng.choice([n for n in cluster.procs if n.startswith("worker-")]))
            cluster.ensure_running()
    wait_until_finished(submitted, cluster, timeout=75)

    assert_drill_passed(checker, cluster, submitted)
    assert sum(1 for a in cluster.actions if "restart" in a) == 4
    assert cluster.restarts_mid_cycle >= 1, f"no restart caught a commit in flight: {cluster.actions}"
    assert checker.failed_polls > 0, "the checker never noticed PostgreSQL going away: was it restarted?"


def test_partition_a_frozen_agent_keeps_running_then_learns_its_work_is_stale_and_stops_it(cluster: Cluster) -> None:
    rng = random.Random(3)
    # Group p cannot fence itself (a frozen VM, an agent stuck in a syscall): its jobs keep
    # running through the partition, and only the control plane's fencing protects the GPUs.
    fleet = start_plane(cluster, ("p", 2, ("--no-self-fence",)), ("a", 2, ()))
    Node.objects.filter(name__startswith="a-").update(state=NodeState.CORDONED)  # first, everything runs on p
    submitted: list[int] = []
    checker = InvariantChecker(cluster, lambda: set(submitted))
    checker.start()
    submitted += submit_jobs(fleet, 2, rng, duration=(9.0, 9.0), prefix="whole-node", shapes=[(8, None, 1.0)])
    wait_for(lambda: Allocation.objects.filter(job_id__in=submitted, started_at__isnull=False).count() == 2, 30,
             "both jobs started on the p nodes", cluster)
    first_generations = set(Allocation.objects.filter(job_id__in=submitted).values_list("generation", flat=True))
    Node.objects.filter(name__startswith="a-").update(state=NodeState.READY)

    cluster.signal("p", signal.SIGSTOP)
    wait_for(lambda: Node.objects.filter(name__startswith="p-", state=NodeState.QUARANTINED).count() == 2, 20,
             "p nodes quarantined", cluster)
    # The jobs run again on the a nodes while the frozen agent still "runs" them on p.
    wait_for(lambda: Allocation.objects.filter(job_id__in=submitted, state="active", started_at__isnull=False,
                                               gpus__node__name__startswith="a-").distinct().count() == 2, 30,
             "both jobs running again on the a nodes", cluster)
    cluster.signal("p", signal.SIGCONT)
    wait_for(lambda: Node.objects.filter(name__startswith="p-", state=NodeState.READY).count() == 2, 30,
             "p nodes registered again, clean", cluster)

    stale = Event.objects.filter(reason="StaleWorkStopped", node__name__startswith="p-")
    told = {g for e in stale for g in e.data["generations"]}
    assert told == first_generations, f"told to stop {told}, ran {first_generations}"
    wait_until_finished(submitted, cluster, timeout=60)
    assert_drill_passed(checker, cluster, submitted)


def test_fencing_a_partitioned_agent_kills_its_jobs_before_the_control_plane_fences_them(cluster: Cluster) -> None:
    rng = random.Random(5)
    fleet = start_plane(cluster, ("s", 2, ()))
    submitted: list[int] = []
    checker = InvariantChecker(cluster, lambda: set(submitted))
    checker.start()
    submitted += submit_jobs(fleet, 4, rng, duration=(8.0, 8.0), prefix="long", shapes=[(4, None, 1.0)])
    wait_for(lambda: Allocation.objects.filter(job_id__in=submitted, started_at__isnull=False).count() == 4, 30,
             "all jobs started", cluster)

    cluster.signal("s", signal.SIGUSR1)  # cut the network; the agent itself stays alive
    wait_for(lambda: Event.objects.filter(kind=EventKind.ALLOCATION_FENCED, job_id__in=submitted).count() == 4, 20,
             "all four allocations fenced", cluster)
    cluster.signal("s", signal.SIGUSR2)
    wait_for(lambda: Node.objects.filter(state=NodeState.READY).count() == 2, 30, "nodes back", cluster)

    self_fenced = [line for line in cluster.log_lines("s") if str(line.get("event", "")).startswith("self-fenced")]
    assert {line["node"] for line in self_fenced} == {"s-000", "s-001"}
    first_fence = min(Event.objects.filter(kind=EventKind.ALLOCATION_FENCED, job_id__in=submitted)
                      .values_list("created_at", flat=True))
    for line in self_fenced:
        killed_at = datetime.fromisoformat(line["at"])
        assert killed_at < first_fence, f"{line['node']} killed its jobs at {killed_at}, after the fence {first_fence}"
    wait_until_finished(submitted, cluster, timeout=60)
    assert_drill_passed(checker, cluster, submitted)
