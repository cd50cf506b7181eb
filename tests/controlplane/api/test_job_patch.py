"""`PATCH jobs/{id}/`: changing a job (Slurm's `scontrol update`). While it waits: its name,
project, class, limits and shape, judged exactly as a submit of the changed job; once it runs:
its name and a lower runtime limit (raised only by an admin). One `job.updated` event each."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"

#: A waiting job as submitted: 4 GPUs of any type, research class (default 4 h, max 7 d).
BASE = {"name": "train", "gpus": 4}


def _submitted(client: Any, **extra: Any) -> Job:
    r = client.post(J, {**BASE, **extra}, format="json")
    assert r.status_code == 201, r.content[:400]
    return Job.objects.get(pk=r.json()["id"])


def test_a_waiting_jobs_shape_changes_with_one_event_listing_old_and_new(fleet, alice) -> None:
    job = _submitted(alice)

    r = alice.patch(f"{J}{job.pk}/", {"gpus": 8, "gpus_per_node": 8, "runtime_limit_s": 7200}, format="json")

    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert body["changed"] is True
    assert body["changes"] == {"gpus": [4, 8], "gpus_per_node": [None, 8], "runtime_limit_s": [14400, 7200]}
    assert body["job"]["gpus"] == 8 and body["job"]["gpus_per_node"] == 8 and body["job"]["runtime_limit_s"] == 7200
    assert body["job"]["pending_code"] == "Changed"
    job.refresh_from_db()
    assert (job.gpus, job.gpus_per_node, job.runtime_limit_s) == (8, 8, 7200)
    (event,) = Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED)
    assert event.actor == "user:alice"
    assert event.message == ("Changed by alice while waiting: runtime limit 4 h → 2 h, GPUs 4 → 8, "
                             "GPUs per node none → 8")
    assert body["detail"] == f"Job {job.pk} changed: runtime limit 4 h → 2 h, GPUs 4 → 8, GPUs per node none → 8."
    assert event.data["changes"] == {"gpus": [4, 8], "gpus_per_node": [None, 8], "runtime_limit_s": [14400, 7200]}


def test_name_project_and_priority_class_change_while_waiting(fleet, alice) -> None:
    job = _submitted(alice, project="llm")

    r = alice.patch(f"{J}{job.pk}/", {"name": "renamed", "project": None, "priority_class": "production"},
                    format="json")

    assert r.status_code == 200, r.content[:400]
    assert r.json()["changes"] == {"name": ["train", "renamed"], "project": ["llm", None],
                                   "priority_class": ["research", "production"]}
    job.refresh_from_db()
    assert (job.name, job.project_id, job.priority_class.name) == ("renamed", None, "production")
    assert job.runtime_limit_s == 14400  # kept: a change of class is not a change of limit


def test_gpu_type_shorthand_and_no_change_is_no_event(fleet, alice) -> None:
    job = _submitted(alice)
    r = alice.patch(f"{J}{job.pk}/", {"gpu_type": "H100-80GB"}, format="json")
    assert r.status_code == 200 and r.json()["changes"] == {"gpu_types": [[], ["H100-80GB"]]}

    again = alice.patch(f"{J}{job.pk}/", {"gpu_types": ["H100-80GB"], "gpus": 4}, format="json")
    assert again.status_code == 200 and again.json()["changed"] is False
    assert again.json()["detail"] == f"Job {job.pk} already is as asked; nothing changed."
    assert Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).count() == 1


# The same wrong request refused with the same fields and words at submit and at PATCH.
PARITY = [
    ({"min_gpus": 8}, "elastic minimum above gpus"),
    ({"max_gpus": 8}, "elastic maximum without minimum"),
    ({"gpus": 8, "gpus_per_node": 4, "topology": "same_node"}, "same_node with fewer per node"),
    ({"gpus": 0}, "gpus below 1"),
    ({"gpus": 70000}, "gpus beyond the most a job may ask"),
    ({"gpu_types": ["B200"]}, "unknown GPU type"),
    ({"gpu_type": "H100-80GB", "gpu_types": ["A100-40GB"]}, "both type spellings"),
    ({"gpus": 1000}, "more GPUs than the fleet has"),
    ({"min_gpu_memory_gb": 200}, "more memory per GPU than any GPU has"),
    ({"priority_class": "platinum"}, "unknown priority class"),
    ({"project": "nosuch"}, "unknown project"),
    ({"runtime_limit_s": 30 * 86400}, "runtime limit beyond the class maximum"),
    ({"name": "a\nb"}, "control characters in the name"),
    ({"cpus_per_gpu": 500}, "more CPUs per GPU than a node has"),
    ({"gpus": "eight"}, "gpus not a number"),
]


@pytest.mark.parametrize("change", [c for c, _ in PARITY], ids=[i for _, i in PARITY])
def test_a_change_is_refused_as_a_submit_of_the_changed_job_is(fleet, alice, change) -> None:
    job = _submitted(alice)
    submit = {**BASE, **change}

    at_submit = alice.post(J, submit, format="json")
    r = alice.patch(f"{J}{job.pk}/", change, format="json")

    assert at_submit.status_code == 400, at_submit.content[:400]
    assert r.status_code == 400, r.content[:400]
    assert r.json()["errors"] == at_submit.json()["errors"]
    job.refresh_from_db()
    assert (job.gpus, job.name, job.gpu_types) == (4, "train", [])
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).exists()


def test_unknown_fields_are_refused_naming_them(fleet, alice) -> None:
    job = _submitted(alice)
    r = alice.patch(f"{J}{job.pk}/", {"gpu": 8, "gpus": 8}, format="json")
    assert r.status_code == 400
    assert list(r.json()["errors"]) == ["gpu"]
    assert r.json()["errors"]["gpu"][0].startswith("Unknown field. Accepted fields: checkpoint_interval_s, cpus_per_gpu")
    assert Job.objects.get(pk=job.pk).gpus == 4


@pytest.mark.parametrize("field, value, words", [
    ("team", "vision", "Read-only: a job stays in the team it was submitted for"),
    ("command", "rm -rf /", "Read-only: fixed at submit; to change it, cancel the job and resubmit it."),
    ("state", "running", "Read-only: use POST jobs/{id}/cancel/, hold/ and release/"),
    ("hold", "user", "Read-only: use POST jobs/{id}/hold/ and jobs/{id}/release/"),
    ("queue_position", 1, "Read-only: the scheduler and the job's agents set it."),
])
def test_read_only_fields_are_refused_saying_what_to_do(fleet, alice, field, value, words) -> None:
    job = _submitted(alice)
    r = alice.patch(f"{J}{job.pk}/", {field: value}, format="json")
    assert r.status_code == 400
    assert r.json()["errors"][field][0].startswith(words)


def test_an_empty_change_is_refused(fleet, alice) -> None:
    job = _submitted(alice)
    r = alice.patch(f"{J}{job.pk}/", {}, format="json")
    assert r.status_code == 400 and r.json()["errors"]["non_field_errors"][0].startswith("Nothing to change")


def test_put_is_not_allowed(fleet, alice) -> None:
    job = _submitted(alice)
    assert alice.put(f"{J}{job.pk}/", BASE, format="json").status_code == 405


def _running(fleet: Any) -> Job:
    now = timezone.now()
    return f.make_job(fleet.ml, gpus=4, runtime_limit_s=4 * 3600, state=JobState.RUNNING, started_at=now)


def test_a_running_job_may_be_renamed_and_have_its_limit_lowered(fleet, alice) -> None:
    job = _running(fleet)

    r = alice.patch(f"{J}{job.pk}/", {"name": "still-going", "runtime_limit_s": 3600}, format="json")

    assert r.status_code == 200, r.content[:400]
    job.refresh_from_db()
    assert (job.name, job.runtime_limit_s) == ("still-going", 3600)
    event = Event.objects.get(job=job, kind=EventKind.JOB_UPDATED)
    assert event.message.startswith("Changed by alice while running: name ")


def test_a_member_may_not_raise_a_running_jobs_limit(fleet, alice) -> None:
    job = _running(fleet)

    r = alice.patch(f"{J}{job.pk}/", {"runtime_limit_s": 8 * 3600}, format="json")

    assert r.status_code == 403, r.content[:400]
    assert r.json()["detail"] == (f"Job {job.pk} is running: its runtime limit may be lowered, but only an admin "
                                  "may raise it (4 h now, 8 h asked).")
    assert r.json()["errors"] == {"runtime_limit_s": ["only an admin may raise a running job's runtime limit"]}
    assert Job.objects.get(pk=job.pk).runtime_limit_s == 4 * 3600


def test_an_admin_may_raise_a_running_jobs_limit_within_its_class(fleet, admin) -> None:
    job = _running(fleet)
    assert admin.patch(f"{J}{job.pk}/", {"runtime_limit_s": 8 * 3600}, format="json").status_code == 200
    assert Job.objects.get(pk=job.pk).runtime_limit_s == 8 * 3600
    beyond = admin.patch(f"{J}{job.pk}/", {"runtime_limit_s": 8 * 86400}, format="json")
    assert beyond.status_code == 400 and list(beyond.json()["errors"]) == ["runtime_limit_s"]


@pytest.mark.parametrize("change,said", [({"gpus": 8}, "GPUs"), ({"gpu_types": ["H100-80GB"]}, "GPU types"),
                                         ({"priority_class": "production"}, "priority class"),
                                         ({"checkpoint_interval_s": 600}, "checkpoint interval")],
                         ids=["gpus", "gpu_types", "priority_class", "checkpoint_interval_s"])
def test_a_running_jobs_shape_is_refused_with_409_naming_the_field_and_state(fleet, alice, change, said) -> None:
    """The detail names the field as the change's sentence does ("not GPUs", the Change form's
    label); it said the API's name ("not gpus") until 7 Dec. The errors stay under the API's."""
    job = _running(fleet)
    (field,) = change

    r = alice.patch(f"{J}{job.pk}/", {**change, "name": "x"}, format="json")

    assert r.status_code == 409, r.content[:400]
    body = r.json()
    assert body["code"] == "conflict" and list(body["errors"]) == [field]
    assert body["errors"][field] == [f"job {job.pk} is running: {field} changes only while it waits; to run it "
                                     f"with another {field}, cancel it and resubmit"]
    assert body["detail"] == f"Job {job.pk} is running: only its name and runtime limit can change now, not {said}."
    assert Job.objects.get(pk=job.pk).name != "x"  # nothing of the request was applied


def test_a_finished_job_cannot_change(fleet, alice) -> None:
    job = f.make_job(fleet.ml, state=JobState.FAILED, finished_at=timezone.now())
    r = alice.patch(f"{J}{job.pk}/", {"name": "again"}, format="json")
    assert r.status_code == 409 and r.json()["errors"] == {"name": [f"job {job.pk} has already ended (failed)"]}


def test_another_teams_job_is_a_404(fleet, clients) -> None:
    job = f.make_job(fleet.ml)
    assert clients["other_team"].patch(f"{J}{job.pk}/", {"name": "mine"}, format="json").status_code == 404


def test_a_held_job_stays_held_and_explained_when_changed(fleet, alice) -> None:
    job = _submitted(alice, hold=True)
    r = alice.patch(f"{J}{job.pk}/", {"gpus": 2}, format="json")
    assert r.status_code == 200
    assert r.json()["job"]["pending_code"] == "Held" and r.json()["job"]["hold"] == "user"


def test_a_runtime_limit_of_days_is_said_in_days(fleet, alice) -> None:
    # the change's words said "518400 s (144.0 h)" where qm --time and the refusals say days
    job = _submitted(alice)
    r = alice.patch(f"{J}{job.pk}/", {"runtime_limit_s": 6 * 86400}, format="json")  # research: at most 7
    assert r.status_code == 200, r.content[:400]
    (event,) = Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED)
    assert event.message == "Changed by alice while waiting: runtime limit 4 h → 6 d"


def test_a_change_is_said_for_people_each_field_by_its_name_and_unit(fleet, alice) -> None:
    """The answer's `detail` (the Change form's message, `qm update`'s output) and the event
    said the API's field names and seconds: "runtime_limit_s 14400 s (4.0 h) → …". They say each
    field as the form labels it, a span as typed (exact: 2 h 30 min, not 2.5 h) and memory in GB."""
    job = _submitted(alice)
    r = alice.patch(f"{J}{job.pk}/", {"runtime_limit_s": 9000, "checkpoint_interval_s": 1800, "cpus_per_gpu": 4,
                                      "memory_gb_per_gpu": 40, "min_gpu_memory_gb": 80}, format="json")
    assert r.status_code == 200, r.content[:400]
    said = r.json()["detail"]
    assert said.startswith(f"Job {job.pk} changed: ") and "_" not in said, said
    for part in ("runtime limit 4 h → 2 h 30 min", "checkpoint interval none → 30 min", "CPUs per GPU 0 → 4",
                 "memory per GPU 0 GB → 40 GB", "min GPU memory 0 GB → 80 GB"):
        assert part in said, said
    assert r.json()["changes"]["runtime_limit_s"] == [14400, 9000]  # the data keeps the API's names and seconds


def test_a_job_that_could_never_run_is_no_longer_said_to_once_changed(fleet, alice) -> None:
    # The cycle had found it could never run as asked; changed (to a shape that may), the job
    # page said "Changed …; waiting for the next scheduling cycle to judge it" beside "Waiting
    # will not help: as asked, this job can never run" and "ETA none: it can never run as asked",
    # from the old request, until that cycle.
    job = _submitted(alice)
    Job.objects.filter(pk=job.pk).update(pending_code="CanNeverRun", pending_resolvable=False,
                                         pending_words="Can never run under its quota")

    r = alice.patch(f"{J}{job.pk}/", {"gpus": 2}, format="json")

    assert r.status_code == 200, r.content[:400]
    assert (r.json()["job"]["pending_code"], r.json()["job"]["pending_resolvable"]) == ("Changed", True)
    job.refresh_from_db()
    assert job.pending_resolvable is True
