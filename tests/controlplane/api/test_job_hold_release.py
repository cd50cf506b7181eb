"""Holding and releasing a waiting job (Slurm's `scontrol hold/release`, `sbatch -H`; Kueue's
inactive workloads): who may, what a refusal says, and the events each leaves."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobHold, JobState
from controlplane.models import Event, Job, PendingPlace
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"
A = "/api/v1/job-arrays/"


def _held(job: Job) -> tuple[str, str | None]:
    job.refresh_from_db()
    return job.hold, job.held_by.get_username() if job.held_by_id else None


def test_submitter_holds_a_waiting_job_as_a_user_hold_with_an_event(fleet, alice) -> None:
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], queue_position=3)

    r = alice.post(f"{J}{job.pk}/hold/")

    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert body["changed"] is True
    assert body["detail"] == (f"Job {job.pk} held by alice: it is out of the queue and holds nothing until "
                              f"released (qm release {job.pk}).")
    assert body["job"]["hold"] == "user" and body["job"]["held_by"] == "alice" and body["job"]["held_at"]
    assert body["job"]["pending_code"] == "Held"
    assert body["job"]["pending_message"] == ("Held by alice: until it is released it is not in the queue and "
                                              "holds nothing.")
    assert _held(job) == (JobHold.USER, "alice")
    assert not PendingPlace.objects.filter(job=job).exists()  # out of line: no position until a cycle ranks it
    event = Event.objects.get(job=job, kind=EventKind.JOB_HELD)
    assert event.actor == "user:alice" and event.reason == "Held"
    assert event.message == "Held by alice: out of the queue until released"


def test_a_member_of_the_team_holds_and_releases_a_teammates_job(fleet, alice) -> None:
    carol = f.make_user("carol", team=fleet.ml)
    job = f.make_job(fleet.ml, submitter=carol)

    assert alice.post(f"{J}{job.pk}/hold/").status_code == 200
    assert _held(job) == (JobHold.USER, "alice")
    r = client_for(fleet, "owner").post(f"{J}{job.pk}/release/")
    assert r.status_code == 200, r.content[:400]
    assert r.json()["detail"] == f"Job {job.pk} released: it is back in the queue from the next scheduling cycle."
    assert _held(job) == (JobHold.NONE, None)
    released = Event.objects.get(job=job, kind=EventKind.JOB_RELEASED)
    assert released.actor == "user:alice" and released.message == "Released by alice (was held by alice): back in the queue"


def test_another_teams_member_cannot_hold_a_job_it_cannot_see(fleet, clients) -> None:
    job = f.make_job(fleet.ml)

    r = clients["other_team"].post(f"{J}{job.pk}/hold/")

    assert r.status_code == 404, r.content[:400]
    assert _held(job) == (JobHold.NONE, None)


def test_finance_cannot_hold(fleet, clients) -> None:
    job = f.make_job(fleet.ml)
    r = clients["finance"].post(f"{J}{job.pk}/hold/")
    assert r.status_code == 403 and r.json()["detail"].startswith("Finance accounts read showback and costs")
    assert _held(job) == (JobHold.NONE, None)


def test_an_admins_hold_is_an_admin_hold(fleet, admin) -> None:
    job = f.make_job(fleet.ml)

    r = admin.post(f"{J}{job.pk}/hold/")

    assert r.status_code == 200
    assert r.json()["job"]["hold"] == "admin"
    assert r.json()["job"]["pending_message"].startswith("Held by admin root:")
    assert _held(job) == (JobHold.ADMIN, "root")


def test_a_member_cannot_release_an_admins_hold_and_is_told_who_holds_it(fleet, alice, admin) -> None:
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"])
    admin.post(f"{J}{job.pk}/hold/")

    r = alice.post(f"{J}{job.pk}/release/")

    assert r.status_code == 403, r.content[:400]
    detail = r.json()["detail"]
    assert detail.startswith(f"Job {job.pk} is held by admin root since ")
    assert detail.endswith(": only an admin may release an admin's hold. Ask an admin to release it.")
    assert _held(job) == (JobHold.ADMIN, "root")
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_RELEASED).exists()

    assert admin.post(f"{J}{job.pk}/release/").status_code == 200
    assert _held(job) == (JobHold.NONE, None)


def test_an_admin_releases_a_users_hold(fleet, alice, admin) -> None:
    job = f.make_job(fleet.ml)
    alice.post(f"{J}{job.pk}/hold/")

    r = admin.post(f"{J}{job.pk}/release/")

    assert r.status_code == 200 and r.json()["changed"] is True
    assert _held(job) == (JobHold.NONE, None)


def test_an_admins_hold_replaces_a_users_and_a_members_second_hold_changes_nothing(fleet, alice, admin) -> None:
    job = f.make_job(fleet.ml)
    alice.post(f"{J}{job.pk}/hold/")

    again = alice.post(f"{J}{job.pk}/hold/")
    assert again.status_code == 200 and again.json()["changed"] is False
    assert "is already held by alice since" in again.json()["detail"]

    r = admin.post(f"{J}{job.pk}/hold/")
    assert r.status_code == 200 and r.json()["changed"] is True
    assert _held(job) == (JobHold.ADMIN, "root")
    held = list(Event.objects.filter(job=job, kind=EventKind.JOB_HELD).order_by("id").values_list("message", flat=True))
    assert held == ["Held by alice: out of the queue until released",
                    "Held by admin root (was held by alice): out of the queue until released"]


def test_releasing_a_job_not_held_changes_nothing(fleet, alice) -> None:
    job = f.make_job(fleet.ml)

    r = alice.post(f"{J}{job.pk}/release/")

    assert r.status_code == 200 and r.json()["changed"] is False
    assert r.json()["detail"] == f"Job {job.pk} is not held; it waits in the queue. Nothing changed."
    assert not Event.objects.filter(job=job).exists()


@pytest.mark.parametrize("state, words", [
    (JobState.RUNNING, "running"), (JobState.PREEMPTING, "being stopped"),
], ids=["running", "stopping"])
def test_holding_a_running_job_is_refused_naming_its_state_and_saying_to_cancel(fleet, alice, state, words) -> None:
    job = f.make_job(fleet.ml, state=state, started_at=timezone.now())

    r = alice.post(f"{J}{job.pk}/hold/")

    assert r.status_code == 409, r.content[:400]
    later = (f"to run it again later, requeue it held (qm requeue --hold {job.pk})" if state == JobState.RUNNING
             else "to run it later, resubmit it held (qm submit --hold)")
    assert r.json()["detail"] == (
        f"Job {job.pk} is {words}: only a waiting job can be held. To stop it, cancel it (qm cancel {job.pk}); "
        f"{later} and release it when you want it to start.")
    assert _held(job) == (JobHold.NONE, None)


def test_holding_a_finished_job_is_refused_naming_its_state(fleet, alice) -> None:
    job = f.make_job(fleet.ml, state=JobState.SUCCEEDED, finished_at=timezone.now())

    r = alice.post(f"{J}{job.pk}/hold/")

    assert r.status_code == 409
    assert r.json()["detail"] == f"Job {job.pk} has already ended (succeeded): only a waiting job can be held."


def test_hold_takes_no_field_but_its_reason(fleet, alice) -> None:
    job = f.make_job(fleet.ml)
    r = alice.post(f"{J}{job.pk}/hold/", {"until": "later"}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["until"]
    assert _held(job) == (JobHold.NONE, None)


def test_submit_held_creates_the_job_held(fleet, alice) -> None:
    r = alice.post(J, {"name": "later", "gpus": 2, "hold": True}, format="json")

    assert r.status_code == 201, r.content[:400]
    body = r.json()
    assert body["hold"] == "user" and body["held_by"] == "alice" and body["pending_code"] == "Held"
    job = Job.objects.get(pk=body["id"])
    assert _held(job) == (JobHold.USER, "alice") and job.held_at == job.submitted_at
    submitted = Event.objects.get(job=job, kind=EventKind.JOB_SUBMITTED)
    assert submitted.message.endswith("; held by alice until released") and submitted.data["hold"] == "user"


def test_an_admin_submitting_held_places_an_admin_hold_on_every_task_of_an_array(fleet, admin) -> None:
    r = admin.post(A, {"name": "sweep", "gpus": 1, "array": "0-2", "team": "ml", "hold": True}, format="json")

    assert r.status_code == 201, r.content[:400]
    tasks = Job.objects.filter(array_id=r.json()["array_id"])
    assert tasks.count() == 3
    assert set(tasks.values_list("hold", "held_by__username", "pending_code")) == {("admin", "root", "Held")}
    assert {j.pending_message for j in tasks} == {"Held by admin root: until it is released it is not in the queue "
                                                  "and holds nothing."}


def test_submit_without_hold_is_not_held_and_keeps_its_fingerprint(fleet, alice) -> None:
    from controlplane.services.jobs import SubmitRequest

    r = alice.post(J, {"name": "now", "gpus": 2}, format="json")
    assert r.status_code == 201 and r.json()["hold"] == "" and r.json()["held_by"] is None
    assert SubmitRequest("a", 1).fingerprint() != SubmitRequest("a", 1, hold=True).fingerprint()


def test_submit_hold_must_be_a_boolean(fleet, alice) -> None:
    r = alice.post(J, {"name": "x", "gpus": 1, "hold": "perhaps"}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["hold"]


def test_array_hold_and_release_act_on_every_waiting_task(fleet, alice, admin) -> None:
    array_id = str(uuid.uuid4())
    tasks = [f.make_job(fleet.ml, name="sweep", array_id=array_id, array_index=i) for i in range(4)]
    Job.objects.filter(pk=tasks[3].pk).update(state=JobState.RUNNING, started_at=timezone.now())

    r = alice.post(f"{A}{array_id}/hold/")

    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert body["changed"] == [t.pk for t in tasks[:3]] and body["not_waiting"] == 1
    assert body["detail"] == f"Array {array_id} (sweep, 4 tasks): 3 held, 1 not waiting (running or ended)."
    assert Event.objects.filter(kind=EventKind.JOB_HELD, job__array_id=array_id).count() == 3

    admin.post(f"{J}{tasks[0].pk}/hold/")  # an admin's hold on one task
    r = alice.post(f"{A}{array_id}/release/")
    body = r.json()
    assert body["changed"] == [tasks[1].pk, tasks[2].pk] and body["refused"] == 1
    assert body["detail"] == (f"Array {array_id} (sweep, 4 tasks): 2 released, 1 not waiting (running or ended), "
                              "1 under an admin's hold (only an admin releases it).")
    assert _held(tasks[0]) == (JobHold.ADMIN, "root")


def test_array_hold_of_another_teams_array_is_a_404(fleet, alice) -> None:
    array_id = str(uuid.uuid4())
    f.make_job(fleet.vision, array_id=array_id, array_index=0)
    assert alice.post(f"{A}{array_id}/hold/").status_code == 404


@pytest.mark.parametrize("tasks", [3, 300])
def test_array_hold_and_release_take_the_same_few_queries_whatever_the_arrays_size(
    fleet, alice, django_assert_max_num_queries, tasks,
) -> None:
    array_id = str(uuid.uuid4())
    Job.objects.bulk_create(
        Job(team=fleet.ml, priority_class=fleet.research, name="wide", gpus=1, runtime_limit_s=3600,
            submitted_at=timezone.now(), state_changed_at=timezone.now(), array_id=array_id, array_index=i)
        for i in range(tasks))

    with django_assert_max_num_queries(16):
        held = alice.post(f"{A}{array_id}/hold/")
    with django_assert_max_num_queries(16):
        released = alice.post(f"{A}{array_id}/release/")

    assert len(held.json()["changed"]) == tasks and len(released.json()["changed"]) == tasks
    assert Event.objects.filter(job__array_id=array_id, kind=EventKind.JOB_HELD).count() == tasks
    assert Event.objects.filter(job__array_id=array_id, kind=EventKind.JOB_RELEASED,
                                message="Released by alice (was held by alice): back in the queue").count() == tasks
    assert set(Job.objects.filter(array_id=array_id).values_list("hold", "pending_code")) == {("", "Released")}


def test_an_admins_array_hold_replaces_the_users_holds(fleet, alice, admin) -> None:
    array_id = str(uuid.uuid4())
    tasks = [f.make_job(fleet.ml, name="sweep", array_id=array_id, array_index=i) for i in range(2)]
    alice.post(f"{J}{tasks[0].pk}/hold/")

    body = admin.post(f"{A}{array_id}/hold/").json()

    assert body["changed"] == [t.pk for t in tasks] and body["unchanged"] == 0
    assert _held(tasks[0]) == (JobHold.ADMIN, "root") and _held(tasks[1]) == (JobHold.ADMIN, "root")
    assert Event.objects.filter(job=tasks[0], kind=EventKind.JOB_HELD).order_by("id").last().message == (
        "Held by admin root (was held by alice): out of the queue until released")
    again = alice.post(f"{A}{array_id}/hold/").json()
    assert again["changed"] == [] and again["unchanged"] == 2
