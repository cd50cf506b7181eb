"""An agent request's body is bounded before it is decoded (Django's DATA_UPLOAD_MAX_MEMORY_SIZE,
5 MiB), and the simulated agent's batch keeps under the bound by going in parts.

`nodes/heartbeats` and `nodes/wait` carry their tokens inside the body, so a body is decoded
before anyone is known. Until 5 Dec a batch of simulated nodes past 5 MiB was refused whole
(413) and every node in it went unheard until its lease ran out.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings

from controlplane.agent import client as agent_client_module
from controlplane.agent.client import AgentClient, Refused
from controlplane.api import agent as agent_api
from controlplane.models import Node
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, build_loop_fleet, register_node

BATCH = "/api/v1/agent/nodes/heartbeats"


def _padded_batch(size: int) -> str:
    """A well-formed batch body of ``size`` bytes: one item with an unknown token, padded."""
    head = '{"nodes": [{"name": "gpu-a", "token": "qma_unknown"}], "pad": "'
    return head + "x" * (size - len(head) - 2) + '"}'


def test_the_agent_and_the_control_plane_share_one_bound_and_it_is_djangos() -> None:
    assert agent_client_module.MAX_BODY_BYTES == agent_api.MAX_AGENT_BODY_BYTES
    assert agent_api.MAX_AGENT_BODY_BYTES == settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def test_an_agent_body_beyond_the_bound_is_413_before_anyone_is_known(fleet: LoopFleet) -> None:
    body = _padded_batch(agent_api.MAX_AGENT_BODY_BYTES + 1)

    response = agent_client("-").post(BATCH, data=body, content_type="application/json")

    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert str(agent_api.MAX_AGENT_BODY_BYTES) in response.json()["detail"]


def test_an_agent_body_at_the_bound_is_decoded_and_answered_item_by_item(fleet: LoopFleet) -> None:
    body = _padded_batch(agent_api.MAX_AGENT_BODY_BYTES)

    response = agent_client("-").post(BATCH, data=body, content_type="application/json")

    assert response.status_code == 200, response.content[:300]
    assert [r["status"] for r in response.json()["results"]] == [401]


def test_a_node_heartbeat_beyond_the_bound_is_413_and_renews_nothing(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-a")
    before = Node.objects.get(pk=node.pk).agent_lease_expires_at
    body = json.dumps({"running": [], "pad": "x" * agent_api.MAX_AGENT_BODY_BYTES})

    response = agent_client(token).post("/api/v1/agent/nodes/gpu-a/heartbeat", data=body,
                                        content_type="application/json")

    assert response.status_code == 413
    assert Node.objects.get(pk=node.pk).agent_lease_expires_at == before


@pytest.mark.django_db(transaction=True)
def test_a_batch_larger_than_the_bound_goes_in_parts_and_every_node_is_answered(
    live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_loop_fleet()
    tokens = {f"gpu-{i}": register_node(f"gpu-{i}")[1] for i in range(8)}
    items = [{"name": name, "token": token, "running": [], "note": "y" * 600} for name, token in tokens.items()]
    whole = len(json.dumps({"nodes": items}))
    # The server and the client share one bound, as in production; lowered so that the whole
    # batch is past it and any two items are within it.
    bound = whole // 3
    monkeypatch.setattr(agent_api.AgentJSONParser, "max_body_bytes", bound)
    monkeypatch.setattr(agent_client_module, "MAX_BODY_BYTES", bound)

    results = AgentClient(live_server.url).sync_many(items)

    assert [r["status"] for r in results] == [200] * 8


@pytest.mark.django_db(transaction=True)
def test_one_node_alone_beyond_the_bound_is_refused_not_split_forever(
    live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_loop_fleet()
    _, token = register_node("gpu-0")
    monkeypatch.setattr(agent_api.AgentJSONParser, "max_body_bytes", 1000)
    monkeypatch.setattr(agent_client_module, "MAX_BODY_BYTES", 1000)

    with pytest.raises(Refused) as refused:
        AgentClient(live_server.url).sync_many([{"name": "gpu-0", "token": token, "note": "z" * 2000}])

    assert refused.value.status == 413
