"""The events say what happened to a node and its jobs, not one story for every case.

Found by QA: a clean agent shutdown requeued its jobs "fenced off a node that stopped answering",
and draining an idle node recorded "its last job has finished" when nothing had run there."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from controlplane.services import agent_protocol, nodes, reconcile, requeue, transitions
from tests.controlplane.agent.test_agent_api import heartbeat_url
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node


@pytest.fixture
def operator(db: object) -> object:
    return get_user_model().objects.create_superuser("ops", "ops@example.com", "ops")


def test_a_job_on_a_node_whose_agent_shut_down_is_requeued_saying_so(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    bind(job, {node: [0]})

    agent_client(token).post(heartbeat_url("gpu-01"), {"goodbye": True}, format="json")

    job.refresh_from_db()
    assert job.state == JobState.PENDING
    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert "agent shut down" in requeued.message and "stopped answering" not in requeued.message


def test_draining_an_idle_node_says_nothing_was_running(fleet: LoopFleet, operator) -> None:
    node, _ = register_node("gpu-01")
    nodes.drain(node, operator)

    assert reconcile.reconcile_nodes().cordoned == 1

    drained = Event.objects.get(node=node, reason="Drained")
    assert drained.message == "gpu-01: draining → cordoned, nothing was running on it"


def test_draining_a_busy_node_says_its_last_job_finished(fleet: LoopFleet, operator) -> None:
    node, _ = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    nodes.drain(node, operator)
    assert reconcile.reconcile_nodes().cordoned == 0

    agent_protocol.apply_reports(
        node, [agent_protocol.Report("exited", allocation.generation, timezone.now(), exit_code=0)], now=timezone.now()
    )
    assert reconcile.reconcile_nodes().cordoned == 1

    drained = Event.objects.get(node=node, reason="Drained")
    assert drained.message == f"gpu-01: draining → cordoned, its last job has finished (job {allocation.job_id} job)"


def test_draining_a_node_whose_last_job_was_requeued_off_it_says_it_was_requeued(fleet: LoopFleet, operator) -> None:
    # Found on the demo (4 Dec): `qm drain h100-06`, then `qm requeue 47` to move the job off it:
    # "h100-06: draining → cordoned, its last job has finished", of a job that was back in the
    # queue and started on another node.
    node, _ = register_node("gpu-01")
    job = make_job(fleet, name="frag-3")
    allocation = bind(job, {node: [0]})
    nodes.drain(node, operator)
    requeue.requeue(operator, job.pk, reason="gpu-01 NVLink slow")
    agent_protocol.apply_reports(
        node, [agent_protocol.Report("exited", allocation.generation, timezone.now(), exit_code=-15)],
        now=timezone.now(),
    )
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING

    assert reconcile.reconcile_nodes().cordoned == 1

    drained = Event.objects.get(node=node, reason="Drained")
    assert drained.message == f"gpu-01: draining → cordoned, its last job was requeued (job {job.pk} frag-3)"


def test_draining_a_node_whose_last_job_was_cancelled_says_it_was_cancelled(fleet: LoopFleet, operator) -> None:
    node, _ = register_node("gpu-01")
    job = make_job(fleet, name="sweep")
    allocation = bind(job, {node: [0]})
    nodes.drain(node, operator)
    assert transitions.cancel_job(job, "user:ops")
    agent_protocol.apply_reports(
        node, [agent_protocol.Report("exited", allocation.generation, timezone.now(), exit_code=-15)],
        now=timezone.now(),
    )

    assert reconcile.reconcile_nodes().cordoned == 1

    drained = Event.objects.get(node=node, reason="Drained")
    assert drained.message == f"gpu-01: draining → cordoned, its last job was cancelled (job {job.pk} sweep)"


def test_draining_a_node_whose_gang_member_left_before_the_gang_settled_names_the_gang(
    fleet: LoopFleet, operator,
) -> None:
    # The member on the draining node exits; the rest of the gang still has its grace period to
    # stop on the other node, so its allocation is not settled when the node empties. Before, the
    # node read "nothing was running on it".
    node, _ = register_node("gpu-01")
    other, _ = register_node("gpu-02")
    gang = make_job(fleet, gpus=2, gpus_per_node=1, name="pretrain")
    allocation = bind(gang, {node: [0], other: [0]})
    nodes.drain(node, operator)
    agent_protocol.apply_reports(
        node, [agent_protocol.Report("exited", allocation.generation, timezone.now(), exit_code=0)], now=timezone.now(),
    )

    assert reconcile.reconcile_nodes().cordoned == 1

    drained = Event.objects.get(node=node, reason="Drained")
    assert drained.message == f"gpu-01: draining → cordoned, its last job has finished (job {gang.pk} pretrain)"
