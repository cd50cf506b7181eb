"""A running job's change naming what does not exist is a 400 on its field naming the value, the
state's conflict said after it (docs/api.md: 400 when any value is invalid, else 409). Found
walking the API as a researcher (6 Dec): `PATCH jobs/{id}/ {"gpu_type": "B200"}` of a running
job answered 409 "gpu_type changes only while it waits", never that B200 is no GPU type."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def _running(fleet: Any) -> Job:
    return f.make_job(fleet.ml, gpus=4, runtime_limit_s=4 * 3600, state=JobState.RUNNING, started_at=timezone.now())


def _conflict(job: Job, field: str) -> str:
    return f"job {job.pk} is running: {field} changes only while it waits; to run it with another {field}, " \
           "cancel it and resubmit"


@pytest.mark.parametrize("body, field", [({"gpu_type": "B200"}, "gpu_type"),
                                         ({"gpu_types": ["H100-80GB", "B200"]}, "gpu_types")],
                         ids=["gpu_type", "gpu_types"])
def test_an_unknown_gpu_type_of_a_running_job_is_a_400_naming_it(fleet, alice, body, field) -> None:
    job = _running(fleet)

    r = alice.patch(f"{J}{job.pk}/", {**body, "name": "x"}, format="json")

    assert r.status_code == 400, r.content[:400]
    errors = r.json()["errors"]
    assert list(errors) == [field]
    unknown, state = errors[field]
    assert unknown.startswith("unknown GPU type 'B200'; known types: ") and "H100-80GB" in unknown
    assert state == _conflict(job, field)
    assert Job.objects.get(pk=job.pk).name != "x"
    assert not Event.objects.filter(job=job, kind="job.updated").exists()


def test_an_unknown_class_and_project_of_a_running_job_are_400s_too(fleet, alice) -> None:
    job = _running(fleet)

    r = alice.patch(f"{J}{job.pk}/", {"priority_class": "bogus", "project": "nope"}, format="json")

    assert r.status_code == 400, r.content[:400]
    errors = r.json()["errors"]
    assert errors["priority_class"][0].startswith("unknown priority class 'bogus'; choose one of: ")
    assert errors["priority_class"][1] == _conflict(job, "priority_class")
    assert errors["project"] == [f"team '{job.team.name}' has no project 'nope'", _conflict(job, "project")]


def test_a_known_gpu_type_of_a_running_job_stays_a_409(fleet, alice) -> None:
    job = _running(fleet)
    r = alice.patch(f"{J}{job.pk}/", {"gpu_type": "H100-80GB"}, format="json")
    assert r.status_code == 409 and r.json()["errors"] == {"gpu_type": [_conflict(job, "gpu_type")]}


def test_a_malformed_field_beside_an_unknown_gpu_type_names_both(fleet, alice) -> None:
    job = _running(fleet)
    r = alice.patch(f"{J}{job.pk}/", {"gpu_type": "B200", "cpus_per_gpu": -1}, format="json")
    assert r.status_code == 400, r.content[:400]
    errors = r.json()["errors"]
    assert sorted(errors) == ["cpus_per_gpu", "gpu_type"]
    assert errors["gpu_type"][0].startswith("unknown GPU type 'B200'")
