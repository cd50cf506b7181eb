"""A heartbeat or report the control plane refuses (400) is recorded for its node.

Nothing of a refused contact is applied (tests/controlplane/api/test_agent_api_hostile_bodies.py),
and until 6 Dec nothing of it was recorded either: a node whose agent sent the same refused
contact again every round (a `qm-agent` from before then) went suspect, then down, with no word
of why but in the web's log. Now the node gets a `node.agent_refused` event naming the fields,
their problems and the runs refused (services/agent_protocol.contact_refused), at most one every
ten minutes a node, so the node's page and `events/?kind=node.agent_refused` say it. A
simulated nodes' batch records it for an item whose token opens its node, never for a node a
body merely names.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Allocation, Event
from controlplane.services import agent_protocol, cycle
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    agent_client,
    build_loop_fleet,
    make_job,
    register_node,
)

pytestmark = pytest.mark.django_db

NOT_UTF8 = "launch failed: cannot prepare /scratch/caf\udce9/run"


@pytest.fixture(autouse=True)
def _bootstrap_secret(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


def _post(token: str, path: str, body: dict[str, Any]) -> Any:
    """As the agent sends it: JSON with every character escaped (the test client's own rendering
    writes a lone surrogate raw, which has no UTF-8 form)."""
    return agent_client(token).generic("POST", f"/api/v1/agent/{path}", json.dumps(body),
                                       content_type="application/json")


def _refused_events() -> list[Event]:
    return list(Event.objects.filter(kind=EventKind.NODE_AGENT_REFUSED).order_by("pk"))


def _bound() -> tuple[str, int]:
    fleet = build_loop_fleet()
    _, token = register_node("gpu-0")
    job = make_job(fleet, name="j")
    assert cycle.run_cycle("worker-1").binds == 1
    return token, Allocation.objects.get(job=job).generation


def test_a_refused_heartbeat_is_the_nodes_event_naming_the_field_and_the_run_once_in_ten_minutes() -> None:
    token, generation = _bound()
    at = timezone.now().isoformat()
    body = {"running": [], "reports": [
        {"kind": "started", "generation": generation, "at": at},
        {"kind": "exited", "generation": generation, "at": at, "exit_code": 126, "message": NOT_UTF8}]}

    first = _post(token, "nodes/gpu-0/heartbeat", body)
    again = _post(token, "nodes/gpu-0/report", body)

    assert first.status_code == again.status_code == 400
    assert list(first.json()["errors"]) == ["reports.1.message"]
    (event,) = _refused_events()  # the second within ten minutes records nothing more
    assert event.node is not None and event.node.name == "gpu-0" and event.actor == "agent:gpu-0"
    assert event.reason == "AgentContactRefused"
    assert event.message == (f"gpu-0: its agent's contact was refused and nothing of it applied: reports.1.message: "
                             f"Surrogate characters are not allowed: U+DCE9. (generation {generation})")
    assert event.data == {"errors": {"reports.1.message": ["Surrogate characters are not allowed: U+DCE9."]},
                          "fields": 1, "generations": [generation]}
    # ten minutes on, a refusal is recorded again
    later = agent_protocol.contact_refused(event.node, {"logs.0.text": ["Null characters are not allowed."]},
                                           {"logs": [{"generation": generation}]},
                                           now=timezone.now() + timedelta(minutes=10, seconds=1))
    assert later is not None and later.data["generations"] == [generation]


def test_words_postgresql_cannot_hold_are_stored_as_their_escapes() -> None:
    token, generation = _bound()
    node = Event.objects.filter(node__name="gpu-0").first().node  # type: ignore[union-attr]
    event = agent_protocol.contact_refused(node, {"reports.0.kind": ['"x\udce9\x00" is not a valid choice.']},
                                           {"reports": [{"generation": generation}]}, now=timezone.now())
    assert event is not None
    event.refresh_from_db()
    assert '"x\\udce9\\x00" is not a valid choice.' in event.message


def test_a_batch_records_the_refusal_for_an_item_whose_token_opens_its_node_only() -> None:
    token, generation = _bound()
    _, other = register_node("gpu-1")
    at = timezone.now().isoformat()
    bad = {"kind": "exited", "generation": generation, "at": at, "exit_code": 1, "message": NOT_UTF8}

    strangers = _post("-", "nodes/heartbeats", {"nodes": [
        {"name": "gpu-0", "token": "qma_never-issued", "reports": [bad]},
        {"name": "gpu-0", "token": other, "reports": [bad]}]})
    assert strangers.status_code == 400 and _refused_events() == []  # a body may name any node

    taken = _post("-", "nodes/heartbeats", {"nodes": [
        {"name": "gpu-1", "token": other, "running": []},
        {"name": "gpu-0", "token": token, "reports": [bad]}]})

    assert taken.status_code == 400 and list(taken.json()["errors"]) == ["nodes.1.reports.0.message"]
    (event,) = _refused_events()
    assert event.node is not None and event.node.name == "gpu-0"
    assert list(event.data["errors"]) == ["reports.0.message"] and event.data["generations"] == [generation]
