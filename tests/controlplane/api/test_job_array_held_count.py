"""The array summary says how many of its waiting tasks are held (`held`), in the API as on the
Jobs page ("Pending 3 (2 held)"): the page counted them, the API's `states` and `state_labels`
said only "pending": 3 (until 7 Dec). One rule for both (services/holds.held_waiting); held
tasks stay in `state_labels`' "pending", which counts each task by its own `state_label`."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.models import Job
from controlplane.services import holds
from frontend.views.jobs import _array_summary

pytestmark = pytest.mark.django_db

A = "/api/v1/job-arrays/"


def test_the_array_summary_counts_its_held_waiting_tasks(fleet, alice: APIClient) -> None:
    r = alice.post(A, {"name": "sweep", "gpus": 1, "array": "0-2", "command": "true"}, format="json")
    assert r.status_code == 201 and r.json()["held"] == 0, r.content[:300]
    array_id = r.json()["array_id"]
    first, second, _ = Job.objects.filter(array_id=array_id).order_by("array_index")
    for job in (first, second):
        holds.hold(job.submitter, job.pk)

    body = alice.get(f"{A}{array_id}/").json()
    assert body["states"] == {"pending": 3} and body["state_labels"] == {"pending": 3}
    assert body["held"] == 2
    assert _array_summary(Job.objects.all(), array_id)["array_held"] == body["held"]  # the page's count

    released = alice.post(f"{A}{array_id}/release/").json()
    assert released["held"] == 0
    held = alice.post(f"{A}{array_id}/hold/").json()
    assert held["held"] == 3
    cancelled = alice.post(f"{A}{array_id}/cancel/").json()
    assert cancelled["held"] == 0 and cancelled["states"] == {"cancelled": 3}

    schema = alice.get("/api/schema/", {"format": "json"}).json()
    summary = schema["components"]["schemas"]["JobArray"]
    assert "held" in summary["properties"] and "held" in summary["required"]


def test_an_array_submitted_held_says_all_its_tasks_held(fleet, alice: APIClient) -> None:
    r = alice.post(A, {"name": "sweep", "gpus": 1, "array": "0-3", "command": "true", "hold": True}, format="json")
    assert r.status_code == 201 and r.json()["held"] == 4, r.content[:300]
