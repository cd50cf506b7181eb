"""A job waiting for a dependency cannot start until another job starts or ends: it has no
place in the queue, so the API gives it no `queue_position` (null, as for a job that does not
wait) and says what it waits for in the engine's words (`pending_message`,
`pending_would_start_if`). Before, it read the engine's rank after every job in line
(`"queue_position": 1` for a job nothing could start), and a held job submitted after it read
2, as if it were behind it in line."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.services import cycle
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def submit(client: Any, name: str, **fields: Any) -> int:
    body = {"name": name, "team": "ml", "gpus": 1, "runtime_limit_s": 3600, "command": "true", **fields}
    r = client.post(J, body, format="json")
    assert r.status_code == 201, r.content[:600]
    return int(r.json()["id"])


def test_a_job_waiting_on_a_dependency_has_no_queue_position_and_says_what_it_waits_for(fleet) -> None:
    alice = client_for(fleet, "owner")
    pre = submit(alice, "preprocess")
    train = submit(alice, "train", dependencies=[{"job": pre, "condition": "afterok"}])
    later = submit(alice, "later", hold=True)
    cycle.run_cycle("worker-1")
    cycle.run_cycle("worker-1")

    job = alice.get(f"{J}{train}/").json()
    assert job["state"] == "pending" and job["pending_code"] == "WaitingForDependency"
    assert job["queue_position"] is None
    assert job["pending_message"] == (f"Waits for job {pre} to succeed (now running): until then it is not in the "
                                      "queue and holds nothing.")
    assert job["pending_would_start_if"] == f"job {pre} succeeds"

    explained = alice.get(f"{J}{train}/explain/").json()
    assert explained["queue_position"] is None and explained["would_start_if"] == f"job {pre} succeeds"

    # the held job after it is ranked after every job in line, and the dependent job is not counted
    assert alice.get(f"{J}{later}/").json()["queue_position"] == 1
    listed = alice.get(J, {"state": "pending", "ordering": "queue_position"}).json()["results"]
    assert [(row["id"], row["queue_position"]) for row in listed] == [(later, 1), (train, None)]
