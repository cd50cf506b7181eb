"""Query parameters on actions and writes, and read-only node fields in a write.

A detail action looks its object up through the list's filters, so before,
`POST jobs/5/cancel/?team=vision` answered 404 "not yours to see" for the caller's own job,
and `?force=1` a 400 listing the jobs list's filters as what cancel takes. Every method of a
non-list endpoint now refuses a parameter it does not take, naming it, before any lookup.
`PATCH nodes/N/ {"last_heartbeat_at": …}` answered 200 and dropped the field; it is refused
as set elsewhere, as `state` already was."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import Job, Node
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("query", ["?team=vision", "?force=1"])
def test_a_job_action_refuses_a_query_parameter_it_does_not_take(fleet: Fleet, alice: APIClient, query: str) -> None:
    job = f.make_job(fleet.ml)
    response = alice.post(f"/api/v1/jobs/{job.pk}/cancel/{query}", format="json")
    assert response.status_code == 400, response.json()
    name = query[1:].split("=")[0]
    assert "Unknown query parameter; this endpoint takes: format." in response.json()["errors"][name]
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING  # nothing cancelled


def test_a_job_action_without_parameters_still_acts(fleet: Fleet, alice: APIClient) -> None:
    job = f.make_job(fleet.ml)
    assert alice.post(f"/api/v1/jobs/{job.pk}/cancel/", format="json").status_code == 200
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED


def test_a_write_refuses_a_query_parameter_it_does_not_take(fleet: Fleet, admin: APIClient) -> None:
    node = fleet.nodes[0]
    response = admin.patch(f"/api/v1/nodes/{node.pk}/?dry_run=1", {"pool": "elsewhere"}, format="json")
    assert response.status_code == 400 and "dry_run" in response.json()["errors"]
    assert Node.objects.get(pk=node.pk).pool == node.pool


@pytest.mark.parametrize("field", ["last_heartbeat_at", "agent_lease_expires_at"])
def test_a_node_write_refuses_what_its_agent_reports(fleet: Fleet, admin: APIClient, field: str) -> None:
    node = fleet.nodes[0]
    response = admin.patch(f"/api/v1/nodes/{node.pk}/", {field: "2030-01-01T00:00:00Z"}, format="json")
    assert response.status_code == 400, response.json()
    assert "Read-only here: the node's agent" in response.json()["errors"][field][0]


def test_a_node_body_read_and_written_back_still_saves(fleet: Fleet, admin: APIClient) -> None:
    node = fleet.nodes[0]
    body = admin.get(f"/api/v1/nodes/{node.pk}/").json()
    body["pool"] = "renamed"
    response = admin.put(f"/api/v1/nodes/{node.pk}/", body, format="json")
    assert response.status_code == 200, response.json()
    assert Node.objects.get(pk=node.pk).pool == "renamed"
