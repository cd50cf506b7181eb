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


def test_operator_a_registration_that_replaces_an_admins_edit_says_what_it_changed(fleet: LoopFleet) -> None:
    """Found by a fleet admin's review (6 Dec): an admin moved h100-10 to pool h100b and tier spot
    (each a NodeChanged event); its agent, restarted with its old flags, registered pool h100
    and tier on_demand, which replaced both, and its node.registered event read only "registered
    8× H100-80GB, was ready": the trail said the node was in h100b, priced as spot, while it
    was not. The registration names each setting it changed, in words and in its data."""
    node, token = register_node("gpu-01", pool="h100", capacity_tier="on_demand", leaf_switch="leaf-1")
    Node.objects.filter(pk=node.pk).update(pool="h100b", capacity_tier="spot", cpus=48)

    response = agent_client(token).post(REGISTER, {
        "name": "gpu-01", "gpu_count": 8, "pool": "h100", "capacity_tier": "on_demand", "leaf_switch": "leaf-1",
        "cpus": 96, "running": []}, format="json")

    assert response.status_code == 201, response.content
    node.refresh_from_db()
    assert (node.pool, node.capacity_tier, node.cpus) == ("h100", "on_demand", 96)
    registered = Event.objects.filter(kind=EventKind.NODE_REGISTERED, node=node).latest("id")
    assert registered.message.endswith(
        "; its agent declared another inventory: pool h100b → h100, CPUs 48 → 96, capacity tier spot → on_demand"
        " (what an agent declares replaces an admin's edit: change its flags to keep one)"), registered.message
    assert registered.data["inventory_before"] == {"pool": "h100b", "cpus": 48, "capacity_tier": "spot"}
