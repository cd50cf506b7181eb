"""A refusal about the GPU types names the field the body sent: `gpu_type` is the shorthand of
`gpu_types`, and the rules judge the list, so `{"gpu_type": "B200"}` was refused on a
`gpu_types` the client never sent ("gpu_types: unknown GPU type 'B200'"), on a submit, an
array's submit and a change alike. A body that sends `gpu_types` is answered on it as before."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"
UNKNOWN = "unknown GPU type 'B200'; known types: "


@pytest.mark.parametrize("path,extra", [(J, {}), ("/api/v1/job-arrays/", {"array": "0-3"})], ids=["job", "array"])
def test_a_submit_is_refused_on_gpu_type_as_sent(fleet, alice, path, extra) -> None:
    r = alice.post(path, {"name": "x", "gpus": 1, "gpu_type": "B200", **extra}, format="json")

    assert r.status_code == 400, r.content
    errors = r.json()["errors"]
    assert list(errors) == ["gpu_type"] and errors["gpu_type"][0].startswith(UNKNOWN)
    assert r.json()["detail"].startswith("Invalid request. gpu_type: " + UNKNOWN)
    assert not Job.objects.exists()


def test_with_a_malformed_field_beside_it_too(fleet, alice) -> None:
    r = alice.post(J, {"name": "x", "gpus": 1, "gpu_type": "B200", "cpus_per_gpu": -1}, format="json")

    assert r.status_code == 400
    assert sorted(r.json()["errors"]) == ["cpus_per_gpu", "gpu_type"]


def test_gpu_types_as_sent_is_answered_on_gpu_types(fleet, alice) -> None:
    r = alice.post(J, {"name": "x", "gpus": 1, "gpu_types": ["B200"]}, format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["gpu_types"]


def test_a_change_is_refused_on_gpu_type_as_sent(fleet, alice) -> None:
    job = alice.post(J, {"name": "x", "gpus": 1}, format="json").json()["id"]

    r = alice.patch(f"{J}{job}/", {"gpu_type": "B200"}, format="json")

    assert r.status_code == 400, r.content
    assert list(r.json()["errors"]) == ["gpu_type"] and r.json()["errors"]["gpu_type"][0].startswith(UNKNOWN)
    assert "gpu_types" not in r.json()["detail"]


def test_a_running_jobs_conflict_names_gpu_type_as_sent(fleet, alice) -> None:
    from django.utils import timezone

    from controlplane.choices import JobState
    from tests.controlplane import factories as f

    job = f.make_job(fleet.ml, gpus=4, runtime_limit_s=3600, state=JobState.RUNNING, started_at=timezone.now())

    r = alice.patch(f"{J}{job.pk}/", {"gpu_type": "H100-80GB"}, format="json")

    assert r.status_code == 409, r.content
    # the sentence names it for people, as the Change form labels it; the errors keep the name sent
    assert r.json()["detail"] == f"Job {job.pk} is running: only its name and runtime limit can change now, not GPU types."
    assert r.json()["errors"] == {"gpu_type": [f"job {job.pk} is running: gpu_type changes only while it waits; to run "
                                               "it with another gpu_type, cancel it and resubmit"]}
