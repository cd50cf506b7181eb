"""Cancelling a waiting job cancels the jobs that waited on it to succeed (afterok can never be
met now), and theirs down the chain, in the same transaction. The answer said only "Job 37
cancelled.": a researcher who cancelled one job on the page saw a 10-task sweep that ran after
it vanish without a word. It now names the jobs cancelled with it; a job waiting with a
condition the cancel meets (afterany, afternotok) is not among them, and nor is one whose
dependency an earlier end of the job settled."""

from __future__ import annotations

from typing import Any

import pytest

from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def submit(client: Any, name: str, **fields: Any) -> int:
    body = {"name": name, "team": "ml", "gpus": 1, "runtime_limit_s": 3600, "command": "true", **fields}
    r = client.post(J, body, format="json")
    assert r.status_code == 201, r.content[:600]
    return int(r.json()["id"])


def test_a_cancel_names_the_jobs_it_cancelled_down_the_chain(fleet: Any) -> None:
    alice = client_for(fleet, "owner")
    pre = submit(alice, "preprocess", hold=True)  # waits: nothing starts it
    train = submit(alice, "train", dependencies=[{"job": pre, "condition": "afterok"}])
    evaluate = submit(alice, "eval", dependencies=[{"job": train, "condition": "afterok"}])
    cleanup = submit(alice, "cleanup", dependencies=[{"job": pre, "condition": "afterany"}])
    report = submit(alice, "report", dependencies=[{"job": pre, "condition": "afternotok"}])

    response = alice.post(f"{J}{pre}/cancel/")

    assert response.status_code == 200
    assert response.json()["detail"] == (
        f"Job {pre} cancelled. With it 2 jobs that waited on it were cancelled, their dependency never to be "
        f"met now: job {train} (train) and job {evaluate} (eval)."
    )
    states = {j["id"]: j["state"] for j in alice.get(J).json()["results"]}
    assert states[train] == states[evaluate] == "cancelled"
    assert states[cleanup] == states[report] == "pending"  # afterany and afternotok are met by a cancel


def test_a_cancel_that_cancels_no_other_job_says_only_its_own(fleet: Any) -> None:
    alice = client_for(fleet, "owner")
    pre = submit(alice, "preprocess", hold=True)
    submit(alice, "cleanup", dependencies=[{"job": pre, "condition": "afterany"}])

    response = alice.post(f"{J}{pre}/cancel/")

    assert response.status_code == 200
    assert response.json()["detail"] == f"Job {pre} cancelled."


def test_a_long_chain_is_counted_and_its_first_jobs_named(fleet: Any) -> None:
    alice = client_for(fleet, "owner")
    pre = submit(alice, "preprocess", hold=True)
    r = alice.post("/api/v1/job-arrays/", {"name": "sweep", "team": "ml", "gpus": 1, "runtime_limit_s": 3600,
                                           "command": "true", "array": "0-11",
                                           "dependencies": [{"job": pre, "condition": "afterok"}]}, format="json")
    assert r.status_code == 201, r.content[:600]
    tasks = sorted(int(t) for t in r.json()["job_ids"])

    detail = alice.post(f"{J}{pre}/cancel/").json()["detail"]

    named = ", ".join(f"job {t} (sweep [{i}])" for i, t in enumerate(tasks[:5]))
    assert detail == (f"Job {pre} cancelled. With it 12 jobs that waited on it were cancelled, their dependency "
                      f"never to be met now: {named} and 7 more.")
