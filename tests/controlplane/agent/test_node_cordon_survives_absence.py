"""An operator's cordon or drain outlives the node going away and coming back.

Found by QA: cordon sim-002, kill -9 its agent, wait until the lease runs out (quarantined),
restart the agent: the node came back ready, and a job was bound to it 6 s later. A down or
quarantined node could not be cordoned either (409), so there was no way to keep it out.
The wish now lives in Node.unschedulable, apart from the health the control loop sets."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Event, Node
from controlplane.services import nodes, reconcile
from tests.controlplane.agent.test_agent_api import REGISTER, heartbeat_url
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, agent_client, register_node


@pytest.fixture
def operator(db: object) -> object:
    return get_user_model().objects.create_superuser("ops", "ops@example.com", "ops")


def _register_again(name: str) -> Node:
    response = agent_client(BOOTSTRAP).post(REGISTER, {"name": name, "running": []}, format="json")
    assert response.status_code == 201, response.content
    return Node.objects.get(name=name)


def _lease_runs_out(node: Node) -> None:
    past = timezone.now() - timedelta(seconds=1)
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=past)
    reconcile.expire_node(node.pk, now=timezone.now())
    assert Node.objects.get(pk=node.pk).state == NodeState.QUARANTINED


@pytest.mark.parametrize("action", [nodes.cordon, nodes.drain], ids=["cordon", "drain"])
def test_a_cordoned_or_drained_node_whose_lease_ran_out_returns_cordoned(fleet: LoopFleet, operator, action) -> None:
    node, _ = register_node("gpu-01")
    action(node, operator)
    _lease_runs_out(node)

    back = _register_again("gpu-01")

    assert back.state == NodeState.CORDONED and back.unschedulable
    returned = Event.objects.filter(node=node, reason="RegisteredClean").get()
    assert returned.data["to"] == NodeState.CORDONED and "until an operator uncordons it" in returned.message


def test_a_cordoned_node_whose_agent_said_goodbye_returns_cordoned(fleet: LoopFleet, operator) -> None:
    node, token = register_node("gpu-01")
    nodes.cordon(node, operator)
    agent_client(token).post(heartbeat_url("gpu-01"), {"goodbye": True}, format="json")
    assert Node.objects.get(pk=node.pk).state == NodeState.DOWN

    assert _register_again("gpu-01").state == NodeState.CORDONED


def test_a_quarantined_node_can_be_cordoned_for_when_it_returns(fleet: LoopFleet, operator) -> None:
    node, _ = register_node("gpu-01")
    _lease_runs_out(node)

    after = nodes.cordon(node, operator)

    assert after.state == NodeState.QUARANTINED and after.unschedulable  # health stays the loop's
    event = Event.objects.filter(node=node, reason="Cordoned").get()
    assert event.actor == "user:ops" and "returns cordoned when its agent registers again" in event.message
    assert _register_again("gpu-01").state == NodeState.CORDONED


def test_uncordoning_a_node_while_it_is_away_lets_it_return_ready(fleet: LoopFleet, operator) -> None:
    node, _ = register_node("gpu-01")
    nodes.cordon(node, operator)
    _lease_runs_out(node)

    after = nodes.uncordon(node, operator)

    assert after.state == NodeState.QUARANTINED and not after.unschedulable
    assert _register_again("gpu-01").state == NodeState.READY


def test_an_uncordoned_node_returns_ready_and_a_repeated_wish_records_nothing(fleet: LoopFleet, operator) -> None:
    node, _ = register_node("gpu-01")
    nodes.cordon(node, operator)
    nodes.uncordon(node, operator)
    _lease_runs_out(node)
    before = Event.objects.filter(node=node).count()

    nodes.uncordon(node, operator)  # already schedulable: nothing to record

    assert Event.objects.filter(node=node).count() == before
    assert _register_again("gpu-01").state == NodeState.READY


def test_a_suspect_node_still_cannot_be_uncordoned(fleet: LoopFleet, operator) -> None:
    node, _ = register_node("gpu-01")
    Node.objects.filter(pk=node.pk).update(state=NodeState.SUSPECT)

    with pytest.raises(nodes.NodeActionRefused, match="suspect"):
        nodes.uncordon(node, operator)
