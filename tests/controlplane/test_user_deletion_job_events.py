"""A user deleted leaves an event on each job they submitted or held, by whoever deleted them.

Found 7 Dec: `Job.submitter` and `Job.held_by` are SET_NULL, so deleting a user (the admin's
page, `manage.py shell`) emptied them on every job of theirs, and the jobs' trails said nothing:
a job page read "submitted by –" with no event saying since when or who removed the account.
Now the user's deletion records one `job.updated` event per such job (reason
`SubmitterDeleted`, or `HolderDeleted` for a job they only held), with the same actor as the
`UserDeleted` event, in the deletion's transaction, written in bulk whatever their number.
"""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import EventKind, JobHold, JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
SHELL = "manage.py shell, run as OS user ops: no page or command said who)"  # conftest's in_a_shell




def _job_events(job: Job) -> list[Event]:
    return list(Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).order_by("id"))


def test_a_submitter_deleted_on_the_admins_page_is_an_event_on_each_of_their_jobs(fleet, boss) -> None:
    dora = f.make_user("dora", team=fleet.ml)
    waiting = f.make_job(fleet.ml, submitter=dora)
    done = f.make_job(fleet.ml, submitter=dora, state=JobState.SUCCEEDED)
    others = f.make_job(fleet.ml, submitter=fleet.users["owner"])

    assert boss.post(f"/admin/auth/user/{dora.pk}/delete/", {"post": "yes"}).status_code == 302

    [deleted] = Event.objects.filter(reason="UserDeleted")
    for job, state in ((waiting, "pending"), (done, "succeeded")):
        [event] = _job_events(job)
        assert (event.reason, event.actor) == ("SubmitterDeleted", deleted.actor) == ("SubmitterDeleted", "user:boss")
        assert event.message == "Its submitter dora was deleted by boss", event.message
        assert event.team_id == fleet.ml.pk
        assert event.data == {"changes": {"submitter": ["dora", None]}, "state": state, "user": "dora"}
        job.refresh_from_db()
        assert job.submitter_id is None
    assert _job_events(others) == []

    page = boss.get(f"/jobs/{waiting.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "submitted by –" in html and "Its submitter dora was deleted by boss" in html
    answer = client_for(fleet, "admin").get(f"/api/v1/jobs/{waiting.pk}/")
    assert answer.status_code == 200 and answer.json()["submitter"] is None
    listed = client_for(fleet, "admin").get(f"/api/v1/events/?job={waiting.pk}&kind=job.updated")
    assert [e["reason"] for e in listed.json()["results"]] == ["SubmitterDeleted"]


def test_a_submitter_deleted_in_a_shell_is_an_event_on_each_of_their_jobs_naming_the_process(fleet,
                                                                                              in_a_shell) -> None:
    dora = f.make_user("dora", team=fleet.ml)
    carl = f.make_user("carl", team=fleet.ml)
    of_dora = f.make_job(fleet.ml, submitter=dora, state=JobState.RUNNING)
    of_carl = f.make_job(fleet.ml, submitter=carl)

    dora.delete()
    get_user_model().objects.filter(username="carl").delete()  # a queryset's delete too

    [dora_gone] = _job_events(of_dora)
    [carl_gone] = _job_events(of_carl)
    said = f" (process {os.getpid()}, {SHELL}"
    assert dora_gone.actor == carl_gone.actor == "process:ops"
    assert dora_gone.message == f"Its submitter dora was deleted by process:ops{said}", dora_gone.message
    assert carl_gone.message == f"Its submitter carl was deleted by process:ops{said}"
    assert dora_gone.data["changes"] == {"submitter": ["dora", None]} and dora_gone.data["state"] == "running"
    assert dora_gone.data["process"] == "manage.py shell" and dora_gone.data["os_user"] == "ops"
    assert set(Event.objects.filter(reason="UserDeleted").values_list("actor", flat=True)) == {"process:ops"}


def test_a_holder_deleted_is_an_event_on_the_jobs_they_held_which_stay_held(fleet, boss) -> None:
    root = f.make_user("ops-admin", superuser=True)
    held = f.make_job(fleet.ml, submitter=fleet.users["owner"], hold=JobHold.ADMIN, held_by=root,
                      held_at=timezone.now())
    own = f.make_job(fleet.ml, submitter=root, hold=JobHold.USER, held_by=root, held_at=timezone.now())

    assert boss.post(f"/admin/auth/user/{root.pk}/delete/", {"post": "yes"}).status_code == 302

    [event] = _job_events(held)
    assert event.reason == "HolderDeleted" and event.actor == "user:boss"
    assert event.message == "Its holder ops-admin was deleted by boss; it stays held", event.message
    assert event.data["changes"] == {"held_by": ["ops-admin", None]}
    [both] = _job_events(own)
    assert both.reason == "SubmitterDeleted"
    assert both.message == "Its submitter and holder ops-admin was deleted by boss; it stays held", both.message
    assert both.data["changes"] == {"submitter": ["ops-admin", None], "held_by": ["ops-admin", None]}
    held.refresh_from_db()
    assert held.hold == JobHold.ADMIN and held.held_by_id is None
    assert "Held by admin an account since removed" in boss.get(f"/jobs/{held.pk}/").content.decode()



def test_the_jobs_events_are_written_in_bulk_whatever_their_number(fleet, in_a_shell) -> None:
    few, many = f.make_user("few"), f.make_user("many")
    f.finished_jobs_of(few, fleet.ml, 3)
    f.finished_jobs_of(many, fleet.ml, 1500)

    with CaptureQueriesContext(connection) as for_few:
        few.delete()
    with CaptureQueriesContext(connection) as for_many:
        many.delete()

    assert len(for_many.captured_queries) == len(for_few.captured_queries), [
        q["sql"][:120] for q in for_many.captured_queries]
    assert Event.objects.filter(reason="SubmitterDeleted").count() == 1503
    assert not Job.objects.filter(submitter__isnull=False).exists()


def test_a_deletion_rolled_back_leaves_no_job_event(fleet, in_a_shell) -> None:
    dora = f.make_user("dora")
    job = f.make_job(fleet.ml, submitter=dora)
    pk = dora.pk

    with pytest.raises(RuntimeError), transaction.atomic():
        dora.delete()
        raise RuntimeError("the script failed after the delete")

    assert _job_events(job) == []
    job.refresh_from_db()
    assert job.submitter_id == pk
