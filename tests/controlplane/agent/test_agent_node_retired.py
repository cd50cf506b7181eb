"""A retired node's agent is refused (409 node_retired) and does not spin.

Retiring a node (services/nodes.retire) revokes its agent's token and lease. Its agent's next
heartbeat, its re-registration with the bootstrap secret or with its old token, and a batch
heartbeat item are each answered 409 `node_retired`, saying since when and that an admin returns
it to service first; nothing re-creates, quarantines or renews the node. The agent logs it once
and asks again only every RETIRED_RETRY_S (before, a refused registration was sent again every
round). Once an admin returns the node to service, its agent registers and it comes back
cordoned.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.utils import timezone

from controlplane.agent.client import AgentClient, Retired
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import RETIRED_RETRY_S, NodeAgent, NodeInventory
from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, Node
from controlplane.services import agent_protocol, nodes
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    agent_client,
    build_loop_fleet,
    register_node,
)

REGISTER = "/api/v1/agent/register"
BODY = {"name": "gpu-01", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96, "memory_gb": 1024,
        "leaf_switch": "leaf-1", "spine": "spine-1"}


def _retired(fleet: LoopFleet) -> tuple[Node, str]:
    node, token = register_node("gpu-01")
    nodes.retire(node, f.make_user("root", role="admin"))
    return Node.objects.get(pk=node.pk), token


def _says_retired(response: Any) -> None:
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["code"] == "node_retired"
    assert body["detail"].startswith("node gpu-01 is retired since ")
    assert "an admin returns it to service first" in body["detail"]


def test_a_retired_nodes_heartbeat_with_its_old_token_is_409_node_retired(fleet: LoopFleet) -> None:
    node, token = _retired(fleet)

    response = agent_client(token).post("/api/v1/agent/nodes/gpu-01/heartbeat", {"running": []}, format="json")

    _says_retired(response)
    node.refresh_from_db()
    assert node.state == NodeState.RETIRED and node.agent_lease_expires_at is None


def test_a_retired_nodes_registration_is_409_with_the_bootstrap_secret_or_its_old_token(fleet: LoopFleet) -> None:
    node, token = _retired(fleet)
    before = Event.objects.count()

    _says_retired(agent_client(BOOTSTRAP).post(REGISTER, BODY, format="json"))
    _says_retired(agent_client(token).post(REGISTER, BODY, format="json"))

    node.refresh_from_db()
    assert node.state == NodeState.RETIRED and node.agent_token_hash == ""
    assert Event.objects.count() == before  # nothing registered, nothing recorded


def test_a_retired_nodes_batch_heartbeat_item_is_409_and_the_others_proceed(fleet: LoopFleet) -> None:
    _, token = _retired(fleet)
    _, other = register_node("gpu-02")

    response = agent_client("-").post("/api/v1/agent/nodes/heartbeats", {"nodes": [
        {"name": "gpu-01", "token": token, "running": []},
        {"name": "gpu-02", "token": other, "running": []},
    ]}, format="json")

    assert response.status_code == 200
    retired, alive = response.json()["results"]
    assert retired["status"] == 409 and retired["code"] == "node_retired"
    assert "retired since" in retired["detail"]
    assert alive["status"] == 200 and alive["node_state"] == "ready"


def test_a_heartbeat_that_raced_the_retirement_neither_renews_nor_quarantines_it(fleet: LoopFleet) -> None:
    """Authenticated just before the retirement committed: told to register again (then 409)."""
    node, _ = register_node("gpu-01")
    stale = Node.objects.get(pk=node.pk)  # what the heartbeat's authentication read
    nodes.retire(node, f.make_user("root", role="admin"))

    desired = agent_protocol.sync(stale, reports=[], running=[], renew=True, now=timezone.now())

    assert desired.reregister and desired.node_state == "retired"
    node.refresh_from_db()
    assert node.state == NodeState.RETIRED and node.agent_lease_expires_at is None
    assert not Event.objects.filter(node=node, reason="LeaseExpired").exists()


def test_returned_to_service_its_agent_registers_and_it_comes_back_cordoned(fleet: LoopFleet) -> None:
    node, _ = _retired(fleet)
    nodes.return_to_service(node, f.make_user("boss", role="admin"))

    response = agent_client(BOOTSTRAP).post(REGISTER, BODY, format="json")

    assert response.status_code == 201, response.content
    node.refresh_from_db()
    assert node.state == NodeState.CORDONED and node.retired_at is None
    said = Event.objects.filter(node=node, kind=EventKind.NODE_STATE, reason="RegisteredClean").latest("id")
    assert said.message.startswith("gpu-01: down → cordoned")


class CountingClient(AgentClient):
    def __init__(self, server: str) -> None:
        super().__init__(server)
        self.registers = 0
        self.heartbeats = 0

    def register(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        self.registers += 1
        return super().register(token, body)

    def heartbeat(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        self.heartbeats += 1
        return super().heartbeat(node, token, body)


@pytest.mark.django_db(transaction=True)
def test_the_agent_of_a_retired_node_says_so_once_and_asks_again_only_every_few_minutes(live_server: Any) -> None:
    build_loop_fleet()
    inventory = NodeInventory(name="sim-000", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64,
                              memory_gb=512, leaf_switch="leaf-1", spine="spine-1", simulated=True)
    client = CountingClient(live_server.url)
    agent = NodeAgent(inventory, client=client, launcher=SimulatedLauncher(), bootstrap_token=BOOTSTRAP,
                      interval_s=0.2, sample_interval_s=0.3)
    deadline = time.monotonic() + 60.0
    while not agent.registered and time.monotonic() < deadline:
        agent.step()
        time.sleep(0.02)
    assert agent.registered
    nodes.retire(Node.objects.get(name="sim-000"), f.make_user("root", role="admin"))

    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        agent.step()
        time.sleep(0.02)

    # Its heartbeat was refused (409), then nothing more: no registration loop.
    assert client.registers == 1 and client.heartbeats >= 1
    assert not agent.registered and agent.node_state == "retired" and agent.token == ""
    assert agent.next_contact - time.monotonic() > RETIRED_RETRY_S - 10
    assert Node.objects.get(name="sim-000").state == NodeState.RETIRED


def test_the_client_types_a_retired_refusal() -> None:
    from controlplane.agent.client import Refused, error_for

    assert isinstance(error_for(409, {"code": "node_retired", "detail": "node x is retired"}), Retired)
    plain = error_for(409, {"code": "conflict", "detail": "no"})
    assert isinstance(plain, Refused) and not isinstance(plain, Retired)
