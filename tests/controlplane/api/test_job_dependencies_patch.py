"""Changing a waiting job's dependencies (`PATCH jobs/{id}/` with `dependencies`, Slurm's
`scontrol update job=X dependency=...`): the whole list is replaced (`[]` or `none` removes
them), judged as a submit's with each bad item refused on its own field, a cycle refused, a
started or ended job refused with 409; a refused change writes nothing; conditions met already
are recorded met; the job's wait and one job.updated event say old → new."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import DependencyCondition, EventKind, JobState
from controlplane.models import Event, Job, JobDependency
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


def submitted(client: Any, **body: Any) -> Job:
    r = client.post(JOBS, {"name": "train", "gpus": 1, **body}, format="json")
    assert r.status_code == 201, r.json()
    return Job.objects.get(pk=r.json()["id"])


def patch(client: Any, job: Job, dependencies: Any, **more: Any) -> Any:
    return client.patch(f"{JOBS}{job.pk}/", {"dependencies": dependencies, **more}, format="json")


def rows(job: Job) -> list[tuple[int, str]]:
    return sorted(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition"))


def updates(job: Job) -> list[Event]:
    return list(Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).order_by("id"))


def refused(r: Any, field: str) -> str:
    assert r.status_code == 400, r.json()
    errors = r.json()["errors"]
    assert field in errors, errors
    return " ".join(errors[field])


def written(job: Job) -> tuple[Any, ...]:
    """Everything a change could write: the job's row, its dependency rows, its events."""
    job = Job.objects.get(pk=job.pk)
    deps = sorted(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition", "satisfied_at"))
    return (job.gpus, job.pending_code, job.pending_words, tuple(deps), Event.objects.filter(job=job).count())


# ------------------------------------------------------------------------------- replacing


def test_the_list_is_replaced_and_one_event_says_old_and_new(fleet, alice) -> None:
    first, second, third = (f.make_job(fleet.ml, name=n) for n in ("first", "second", "third"))
    job = submitted(alice, dependencies=[{"job": first.pk}])

    r = patch(alice, job, [{"job": second.pk, "condition": "afterany"}, {"job": third.pk}])

    assert r.status_code == 200, r.json()
    assert rows(job) == [(second.pk, "afterany"), (third.pk, "afterok")]
    new = f"afterok:{third.pk},afterany:{second.pk}"
    assert r.json()["changes"] == {"dependencies": [f"afterok:{first.pk}", new]}
    assert r.json()["detail"] == f"Job {job.pk} changed: dependencies afterok:{first.pk} → {new}."
    assert [d["job"] for d in r.json()["job"]["dependencies"]] == [second.pk, third.pk]
    (event,) = updates(job)
    assert event.actor == "user:alice"
    assert event.message == f"Changed by alice while waiting: dependencies afterok:{first.pk} → {new}"
    assert event.data["changes"] == {"dependencies": [f"afterok:{first.pk}", new]}


def test_an_empty_list_removes_them_all_and_the_job_waits_for_the_cycle(fleet, alice) -> None:
    up = f.make_job(fleet.ml, name="up", state=JobState.RUNNING)
    job = submitted(alice, dependencies=[{"job": up.pk}])
    assert job.pending_code == "WaitingForDependency"

    r = patch(alice, job, [])

    assert r.status_code == 200, r.json()
    assert rows(job) == []
    assert r.json()["changes"] == {"dependencies": [f"afterok:{up.pk}", "none"]}
    assert r.json()["job"]["pending_code"] == "Changed"
    assert updates(job)[0].message == f"Changed by alice while waiting: dependencies afterok:{up.pk} → none"


def test_slurms_text_is_taken_as_the_list_and_none_removes_them(fleet, alice) -> None:
    a, b, c = (f.make_job(fleet.ml) for _ in range(3))
    job = submitted(alice)

    r = patch(alice, job, f"afterok:{a.pk}:{b.pk},afterany:{c.pk}")
    assert r.status_code == 200, r.json()
    assert rows(job) == [(a.pk, "afterok"), (b.pk, "afterok"), (c.pk, "afterany")]

    assert patch(alice, job, "none").status_code == 200
    assert rows(job) == []


def test_the_same_dependencies_again_change_nothing(fleet, alice) -> None:
    up = f.make_job(fleet.ml)
    job = submitted(alice, dependencies=[{"job": up.pk, "condition": "afterany"}])

    r = patch(alice, job, f"afterany:{up.pk}")

    assert r.status_code == 200 and r.json()["changed"] is False
    assert updates(job) == []


def test_a_kept_dependency_keeps_when_it_was_met(fleet, alice) -> None:
    done, other = f.make_job(fleet.ml, state=JobState.SUCCEEDED, exit_code=0), f.make_job(fleet.ml)
    job = submitted(alice, dependencies=[{"job": done.pk}])
    met_at = JobDependency.objects.get(job=job).satisfied_at
    assert met_at is not None

    assert patch(alice, job, [{"job": done.pk}, {"job": other.pk}]).status_code == 200

    assert JobDependency.objects.get(job=job, upstream=done).satisfied_at == met_at
    assert JobDependency.objects.get(job=job, upstream=other).satisfied_at is None


# ------------------------------------------------------------------- met at the change's time


@pytest.mark.parametrize(("state", "condition"), [
    (JobState.SUCCEEDED, "afterok"), (JobState.RUNNING, "after"), (JobState.FAILED, "afternotok"),
    (JobState.CANCELLED, "afterany"),
], ids=["afterok-succeeded", "after-running", "afternotok-failed", "afterany-cancelled"])
def test_a_condition_met_already_is_recorded_met_and_the_job_does_not_wait(fleet, alice, state, condition) -> None:
    up = f.make_job(fleet.ml, state=state, exit_code=0 if state == JobState.SUCCEEDED else None)
    job = submitted(alice)

    r = patch(alice, job, [{"job": up.pk, "condition": condition}])

    assert r.status_code == 200, r.json()
    assert JobDependency.objects.get(job=job).satisfied_at is not None
    assert r.json()["job"]["pending_code"] == "Changed"


def test_a_condition_not_met_yet_makes_the_job_wait_at_once_in_the_engines_words(fleet, alice) -> None:
    up = f.make_job(fleet.ml, state=JobState.RUNNING)
    job = submitted(alice)

    r = patch(alice, job, [{"job": up.pk}])

    assert JobDependency.objects.get(job=job).satisfied_at is None
    assert r.json()["job"]["pending_code"] == "WaitingForDependency"
    assert r.json()["job"]["pending_message"] == (f"Waits for job {up.pk} to succeed (now running): until then it "
                                                  "is not in the queue and holds nothing.")


@pytest.mark.parametrize(("state", "exit_code", "condition", "words"), [
    (JobState.FAILED, 3, "afterok", "failed (exit 3): afterok can never be met"),
    (JobState.SUCCEEDED, 0, "afternotok", "succeeded: afternotok can never be met"),
], ids=["afterok-failed", "afternotok-succeeded"])
def test_a_condition_that_can_never_be_met_is_refused_not_cancelling_the_job(
    fleet, alice, state: str, exit_code: int, condition: str, words: str,
) -> None:
    up = f.make_job(fleet.ml, state=state, exit_code=exit_code)
    job = submitted(alice)
    before = written(job)

    r = patch(alice, job, [{"job": up.pk, "condition": condition}])

    assert words in refused(r, "dependencies.0.condition")
    assert written(job) == before
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


# ----------------------------------------------------------------- refusals, field by field


def test_each_bad_item_is_refused_on_its_own_field_and_nothing_is_written(fleet, alice) -> None:
    ok, failed = f.make_job(fleet.ml), f.make_job(fleet.ml, state=JobState.FAILED, exit_code=1)
    theirs = f.make_job(fleet.vision)
    job = submitted(alice, dependencies=[{"job": ok.pk}])
    before = written(job)

    r = patch(alice, job, [{"job": ok.pk, "condition": "afterany"}, {"job": 999_999}, {"job": failed.pk},
                           {"job": theirs.pk}])

    assert refused(r, "dependencies.1.job") == "no job 999999 you can see"
    assert f"job {failed.pk} failed (exit 1)" in refused(r, "dependencies.2.condition")
    assert refused(r, "dependencies.3.job") == f"no job {theirs.pk} you can see"
    assert "dependencies.0.job" not in r.json()["errors"]
    assert written(job) == before


@pytest.mark.parametrize(("body", "field", "words"), [
    ([{"job": 1, "condition": "afterwards"}], "dependencies.0.condition", "afterwards"),
    ([{"condition": "afterok"}], "dependencies.0.job", "one of the two"),
    ([{"job": 1, "type": "afterok"}], "dependencies.0.type", ""),
    ("afterok:12x", "dependencies", "afterok:12x: '12x' is not a job id"),
    ("afterwards:12", "dependencies", "'afterwards:12' is not TYPE:JOB[:JOB...]"),
    ("none,afterok:12", "dependencies", "'none' stands alone"),
], ids=["unknown-condition", "no-job", "unknown-key", "text-bad-id", "text-bad-type", "text-none-among"])
def test_a_malformed_item_or_text_is_refused_naming_its_field(fleet, alice, body: Any, field: str, words: str) -> None:
    job = submitted(alice)
    before = written(job)

    assert words in refused(patch(alice, job, body), field)
    assert written(job) == before


def test_a_duplicate_is_refused_on_the_second_item(fleet, alice) -> None:
    up = f.make_job(fleet.ml)
    job = submitted(alice)
    assert "already dependency 0" in refused(patch(alice, job, [{"job": up.pk}, {"job": up.pk}]), "dependencies.1.job")


def test_a_bad_shape_and_a_bad_dependency_are_refused_together_and_nothing_is_written(fleet, alice) -> None:
    up = f.make_job(fleet.ml)
    job = submitted(alice, dependencies=[{"job": up.pk}])
    before = written(job)

    r = patch(alice, job, [{"job": 999_999}], min_gpus=8)  # above gpus: the service refuses it

    assert "dependencies.0.job" in r.json()["errors"] and "min_gpus" in r.json()["errors"], r.json()
    assert written(job) == before


def test_a_valid_shape_with_a_bad_dependency_writes_neither(fleet, alice) -> None:
    job = submitted(alice)
    before = written(job)

    r = patch(alice, job, [{"job": 999_999}], gpus=2)

    refused(r, "dependencies.0.job")
    assert written(job) == before


# --------------------------------------------------------------------------------- cycles


def test_a_job_cannot_wait_on_itself(fleet, alice) -> None:
    job = submitted(alice)
    before = written(job)

    assert refused(patch(alice, job, [{"job": job.pk}]), "dependencies.0.job") == (
        f"job {job.pk} is this job: a job cannot wait on itself")
    assert written(job) == before


def test_a_job_cannot_wait_on_a_job_that_waits_on_it(fleet, alice) -> None:
    job = submitted(alice)
    other = f.make_job(fleet.ml, name="other")
    JobDependency.objects.create(job=other, upstream=job, condition=DependencyCondition.AFTER_OK)
    unrelated = f.make_job(fleet.ml)
    before = written(job)

    r = patch(alice, job, [{"job": unrelated.pk}, {"job": other.pk, "condition": "afterany"}])

    assert refused(r, "dependencies.1.job") == (
        f"job {other.pk} waits on this job (job {job.pk}): a cycle, neither could ever start")
    assert "dependencies.0.job" not in r.json()["errors"]
    assert written(job) == before


def test_a_cycle_down_a_chain_is_refused_naming_the_chain(fleet, alice) -> None:
    job = submitted(alice)
    a, b, c = (f.make_job(fleet.ml, name=n) for n in "abc")
    JobDependency.objects.create(job=a, upstream=b, condition=DependencyCondition.AFTER_ANY)
    JobDependency.objects.create(job=b, upstream=c, condition=DependencyCondition.AFTER_OK)
    JobDependency.objects.create(job=c, upstream=job, condition=DependencyCondition.AFTER)

    r = patch(alice, job, f"afterok:{a.pk}")

    assert refused(r, "dependencies.0.job") == (
        f"job {a.pk} waits on job {b.pk}, which waits on job {c.pk}, which waits on this job (job {job.pk}): "
        "a cycle, none of them could ever start")


def test_a_chain_through_a_met_dependency_or_an_ended_job_is_no_cycle(fleet, alice) -> None:
    """Only what waits can close a cycle: a job whose dependency on this one is met already
    (after: this job ran once and was requeued), or one that ended, waits on nothing."""
    job = submitted(alice)
    Job.objects.filter(pk=job.pk).update(requeue_count=1)
    met, ended = f.make_job(fleet.ml, name="met"), f.make_job(fleet.ml, name="ended", state=JobState.CANCELLED)
    JobDependency.objects.create(job=met, upstream=job, condition=DependencyCondition.AFTER)  # met: job started once
    JobDependency.objects.create(job=ended, upstream=job, condition=DependencyCondition.AFTER_OK)

    r = patch(alice, job, [{"job": met.pk}, {"job": ended.pk, "condition": "afterany"}])

    assert r.status_code == 200, r.json()
    assert rows(job) == [(met.pk, "afterok"), (ended.pk, "afterany")]


# ------------------------------------------------------------------ only while it waits


@pytest.mark.parametrize("state", [JobState.RUNNING, JobState.PREEMPTING])
def test_a_started_job_is_refused_with_409_naming_the_field(fleet, alice, state: str) -> None:
    up = f.make_job(fleet.ml)
    job = submitted(alice)
    Job.objects.filter(pk=job.pk).update(state=state)
    before = written(job)

    r = patch(alice, job, [{"job": up.pk}])

    assert r.status_code == 409, r.json()
    assert "dependencies changes only while it waits" in " ".join(r.json()["errors"]["dependencies"])
    assert written(job) == before


def test_an_ended_job_is_refused_with_409_even_with_bad_dependencies(fleet, alice) -> None:
    job = submitted(alice)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, exit_code=0)

    r = patch(alice, job, [{"job": 999_999}])

    assert r.status_code == 409, r.json()
    assert r.json()["errors"] == {"dependencies": [f"job {job.pk} has already ended (succeeded)"]}


def test_a_held_job_changes_its_dependencies_and_stays_held(fleet, alice) -> None:
    up = f.make_job(fleet.ml, state=JobState.RUNNING)
    job = submitted(alice, hold=True)

    r = patch(alice, job, [{"job": up.pk}])

    assert r.status_code == 200, r.json()
    assert rows(job) == [(up.pk, "afterok")]
    assert r.json()["job"]["pending_code"] == "Held"


def test_another_teams_member_may_not_change_them(fleet, alice, clients) -> None:
    up = f.make_job(fleet.ml)
    job = submitted(alice, dependencies=[{"job": up.pk}])

    r = patch(clients["other_team"], job, [])

    assert r.status_code == 404, r.json()  # not a job they can see
    assert rows(job) == [(up.pk, "afterok")]
