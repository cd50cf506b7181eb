"""A registration that says it still runs a generation that is no longer its node's is refused.

Found on the operator's night drill (an agent speaking the protocol by hand): node opsx-000's
allocation 219 was fenced when its lease ran out; its heartbeat claiming 219 was rightly told
`reregister` and `stop: [219]`, but the registration that followed with `"running": [219]`
made the node ready at once, recorded "registered again with nothing stale running", and its
GPUs took new work while, by the agent's own word, generation 219 still ran on them. Such a
registration is now a 400 naming `running` and the generations; the node stays quarantined and
registers once it says it runs none of them. (`qm-agent` itself registers only once all its
processes are gone, so it never hit this.)"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, NodeState
from controlplane.models import Allocation, Event, Node
from controlplane.services import reconcile
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node

REGISTER = "/api/v1/agent/register"


def test_operator_registering_while_claiming_a_fenced_generation_is_refused_naming_running(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet, gpus=8), {node: list(range(8))})
    reconcile.reconcile_nodes(now=timezone.now() + timedelta(seconds=60))  # the lease ran out: fenced
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.FENCED
    registered = Event.objects.filter(kind=EventKind.NODE_REGISTERED).count()

    response = agent_client(token).post(REGISTER, {"name": "gpu-01", "running": [allocation.generation]}, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()["errors"]) == ["running"]
    assert str(allocation.generation) in response.json()["errors"]["running"][0]
    assert Node.objects.get(pk=node.pk).state == NodeState.QUARANTINED
    assert Event.objects.filter(kind=EventKind.NODE_REGISTERED).count() == registered

    clean = agent_client(token).post(REGISTER, {"name": "gpu-01", "running": []}, format="json")

    assert clean.status_code == 201
    assert Node.objects.get(pk=node.pk).state == NodeState.READY


def test_operator_registering_with_work_still_live_on_the_node_keeps_it(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})

    response = agent_client(token).post(REGISTER, {"name": "gpu-01", "running": [allocation.generation]}, format="json")

    assert response.status_code == 201
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.ACTIVE


def test_operator_a_first_registration_claiming_to_run_anything_is_refused(fleet: LoopFleet) -> None:
    body = {"name": "gpu-new", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96,
            "memory_gb": 1024, "leaf_switch": "leaf-1", "spine": "spine-1", "running": [4711]}
    from tests.controlplane.loop_fixtures import BOOTSTRAP

    response = agent_client(BOOTSTRAP).post(REGISTER, body, format="json")

    assert response.status_code == 400 and list(response.json()["errors"]) == ["running"]
    assert not Node.objects.filter(name="gpu-new").exists()
