"""A job field's number out of its bounds is refused in the field's unit and meaning: `qm submit
--time 0` and `--gpus 0` were told DRF's "Ensure this value is greater than or equal to 1.",
which says neither that the runtime limit is in seconds nor what the 1 counts. Submit (jobs and
arrays) and change (PATCH) alike, as the change types each field as the submit does."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"

BOUNDS = [
    ({"gpus": 0}, "gpus", "a job needs at least 1 GPU"),
    ({"gpus": 70_000}, "gpus", "a job may ask for at most 65,536 GPUs"),
    ({"gpus": 8, "gpus_per_node": 0}, "gpus_per_node", "at least 1 GPU on each node of the gang"),
    ({"gpus": 8, "gpus_per_node": 2000}, "gpus_per_node", "at most 1,024 GPUs on one node"),
    ({"gpus": 8, "min_gpus": 0, "max_gpus": 8}, "min_gpus", "an elastic job runs on at least 1 GPU"),
    ({"gpus": 8, "min_gpus": 1, "max_gpus": 0}, "max_gpus", "an elastic job grows to at least 1 GPU"),
    ({"gpus": 1, "runtime_limit_s": 0}, "runtime_limit_s", "a runtime limit is at least 1 s"),
    ({"gpus": 1, "checkpoint_interval_s": 0}, "checkpoint_interval_s", "a checkpoint interval is at least 1 s"),
    ({"gpus": 1, "cpus_per_gpu": -1}, "cpus_per_gpu", "host CPUs per GPU: 0 (none asked for) or more"),
    ({"gpus": 1, "memory_gb_per_gpu": -1}, "memory_gb_per_gpu", "GB of host memory per GPU: 0 (none asked for) or more"),
    ({"gpus": 1, "min_gpu_memory_gb": -1}, "min_gpu_memory_gb", "GB of device memory per GPU: 0 (none asked for) or more"),
]


@pytest.mark.parametrize(("body", "field", "words"), BOUNDS, ids=[b[1] + str(list(b[0].values())[-1]) for b in BOUNDS])
def test_a_submit_out_of_bounds_is_told_the_fields_unit_and_meaning(alice, fleet, body, field, words) -> None:
    answer = alice.post(JOBS, {"name": "x", **body}, format="json")

    assert answer.status_code == 400, answer.json()
    said = " ".join(answer.json()["errors"][field])
    assert words in said and "Ensure this value" not in said, said


def test_a_change_out_of_bounds_is_told_alike(alice, fleet) -> None:
    job = alice.post(JOBS, {"name": "x", "gpus": 1}, format="json").json()

    answer = alice.patch(f"{JOBS}{job['id']}/", {"gpus": 0, "runtime_limit_s": 0}, format="json")

    assert answer.status_code == 400, answer.json()
    assert answer.json()["errors"]["gpus"] == ["a job needs at least 1 GPU"]
    assert answer.json()["errors"]["runtime_limit_s"] == ["a runtime limit is at least 1 s"]


def test_a_role_and_an_array_limit_out_of_bounds_are_told_alike(alice, fleet) -> None:
    roles = [{"name": "learner", "count": 0, "gpus_per_member": 0}]
    answer = alice.post(JOBS, {"name": "x", "gpus": 1, "roles": roles}, format="json")
    assert answer.status_code == 400, answer.json()
    errors = answer.json()["errors"]
    assert errors["roles.0.count"] == ["a role has at least 1 member"], errors
    assert errors["roles.0.gpus_per_member"] == ["at least 1 GPU for each member"], errors

    answer = alice.post("/api/v1/job-arrays/", {"name": "x", "gpus": 1, "array": "0-3", "array_task_limit": 0},
                        format="json")
    assert answer.status_code == 400, answer.json()
    assert answer.json()["errors"]["array_task_limit"] == ["at least 1 task holding GPUs at once"]
