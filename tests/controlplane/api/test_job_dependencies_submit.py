"""Submitting with dependencies (Slurm's --dependency): each refusal names the item's field, a
condition met already is recorded satisfied, a refused submit writes nothing, and the job's
`dependencies` and `dependents` read back."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from controlplane.api.serializers import JobSerializer, job_payload
from controlplane.choices import JobState
from controlplane.models import Event, Job, JobDependency
from controlplane.services.dependencies import MAX_DEPENDENCIES
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"
ARRAYS = "/api/v1/job-arrays/"


def submit(client: APIClient, **body: Any) -> Any:
    return client.post(JOBS, {"name": "train", "gpus": 1, **body}, format="json")


def upstream(fleet: Any, state: str = JobState.PENDING, team: Any = None, **kw: Any) -> Job:
    return f.make_job(team or fleet.ml, state=state, **kw)


def refused(r: Any, field: str) -> str:
    assert r.status_code == 400, r.json()
    errors = r.json()["errors"]
    assert field in errors, errors
    return " ".join(errors[field])


def nothing_written(before: tuple[int, int, int]) -> bool:
    return (Job.objects.count(), JobDependency.objects.count(), Event.objects.count()) == before


def counts() -> tuple[int, int, int]:
    return Job.objects.count(), JobDependency.objects.count(), Event.objects.count()


def test_a_dependency_is_recorded_with_afterok_by_default(fleet, alice) -> None:
    up = upstream(fleet)
    r = submit(alice, dependencies=[{"job": up.pk}])

    assert r.status_code == 201, r.json()
    dep = JobDependency.objects.get(job_id=r.json()["id"])
    assert (dep.upstream_id, dep.condition, dep.satisfied_at) == (up.pk, "afterok", None)
    assert r.json()["dependencies"] == [{"job": up.pk, "condition": "afterok", "satisfied_at": None, "state": "pending"}]
    assert r.json()["dependents"] == []


def test_an_unknown_job_is_refused_on_its_item(fleet, alice) -> None:
    up = upstream(fleet)
    before = counts()
    r = submit(alice, dependencies=[{"job": up.pk}, {"job": 999_999, "condition": "afterany"}])

    assert refused(r, "dependencies.1.job") == "no job 999999 you can see"
    assert nothing_written(before)


def test_another_teams_job_is_refused_as_if_it_did_not_exist(fleet, alice) -> None:
    theirs = upstream(fleet, team=fleet.vision)
    r = submit(alice, dependencies=[{"job": theirs.pk}])

    assert refused(r, "dependencies.0.job") == f"no job {theirs.pk} you can see"


def test_an_admin_may_depend_on_any_teams_job(fleet, admin) -> None:
    theirs = upstream(fleet, team=fleet.vision)
    r = submit(admin, team="ml", dependencies=[{"job": theirs.pk}])

    assert r.status_code == 201, r.json()


def test_a_duplicate_upstream_is_refused_on_the_second_item(fleet, alice) -> None:
    up = upstream(fleet)
    r = submit(alice, dependencies=[{"job": up.pk}, {"job": up.pk, "condition": "afterany"}])

    assert "already dependency 0" in refused(r, "dependencies.1.job")


@pytest.mark.parametrize(("state", "exit_code", "condition", "words"), [
    (JobState.FAILED, 3, "afterok", "failed (exit 3): afterok can never be met"),
    (JobState.CANCELLED, None, "afterok", "was cancelled: afterok can never be met"),
    (JobState.TIMED_OUT, None, "afterok", "timed out: afterok can never be met"),
    (JobState.UNSCHEDULABLE, None, "afterok", "can never run: afterok can never be met"),
    (JobState.SUCCEEDED, 0, "afternotok", "succeeded: afternotok can never be met"),
], ids=["afterok-failed", "afterok-cancelled", "afterok-timed-out", "afterok-never-runs", "afternotok-succeeded"])
def test_a_condition_that_can_never_be_met_is_refused_with_the_sentence(
    fleet, alice, state: str, exit_code: int | None, condition: str, words: str,
) -> None:
    up = upstream(fleet, state=state, exit_code=exit_code)
    before = counts()
    r = submit(alice, dependencies=[{"job": up.pk, "condition": condition}])

    assert refused(r, "dependencies.0.condition") == f"job {up.pk} {words} (this job would run only after it " + {
        "afterok": "succeeded)", "afternotok": "failed)"}[condition]
    assert nothing_written(before)


@pytest.mark.parametrize(("state", "condition"), [
    (JobState.SUCCEEDED, "afterok"), (JobState.RUNNING, "after"), (JobState.FAILED, "afternotok"),
    (JobState.CANCELLED, "afterany"), (JobState.CANCELLED, "after"),
], ids=["afterok-succeeded", "after-running", "afternotok-failed", "afterany-cancelled", "after-cancelled"])
def test_a_condition_met_already_is_recorded_satisfied_at_once(fleet, alice, state: str, condition: str) -> None:
    up = upstream(fleet, state=state)
    r = submit(alice, dependencies=[{"job": up.pk, "condition": condition}])

    assert r.status_code == 201, r.json()
    assert JobDependency.objects.get(job_id=r.json()["id"]).satisfied_at is not None
    assert r.json()["dependencies"][0]["satisfied_at"] is not None


def test_after_on_a_job_requeued_after_it_started_is_met(fleet, alice) -> None:
    up = upstream(fleet, requeue_count=1)  # pending again: preempted once
    r = submit(alice, dependencies=[{"job": up.pk, "condition": "after"}])

    assert JobDependency.objects.get(job_id=r.json()["id"]).satisfied_at is not None


def test_a_condition_not_met_yet_waits_and_says_so_from_the_submit_on(fleet, alice) -> None:
    up = upstream(fleet, state=JobState.RUNNING)
    r = submit(alice, dependencies=[{"job": up.pk, "condition": "afterok"}])

    assert JobDependency.objects.get(job_id=r.json()["id"]).satisfied_at is None
    # the engine's own words, before the first cycle says them
    assert r.json()["pending_code"] == "WaitingForDependency"
    assert r.json()["pending_message"] == (f"Waits for job {up.pk} to succeed (now running): until then it is not "
                                           "in the queue and holds nothing.")
    assert r.json()["pending_would_start_if"] == f"job {up.pk} succeeds"
    assert Job.objects.get(pk=r.json()["id"]).pending_code == "WaitingForDependency"


def test_a_job_whose_dependencies_are_all_met_waits_for_the_cycle_as_any_other(fleet, alice) -> None:
    up = upstream(fleet, state=JobState.SUCCEEDED)
    r = submit(alice, dependencies=[{"job": up.pk}])

    assert (r.json()["pending_code"], r.json()["pending_message"]) == (
        "Submitted", "Waiting for the next scheduling cycle")


def test_an_unknown_condition_is_refused_on_its_item(fleet, alice) -> None:
    up = upstream(fleet)
    r = submit(alice, dependencies=[{"job": up.pk}, {"job": up.pk + 1, "condition": "afterwards"}])

    assert "afterwards" in refused(r, "dependencies.1.condition")


def test_an_item_naming_neither_job_nor_array_is_refused(fleet, alice) -> None:
    assert "one of the two" in refused(submit(alice, dependencies=[{"condition": "afterok"}]), "dependencies.0.job")


def test_an_unknown_key_in_an_item_is_refused_on_it(fleet, alice) -> None:
    up = upstream(fleet)
    refused(submit(alice, dependencies=[{"job": up.pk, "type": "afterok"}]), "dependencies.0.type")


def test_more_than_the_cap_is_refused(fleet, alice) -> None:
    ups = [upstream(fleet) for _ in range(MAX_DEPENDENCIES + 1)]
    before = counts()
    r = submit(alice, dependencies=[{"job": u.pk} for u in ups])

    assert str(MAX_DEPENDENCIES) in refused(r, "dependencies")
    assert nothing_written(before)


def test_a_refusal_after_a_valid_item_writes_nothing(fleet, alice) -> None:
    """The job is inserted only after every item passed; and even a refusal raised later would
    roll back the job with its dependency rows and events (one transaction)."""
    ok, failed = upstream(fleet), upstream(fleet, state=JobState.FAILED, exit_code=1)
    before = counts()
    r = submit(alice, dependencies=[{"job": ok.pk}, {"job": failed.pk}])

    refused(r, "dependencies.1.condition")
    assert nothing_written(before)


def test_a_dependency_on_a_whole_array_waits_on_every_task(fleet, alice) -> None:
    array = alice.post(ARRAYS, {"name": "sweep", "gpus": 1, "array": "0-3"}, format="json").json()
    r = submit(alice, dependencies=[{"array": str(array["array_id"]), "condition": "afterany"}])

    assert r.status_code == 201, r.json()
    assert sorted(JobDependency.objects.filter(job_id=r.json()["id"]).values_list("upstream_id", flat=True)) == \
        sorted(array["job_ids"])
    assert sorted(d["job"] for d in r.json()["dependencies"]) == sorted(array["job_ids"])


def test_an_array_with_one_failed_task_refuses_afterok_naming_the_task(fleet, alice) -> None:
    array = alice.post(ARRAYS, {"name": "sweep", "gpus": 1, "array": "0-2"}, format="json").json()
    bad = array["job_ids"][1]
    Job.objects.filter(pk=bad).update(state=JobState.FAILED, exit_code=2)

    r = submit(alice, dependencies=[{"array": str(array["array_id"])}])
    assert refused(r, "dependencies.0.condition").startswith(f"job {bad} failed (exit 2)")


def test_an_unknown_array_is_refused_on_its_item(fleet, alice) -> None:
    r = submit(alice, dependencies=[{"array": "00000000-0000-0000-0000-000000000000"}])
    assert refused(r, "dependencies.0.array").startswith("no job array")


def test_an_array_submitted_with_a_dependency_gives_it_to_every_task(fleet, alice) -> None:
    up = upstream(fleet)
    r = alice.post(ARRAYS, {"name": "eval", "gpus": 1, "array": "0-2", "dependencies": [{"job": up.pk}]}, format="json")

    assert r.status_code == 201, r.json()
    assert sorted(JobDependency.objects.filter(upstream=up).values_list("job_id", flat=True)) == sorted(r.json()["job_ids"])


def test_the_upstream_lists_its_dependents(fleet, alice) -> None:
    up = upstream(fleet)
    a = submit(alice, dependencies=[{"job": up.pk}]).json()["id"]
    b = submit(alice, dependencies=[{"job": up.pk, "condition": "afterany"}]).json()["id"]

    detail = alice.get(f"{JOBS}{up.pk}/").json()
    listed = {j["id"]: j for j in alice.get(JOBS).json()["results"]}
    assert detail["dependents"] == [a, b] == listed[up.pk]["dependents"]
    assert listed[b]["dependencies"][0]["condition"] == "afterany"


def test_the_fast_payload_matches_the_documented_serializer_with_dependencies(fleet, alice) -> None:
    up = upstream(fleet, state=JobState.SUCCEEDED)
    pk = submit(alice, dependencies=[{"job": up.pk}]).json()["id"]
    stored = Job.objects.select_related("team", "project", "submitter", "priority_class", "place").get(pk=pk)
    stored.gpus_held = 0
    assert job_payload(stored) == dict(JobSerializer(stored).data)


def test_the_job_list_reads_dependencies_in_one_query_whatever_the_page(fleet, alice) -> None:
    def list_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert alice.get(JOBS).status_code == 200
        return len(queries)

    up = upstream(fleet)
    submit(alice, dependencies=[{"job": up.pk}])
    few = list_queries()
    for _ in range(5):
        submit(alice, dependencies=[{"job": upstream(fleet).pk}])
    assert list_queries() == few
