"""An elastic job gives min_gpus and max_gpus together. The engine refuses one without the
other ("min_gpus and max_gpus must be given together for an elastic job"), yet the API took
`{"gpus": 4, "min_gpus": 2}` with a 201: the job then sat pending for ever as InvalidRequest,
and `qm status` called it "elastic 2–4". Now the submit (both typing paths, arrays too) and the
form's live check refuse it with a 400 naming the missing field, and write nothing; every
elastic shape the API does take is one the engine accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services.cycle import run_cycle
from tests.controlplane.fleet_fixture import Fleet

JOBS = "/api/v1/jobs/"
ARRAYS = "/api/v1/job-arrays/"
CHECK = "/ui/jobs/check.json"

HALF_RANGES = [
    pytest.param({"gpus": 4, "min_gpus": 2}, "max_gpus", "min_gpus 2 without max_gpus", id="min-only"),
    pytest.param({"gpus": 4, "max_gpus": 8}, "min_gpus", "max_gpus 8 without min_gpus", id="max-only"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("shape, missing, words", HALF_RANGES)
@pytest.mark.parametrize("slow_path", [False, True], ids=["plain-body", "serializer-body"])
def test_half_an_elastic_range_is_refused_naming_the_missing_field(
    fleet: Fleet, alice: APIClient, shape: dict[str, Any], missing: str, words: str, slow_path: bool,
) -> None:
    body: dict[str, Any] = {"name": "half-elastic", **shape}
    if slow_path:  # a null optional field sends the body through the serializer
        body["checkpoint_interval_s"] = None
    before = Job.objects.count()

    response = alice.post(JOBS, body, format="json")

    assert response.status_code == 400, response.json()
    assert set(response.json()["errors"]) == {missing}
    assert words in response.json()["errors"][missing][0]
    assert missing in response.json()["detail"]
    assert Job.objects.count() == before


@pytest.mark.django_db
@pytest.mark.parametrize("shape, missing, words", HALF_RANGES)
def test_an_array_and_the_live_check_refuse_it_alike(
    fleet: Fleet, alice: APIClient, shape: dict[str, Any], missing: str, words: str,
) -> None:
    page = Client()
    page.force_login(fleet.users["owner"])
    body = {"name": "half-elastic", **shape, "array": "0-3"}

    submitted = alice.post(ARRAYS, body, format="json")
    checked = page.post(CHECK, data=json.dumps(body), content_type="application/json").json()

    assert submitted.status_code == 400 and set(submitted.json()["errors"]) == {missing}
    assert checked["runs"] is False and checked["errors"] == submitted.json()["errors"]
    assert not Job.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("shape", [
    {"gpus": 4, "min_gpus": 2, "max_gpus": 8},
    {"gpus": 4, "min_gpus": 4, "max_gpus": 4},
    {"gpus": 8, "min_gpus": 4, "max_gpus": 16, "gpus_per_node": 4},
    {"gpus": 4},
])
def test_every_elastic_shape_the_api_takes_the_engine_takes(fleet: Fleet, alice: APIClient, shape: dict[str, Any]) -> None:
    response = alice.post(JOBS, {"name": "elastic", **shape}, format="json")
    assert response.status_code == 201, response.json()

    run_cycle("test")

    job = Job.objects.get(pk=response.json()["id"])
    assert job.pending_code != "InvalidRequest", job.pending_message
    assert job.state in (JobState.PENDING, JobState.RUNNING)
