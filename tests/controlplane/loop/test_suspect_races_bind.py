"""A node going suspect (or its agent saying it shuts down) while the cycle's commit binds onto
it, on PostgreSQL with two connections (tests/controlplane/lock_waits.py).

A suspect node gets no new work ("no new work goes there", its MissedHeartbeats event says), and
a node whose agent shuts down drains. The commit leaves out a bind onto a node that is not ready
when it looks, but until 5 Dec reconcile marked a node suspect (and an agent's shutdown set it
draining) without the scheduler lease row: a bind that had read the node ready committed after
the node had been marked, starting a job on a node whose history already said it took no new
work (and the shutting-down agent then refused it: one more requeue). Now both take the lease
row first, as a cordon does, so the bind either commits before the node is marked (and is
running work, left alone) or finds it marked and is left out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Event, Job, Node, PendingPlace
from controlplane.services import agent_protocol, reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Fleet:
    return build_fleet()


def _bind(job: Job, node: Node) -> tuple[int, int]:
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        return transitions.bind_jobs(
            [transitions.BindRequest(job_id=job.pk, gpus=[transitions.GpuSet(node_id=node.pk, gpu_indices=[0, 1])],
                                     borrowed=False)],
            lease=lease, at=timezone.now(), actor="scheduler@epoch:1", node_names={node.pk: node.name})


def _race(fleet: Fleet, node: Node, mark: Any) -> tuple[Job, dict[str, Any]]:
    """Bind a job onto `node` in a commit held up after it read the node ready, run `mark` (what
    makes the node not ready) meanwhile, then let the commit go on."""
    job = f.make_job(fleet.ml, fleet.research, name="late", gpus=2)
    PendingPlace.objects.create(job=job, queue_position=1)
    with transaction.atomic():
        # The bind has read the node ready and waits here (deleting the job's queue place),
        # inside the cycle's commit, holding the lease.
        PendingPlace.objects.select_for_update().get(job=job)
        binding, bound = in_thread(lambda: _bind(job, node))
        assert blocked_on_a_lock()
        marking, marked = in_thread(mark)
        marking.join(3)  # before: done at once; now it waits for the commit's lease row
    binding.join(20)
    marking.join(20)
    assert "error" not in bound and "error" not in marked, (bound, marked)
    return job, bound


def test_a_node_marked_suspect_during_a_bind_gets_the_job_only_if_the_bind_came_first(
        committed_fleet: Fleet) -> None:
    node = committed_fleet.nodes[1]
    now = timezone.now()
    Node.objects.filter(pk=node.pk).update(last_heartbeat_at=now - timedelta(seconds=60),
                                           agent_lease_expires_at=now + timedelta(seconds=60))

    job, bound = _race(committed_fleet, node, lambda: reconcile.reconcile_nodes(timezone.now()))

    assert Node.objects.get(pk=node.pk).state == NodeState.SUSPECT
    suspect = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason=reconcile.MISSED_HEARTBEATS)
    if Job.objects.get(pk=job.pk).state == JobState.RUNNING:
        bind = Event.objects.get(job=job, kind=EventKind.JOB_BOUND)
        assert bind.pk < suspect.pk, "the job was bound onto a node already marked suspect"
    else:
        assert bound["result"] == (0, 1)


def test_a_node_whose_agent_shuts_down_during_a_bind_gets_the_job_only_if_the_bind_came_first(
        committed_fleet: Fleet) -> None:
    node = committed_fleet.nodes[1]
    Node.objects.filter(pk=node.pk).update(last_heartbeat_at=timezone.now(),
                                           agent_lease_expires_at=timezone.now() + timedelta(seconds=60))
    node.refresh_from_db()

    job, bound = _race(committed_fleet, node, lambda: agent_protocol.sync(
        node, reports=(), running=(), renew=True, now=timezone.now(), shutting_down=True))

    assert Node.objects.get(pk=node.pk).state == NodeState.DRAINING
    draining = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason="AgentShuttingDown")
    if Job.objects.get(pk=job.pk).state == JobState.RUNNING:
        bind = Event.objects.get(job=job, kind=EventKind.JOB_BOUND)
        assert bind.pk < draining.pk, "the job was bound onto a node already draining for its agent's shutdown"
    else:
        assert bound["result"] == (0, 1)
