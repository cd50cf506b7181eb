"""Slurm's `aftercorr:ARRAY`: each task of a job array submitted with it waits for the task of
the same index of the array named to succeed (afterok, task by task); a task with no
counterpart does not wait (as Slurm clears such a dependency). Only for an array's submit (or a
change of one of its tasks) and on an array: anything else is a 400 naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, JobDependency
from controlplane.services import dependencies
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

ARRAYS = "/api/v1/job-arrays/"


def array(client: Any, indices: str, name: str = "sweep", **body: Any) -> tuple[str, dict[int, Job]]:
    r = client.post(ARRAYS, {"name": name, "gpus": 1, "array": indices, **body}, format="json")
    assert r.status_code == 201, r.json()
    tasks = {t.array_index: t for t in Job.objects.filter(array_id=r.json()["array_id"])}
    return r.json()["array_id"], tasks


def waits_on(job: Job) -> list[tuple[int, str]]:
    return sorted(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition"))


def end(job: Job, state: str, exit_code: int | None = None) -> None:
    at = timezone.now()
    Job.objects.filter(pk=job.pk).update(state=state, exit_code=exit_code, finished_at=at)
    dependencies.ended([dependencies.Change(job.pk, state, exit_code)], at=at, actor="agent")


def test_each_task_waits_for_its_counterpart_and_one_without_waits_for_none(fleet, alice) -> None:
    up_id, up = array(alice, "0-3", name="prep")

    _, tasks = array(alice, "0-5", dependencies=f"aftercorr:{up_id}")

    for i in range(4):
        assert waits_on(tasks[i]) == [(up[i].pk, "afterok")]
        assert tasks[i].pending_code == "WaitingForDependency"
        assert tasks[i].pending_message == (f"Waits for job {up[i].pk} to succeed (now pending): until then it is not "
                                            "in the queue and holds nothing.")
    for i in (4, 5):  # no task 4 or 5 upstream: nothing to wait for
        assert waits_on(tasks[i]) == [] and tasks[i].pending_code == "Submitted"
    assert dependencies.waits([t.pk for t in tasks.values()]) == {
        tasks[i].pk: [(up[i].pk, "afterok", "pending")] for i in range(4)}


def test_a_counterpart_failing_cancels_its_task_only(fleet, alice) -> None:
    up_id, up = array(alice, "0-2", name="prep")
    _, tasks = array(alice, "0-2", dependencies=f"aftercorr:{up_id}")

    end(up[1], JobState.FAILED, 4)
    end(up[0], JobState.SUCCEEDED)

    states = {i: Job.objects.get(pk=t.pk).state for i, t in tasks.items()}
    assert states == {0: JobState.PENDING, 1: JobState.CANCELLED, 2: JobState.PENDING}
    assert Job.objects.get(pk=tasks[1].pk).pending_message == (
        f"Job {up[1].pk} failed (exit 4): this job was to run only after it succeeded (afterok), so it is cancelled.")
    assert Event.objects.filter(job=tasks[0], reason=dependencies.SATISFIED).exists()
    assert dependencies.waits([tasks[0].pk]) == {}  # task 0 is in line
    assert dependencies.waits([tasks[2].pk]) == {tasks[2].pk: [(up[2].pk, "afterok", "pending")]}


def test_with_other_dependencies_every_task_waits_on_those_too(fleet, alice) -> None:
    pre = f.make_job(fleet.ml, name="pre", state=JobState.RUNNING)
    up_id, up = array(alice, "0-1", name="prep")

    _, tasks = array(alice, "0-1", dependencies=f"afterok:{pre.pk},aftercorr:{up_id}")

    assert waits_on(tasks[0]) == sorted([(pre.pk, "afterok"), (up[0].pk, "afterok")])
    assert waits_on(tasks[1]) == sorted([(pre.pk, "afterok"), (up[1].pk, "afterok")])
    assert tasks[1].pending_message.startswith(f"Waits for job {pre.pk} to succeed (now running) and job {up[1].pk} "
                                               "to succeed (now pending)")


def test_a_task_named_by_job_id_stands_for_its_array(fleet, alice) -> None:
    _, up = array(alice, "0-1", name="prep")

    _, tasks = array(alice, "0-1", dependencies=[{"job": up[1].pk, "condition": "aftercorr"}])

    assert waits_on(tasks[0]) == [(up[0].pk, "afterok")] and waits_on(tasks[1]) == [(up[1].pk, "afterok")]


def test_refusals_name_the_field_and_write_nothing(fleet, alice) -> None:
    up_id, up = array(alice, "0-1", name="prep")
    plain = f.make_job(fleet.ml, name="plain")
    before = Job.objects.count()

    r = alice.post("/api/v1/jobs/", {"name": "one", "gpus": 1, "dependencies": f"aftercorr:{up_id}"}, format="json")
    assert r.status_code == 400
    assert "aftercorr is for a job array" in r.json()["errors"]["dependencies.0.condition"][0]

    r = alice.post(ARRAYS, {"name": "s", "gpus": 1, "array": "0-1", "dependencies": f"aftercorr:{plain.pk}"},
                   format="json")
    assert r.status_code == 400
    assert r.json()["errors"]["dependencies.0.job"] == [
        f"job {plain.pk} is no task of a job array: aftercorr waits on the task of the same index of an array "
        "(give the array's id, or one of its tasks)"]

    r = alice.post(ARRAYS, {"name": "s", "gpus": 1, "array": "0-1", "dependencies": f"aftercorr:{up_id}?afterok:1"},
                   format="json")
    assert r.status_code == 400 and "aftercorr cannot be one of any-of" in r.json()["errors"]["dependencies"][0]

    Job.objects.filter(pk=up[1].pk).update(state=JobState.FAILED, exit_code=2)
    r = alice.post(ARRAYS, {"name": "s", "gpus": 1, "array": "0-1", "dependencies": f"aftercorr:{up_id}"},
                   format="json")
    assert r.status_code == 400
    assert r.json()["errors"]["dependencies.0.condition"] == [
        f"job {up[1].pk} (task 1 of its array) failed (exit 2): aftercorr can never be met for task 1 (it would run "
        "only after that task succeeded)"]
    # ... while an array without a task 1 does not care
    _, tasks = array(alice, "0", dependencies=f"aftercorr:{up_id}")
    assert waits_on(tasks[0]) == [(up[0].pk, "afterok")]
    assert Job.objects.count() == before + 1
    assert not Event.objects.filter(kind=EventKind.JOB_SUBMITTED, job__name="s").exists()


def test_a_task_changed_to_aftercorr_waits_on_its_counterpart(fleet, alice) -> None:
    up_id, up = array(alice, "0-2", name="prep")
    _, tasks = array(alice, "0-2")
    plain = f.make_job(fleet.ml, name="plain", submitter=fleet.users["owner"])

    r = alice.patch(f"/api/v1/jobs/{tasks[2].pk}/", {"dependencies": f"aftercorr:{up_id}"}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["changes"] == {"dependencies": ["none", f"afterok:{up[2].pk}"]}
    assert waits_on(tasks[2]) == [(up[2].pk, "afterok")]
    r = alice.patch(f"/api/v1/jobs/{tasks[2].pk}/", {"dependencies": f"-aftercorr:{up_id}"}, format="json")
    assert r.status_code == 200, r.json()
    assert waits_on(tasks[2]) == []
    r = alice.patch(f"/api/v1/jobs/{plain.pk}/", {"dependencies": f"aftercorr:{up_id}"}, format="json")
    assert r.status_code == 400 and "aftercorr is for a job array" in r.json()["errors"]["dependencies.0.condition"][0]
