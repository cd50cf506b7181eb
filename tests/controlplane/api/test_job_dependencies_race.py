"""A submit with a dependency and its upstream job's end, at the same moment: the dependency is
never left waiting on a job that already ended. The submit locks the upstream rows FOR SHARE
while it checks them and writes its dependency rows; a transition updating the upstream row
first makes the submit wait and then read the new state (met at once, or refused), and a
submit holding the lock first makes the transition wait and then find the new dependency."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connections, transaction
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job, JobDependency
from controlplane.services import dependencies
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import build_fleet, client_for

J = "/api/v1"


@pytest.fixture
def committed_fleet(transactional_db: Any, settings: Any) -> Any:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return build_fleet()


def _end_while_submitting(fleet: Any, exit_state: str, condition: str) -> tuple[Any, threading.Thread]:
    """The upstream job ends in a transaction that stays open while a submit depending on it
    starts; returns the submit's answer once both are done."""
    up = f.make_job(fleet.ml, state=JobState.RUNNING, started_at=timezone.now())
    locked, release = threading.Event(), threading.Event()
    answer: dict[str, Any] = {}

    def end() -> None:
        try:
            with transaction.atomic():
                Job.objects.filter(pk=up.pk).update(state=exit_state, finished_at=timezone.now())
                dependencies.ended([dependencies.Change(up.pk, exit_state, 0 if exit_state == "succeeded" else 1)],
                                   at=timezone.now(), actor="agent")
                locked.set()
                release.wait(30)
        finally:
            connections.close_all()

    def submit() -> None:
        try:
            r = client_for(fleet, "owner").post(
                f"{J}/jobs/", {"name": "down", "gpus": 1, "dependencies": [{"job": up.pk, "condition": condition}]},
                format="json")
            answer["status"], answer["body"] = r.status_code, r.json()
        finally:
            connections.close_all()

    ender = threading.Thread(target=end)
    ender.start()
    assert locked.wait(30)
    submitter = threading.Thread(target=submit)
    submitter.start()
    time.sleep(0.5)
    waited = submitter.is_alive()  # blocked on the upstream row until the end commits
    release.set()
    ender.join(30)
    submitter.join(30)
    answer["waited"] = waited
    return answer, submitter


def test_a_submit_during_the_upstreams_success_sees_it_and_records_the_dependency_met(committed_fleet) -> None:
    answer, _ = _end_while_submitting(committed_fleet, JobState.SUCCEEDED, "afterok")

    assert answer["waited"]
    assert answer["status"] == 201, answer
    assert JobDependency.objects.get(job_id=answer["body"]["id"]).satisfied_at is not None


def test_a_submit_during_the_upstreams_failure_is_refused(committed_fleet) -> None:
    answer, _ = _end_while_submitting(committed_fleet, JobState.FAILED, "afterok")

    assert answer["waited"]
    assert answer["status"] == 400 and "dependencies.0.condition" in answer["body"]["errors"], answer
    assert not Job.objects.filter(name="down").exists()


def test_an_end_during_a_submit_finds_the_new_dependency(committed_fleet) -> None:
    """The other order: the submit holds the upstream row (FOR SHARE) until it commits; the end's
    UPDATE waits for it and then settles the dependency it wrote."""
    fleet = committed_fleet
    up = f.make_job(fleet.ml, state=JobState.RUNNING, started_at=timezone.now())
    alice = fleet.users["owner"]
    from controlplane.services import jobs as job_service

    inserted, release = threading.Event(), threading.Event()
    ended = threading.Event()

    def submit() -> None:
        try:
            with transaction.atomic():
                job_service.submit(alice, job_service.SubmitRequest(
                    name="down", gpus=1, dependencies=({"job": up.pk, "condition": "afterok"},)))
                inserted.set()
                release.wait(30)
        finally:
            connections.close_all()

    def end() -> None:
        try:
            with transaction.atomic():
                Job.objects.filter(pk=up.pk).update(state=JobState.SUCCEEDED, finished_at=timezone.now())
                dependencies.ended([dependencies.Change(up.pk, JobState.SUCCEEDED, 0)], at=timezone.now(),
                                   actor="agent")
            ended.set()
        finally:
            connections.close_all()

    submitter = threading.Thread(target=submit)
    submitter.start()
    assert inserted.wait(30)
    ender = threading.Thread(target=end)
    ender.start()
    time.sleep(0.5)
    assert not ended.is_set()  # the end waits for the submit's commit
    release.set()
    submitter.join(30)
    ender.join(30)

    assert JobDependency.objects.get(job__name="down").satisfied_at is not None
