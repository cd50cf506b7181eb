"""A hold carries its holder's reason (Slurm's `scontrol hold` comment, an admin's "waiting for
maintenance"): given with the hold (or a held submit), checked (a string, one line, bounded),
said in the job.held event and in the engine's Held explanation, shown in the job's
representation, and cleared on release."""

from __future__ import annotations

import uuid

import pytest

from controlplane.choices import EventKind, JobHold
from controlplane.models import Event, Job
from controlplane.models.jobs import HOLD_REASON_MAX_LENGTH
from controlplane.services.cycle import run_cycle
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"
A = "/api/v1/job-arrays/"
REASON = "waiting for dataset v3"


def test_a_hold_with_a_reason_says_it_in_the_event_the_explanation_and_the_job(fleet, alice) -> None:
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"])

    r = alice.post(f"{J}{job.pk}/hold/", {"reason": REASON}, format="json")

    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert body["detail"] == (f"Job {job.pk} held by alice ({REASON}): it is out of the queue and holds nothing "
                              f"until released (qm release {job.pk}).")
    assert body["job"]["hold_reason"] == REASON
    assert body["job"]["pending_message"] == (f"Held by alice: {REASON} — until it is released it is not in the "
                                              "queue and holds nothing.")
    event = Event.objects.get(job=job, kind=EventKind.JOB_HELD)
    assert event.message == f"Held by alice: {REASON} — out of the queue until released"
    assert event.data["reason"] == REASON and event.data["hold"] == "user"
    assert alice.get(f"{J}{job.pk}/").json()["hold_reason"] == REASON


def test_the_engine_says_the_reason_every_cycle(fleet, alice) -> None:
    job = f.make_job(fleet.ml)
    alice.post(f"{J}{job.pk}/hold/", {"reason": REASON}, format="json")
    # The next cycle words it anew from the snapshot (JobSpec.hold_reason), not the hold's copy.
    Job.objects.filter(pk=job.pk).update(pending_code="", pending_words="")

    run_cycle("test")

    explained = alice.get(f"{J}{job.pk}/explain/").json()
    assert explained["reason_code"] == "Held"
    assert explained["reason"] == (f"Held by alice: {REASON} — until it is released it is not in the queue and "
                                   "holds nothing.")
    assert explained["would_start_if"] == "it is released"


def test_release_clears_the_reason_and_its_event_keeps_it(fleet, alice) -> None:
    job = f.make_job(fleet.ml)
    alice.post(f"{J}{job.pk}/hold/", {"reason": REASON}, format="json")

    r = alice.post(f"{J}{job.pk}/release/")

    assert r.status_code == 200, r.content[:400]
    assert r.json()["job"]["hold_reason"] == "" and r.json()["job"]["hold"] == ""
    job.refresh_from_db()
    assert (job.hold, job.hold_reason) == (JobHold.NONE, "")
    released = Event.objects.get(job=job, kind=EventKind.JOB_RELEASED)
    assert released.data == {"was": "alice", "was_reason": REASON}
    # Held again without one: no reason left over from the first hold.
    alice.post(f"{J}{job.pk}/hold/", {}, format="json")
    job.refresh_from_db()
    assert job.hold == JobHold.USER and job.hold_reason == ""
    assert job.pending_message == "Held by alice: until it is released it is not in the queue and holds nothing."


@pytest.mark.parametrize("reason, words", [
    ("x" * (HOLD_REASON_MAX_LENGTH + 1), "at most 200 characters (201 given)"),
    (42, "must be text, got a number"),
    (["later"], "must be text, got a list"),
    (None, "This field may not be null."),
    ("line one\nline two", "contains a control character (U+000A, a new line) at position 9: it is one line of text"),
], ids=["too-long", "number", "list", "null", "two-lines"])
def test_a_bad_reason_is_a_400_naming_reason_and_holds_nothing(fleet, alice, reason, words) -> None:
    job = f.make_job(fleet.ml)

    r = alice.post(f"{J}{job.pk}/hold/", {"reason": reason}, format="json")

    assert r.status_code == 400, r.content[:400]
    errors = r.json()["errors"]
    assert list(errors) == ["reason"] and words in " ".join(errors["reason"])
    job.refresh_from_db()
    assert job.hold == JobHold.NONE and not Event.objects.filter(job=job).exists()


def test_a_hold_takes_no_other_field(fleet, alice) -> None:
    job = f.make_job(fleet.ml)
    r = alice.post(f"{J}{job.pk}/hold/", {"reason": "later", "until": "friday"}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["until"]
    assert r.json()["errors"]["until"][0].startswith("Unknown field. Accepted fields: reason.")
    job.refresh_from_db()
    assert job.hold == JobHold.NONE


def test_release_still_takes_no_fields(fleet, alice) -> None:
    job = f.make_job(fleet.ml)
    alice.post(f"{J}{job.pk}/hold/", {"reason": REASON}, format="json")
    r = alice.post(f"{J}{job.pk}/release/", {"reason": "done"}, format="json")
    assert r.status_code == 400 and r.json()["errors"] == {"reason": ["release takes no fields"]}
    job.refresh_from_db()
    assert job.hold == JobHold.USER and job.hold_reason == REASON


def test_a_member_refused_an_admins_hold_is_told_its_reason(fleet, alice, admin) -> None:
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"])
    admin.post(f"{J}{job.pk}/hold/", {"reason": "waiting for maintenance"}, format="json")

    refused = alice.post(f"{J}{job.pk}/release/")
    again = alice.post(f"{J}{job.pk}/hold/", {"reason": "mine"}, format="json")

    assert refused.status_code == 403
    assert "(waiting for maintenance): only an admin may release an admin's hold" in refused.json()["detail"]
    assert again.status_code == 200 and again.json()["changed"] is False
    assert "(waiting for maintenance); nothing changed." in again.json()["detail"]
    job.refresh_from_db()
    assert (job.hold, job.hold_reason) == (JobHold.ADMIN, "waiting for maintenance")


def test_another_teams_member_cannot_hold_with_a_reason(fleet, clients) -> None:
    job = f.make_job(fleet.ml)
    r = clients["other_team"].post(f"{J}{job.pk}/hold/", {"reason": REASON}, format="json")
    assert r.status_code == 404
    job.refresh_from_db()
    assert job.hold == JobHold.NONE and job.hold_reason == ""


def test_a_reason_cannot_be_patched(fleet, alice) -> None:
    job = f.make_job(fleet.ml)
    r = alice.patch(f"{J}{job.pk}/", {"hold_reason": "sneaky"}, format="json")
    assert r.status_code == 400 and "qm hold --reason" in r.json()["errors"]["hold_reason"][0]


def test_submit_held_with_a_reason(fleet, alice) -> None:
    r = alice.post(J, {"name": "later", "gpus": 2, "hold": True, "hold_reason": REASON}, format="json")

    assert r.status_code == 201, r.content[:400]
    body = r.json()
    assert body["hold"] == "user" and body["hold_reason"] == REASON
    assert body["pending_message"].startswith(f"Held by alice: {REASON} — ")
    submitted = Event.objects.get(job_id=body["id"], kind=EventKind.JOB_SUBMITTED)
    assert submitted.message.endswith(f"; held by alice ({REASON}) until released")
    assert submitted.data["hold_reason"] == REASON


@pytest.mark.parametrize("body, words", [
    ({"hold_reason": REASON}, 'a reason is for a job submitted held: send "hold": true with it'),
    ({"hold": True, "hold_reason": 7}, "must be text, got a number"),
    ({"hold": True, "hold_reason": "y" * 201}, "at most 200 characters (201 given)"),
], ids=["without-hold", "number", "too-long"])
def test_a_bad_submit_reason_is_a_400_naming_hold_reason(fleet, alice, body, words) -> None:
    r = alice.post(J, {"name": "later", "gpus": 2, **body}, format="json")
    assert r.status_code == 400, r.content[:400]
    errors = r.json()["errors"]
    assert list(errors) == ["hold_reason"] and words in errors["hold_reason"][0]
    assert not Job.objects.filter(name="later").exists()


def test_array_hold_with_a_reason_gives_it_to_every_waiting_task(fleet, alice) -> None:
    array_id = str(uuid.uuid4())
    tasks = [f.make_job(fleet.ml, name="sweep", array_id=array_id, array_index=i) for i in range(3)]

    r = alice.post(f"{A}{array_id}/hold/", {"reason": "quota review"}, format="json")

    assert r.status_code == 200, r.content[:400]
    assert r.json()["changed"] == [t.pk for t in tasks]
    assert set(Job.objects.filter(array_id=array_id).values_list("hold_reason", "pending_words")) == {
        ("quota review", "Held by alice: quota review — until it is released it is not in the queue and holds "
                         "nothing.")}
    assert set(Event.objects.filter(job__array_id=array_id, kind=EventKind.JOB_HELD).values_list("message", flat=True)
               ) == {"Held by alice: quota review — out of the queue until released"}

    bad = alice.post(f"{A}{array_id}/hold/", {"reason": {"why": "x"}}, format="json")
    assert bad.status_code == 400 and list(bad.json()["errors"]) == ["reason"]

    alice.post(f"{A}{array_id}/release/")
    assert set(Job.objects.filter(array_id=array_id).values_list("hold", "hold_reason")) == {("", "")}


def test_a_second_hold_with_another_reason_changes_the_reason_not_the_hold(fleet, alice) -> None:
    carol = f.make_user("carol", team=fleet.ml)
    job = f.make_job(fleet.ml, submitter=carol)
    alice.post(f"{J}{job.pk}/hold/", {"reason": REASON}, format="json")
    job.refresh_from_db()
    held_at = job.held_at

    r = alice.post(f"{J}{job.pk}/hold/", {"reason": "waiting for dataset v4"}, format="json")

    assert r.status_code == 200, r.content[:400]
    assert r.json()["changed"] is True
    assert r.json()["detail"].startswith(f"Job {job.pk} stays held by alice since ")
    assert r.json()["detail"].endswith("; its reason is now: waiting for dataset v4.")
    job.refresh_from_db()
    assert (job.hold, job.held_by.username, job.held_at) == (JobHold.USER, "alice", held_at)
    assert job.hold_reason == "waiting for dataset v4"
    assert job.pending_message == ("Held by alice: waiting for dataset v4 — until it is released it is not in the "
                                   "queue and holds nothing.")
    event = Event.objects.filter(job=job, kind=EventKind.JOB_HELD).order_by("id").last()
    assert event.message.startswith(f"Hold reason changed by alice: waiting for dataset v4 (was: {REASON}); "
                                    "held by alice since ")
    assert event.data["reason"] == "waiting for dataset v4" and event.data["was_reason"] == REASON

    # The same reason again, or none: nothing changes and nothing is recorded.
    for body in ({"reason": "waiting for dataset v4"}, {}):
        again = alice.post(f"{J}{job.pk}/hold/", body, format="json")
        assert again.json()["changed"] is False
    assert Event.objects.filter(job=job, kind=EventKind.JOB_HELD).count() == 2
    job.refresh_from_db()
    assert job.hold_reason == "waiting for dataset v4"
