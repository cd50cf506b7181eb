"""Adding to and removing from a waiting job's dependencies (Slurm's `scontrol update
dependency+=afterok:5` and `dependency-=afterok:5`): `PATCH jobs/{id}/` with the text led by
`+` (or `+=`) or `-` (or `-=`). The rest of the list stays as it is (a kept dependency keeps its
satisfied_at); one job.updated event says old → new; removing one that is not there, adding a
job there already with another condition, and a cycle are each a 400 naming the item's field
(its index in the edit's own list) and write nothing."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, JobDependency
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


def submitted(client: Any, **body: Any) -> Job:
    r = client.post(JOBS, {"name": "train", "gpus": 1, **body}, format="json")
    assert r.status_code == 201, r.json()
    return Job.objects.get(pk=r.json()["id"])


def patch(client: Any, job: Job, text: str) -> Any:
    return client.patch(f"{JOBS}{job.pk}/", {"dependencies": text}, format="json")


def rows(job: Job) -> list[tuple[int, str]]:
    return sorted(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition"))


def refused(r: Any, field: str) -> str:
    assert r.status_code == 400, r.json()
    errors = r.json()["errors"]
    assert field in errors, errors
    return " ".join(errors[field])


def written(job: Job) -> tuple[Any, ...]:
    """Everything a change could write: the job's row, its dependency rows, its events."""
    job = Job.objects.get(pk=job.pk)
    deps = sorted(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition", "satisfied_at"))
    return (job.singleton, job.pending_code, job.pending_words, tuple(deps), Event.objects.filter(job=job).count())


def test_plus_adds_to_the_list_and_one_event_says_old_and_new(fleet, alice) -> None:
    done = f.make_job(fleet.ml, name="done", state=JobState.SUCCEEDED, exit_code=0)
    up, more = f.make_job(fleet.ml, name="up"), f.make_job(fleet.ml, name="more")
    job = submitted(alice, dependencies=f"afterok:{done.pk}")
    met_at = JobDependency.objects.get(job=job).satisfied_at
    assert met_at is not None

    r = patch(alice, job, f"+afterany:{up.pk}:{more.pk}")

    assert r.status_code == 200, r.json()
    assert rows(job) == [(done.pk, "afterok"), (up.pk, "afterany"), (more.pk, "afterany")]
    assert JobDependency.objects.get(job=job, upstream=done).satisfied_at == met_at  # kept as it was
    new = f"afterok:{done.pk},afterany:{up.pk}:{more.pk}"
    assert r.json()["changes"] == {"dependencies": [f"afterok:{done.pk}", new]}
    (event,) = Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED)
    assert event.message == f"Changed by alice while waiting: dependencies afterok:{done.pk} → {new}"
    job.refresh_from_db()
    assert job.pending_code == "WaitingForDependency"
    assert job.pending_message.startswith(f"Waits for job {up.pk} to end (now pending) and job {more.pk} to end")


def test_plus_equals_is_the_same_and_adding_one_there_already_changes_nothing(fleet, alice) -> None:
    up = f.make_job(fleet.ml, name="up")
    job = submitted(alice, dependencies=f"afterok:{up.pk}")

    r = patch(alice, job, f"+=afterok:{up.pk}")

    assert r.status_code == 200, r.json()
    assert r.json()["changed"] is False and rows(job) == [(up.pk, "afterok")]
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).exists()


def test_minus_removes_from_the_list(fleet, alice) -> None:
    up, other = f.make_job(fleet.ml, name="up"), f.make_job(fleet.ml, name="other")
    job = submitted(alice, dependencies=f"afterok:{up.pk},afterany:{other.pk},singleton")

    r = patch(alice, job, f"-=afterany:{other.pk}")

    assert r.status_code == 200, r.json()
    assert rows(job) == [(up.pk, "afterok")]
    assert r.json()["changes"] == {"dependencies": [f"afterok:{up.pk},afterany:{other.pk},singleton",
                                                    f"afterok:{up.pk},singleton"]}

    r = patch(alice, job, f"-afterok:{up.pk},singleton")

    assert r.status_code == 200, r.json()
    job.refresh_from_db()
    assert rows(job) == [] and not job.singleton and job.pending_code == "Changed"


def test_minus_an_array_removes_each_of_its_tasks(fleet, alice) -> None:
    r = alice.post("/api/v1/job-arrays/", {"name": "shard", "gpus": 1, "array": "0-2"}, format="json")
    assert r.status_code == 201, r.json()
    array_id = r.json()["array_id"]
    tasks = sorted(Job.objects.filter(array_id=array_id).values_list("pk", flat=True))
    keep = f.make_job(fleet.ml, name="keep")
    job = submitted(alice, dependencies=f"afterok:{array_id},afterany:{keep.pk}")
    assert len(rows(job)) == 4

    r = patch(alice, job, f"-afterok:{array_id}")

    assert r.status_code == 200, r.json()
    assert rows(job) == [(keep.pk, "afterany")]
    assert all(not JobDependency.objects.filter(job=job, upstream_id=t).exists() for t in tasks)


def test_removing_one_that_is_not_there_is_refused_naming_its_field_and_writes_nothing(fleet, alice) -> None:
    up, other = f.make_job(fleet.ml, name="up"), f.make_job(fleet.ml, name="other")
    job = submitted(alice, dependencies=f"afterok:{up.pk}")
    before = written(job)

    message = refused(patch(alice, job, f"-afterok:{up.pk}:{other.pk}"), "dependencies.1.job")
    assert message == f"afterok:{other.pk} is not among job {job.pk}'s dependencies (afterok:{up.pk}); nothing to remove"
    wrong = refused(patch(alice, job, f"-afterany:{up.pk}"), "dependencies.0.condition")
    assert wrong == f"job {up.pk} is a dependency of job {job.pk} with afterok, not afterany: remove afterok:{up.pk}"
    assert "singleton is not among" in refused(patch(alice, job, "-singleton"), "dependencies.0.condition")
    assert written(job) == before  # nothing of it written, the one item that was there kept


def test_adding_a_job_there_already_with_another_condition_is_refused(fleet, alice) -> None:
    up, other = f.make_job(fleet.ml, name="up"), f.make_job(fleet.ml, name="other")
    job = submitted(alice, dependencies=f"afterok:{up.pk}")
    before = written(job)

    message = refused(patch(alice, job, f"+afterany:{other.pk}:{up.pk}"), "dependencies.1.job")

    assert f"job {up.pk} is already a dependency of job {job.pk} (afterok:{up.pk})" in message
    assert f"remove it first (-afterok:{up.pk})" in message
    assert written(job) == before and not JobDependency.objects.filter(job=job, upstream=other).exists()


def test_an_added_item_is_judged_as_a_submits_on_its_own_index(fleet, alice) -> None:
    up = f.make_job(fleet.ml, name="up")
    failed = f.make_job(fleet.ml, name="failed", state=JobState.FAILED, exit_code=3)
    job = submitted(alice, dependencies=f"afterok:{up.pk}")

    assert refused(patch(alice, job, "+afterok:999999"), "dependencies.0.job") == "no job 999999 you can see"
    assert "afterok can never be met" in refused(patch(alice, job, f"+afterany:{up.pk + 10**6},afterok:{failed.pk}"),
                                                 "dependencies.1.condition")


def test_a_cycle_made_by_an_addition_is_refused(fleet, alice) -> None:
    first = submitted(alice)
    second = submitted(alice, dependencies=f"afterok:{first.pk}")
    before = written(first)

    message = refused(patch(alice, first, f"+afterany:{second.pk}"), "dependencies.0.job")

    assert message == (f"job {second.pk} waits on this job (job {first.pk}): a cycle, neither could ever start")
    assert written(first) == before


def test_bad_edit_text_is_refused_on_dependencies(fleet, alice) -> None:
    job = submitted(alice)
    assert "names nothing to add" in refused(patch(alice, job, "+"), "dependencies")
    assert "names nothing to remove" in refused(patch(alice, job, "-=none"), "dependencies")
    assert "is not TYPE:JOB" in refused(patch(alice, job, "+afterwhen:5"), "dependencies")


def test_an_edit_of_a_running_job_is_refused_with_409(fleet, alice) -> None:
    job = submitted(alice)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    r = patch(alice, job, "+singleton")
    assert r.status_code == 409 and "dependencies" in r.json()["errors"]
