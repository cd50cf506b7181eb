"""An operator's cordon or drain racing the scheduling cycle's commit (two PostgreSQL
connections, real row locks: tests/controlplane/lock_waits.py).

Before, a cordon locked only the node's row while the cycle's bind read the node's state
without a lock: a bind that had read the node ready committed after the cordon, so a job
started on a node the operator had just been told took no new work, and the cordon's answer
and event said "nothing runs there". Now a cordon, a drain and an uncordon take the scheduler
lease row first (lock order lease → node, as retire, reconcile and the cycle's commit): a bind
committing meanwhile is done before the cordon reads the node's jobs, and names it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Event, Job, Node, PendingPlace
from controlplane.services import nodes, reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread, lock_waiters


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Fleet:
    return build_fleet()


def _bind(job: Job, node: Node) -> tuple[int, int]:
    """The cycle's commit of one bind onto `node` (lease row locked, as commit_plan does)."""
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        return transitions.bind_jobs(
            [transitions.BindRequest(job_id=job.pk, gpus=[transitions.GpuSet(node_id=node.pk, gpu_indices=[0, 1])],
                                     borrowed=False)],
            lease=lease, at=timezone.now(), actor="scheduler@epoch:1", node_names={node.pk: node.name})


@pytest.mark.parametrize("verb", ["cordon", "drain"])
def test_a_job_bound_while_a_node_is_cordoned_is_named_by_the_cordon_or_never_starts_there(
        committed_fleet: Fleet, verb: str) -> None:
    fleet = committed_fleet
    node = fleet.nodes[1]
    job = f.make_job(fleet.ml, fleet.research, name="late", gpus=2)
    PendingPlace.objects.create(job=job, queue_position=1)
    with transaction.atomic():
        # The bind has read the node ready and waits here (deleting the job's queue place),
        # inside the cycle's commit, holding the lease.
        PendingPlace.objects.select_for_update().get(job=job)
        binding, bound = in_thread(lambda: _bind(job, node))
        assert blocked_on_a_lock()
        acting, acted = in_thread(lambda: nodes.act(verb, node, fleet.users["admin"], reason="bad fan"))
        # Before: the cordon ran to its end meanwhile. Now it waits for the commit's lease.
        deadline = time.monotonic() + 20
        while acting.is_alive() and lock_waiters() < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    binding.join(20)
    acting.join(20)
    assert "error" not in bound and "error" not in acted, (bound, acted)

    outcome = acted["result"]
    state = Job.objects.get(pk=job.pk).state
    event = Event.objects.filter(node=node, kind=EventKind.NODE_STATE).latest("id")
    assert Node.objects.get(pk=node.pk).unschedulable
    if state == JobState.RUNNING:  # it started before the cordon read the node's jobs: named
        assert [j.job_id for j in outcome.running_jobs] == [job.pk], outcome.detail
        assert f"job {job.pk} late" in outcome.detail and "nothing runs there" not in outcome.detail
        assert event.data.get("running_jobs") == [job.pk], event.data
    else:  # or it never started there
        assert state == JobState.PENDING and bound["result"] == (0, 1)
    assert Node.objects.get(pk=node.pk).state == (NodeState.CORDONED if verb == "cordon" else NodeState.DRAINING)
