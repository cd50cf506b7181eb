"""Cancelling a whole array (`POST job-arrays/{id}/cancel/`, the Jobs page's *Cancel the array*)
cancels the jobs that waited on its tasks to succeed, and theirs down the chain, as a single
job's cancel does; its answer said only "Array … (sweep, 2 tasks): 2 cancelled, 0 stopping.",
while a single job's names them (services/dependencies.cancelled_with). It now names them in the
same words; a job of another team is named by its id alone."""

from __future__ import annotations

from typing import Any

import pytest

from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"
A = "/api/v1/job-arrays/"


def submit(client: Any, name: str, **fields: Any) -> int:
    body = {"name": name, "team": "ml", "gpus": 1, "runtime_limit_s": 3600, "command": "true", **fields}
    r = client.post(J, body, format="json")
    assert r.status_code == 201, r.content[:600]
    return int(r.json()["id"])


def test_an_array_cancel_names_the_jobs_it_cancelled_down_the_chain(fleet: Any) -> None:
    alice = client_for(fleet, "owner")
    r = alice.post(A, {"name": "sweep", "team": "ml", "gpus": 1, "runtime_limit_s": 3600, "command": "true",
                       "array": "0-1", "hold": True}, format="json")
    assert r.status_code == 201, r.content[:600]
    array_id, (first, second) = r.json()["array_id"], r.json()["job_ids"]
    merge = submit(alice, "merge", dependencies=[{"job": first, "condition": "afterok"},
                                                 {"job": second, "condition": "afterok"}])
    report = submit(alice, "report", dependencies=[{"job": merge, "condition": "afterok"}])
    cleanup = submit(alice, "cleanup", dependencies=[{"job": second, "condition": "afterany"}])

    response = alice.post(f"{A}{array_id}/cancel/")

    assert response.status_code == 200, response.content[:600]
    assert response.json()["detail"] == (
        f"Array {array_id} (sweep, 2 tasks): 2 cancelled, 0 stopping. With them 2 jobs that waited on its tasks "
        f"were cancelled, their dependency never to be met now: job {merge} (merge) and job {report} (report)."
    )
    states = {j["id"]: j["state"] for j in alice.get(J).json()["results"]}
    assert states[merge] == states[report] == "cancelled"
    assert states[cleanup] == "pending"  # afterany is met by a cancel


def test_an_array_cancel_that_cancels_no_other_job_says_only_its_tasks(fleet: Any) -> None:
    alice = client_for(fleet, "owner")
    r = alice.post(A, {"name": "sweep", "team": "ml", "gpus": 1, "runtime_limit_s": 3600, "command": "true",
                       "array": "0-1", "hold": True}, format="json")
    array_id, (first, _) = r.json()["array_id"], r.json()["job_ids"]
    submit(alice, "cleanup", dependencies=[{"job": first, "condition": "afterany"}])

    response = alice.post(f"{A}{array_id}/cancel/")

    assert response.json()["detail"] == f"Array {array_id} (sweep, 2 tasks): 2 cancelled, 0 stopping."
