"""A researcher's pipeline through the REST API and real scheduling cycles, across features
built apart: dependencies, holds, changing a waiting job, history and output.

Each feature has its own tests; these check that they agree with each other where they meet
(a held job whose dependency is met, a held job whose dependency fails, a changed job that
keeps its dependencies, the history and the output of a job that never ran)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, Job
from controlplane.services import cycle, transitions
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def submit(client: Any, name: str, **fields: Any) -> int:
    body = {"name": name, "team": "ml", "gpus": 1, "runtime_limit_s": 3600, "command": "true", **fields}
    r = client.post(J, body, format="json")
    assert r.status_code == 201, r.content[:600]
    return int(r.json()["id"])


def job(pk: int) -> Job:
    return Job.objects.get(pk=pk)


def finish(pk: int, exit_code: int) -> None:
    allocation = Allocation.objects.get(job_id=pk, state="active")
    assert transitions.complete_release(allocation.pk, exit_code=exit_code, at=timezone.now(), actor="agent")


def cycles(n: int = 2) -> None:
    for _ in range(n):
        cycle.run_cycle("worker-1")


def test_a_held_job_whose_dependency_is_met_stays_held_until_released(fleet) -> None:
    alice = client_for(fleet, "owner")
    pre = submit(alice, "preprocess")
    train = submit(alice, "train", hold=True, dependencies=[{"job": pre, "condition": "afterok"}])
    cycles()
    assert job(pre).state == JobState.RUNNING
    assert job(train).pending_code == "Held"
    assert job(train).pending_message.endswith(f"It also waits for job {pre} to succeed (now running).")

    finish(pre, 0)
    cycles()
    held = job(train)
    assert held.state == JobState.PENDING and held.pending_code == "Held"
    assert held.pending_message == "Held by alice: until it is released it is not in the queue and holds nothing."

    assert alice.post(f"{J}{train}/release/").status_code == 200
    cycles()
    assert job(train).state == JobState.RUNNING


def test_a_failed_upstream_cancels_a_held_dependent_and_the_history_says_why(fleet) -> None:
    alice = client_for(fleet, "owner")
    pre = submit(alice, "preprocess")
    train = submit(alice, "train", hold=True, dependencies=[{"job": pre}])
    evaluate = submit(alice, "eval", dependencies=[{"job": train, "condition": "afterok"}])
    cycles()

    finish(pre, 3)
    cycles()
    assert [job(pk).state for pk in (train, evaluate)] == [JobState.CANCELLED, JobState.CANCELLED]
    assert job(train).pending_code == job(evaluate).pending_code == "DependencyNeverSatisfied"

    r = alice.get(J, {"state": ["failed", "cancelled"], "ordering": "id"})
    assert r.status_code == 200, r.content[:400]
    rows = {row["id"]: row for row in r.json()["results"]}
    assert rows[pre]["exit_code"] == 3 and rows[pre]["state"] == "failed"
    for pk in (train, evaluate):
        assert rows[pk]["state"] == "cancelled"
        assert rows[pk]["gpu_hours"] == 0 and rows[pk]["elapsed_s"] in (None, 0)
    assert rows[evaluate]["dependencies"][0]["job"] == train


def test_changing_a_waiting_dependent_keeps_its_dependencies(fleet) -> None:
    alice = client_for(fleet, "owner")
    pre = submit(alice, "preprocess")
    train = submit(alice, "train", dependencies=[{"job": pre, "condition": "afterany"}])
    cycles()

    r = alice.patch(f"{J}{train}/", {"gpus": 4}, format="json")
    assert r.status_code == 200, r.content[:400]
    cycles()
    changed = job(train)
    assert changed.gpus == 4 and changed.pending_code == "WaitingForDependency"
    assert [d["job"] for d in r.json()["job"]["dependencies"]] == [pre]

    finish(pre, 1)  # afterany: a failure meets it too
    cycles()
    running = job(train)
    assert running.state == JobState.RUNNING
    assert sum(a.gpus.count() for a in Allocation.objects.filter(job=running)) == 4


def test_a_job_that_never_ran_has_no_output_and_says_so(fleet) -> None:
    alice = client_for(fleet, "owner")
    pre = submit(alice, "preprocess")
    train = submit(alice, "train", dependencies=[{"job": pre}])
    assert alice.post(f"{J}{train}/cancel/").status_code in (200, 202)

    r = alice.get(f"{J}{train}/logs/")
    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert body["text"] == ""
    assert body["notice"] == f"Job {train} never ran: no output."
