"""A refused change of a job (`PATCH jobs/{id}/`, `qm update`) names every field at fault in one
answer. It was refused in rounds: the malformed fields first (400), and only once they were fixed
what the change itself would be refused for (the changed job judged as a submit, the fields a
running job cannot change, a limit only an admin may raise); a researcher fixing one error
learnt of the next on the next try. Nothing is written and no event recorded either way."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def _waiting(client: Any) -> Job:
    r = client.post(J, {"name": "train", "gpus": 4}, format="json")
    assert r.status_code == 201, r.content[:400]
    return Job.objects.get(pk=r.json()["id"])


def _running(fleet: Any) -> Job:
    return f.make_job(fleet.ml, gpus=4, runtime_limit_s=4 * 3600, state=JobState.RUNNING,
                      started_at=timezone.now())


def refused(client: Any, job: Job, body: dict[str, Any], status: int = 400) -> dict[str, Any]:
    row = Job.objects.filter(pk=job.pk).values().get()
    events = Event.objects.count()
    r = client.patch(f"{J}{job.pk}/", body, format="json")
    assert r.status_code == status, r.content[:600]
    assert Job.objects.filter(pk=job.pk).values().get() == row  # nothing half-written
    assert Event.objects.count() == events
    return dict(r.json())


def test_a_malformed_field_and_the_changes_own_refusals_are_named_together(fleet, alice) -> None:
    job = _waiting(alice)

    body = refused(alice, job, {"cpus_per_gpu": -1, "project": "nope", "dependencies": "afterok:999999"})

    errors = body["errors"]
    assert set(errors) == {"cpus_per_gpu", "project", "dependencies.0.job"}, errors
    assert "host CPUs per GPU: 0 (none asked for) or more" in errors["cpus_per_gpu"][0]
    assert errors["project"] == ["team 'ml' has no project 'nope'"]
    assert errors["dependencies.0.job"] == ["no job 999999 you can see"]
    assert "project" in body["detail"] and "cpus_per_gpu" in body["detail"]


def test_an_unknown_field_and_a_malformed_one_are_named_together(fleet, alice) -> None:
    job = _waiting(alice)

    errors = refused(alice, job, {"gpu_per_node": 2, "cpus_per_gpu": -1, "name": "ok"})["errors"]

    assert set(errors) == {"gpu_per_node", "cpus_per_gpu"}, errors
    assert errors["gpu_per_node"][0].startswith("Unknown field.")


def test_a_shape_field_that_cannot_be_read_leaves_the_shapes_rules_unjudged(fleet, alice) -> None:
    """gpus 0 is refused by its bounds; max_gpus 2 against the job's own 4 GPUs would speak of a
    count this change means to replace: the shape waits for a readable count, the project is
    named now."""
    job = _waiting(alice)

    errors = refused(alice, job, {"gpus": 0, "min_gpus": 1, "max_gpus": 2, "project": "nope"})["errors"]

    assert set(errors) == {"gpus", "project"}, errors


def test_a_running_jobs_state_conflicts_are_named_with_the_malformed_fields(fleet, alice) -> None:
    """400 when any field is invalid, the state's refusals said with the rest, each on its field:
    a malformed count of GPUs on a running job is said to be both."""
    job = _running(fleet)
    conflict = f"job {job.pk} is running: %s changes only while it waits; to run it with another %s, cancel it and resubmit"

    errors = refused(alice, job, {"name": "  ", "gpus": 0, "priority_class": "production"})["errors"]

    assert set(errors) == {"name", "gpus", "priority_class"}, errors
    assert errors["priority_class"] == [conflict % ("priority_class", "priority_class")]
    assert len(errors["gpus"]) == 2 and errors["gpus"][1] == conflict % ("gpus", "gpus"), errors["gpus"]
    assert "a job needs at least 1 GPU" in errors["gpus"][0]


def test_a_running_jobs_shape_and_a_raised_limit_are_refused_together(fleet, alice) -> None:
    """No invalid value: 409 for the state, naming the limit only an admin may raise as well."""
    job = _running(fleet)

    body = refused(alice, job, {"gpus": 8, "runtime_limit_s": 8 * 3600}, status=409)

    assert set(body["errors"]) == {"gpus", "runtime_limit_s"}, body
    assert body["errors"]["runtime_limit_s"] == ["only an admin may raise a running job's runtime limit"]
    assert body["detail"] == (f"Job {job.pk} is running: only its name and runtime limit can change now, not GPUs. "
                              f"Job {job.pk} is running: its runtime limit may be lowered, but only an admin may "
                              "raise it (4 h now, 8 h asked).")
