"""An agent that comes back with another GPU count (a GPU fell off the bus, the node was
rebuilt): found on the operator's night drill. The agent was killed with jobs on GPUs 4-7 and
restarted with `--gpus 4`; its registration, which says it runs nothing, was refused 400
"drain the node before shrinking its inventory" every 5 s for 20 s, the node stayed `ready`
with 8 GPUs and its dead jobs `running`, until the lease ran out and the jobs were requeued as
if the node had "stopped answering". A fresh agent's registration settles what it no longer
runs first (fenced, `AgentRestarted`), then takes the new inventory, and its event says what
changed."""

from __future__ import annotations

from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Node
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node

REGISTER = "/api/v1/agent/register"


def test_operator_a_restarted_agent_with_fewer_gpus_registers_at_once_and_its_old_work_is_fenced(
    fleet: LoopFleet,
) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet, gpus=4)
    allocation = bind(job, {node: [4, 5, 6, 7]})

    response = agent_client(token).post(REGISTER, {"name": "gpu-01", "gpu_count": 4, "running": []}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["settled_generations"] == [allocation.generation]
    node.refresh_from_db()
    assert node.gpu_count == 4 and node.state == NodeState.READY
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.FENCED and allocation.release_reason == "AgentRestarted"
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    registered = Event.objects.filter(kind=EventKind.NODE_REGISTERED, node=node).latest("id")
    assert "8 → 4 GPUs" in registered.message, registered.message
    assert registered.data["gpus"] == 4 and registered.data["gpus_before"] == 8


def test_operator_an_agent_still_running_work_on_gpus_it_no_longer_declares_is_refused_naming_the_field(
    fleet: LoopFleet,
) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet, gpus=4), {node: [4, 5, 6, 7]})

    response = agent_client(token).post(
        REGISTER, {"name": "gpu-01", "gpu_count": 4, "running": [allocation.generation]}, format="json"
    )

    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["gpu_count"]
    assert Node.objects.get(pk=node.pk).gpu_count == 8
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.ACTIVE


def test_operator_a_registration_that_keeps_its_inventory_says_nothing_changed(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")

    agent_client(token).post(REGISTER, {"name": "gpu-01", "gpu_count": 8, "running": []}, format="json")

    registered = Event.objects.filter(kind=EventKind.NODE_REGISTERED, node=node).latest("id")
    assert "→" not in registered.message and "gpus_before" not in registered.data
