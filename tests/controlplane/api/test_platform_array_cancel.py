"""`POST job-arrays/{array_id}/cancel/`: every task of an array still pending, running or
stopping to be requeued is cancelled in one request, as `scancel ARRAY_ID` does.

Found by QA as a platform engineer: there was no such endpoint, and `qm cancel --array` sent
one request per task: a 1,000-task sweep took 24 s on the demo, a 10,000-task one (the
documented maximum) about four minutes."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, SchedulerLease
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
A = "/api/v1/job-arrays/"


def _array(fleet, team=None, n: int = 4) -> tuple[str, list[Job]]:
    array_id = str(uuid.uuid4())
    jobs = [f.make_job(team or fleet.ml, name="sweep", array_id=array_id, array_index=i) for i in range(n)]
    return array_id, jobs


def test_cancel_cancels_every_live_task_in_one_request(fleet, alice) -> None:
    array_id, (waiting, running, done, also_waiting) = _array(fleet)
    SchedulerLease.objects.create(epoch=1)
    now = timezone.now()
    Job.objects.filter(pk=running.pk).update(state=JobState.RUNNING, started_at=now)
    allocation = Allocation.objects.create(job=running, generation=1, epoch=1, created_at=now, started_at=now)
    AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[1], gpu_index=0)
    Job.objects.filter(pk=done.pk).update(state=JobState.SUCCEEDED, finished_at=now)

    r = alice.post(f"{A}{array_id}/cancel/")

    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert (body["cancelled"], body["stopping"], body["skipped"]) == (2, 1, 0), body
    assert body["count"] == 4 and body["states"] == {"cancelled": 2, "preempting": 1, "succeeded": 1}, body
    assert body["state_labels"]["stopping: cancelled"] == 1
    assert body["detail"] == f"Array {array_id} (sweep, 4 tasks): 2 cancelled, 1 stopping.", body
    states = dict(Job.objects.filter(array_id=array_id).values_list("pk", "state"))
    assert states == {waiting.pk: "cancelled", running.pk: "preempting", done.pk: "succeeded",
                      also_waiting.pk: "cancelled"}
    assert Event.objects.filter(kind=EventKind.JOB_CANCELLED, job__array_id=array_id, actor="user:alice").count() == 3

    again = alice.post(f"{A}{array_id}/cancel/")
    assert again.status_code == 200 and (again.json()["cancelled"], again.json()["stopping"]) == (0, 0)
    assert again.json()["skipped"] == 1  # the task already stopping: counted apart, not cancelled twice


def test_another_teams_array_is_a_404_and_nothing_is_cancelled(fleet, alice) -> None:
    array_id, jobs = _array(fleet, team=fleet.vision, n=2)

    r = alice.post(f"{A}{array_id}/cancel/")

    assert r.status_code == 404 and "No such job array" in r.json()["detail"]
    assert set(Job.objects.filter(array_id=array_id).values_list("state", flat=True)) == {JobState.PENDING}


def test_cancel_takes_no_fields_and_finance_may_not(fleet, alice, clients) -> None:
    array_id, _ = _array(fleet, n=2)

    r = alice.post(f"{A}{array_id}/cancel/", {"reason": "oops"}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["reason"]
    assert clients["finance"].post(f"{A}{array_id}/cancel/").status_code in (403, 404)
    assert set(Job.objects.filter(array_id=array_id).values_list("state", flat=True)) == {JobState.PENDING}


def test_the_schema_describes_it(admin) -> None:
    schema = admin.get("/api/schema/", {"format": "json"}).json()
    op = schema["paths"]["/api/v1/job-arrays/{array_id}/cancel/"]["post"]
    props = schema["components"]["schemas"]["JobArrayCancel"]["properties"]
    assert {"cancelled", "stopping", "skipped", "detail", "states"} <= set(props) and "200" in op["responses"]


def test_waiting_tasks_are_cancelled_in_a_few_statements_whatever_their_number(fleet, alice) -> None:
    """A 10,000-task sweep took 20.8 s to cancel on the demo, one task at a time: past the CLI's
    30 s timeout on a loaded server. Waiting tasks are now cancelled together."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    few, _ = _array(fleet, n=3)
    many, _ = _array(fleet, n=60)
    with CaptureQueriesContext(connection) as three:
        assert alice.post(f"{A}{few}/cancel/").status_code == 200
    with CaptureQueriesContext(connection) as sixty:
        r = alice.post(f"{A}{many}/cancel/")

    assert r.status_code == 200 and r.json()["cancelled"] == 60
    assert len(sixty) == len(three), (len(three), len(sixty))
    events = Event.objects.filter(job__array_id=many, actor="user:alice")
    assert events.filter(kind=EventKind.JOB_CANCELLED, message="Cancelled while waiting").count() == 60
    assert events.filter(kind=EventKind.JOB_FINISHED, message="Job cancelled", reason="Cancelled").count() == 60
    assert set(Job.objects.filter(array_id=many).values_list("state", flat=True)) == {JobState.CANCELLED}
    assert not Job.objects.filter(array_id=many, finished_at=None).exists()


def test_an_admin_cancels_another_teams_array(fleet, admin) -> None:
    array_id, jobs = _array(fleet, team=fleet.vision, n=3)

    r = admin.post(f"{A}{array_id}/cancel/")

    assert r.status_code == 200 and r.json()["cancelled"] == 3, r.content[:300]
    assert Event.objects.filter(job__array_id=array_id, kind=EventKind.JOB_CANCELLED, actor="user:root",
                                team=fleet.vision).count() == 3
