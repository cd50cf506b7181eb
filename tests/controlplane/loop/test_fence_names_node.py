"""A fence and the requeue it causes name the node(s) the allocation held.

QA saw "Requeued whole after being fenced off a node that stopped answering" and "Fenced:
generation 20 → 21": the operator had to find the node elsewhere. Now both name it, the fence
event's `node` is set when the allocation held one node, and the job's waiting words say it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Node
from controlplane.services import reconcile, transitions
from tests.controlplane.agent.test_agent_api import heartbeat_url
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node

pytestmark = pytest.mark.django_db


def _expire(node: Node) -> None:
    now = timezone.now()
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=now - timedelta(seconds=5))
    reconcile.expire_node(node.pk, now=now)


def test_a_job_fenced_off_a_node_that_stopped_answering_names_it(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-07")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})
    old = allocation.generation

    _expire(node)

    fenced = Event.objects.get(job=job, kind=EventKind.ALLOCATION_FENCED)
    allocation.refresh_from_db()
    assert fenced.message == f"Fenced off gpu-07: generation {old} → {allocation.generation}"
    assert fenced.node_id == node.pk
    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert requeued.message.startswith("Requeued whole after being fenced off gpu-07, which stopped answering; lost ")
    assert requeued.node_id == node.pk
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert job.pending_words.startswith("Requeued whole after being fenced off gpu-07, which stopped answering; ")


def test_a_gang_fenced_names_every_node_it_held_and_leaves_the_node_field_empty(fleet: LoopFleet) -> None:
    a, _ = register_node("gpu-01")
    b, _ = register_node("gpu-02")
    job = make_job(fleet, gpus=4)
    bind(job, {a: [0, 1], b: [0, 1]})

    _expire(b)

    fenced = Event.objects.get(job=job, kind=EventKind.ALLOCATION_FENCED)
    assert fenced.message.startswith("Fenced off gpu-01, gpu-02: generation ")
    assert fenced.node_id is None
    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert requeued.message.startswith(
        "Requeued whole after being fenced off a node that stopped answering (it held gpu-01, gpu-02); lost ")


def test_a_clean_shutdown_names_the_node_whose_agent_shut_down(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-03")
    job = make_job(fleet)
    bind(job, {node: [0]})

    agent_client(token).post(heartbeat_url("gpu-03"), {"goodbye": True}, format="json")

    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert "fenced off gpu-03, whose agent shut down" in requeued.message


def test_a_cancel_the_node_never_confirmed_names_the_node(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-04")
    job = make_job(fleet)
    bind(job, {node: [0]})
    assert transitions.cancel_job(job, "user:alice")

    _expire(node)

    finished = Event.objects.get(job=job, kind=EventKind.JOB_FINISHED)
    assert finished.message == "Cancelled; gpu-04 stopped answering before confirming the stop"


def test_a_runtime_limit_stop_the_node_never_confirmed_ends_the_job_timed_out_naming_the_node(
        fleet: LoopFleet) -> None:
    """The fence of a job stopped at its runtime limit ends it as the stop would have (timed
    out, its dependents told), not requeued; the words name the node, as a cancel's do."""
    node, _ = register_node("gpu-05")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})
    transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_RUNTIME_LIMIT,
                            grace_period_s=5, at=timezone.now(), actor="test", message="runtime limit")

    _expire(node)

    finished = Event.objects.get(job=job, kind=EventKind.JOB_FINISHED)
    assert finished.message == "Timed out; gpu-05 stopped answering before confirming the stop"
    assert finished.reason == "TimedOut"
    assert finished.data == {"state": JobState.TIMED_OUT.value, "exit_code": None, "nodes": ["gpu-05"]}
    job.refresh_from_db()
    assert job.state == JobState.TIMED_OUT
