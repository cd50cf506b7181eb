"""`state_label`: what a job's state means, beside `state`. A job stopping for any reason is
`preempting` (the stored state), and the job list, `qm status` and the timeline showed
"Preempting" for a job its owner had cancelled or that reached its runtime limit. The API now
derives `state_label` ("stopping: cancelled", "stopping: runtime limit", "preempting", …) from
the stop's release reason; `state` is unchanged."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from controlplane.api import serializers as s
from controlplane.models import Job
from tests.controlplane.fleet_fixture import Fleet
from tests.controlplane.stopping_jobs import STOPS, make_stopping_jobs

pytestmark = pytest.mark.django_db

EXPECTED = {**{name: label for name, (_, label) in STOPS.items()}, "running": "running"}


def test_the_list_and_the_job_say_why_a_job_is_stopping(fleet: Fleet, alice: APIClient) -> None:
    jobs = make_stopping_jobs(fleet)

    listed = alice.get("/api/v1/jobs/", {"limit": 50}).json()["results"]

    assert {j["name"]: j["state_label"] for j in listed} == EXPECTED
    assert {j["name"]: j["state"] for j in listed} == {
        **{name: "preempting" for name in STOPS}, "running": "running"}
    for name, job in jobs.items():
        assert alice.get(f"/api/v1/jobs/{job.pk}/").json()["state_label"] == EXPECTED[name]


def test_a_waiting_job_and_a_finished_one_are_labelled_by_their_state(fleet: Fleet, alice: APIClient) -> None:
    submitted = alice.post("/api/v1/jobs/", {"name": "w", "gpus": 1}, format="json").json()
    assert submitted["state_label"] == "pending"
    Job.objects.filter(pk=submitted["id"]).update(state="cancelled")
    assert alice.get(f"/api/v1/jobs/{submitted['id']}/").json()["state_label"] == "cancelled"


def test_the_labels_cost_no_query_beyond_the_held_gpus_one(fleet: Fleet, alice: APIClient) -> None:
    make_stopping_jobs(fleet)
    with CaptureQueriesContext(connection) as with_stops:
        alice.get("/api/v1/jobs/", {"limit": 50})
    Job.objects.filter(state="preempting").update(state="running")
    with CaptureQueriesContext(connection) as without:
        alice.get("/api/v1/jobs/", {"limit": 50})
    assert len(with_stops.captured_queries) == len(without.captured_queries)


def test_the_serializer_describes_the_field() -> None:
    assert "state_label" in s.JobSerializer.Meta.fields
