"""/metrics for the on-call operator: nodes by pool and state, and when the loop last ran.

Found by running the demo as an operator: a node's agent killed (kill -9) made the node suspect,
then quarantined, and /metrics said nothing of it (no family named a node state), and nothing
said when the scheduling loop last committed a cycle: an alert on "a node is quarantined" or
"the loop is down" could not be written.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from controlplane.choices import NodeState
from controlplane.models import Node, SchedulerLease
from controlplane.services import nodes
from tests.controlplane.fleet_fixture import Fleet, client_for

pytestmark = pytest.mark.django_db


def scrape(client: APIClient) -> tuple[dict[str, dict[tuple[tuple[str, str], ...], float]], str]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    text = response.content.decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out, text


def test_nodes_and_their_gpus_are_counted_by_pool_and_state_with_every_state_present(fleet: Fleet) -> None:
    admin = fleet.users["admin"]
    nodes.cordon(fleet.nodes[1], admin)
    nodes.drain(fleet.nodes[4], admin)
    Node.objects.filter(pk=fleet.nodes[2].pk).update(state=NodeState.QUARANTINED)
    Node.objects.filter(pk=fleet.nodes[3].pk).update(state=NodeState.SUSPECT)

    series, text = scrape(client_for(fleet, "admin"))

    by_node = {dict(labels)["pool"] + "/" + dict(labels)["state"]: v for labels, v in series["quartermaster_nodes"].items()}
    assert by_node == {
        "h100/ready": 1, "h100/cordoned": 1, "h100/quarantined": 1, "h100/suspect": 1, "h100/draining": 0,
        "h100/down": 0,
        "a100/ready": 1, "a100/draining": 1, "a100/cordoned": 0, "a100/quarantined": 0, "a100/suspect": 0,
        "a100/down": 0,
    }
    gpus = {dict(labels)["pool"] + "/" + dict(labels)["state"]: v for labels, v in series["quartermaster_node_gpus"].items()}
    assert gpus["h100/quarantined"] == 8 and gpus["a100/draining"] == 8 and gpus["a100/down"] == 0
    assert sum(gpus.values()) == 48
    assert "# HELP quartermaster_nodes Nodes per pool and state" in text
    assert "# TYPE quartermaster_node_gpus gauge" in text


def test_the_last_cycle_time_is_exported_once_a_cycle_has_run(fleet: Fleet) -> None:
    client = client_for(fleet, "admin")
    series, text = scrape(client)
    assert "# HELP quartermaster_last_cycle_timestamp_seconds" in text
    assert "quartermaster_last_cycle_timestamp_seconds" not in series, "no cycle yet: no value, not 0"

    at = datetime(2026, 11, 29, 21, 0, 5, 250000, tzinfo=UTC)
    SchedulerLease.objects.update_or_create(name="scheduler", defaults={"last_cycle_at": at, "epoch": 2})

    series, _ = scrape(client)
    assert series["quartermaster_last_cycle_timestamp_seconds"] == {(): at.timestamp()}
    assert series["quartermaster_leader_epoch"] == {(): 2}


def test_no_family_calls_a_device_counter_utilization(fleet: Fleet) -> None:
    _, text = scrape(client_for(fleet, "admin"))
    families = [line for line in text.splitlines() if line.startswith("# HELP ")]
    assert len(families) >= 20
    assert not [line for line in families if "utiliz" in line.lower()]
