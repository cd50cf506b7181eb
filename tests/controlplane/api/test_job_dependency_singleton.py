"""Slurm's `--dependency=singleton` through the API: a job given it starts only when no other job
of its submitter and name runs, or waits ahead of it (submitted earlier). It is an item of
`dependencies` (`{"condition": "singleton"}`, or `singleton` in the text, alone or among
others), a flag of the job (`singleton` in every answer), said in the waiting job's reason
(which job of that name it waits for) and its page, changed by PATCH like the other items;
bad input is a 400 naming the field, and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, JobDependency
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


def submit(client: Any, name: str = "train", **body: Any) -> Any:
    return client.post(JOBS, {"name": name, "gpus": 1, **body}, format="json")


def submitted(client: Any, name: str = "train", **body: Any) -> Job:
    r = submit(client, name, **body)
    assert r.status_code == 201, r.json()
    return Job.objects.get(pk=r.json()["id"])


def refused(r: Any, field: str) -> str:
    assert r.status_code == 400, r.json()
    errors = r.json()["errors"]
    assert field in errors, errors
    return " ".join(errors[field])


def alice_job(fleet: Any, **kw: Any) -> Job:
    return f.make_job(fleet.ml, submitter=fleet.users["owner"], **kw)


# --------------------------------------------------------------------------------- submit


def test_singleton_alone_waits_for_the_running_job_of_its_name_and_says_which(fleet, alice) -> None:
    running = alice_job(fleet, name="train", state=JobState.RUNNING)

    r = submit(alice, dependencies="singleton")

    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["singleton"] is True and body["dependencies"] == []
    assert body["pending_code"] == "WaitingForDependency"
    assert body["pending_message"] == (f"Waits for job {running.pk} to end (now running; same name “train”, "
                                       "singleton): until then it is not in the queue and holds nothing.")
    assert body["pending_would_start_if"] == f"job {running.pk} ends"
    assert Job.objects.get(pk=body["id"]).singleton is True
    assert not JobDependency.objects.filter(job_id=body["id"]).exists()  # a flag, not a row


def test_singleton_waits_for_the_nearest_job_of_its_name_submitted_before_it(fleet, alice) -> None:
    alice_job(fleet, name="train", state=JobState.RUNNING)
    ahead = submitted(alice, dependencies=[{"condition": "singleton"}])

    job = submitted(alice, dependencies=[{"condition": "singleton"}])

    assert job.pending_message.startswith(f"Waits for job {ahead.pk} to end (now pending; same name “train”")


def test_singleton_with_nothing_of_its_name_live_waits_only_for_the_cycle(fleet, alice) -> None:
    alice_job(fleet, name="train", state=JobState.SUCCEEDED)  # ended: holds nothing up
    alice_job(fleet, name="other", state=JobState.RUNNING)  # another name
    f.make_job(fleet.ml, name="train", state=JobState.RUNNING, submitter=f.make_user("carol", team=fleet.ml))

    job = submitted(alice, dependencies="singleton")

    assert job.singleton and job.pending_code == "Submitted"


def test_singleton_combined_with_afterok_in_the_text(fleet, alice) -> None:
    up = f.make_job(fleet.ml, name="pre", state=JobState.RUNNING)
    running = alice_job(fleet, name="train", state=JobState.RUNNING)

    r = submit(alice, dependencies=f"afterok:{up.pk},singleton")

    assert r.status_code == 201, r.json()
    assert r.json()["singleton"] is True
    assert [(d["job"], d["condition"]) for d in r.json()["dependencies"]] == [(up.pk, "afterok")]
    assert r.json()["pending_message"].startswith(
        f"Waits for job {up.pk} to succeed (now running) and job {running.pk} to end (now running; same name")


def test_singleton_that_names_a_job_is_refused_on_its_field(fleet, alice) -> None:
    up = f.make_job(fleet.ml, name="pre")
    before = Job.objects.count()

    assert "singleton names no job" in refused(
        submit(alice, dependencies=[{"job": up.pk, "condition": "singleton"}]), "dependencies.0.condition")
    assert "singleton names no job" in refused(submit(alice, dependencies=f"singleton:{up.pk}"), "dependencies")
    assert "already dependency 0" in refused(submit(alice, dependencies="singleton,singleton"),
                                             "dependencies.1.condition")
    assert Job.objects.count() == before and not Event.objects.filter(kind=EventKind.JOB_SUBMITTED).exists()


def test_a_submit_may_not_add_to_a_list_it_does_not_have(fleet, alice) -> None:
    assert "a submit gives the whole list" in refused(submit(alice, dependencies="+singleton"), "dependencies")


def test_singleton_is_not_a_field_of_its_own(fleet, alice) -> None:
    job = submitted(alice)
    r = alice.patch(f"{JOBS}{job.pk}/", {"singleton": True}, format="json")
    assert "+singleton" in refused(r, "singleton")


# ---------------------------------------------------------------------------------- change


def test_patch_gives_and_takes_singleton_in_text_and_list_forms(fleet, alice) -> None:
    running = alice_job(fleet, name="train", state=JobState.RUNNING)
    job = submitted(alice)

    r = alice.patch(f"{JOBS}{job.pk}/", {"dependencies": "+singleton"}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["changes"] == {"dependencies": ["none", "singleton"]}
    assert r.json()["job"]["singleton"] is True
    job.refresh_from_db()
    assert job.singleton and job.pending_message.startswith(f"Waits for job {running.pk} to end (now running; ")
    (event,) = Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED)
    assert event.message == "Changed by alice while waiting: dependencies none → singleton"

    r = alice.patch(f"{JOBS}{job.pk}/", {"dependencies": []}, format="json")

    assert r.status_code == 200 and r.json()["changes"] == {"dependencies": ["singleton", "none"]}
    job.refresh_from_db()
    assert not job.singleton and job.pending_code == "Changed"

    r = alice.patch(f"{JOBS}{job.pk}/", {"dependencies": [{"condition": "singleton"}]}, format="json")
    assert r.status_code == 200 and Job.objects.get(pk=job.pk).singleton


def test_a_singleton_whose_earlier_job_of_its_name_waits_on_it_is_a_cycle(fleet, alice) -> None:
    """Job A (earlier, name x) given afterok on B (a singleton named x, submitted after A): B
    waits for A, A for B, and neither could ever start: refused, and nothing written."""
    a = submitted(alice, name="x")
    b = submitted(alice, name="x", dependencies="singleton")

    r = alice.patch(f"{JOBS}{a.pk}/", {"dependencies": f"afterok:{b.pk}"}, format="json")

    message = refused(r, "dependencies.0.job")
    assert f"job {b.pk} waits on this job (job {a.pk}): a cycle" in message
    assert not JobDependency.objects.filter(job=a).exists()

    # ... and the other way round: B, already waiting on A (ahead of it), made to wait on A
    # again is no cycle; A, made a singleton, waits on nothing earlier: no cycle either.
    c = submitted(alice, name="x")
    r = alice.patch(f"{JOBS}{c.pk}/", {"dependencies": f"afterok:{a.pk}"}, format="json")
    assert r.status_code == 200, r.json()
    r = alice.patch(f"{JOBS}{b.pk}/", {"dependencies": f"+afterany:{c.pk}"}, format="json")
    # b (singleton) waits on a (ahead); c waits on a; b on c: a chain, no cycle
    assert r.status_code == 200, r.json()


def test_a_job_made_singleton_behind_a_job_waiting_on_it_is_refused(fleet, alice) -> None:
    a = submitted(alice, name="x")
    b = submitted(alice, name="x")
    assert alice.patch(f"{JOBS}{a.pk}/", {"dependencies": f"afterok:{b.pk}"}, format="json").status_code == 200

    r = alice.patch(f"{JOBS}{b.pk}/", {"dependencies": "+singleton"}, format="json")

    message = refused(r, "dependencies.0.condition")
    assert message == f"singleton: job {a.pk} waits on this job (job {b.pk}): a cycle, neither could ever start"
    assert not Job.objects.get(pk=b.pk).singleton


# -------------------------------------------------------------------------------- read side


def test_the_job_page_says_singleton_and_the_job_it_waits_for(fleet, alice) -> None:
    from django.test import Client

    running = alice_job(fleet, name="train", state=JobState.RUNNING)
    job = submitted(alice, dependencies="singleton")
    web = Client()
    web.force_login(fleet.users["owner"])

    page = web.get(f"/jobs/{job.pk}/").content.decode()

    assert 'id="runs-after-singleton"' in page
    assert "singleton: one job named “train” of its submitter at a time; it waits for" in page
    assert f'href="/jobs/{running.pk}/">job {running.pk}</a> to end' in page
    assert 'value="singleton"' in page  # the Change form's "Runs after" text
    refreshed = web.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]  # the live refresh says it too
    assert "singleton: one job named “train” of its submitter at a time; it waits for" in refreshed


def test_job_answers_say_singleton(fleet, alice) -> None:
    job = submitted(alice, dependencies="singleton")
    assert alice.get(f"{JOBS}{job.pk}/").json()["singleton"] is True
    listed = {j["id"]: j for j in alice.get(JOBS).json()["results"]}
    assert listed[job.pk]["singleton"] is True


def test_a_job_array_given_singleton_gives_it_to_every_task(fleet, alice) -> None:
    r = alice.post("/api/v1/job-arrays/", {"name": "sweep", "gpus": 1, "array": "0-3", "dependencies": "singleton"},
                   format="json")

    assert r.status_code == 201, r.json()
    tasks = Job.objects.filter(array_id=r.json()["array_id"])
    assert tasks.count() == 4 and all(t.singleton for t in tasks)
