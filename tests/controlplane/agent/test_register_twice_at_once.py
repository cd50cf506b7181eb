"""Two registrations of one new node at once (an agent retrying a registration its client
timed out on while the first was still being written; two agents started with one name), on
PostgreSQL with two connections.

Until 5 Dec the second found no node, inserted one too and met the unique name: an
IntegrityError, answered 500. Now it waits for the first and registers the node again, as any
re-registration does: one node, one registration event each, the second's token the valid one."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, Node
from controlplane.services import agent_protocol
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, agent_client, inventory

pytestmark = pytest.mark.django_db(transaction=True)
NAME = "register-twice-0"


def test_a_second_registration_of_a_node_being_created_registers_it_again(fleet: LoopFleet) -> None:
    body: dict[str, Any] = {"name": NAME, "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96,
                            "memory_gb": 1024, "leaf_switch": "leaf-1", "spine": "spine-1"}
    with transaction.atomic():
        # The first registration, written and not yet committed ...
        first = agent_protocol.register(NAME, inventory(), token=BOOTSTRAP, running=[], now=timezone.now())
        # ... while the agent's retry arrives.
        retrying, retried = in_thread(lambda: agent_client(BOOTSTRAP).post("/api/v1/agent/register", body,
                                                                           format="json"))
        assert blocked_on_a_lock(), "the second registration should wait for the first"
    retrying.join(30)

    assert "error" not in retried, retried.get("error")
    r = retried["result"]
    assert r.status_code == 201, r.content[:500]
    node = Node.objects.get(name=NAME)
    assert agent_protocol.token_opens(node, r.json()["token"])
    assert not agent_protocol.token_opens(node, first.token)
    assert Event.objects.filter(node=node, kind=EventKind.NODE_REGISTERED).count() == 2
