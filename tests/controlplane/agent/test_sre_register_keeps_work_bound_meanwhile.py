"""A fresh agent's registration settles what its predecessor abandoned, not what was bound since.

Found reading the restart drill's events (kill -9 of an agent, started again 3 s later) against
`agent_protocol.register`: registration decides that the node has abandoned work from a read
made before its transaction, then, under the scheduler lease row lock, settled every live
allocation of the node — including one the scheduler bound onto the node's free GPUs in
between. That job, which had never run anywhere, was fenced "a node's agent restarted without
it", requeued and counted a requeue. Its comment said the opposite ("Allocations bound after
this read are new work for the fresh agent"). Now only the allocations read before are settled;
work bound meanwhile is the fresh agent's to start.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job
from controlplane.services import agent_protocol, reconcile
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    agent_client,
    bind,
    build_loop_fleet,
    inventory,
    make_job,
    register_node,
)


@pytest.mark.django_db(transaction=True)
def test_sre_work_bound_while_a_fresh_agent_registers_is_kept() -> None:
    fleet = build_loop_fleet()
    node, token = register_node("gpu-01")
    old = bind(make_job(fleet, name="old"), {node: [0]})
    # Its agent started it, then died (a run never started is the fresh agent's to start:
    # test_sre_restarted_agent_takes_over_unstarted_work.py).
    agent_client(token).post(f"/api/v1/agent/nodes/{node.name}/heartbeat", {"running": [old.generation], "reports": [
        {"kind": "started", "generation": old.generation, "at": timezone.now().isoformat()}]}, format="json")
    new_job = make_job(fleet, name="bound-meanwhile")

    holding = threading.Event()
    release = threading.Event()
    registered: dict[str, Any] = {}

    def leader_commit() -> None:
        # The leader's commit holds the lease row while the registration waits for it.
        try:
            with transaction.atomic():
                reconcile.lock_scheduler_lease()
                holding.set()
                release.wait(10)
                bind(new_job, {node: [1]})
        finally:
            connection.close()

    def fresh_agent() -> None:
        try:
            registered["r"] = agent_protocol.register("gpu-01", inventory(), token=BOOTSTRAP, running=[],
                                                      now=timezone.now())
        finally:
            connection.close()

    leader = threading.Thread(target=leader_commit)
    leader.start()
    assert holding.wait(10)
    agent = threading.Thread(target=fresh_agent)
    agent.start()
    # The registration has read the node's work and now waits for the lease row.
    agent.join(1.0)
    assert agent.is_alive()
    release.set()
    leader.join(10)
    agent.join(10)

    assert registered["r"].released == [old.generation]
    assert Allocation.objects.get(pk=old.pk).state == AllocationState.FENCED
    meanwhile = Allocation.objects.get(job=new_job)
    assert meanwhile.state == AllocationState.ACTIVE
    assert Job.objects.get(pk=new_job.pk).state == JobState.RUNNING
    assert Job.objects.get(pk=new_job.pk).requeue_count == 0
