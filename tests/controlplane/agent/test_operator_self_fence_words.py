"""An agent that stopped its work itself because it could not renew its lease says so when it
registers again, and the jobs' history says the node stopped answering, not that it restarted.

Found on the operator's night drill: the network of opsa-000/001's agent cut for 19 s
(SIGUSR1, then SIGUSR2). The agent self-fenced at 18 s and registered again at 19 s, before
the control plane's lease ran out; the gang's history then said "Requeued whole after being
fenced: a node's agent restarted without it" — no agent had restarted, a partition had happened.
The registration now carries `self_fenced_at`; what it settles is fenced as `NodeLeaseExpired`
("fenced off opsa-000, which stopped answering"), and the registration event says when the agent
stopped its work."""

from __future__ import annotations

from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, Event, Job
from tests.controlplane.agent.test_node_agent import (
    LEASE_S,
    FakeClock,
    ScriptedControlPlane,
    allocation,
    make_agent,
    run_for,
)
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node

REGISTER = "/api/v1/agent/register"


def test_operator_an_agent_registering_after_a_self_fence_says_when() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(6, [0])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)
    plane.down = True
    run_for(agent, clock, LEASE_S)
    plane.down = False
    plane.allocations = []

    run_for(agent, clock, 3.0)
    run_for(agent, clock, 3.0)

    first, again = plane.registrations[0], plane.registrations[1]
    assert "self_fenced_at" not in first
    assert again["running"] == [] and again["self_fenced_at"]
    assert len(plane.registrations) == 2 or "self_fenced_at" not in plane.registrations[2]


def test_operator_work_settled_by_a_self_fenced_agents_registration_stopped_answering(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet, gpus=8)
    held = bind(job, {node: list(range(8))})
    agent_client(token).post(f"/api/v1/agent/nodes/{node.name}/heartbeat", {"running": [held.generation], "reports": [
        {"kind": "started", "generation": held.generation, "at": timezone.now().isoformat()}]}, format="json")
    fenced_at = timezone.now()

    response = agent_client(token).post(
        REGISTER, {"name": "gpu-01", "running": [], "self_fenced_at": fenced_at.isoformat()}, format="json"
    )

    assert response.status_code == 201, response.content
    held = Allocation.objects.get(pk=held.pk)
    assert held.state == AllocationState.FENCED and held.release_reason == "NodeLeaseExpired"
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert requeued.message.startswith("Requeued whole after being fenced off gpu-01, which stopped answering")
    registered = Event.objects.filter(kind=EventKind.NODE_REGISTERED, node=node).latest("id")
    assert "stopped them itself at" in registered.message and "could not renew its lease" in registered.message


def test_operator_a_plain_restart_keeps_its_words(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    held = bind(job, {node: [0]})
    agent_client(token).post(f"/api/v1/agent/nodes/{node.name}/heartbeat", {"running": [held.generation], "reports": [
        {"kind": "started", "generation": held.generation, "at": timezone.now().isoformat()}]}, format="json")

    agent_client(token).post(REGISTER, {"name": "gpu-01", "running": []}, format="json")

    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert "agent restarted without it" in requeued.message


def test_operator_a_bad_self_fenced_at_is_400_naming_it(fleet: LoopFleet) -> None:
    _, token = register_node("gpu-01")

    response = agent_client(token).post(REGISTER, {"name": "gpu-01", "self_fenced_at": "yesterday"}, format="json")

    assert response.status_code == 400 and list(response.json()["errors"]) == ["self_fenced_at"]
