"""Drill: Redis stopped under a whole control plane at the default clocks; beat keeps the loop going.

Web, two loop workers, beat and two groups of simulated agents, with the production defaults
(cycle 2 s, leader lease 15 s, agent lease 20 s, suspect after 8 s). Redis is shut down for
45 s, then started empty. Meanwhile: a job is submitted, a running job passes its runtime limit,
and one agent group is killed. Beat binds the job, stops the one over its limit and fences the
dead nodes, the old leader having given up the lead when it lost Redis; once Redis is back a
worker leads again within seconds.
Every invariant of the chaos checker holds throughout. Timings are printed for docs/operations.md.
Should it fail, its evidence is kept (chaos_cluster.py, `Cluster.keep_evidence`): every process's
log and the timeline of what it waited for, in the failure's message and in test-artifacts/chaos/.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, NodeState
from controlplane.models import Allocation, Event, Job, Node, SchedulerLease
from controlplane.services import transitions
from controlplane.services.cycle import LEASE_NAME
from tests.controlplane.loop.chaos_cluster import Cluster, InvariantChecker, flush_redis, services_known
from tests.controlplane.loop_fixtures import build_loop_fleet

pytestmark = [
    pytest.mark.chaos,  # stops the Redis every test shares
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not services_known(), reason="needs the servers `make test` starts (QM_TEST_* variables)"),
]

DEFAULTS = {"QM_CYCLE_INTERVAL_S": "2", "QM_CYCLE_DEBOUNCE_S": "0.5", "QM_LEADER_LEASE_S": "15",
            "QM_AGENT_LEASE_S": "20", "QM_SUSPECT_AFTER_S": "8", "QM_LOG_LEVEL": "INFO"}
OUTAGE_S = 45.0


@pytest.fixture
def cluster(tmp_path: Path, transactional_db: Any) -> Iterator[Cluster]:
    flush_redis()
    cluster = Cluster(tmp_path / "cluster", env=dict(DEFAULTS))
    try:
        yield cluster
    finally:
        cluster.stop()
        if subprocess.run(["redis-cli", "-p", os.environ["QM_TEST_REDIS_PORT"], "ping"],
                          capture_output=True).returncode != 0:
            cluster.restart_redis()
        connection.close()


def _wait(what: str, condition: Any, timeout: float, cluster: Cluster) -> float:
    started = time.monotonic()
    cluster.note(f"waiting for {what} (up to {timeout:.0f} s)")
    while not condition():
        if time.monotonic() - started > timeout:
            cluster.note(f"gave up waiting for {what}")
            raise AssertionError(f"{what}: not within {timeout} s" + cluster.keep_evidence(_drill()))
        time.sleep(0.2)
    done = time.monotonic()
    cluster.note(f"{what}: {done - started:.1f} s after the wait began")
    return done


def _drill() -> str:
    return test_redis_stopped_under_the_plane_beat_binds_stops_and_fences_until_it_is_back.__name__


def _within(what: str, took: float, bound: float, cluster: Cluster) -> None:
    """`took` under `bound` seconds, or an AssertionError with the drill's evidence."""
    if not took < bound:
        raise AssertionError(f"{what} {took:.1f} s, not under {bound:g} s" + cluster.keep_evidence(_drill()))


def _holder() -> str:
    return SchedulerLease.objects.filter(name=LEASE_NAME).values_list("holder", flat=True).first() or ""


def test_redis_stopped_under_the_plane_beat_binds_stops_and_fences_until_it_is_back(cluster: Cluster) -> None:
    fleet = build_loop_fleet()
    cluster.web()
    cluster.workers(2)
    cluster.beat()
    cluster.agents("a", 2)
    cluster.wait_web()
    _wait("group a ready", lambda: Node.objects.filter(state=NodeState.READY).count() == 2, 40, cluster)
    now = timezone.now()
    over = Job.objects.create(team=fleet.team, priority_class=fleet.research, name="over-limit", gpus=1,
                              runtime_limit_s=25, submitted_at=now, state_changed_at=now,
                              env={"QM_SIM_DURATION_S": "600", "QM_SIM_STEPS_PER_S": "5"})
    filler = Job.objects.create(team=fleet.team, priority_class=fleet.research, name="filler", gpus=8,
                                gpus_per_node=8, runtime_limit_s=3600, submitted_at=now, state_changed_at=now,
                                env={"QM_SIM_DURATION_S": "600", "QM_SIM_STEPS_PER_S": "5"})
    _wait("group a busy", lambda: Allocation.objects.filter(job__in=[over, filler], started_at__isnull=False).count()
          == 2, 40, cluster)
    cluster.agents("b", 2)
    _wait("group b ready", lambda: Node.objects.filter(state=NodeState.READY).count() == 4, 40, cluster)
    now = timezone.now()
    on_b = [Job.objects.create(team=fleet.team, priority_class=fleet.research, name=f"on-b-{i}", gpus=8,
                               gpus_per_node=8, runtime_limit_s=3600, submitted_at=now, state_changed_at=now,
                               env={"QM_SIM_DURATION_S": "600", "QM_SIM_STEPS_PER_S": "5"}) for i in range(2)]
    _wait("the two 8-GPU jobs running", lambda: Allocation.objects.filter(
        job__in=on_b, started_at__isnull=False, state=AllocationState.ACTIVE).count() == 2, 40, cluster)
    leader = _holder()
    assert "@" in leader, leader
    checker = InvariantChecker(cluster, lambda: set(Job.objects.values_list("pk", flat=True)))
    checker.start()

    port = os.environ["QM_TEST_REDIS_PORT"]
    subprocess.run(["redis-cli", "-p", port, "shutdown", "nosave"], capture_output=True, timeout=10)
    down = time.monotonic()
    cluster.actions.append(f"{down:.1f} redis stopped")
    cluster.note(f"Redis shut down (the lead was {leader})")
    time.sleep(2)
    now = timezone.now()
    during = Job.objects.create(team=fleet.team, priority_class=fleet.research, name="during-outage", gpus=2,
                                runtime_limit_s=3600, submitted_at=now, state_changed_at=now,
                                env={"QM_SIM_DURATION_S": "600", "QM_SIM_STEPS_PER_S": "5"})
    cluster.note(f"job {during.pk} submitted during the outage")
    cluster.kill("b")  # both nodes of group b die with their agent process
    killed = time.monotonic()

    beat_led = _wait("beat leading", lambda: _holder().startswith("beat:"), 40, cluster)
    bound = _wait("the job submitted during the outage bound",
                  lambda: Event.objects.filter(job=during, kind=EventKind.JOB_BOUND).exists(), 40, cluster)
    stopped = _wait("the job over its limit stopped", lambda: Allocation.objects.filter(
        job=over, release_reason=transitions.RELEASE_RUNTIME_LIMIT).exists(), 40, cluster)
    fenced = _wait("group b fenced", lambda: Node.objects.filter(
        name__startswith="b-", state=NodeState.QUARANTINED).count() == 2 and Allocation.objects.filter(
        job__in=on_b, state=AllocationState.FENCED).count() == 2, 40, cluster)
    beat_epoch = SchedulerLease.objects.get(name=LEASE_NAME).epoch
    assert _holder().startswith("beat:")
    # Bound and stopped by beat's cycles (its epoch), the old leader having given up the lead.
    assert Event.objects.get(job=during, kind=EventKind.JOB_BOUND).epoch == beat_epoch
    assert Event.objects.get(job=over, kind=EventKind.JOB_TIMED_OUT).epoch == beat_epoch
    rest = OUTAGE_S - (time.monotonic() - down)
    if rest > 0:
        time.sleep(rest)

    cluster.restart_redis()
    up = time.monotonic()
    worker_led = _wait("a worker leading again", lambda: "@" in _holder(), 60, cluster)
    now = timezone.now()
    after = Job.objects.create(team=fleet.team, priority_class=fleet.research, name="after-outage", gpus=1,
                               runtime_limit_s=3600, submitted_at=now, state_changed_at=now,
                               env={"QM_SIM_DURATION_S": "600", "QM_SIM_STEPS_PER_S": "5"})
    after_bound = _wait("a job submitted after bound by a worker",
                        lambda: Event.objects.filter(job=after, kind=EventKind.JOB_BOUND).exists(), 30, cluster)
    time.sleep(4)
    checker.stop()
    beat_log = cluster.procs["beat"].log.read_text(errors="replace")
    print(f"\nredis outage drill: beat led {beat_led - down:.1f} s after Redis stopped (old leader {leader}); "
          f"the job submitted 2 s in bound at {bound - down:.1f} s; the job over its limit stopped at "
          f"{stopped - down:.1f} s; group b (killed at {killed - down:.1f} s) fenced at {fenced - down:.1f} s; "
          f"Redis back after {up - down:.1f} s: a worker led {worker_led - up:.1f} s later ({_holder()}), a new "
          f"job bound {after_bound - worker_led:.1f} s after that; 'run in beat' said "
          f"{beat_log.count('loop tick run in beat: broker unreachable')} time(s); epochs {sorted(checker.epochs_seen)}")
    assert not checker.violations, "\n".join(checker.violations) + cluster.keep_evidence(_drill())
    # The old leader gave up the lead when it lost Redis, and a worker was back within about a
    # second of Redis (until 3 Dec: the rest of its 15 s lease, and 11 s after Redis returned).
    _within("beat led after Redis stopped:", beat_led - down, 8, cluster)
    _within("a worker led after Redis was back:", worker_led - up, 8, cluster)
    assert beat_log.count("loop tick run in beat: broker unreachable") == 1
    assert beat_log.count("broker reachable again: loop ticks go to the workers") == 1
    assert "@" in _holder() and SchedulerLease.objects.get(name=LEASE_NAME).epoch == beat_epoch + 1
