"""The submit form's live shape check and the submit itself apply the same cross-field shape
rules (elastic min_gpus/max_gpus around gpus, a same_node job's gpus_per_node): a shape the
submit refuses is never said to run by the check, and both name the same fields with the same
messages. Before, the check said "This fleet can run 4 GPUs" for gpus 4, min_gpus 8, max_gpus 2
and the submit then refused both fields."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from controlplane.api import serializers as s
from controlplane.models import Job
from controlplane.services import jobs as job_service
from tests.controlplane.fleet_fixture import Fleet

JOBS = "/api/v1/jobs/"
ARRAYS = "/api/v1/job-arrays/"
CHECK = "/ui/jobs/check.json"

BAD_SHAPES = [
    pytest.param({"gpus": 4, "min_gpus": 8, "max_gpus": 2}, {"min_gpus", "max_gpus"}, id="elastic-both-wrong"),
    pytest.param({"gpus": 4, "min_gpus": 8}, {"min_gpus"}, id="min-above-gpus"),
    pytest.param({"gpus": 4, "max_gpus": 2}, {"max_gpus"}, id="max-below-gpus"),
    pytest.param({"gpus": 8, "topology": "same_node", "gpus_per_node": 4}, {"gpus_per_node"},
                 id="same-node-split"),
    # Slurm refuses --gpus 1 --gpus-per-node 3; it was taken as one member of 1 GPU
    pytest.param({"gpus": 1, "gpus_per_node": 3}, {"gpus_per_node"}, id="more-per-node-than-gpus"),
    # members on distinct nodes of a job that has one member, or puts them all on one node
    pytest.param({"gpus": 4, "gpus_per_node": 4, "members_on_distinct_nodes": True}, {"members_on_distinct_nodes"},
                 id="distinct-nodes-of-one-member"),
    pytest.param({"gpus": 8, "topology": "same_node", "members_on_distinct_nodes": True},
                 {"members_on_distinct_nodes"}, id="distinct-nodes-of-same-node"),
]


@pytest.fixture
def page_client(fleet: Fleet) -> Client:
    client = Client()
    client.force_login(fleet.users["owner"])
    return client


def _live_check(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(CHECK, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
@pytest.mark.parametrize("shape, fields", BAD_SHAPES)
@pytest.mark.parametrize("slow_path", [False, True], ids=["plain-body", "serializer-body"])
def test_the_live_check_refuses_what_the_submit_refuses_with_the_same_field_errors(
    fleet: Fleet, alice: APIClient, page_client: Client, shape: dict[str, Any], fields: set[str], slow_path: bool,
) -> None:
    body: dict[str, Any] = {"name": "bad-shape", **shape}
    if slow_path:  # a null optional field: the plain typing leaves the body to the serializer
        body["checkpoint_interval_s"] = None
    before = Job.objects.count()

    submitted = alice.post(JOBS, body, format="json")
    checked = _live_check(page_client, body)

    assert submitted.status_code == 400, submitted.json()
    assert Job.objects.count() == before
    assert set(submitted.json()["errors"]) == fields
    assert checked["runs"] is False
    assert checked["errors"] == submitted.json()["errors"]
    for field in fields:
        assert field in checked["detail"]


@pytest.mark.django_db
def test_an_array_of_a_bad_shape_is_refused_alike_by_both(fleet: Fleet, alice: APIClient, page_client: Client) -> None:
    body = {"name": "bad-array", "gpus": 4, "min_gpus": 8, "max_gpus": 2, "array": "0-3"}

    submitted = alice.post(ARRAYS, body, format="json")
    checked = _live_check(page_client, body)

    assert submitted.status_code == 400
    assert checked["runs"] is False and checked["errors"] == submitted.json()["errors"]
    assert set(checked["errors"]) == {"min_gpus", "max_gpus"}


@pytest.mark.django_db
def test_the_elastic_range_around_gpus_still_runs(fleet: Fleet, alice: APIClient, page_client: Client) -> None:
    body = {"name": "elastic", "gpus": 4, "min_gpus": 2, "max_gpus": 8}

    assert _live_check(page_client, body)["runs"] is True
    assert alice.post(JOBS, body, format="json").status_code == 201


def test_the_rules_are_one_function_for_serializer_fast_path_and_service() -> None:
    """The serializer, the plain typing and the service all take their rules from
    services.jobs.shape_errors: a body it faults is never taken by the plain typing."""
    data = {"name": "x", "gpus": 4, "min_gpus": 8, "max_gpus": 2}
    errors = job_service.shape_errors(gpus=4, gpus_per_node=None, topology="any", min_gpus=8, max_gpus=2)

    serializer = s.JobSubmitSerializer(data=data)
    assert not serializer.is_valid()
    assert {k: [str(m) for m in v] for k, v in serializer.errors.items()} == {k: [v] for k, v in errors.items()}
    assert s.plain_submit_request(data, s.JobSubmitSerializer) is None


@pytest.mark.django_db
def test_the_submits_judgement_itself_refuses_such_a_shape_naming_the_fields(fleet: Fleet) -> None:
    """jobs.judge, which the live check and the submit both ask (check_shape, the live check's
    own shape check, is gone with its first-fault-only answer), refuses a shape submit()
    refuses, naming each field, though the fleet could hold its 4 GPUs."""
    user = fleet.users["owner"]
    judged = job_service.judge(user, job_service.SubmitRequest(name="x", gpus=4, min_gpus=8, max_gpus=2))

    assert judged.errors == {"min_gpus": "min_gpus 8 is more than gpus 4", "max_gpus": "max_gpus 2 is less than gpus 4"}
    assert judged.never_runs is None  # the rules refuse it, not the fleet
    assert job_service.judge(user, job_service.SubmitRequest(name="x", gpus=4, min_gpus=2, max_gpus=8)).errors == {}


@pytest.mark.django_db
def test_more_gpus_per_node_than_gpus_says_how_many_at_most(fleet: Fleet, alice: APIClient) -> None:
    r = alice.post(JOBS, {"name": "x", "gpus": 1, "gpus_per_node": 3}, format="json")

    assert r.status_code == 400
    assert r.json()["errors"] == {"gpus_per_node": ["gpus_per_node 3 is more than gpus 1: give at most 1, or leave it out"]}
    assert alice.post(JOBS, {"name": "x", "gpus": 3, "gpus_per_node": 3}, format="json").status_code == 201
