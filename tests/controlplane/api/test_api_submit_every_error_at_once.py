"""A refused submit names every field at fault in one answer, not one stage at a time: the
fields' types and bounds, the shape's rules, then the team, class, project, runtime limit and
array, then the dependencies were each judged only once everything before them passed, so a
researcher fixed a form in three or four rounds, learning of a bad dependency last. Nothing is
written either way."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import Event, Job

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"
ARRAYS = "/api/v1/job-arrays/"


def refused(client: Any, url: str, body: dict[str, Any]) -> dict[str, list[str]]:
    jobs, events = Job.objects.count(), Event.objects.count()
    r = client.post(url, body, format="json")
    assert r.status_code == 400, r.json()
    assert (Job.objects.count(), Event.objects.count()) == (jobs, events)  # nothing half-written
    return r.json()["errors"]


def test_malformed_fields_and_the_submits_own_refusals_are_named_together(alice, fleet) -> None:
    errors = refused(alice, ARRAYS, {
        "name": "sweep", "gpus": 2, "cpus_per_gpu": -1, "checkpoint_interval_s": 0,
        "runtime_limit_s": 30 * 86400, "project": "no-such-project", "array": "5-1",
        "dependencies": "afterok:999999",
    })

    assert set(errors) == {"cpus_per_gpu", "checkpoint_interval_s", "runtime_limit_s", "project", "array",
                           "dependencies.0.job"}, errors
    assert "host CPUs per GPU: 0 (none asked for) or more" in errors["cpus_per_gpu"][0]
    assert "beyond the maximum of priority class 'research'" in errors["runtime_limit_s"][0]
    assert errors["project"] == ["team 'ml' has no project 'no-such-project'"]
    assert errors["array"] == ["range 5-1 ends before it starts"]
    assert errors["dependencies.0.job"] == ["no job 999999 you can see"]


def test_a_shape_the_rules_fault_is_named_with_the_limit_and_the_dependency(alice, fleet) -> None:
    errors = refused(alice, JOBS, {
        "name": "elastic", "gpus": 8, "min_gpus": 8, "max_gpus": 4, "runtime_limit_s": 30 * 86400,
        "dependencies": "afterok:999999",
    })

    assert set(errors) == {"max_gpus", "runtime_limit_s", "dependencies.0.job"}, errors


def test_an_array_and_a_dependency_at_fault_are_named_together(alice, fleet) -> None:
    errors = refused(alice, ARRAYS, {"name": "sweep", "gpus": 1, "array": "0-3%0", "dependencies": "afterok:999999"})

    assert set(errors) == {"array", "dependencies.0.job"}, errors


def test_a_gpu_count_that_cannot_be_read_leaves_the_rules_hanging_on_it_unjudged(alice, fleet) -> None:
    """gpus 0 is refused by its bounds; min_gpus 8 above max_gpus 4 is still wrong, but "max_gpus 4
    is less than gpus 1" would speak of a count nobody asked for: the shape waits for a readable
    count, the rest (the project) is named now."""
    errors = refused(alice, JOBS, {"name": "x", "gpus": 0, "min_gpus": 2, "max_gpus": 4, "project": "nope"})

    assert set(errors) == {"gpus", "project"}, errors


def test_a_shape_this_fleet_can_never_run_is_named_with_a_bad_project(alice, fleet) -> None:
    errors = refused(alice, JOBS, {"name": "x", "gpus": 4, "gpu_type": "H100-80GB", "min_gpu_memory_gb": 200,
                                   "project": "nope"})

    assert "project" in errors and len(errors) == 2, errors
