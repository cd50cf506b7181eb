"""DELETE of a node whose agent is live is refused (409), naming the lease and the two ways out:
stop the agent and delete once its lease has lapsed, or retire the node. Found by the admin
review (6 Dec): `DELETE nodes/9/` on a ready, heartbeating node with no history answered 204, and
its agent then looped every few seconds on "Unknown agent token" and a refused first
registration, with nothing said to the admin. Nothing is deleted or recorded when refused; a node
whose lease has lapsed (or that never had an agent) is deleted as before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import Event, Node

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _deletion_events(node: Node) -> int:
    return Event.objects.filter(data__model="node", data__before__id=node.pk).count()


def test_deleting_a_node_whose_agent_is_live_is_refused_naming_its_lease_and_the_ways_out(fleet: Any, admin: Any) -> None:
    node = fleet.nodes[2]
    now = timezone.now()
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=now + timedelta(seconds=20), last_heartbeat_at=now)

    r = admin.delete(f"{J}/nodes/{node.pk}/")

    assert r.status_code == 409, r.content
    detail = r.json()["detail"]
    assert detail.startswith(f"Node {node.name}'s agent is live (its lease runs to "), detail
    assert "Stop its agent first" in detail and f"retire it instead (POST nodes/{node.pk}/retire/" in detail
    assert Node.objects.filter(pk=node.pk).exists() and _deletion_events(node) == 0


def test_a_node_whose_lease_has_lapsed_is_deleted(fleet: Any, admin: Any) -> None:
    node = fleet.nodes[2]
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))

    r = admin.delete(f"{J}/nodes/{node.pk}/")

    assert r.status_code in (200, 204), r.content
    assert not Node.objects.filter(pk=node.pk).exists() and _deletion_events(node) == 1
