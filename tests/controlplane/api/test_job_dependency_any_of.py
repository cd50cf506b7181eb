"""Slurm's `?` (any one of several): `afterok:12?afterok:13`, or the list with
`"dependency_mode": "any"`, lets the job start once any one of its dependencies is met. It is
cancelled (DependencyNeverSatisfied) only once none of them can be met; `,` and `?` never mix in
one list; its text says `?` (text_now, the event, the page); a cycle is one only if no
alternative leads out of it; a change of the list keeps or sets the mode as asked."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, JobDependency
from controlplane.services import dependencies
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


def submit(client: Any, name: str = "eval", **body: Any) -> Any:
    return client.post(JOBS, {"name": name, "gpus": 1, **body}, format="json")


def submitted(client: Any, name: str = "eval", **body: Any) -> Job:
    r = submit(client, name, **body)
    assert r.status_code == 201, r.json()
    return Job.objects.get(pk=r.json()["id"])


def end(job: Job, state: str, exit_code: int | None = None) -> None:
    """`job` ends as the transitions end it: its row, then its dependents settled."""
    at = timezone.now()
    Job.objects.filter(pk=job.pk).update(state=state, exit_code=exit_code, finished_at=at)
    dependencies.ended([dependencies.Change(job.pk, state, exit_code)], at=at, actor="agent")


def test_the_text_with_question_marks_is_any_of_and_says_so(fleet, alice) -> None:
    a = f.make_job(fleet.ml, name="a", state=JobState.RUNNING)
    b = f.make_job(fleet.ml, name="b")

    r = submit(alice, dependencies=f"afterok:{a.pk}?afternotok:{b.pk}")

    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["dependency_mode"] == "any"
    assert [(d["job"], d["condition"]) for d in body["dependencies"]] == [(a.pk, "afterok"), (b.pk, "afternotok")]
    assert body["pending_code"] == "WaitingForDependency"
    assert body["pending_message"] == (f"Waits for any one of job {a.pk} to succeed (now running) or job {b.pk} to "
                                       "fail (now pending): until then it is not in the queue and holds nothing.")
    assert body["pending_would_start_if"] == f"job {a.pk} succeeds or job {b.pk} fails"
    assert dependencies.text_now(body["id"], any_of=True) == f"afterok:{a.pk}?afternotok:{b.pk}"


def test_the_list_form_says_any_with_dependency_mode(fleet, alice) -> None:
    a, b = f.make_job(fleet.ml, name="a"), f.make_job(fleet.ml, name="b")

    job = submitted(alice, dependencies=[{"job": a.pk}, {"job": b.pk}], dependency_mode="any")

    assert job.dependency_mode == "any"
    # a list without it is all-of, as before
    assert submitted(alice, dependencies=[{"job": a.pk}, {"job": b.pk}]).dependency_mode == "all"


def test_mixing_commas_and_question_marks_is_refused(fleet, alice) -> None:
    a, b, c = (f.make_job(fleet.ml, name=n) for n in "abc")
    before = Job.objects.count()

    r = submit(alice, dependencies=f"afterok:{a.pk}?afterok:{b.pk},afterany:{c.pk}")

    assert r.status_code == 400
    (message,) = r.json()["errors"]["dependencies"]
    assert "',' (every one met) and '?' (any one of them met) cannot be mixed in one list" in message
    r = submit(alice, dependencies=f"afterok:{a.pk}?afterok:{b.pk}", dependency_mode="all")
    assert r.status_code == 400 and "contradicts it" in r.json()["errors"]["dependency_mode"][0]
    r = submit(alice, dependencies=f"afterok:{a.pk}?singleton")
    assert r.status_code == 400 and "singleton cannot be one of any-of" in r.json()["errors"]["dependencies"][0]
    r = submit(alice, dependencies=[{"job": a.pk}, {"condition": "singleton"}], dependency_mode="any")
    assert r.status_code == 400 and "singleton cannot be one of any-of" in r.json()["errors"][
        "dependencies.1.condition"][0]
    assert Job.objects.count() == before


def test_it_starts_once_any_one_is_met(fleet, alice) -> None:
    a, b = f.make_job(fleet.ml, name="a", state=JobState.RUNNING), f.make_job(fleet.ml, name="b", state=JobState.RUNNING)
    job = submitted(alice, dependencies=f"afterok:{a.pk}?afterok:{b.pk}")
    assert dependencies.waits([job.pk]) != {}
    assert dependencies.waiting_among([job.pk], singletons=[], alternatives=[job.pk]) == {job.pk}

    end(b, JobState.SUCCEEDED)

    assert dependencies.waits([job.pk]) == {}  # the snapshot passes it no wait: it is in line
    assert dependencies.waiting_among([job.pk]) == set()  # nor does the bind guard drop it
    assert dependencies.waiting_among([job.pk], singletons=[], alternatives=[job.pk]) == set()  # as the bind asks
    (event,) = Event.objects.filter(job=job, reason=dependencies.SATISFIED)
    assert event.message == (f"Job {b.pk} succeeded: its dependency afterok is met (any one of its dependencies is "
                             "enough); it waits on no other job now")
    # the other one failing afterwards cancels nothing: one was met
    end(a, JobState.FAILED, 1)
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


def test_it_is_cancelled_only_once_none_can_be_met(fleet, alice) -> None:
    a, b = f.make_job(fleet.ml, name="a", state=JobState.RUNNING), f.make_job(fleet.ml, name="b", state=JobState.RUNNING)
    job = submitted(alice, dependencies=f"afterok:{a.pk}?afterok:{b.pk}")
    downstream = submitted(alice, "report", dependencies=f"afterok:{job.pk}")

    end(a, JobState.FAILED, 3)

    assert Job.objects.get(pk=job.pk).state == JobState.PENDING  # b may still succeed
    assert dependencies.waits([job.pk]) == {job.pk: [(b.pk, "afterok", "running")]}

    end(b, JobState.CANCELLED)

    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.pending_code == dependencies.NEVER_SATISFIED
    assert job.pending_message == (f"Job {b.pk} was cancelled: this job was to run after any one of its dependencies "
                                   f"was met (afterok:{a.pk}?afterok:{b.pk}), and none can be now, so it is cancelled.")
    (cancel,) = Event.objects.filter(job=job, kind=EventKind.JOB_CANCELLED)
    assert cancel.data["dependency_mode"] == "any"
    assert Job.objects.get(pk=downstream.pk).state == JobState.CANCELLED  # down the chain, as today


def test_a_submit_is_refused_only_when_none_can_ever_be_met(fleet, alice) -> None:
    failed = f.make_job(fleet.ml, name="a", state=JobState.FAILED, exit_code=2)
    cancelled = f.make_job(fleet.ml, name="b", state=JobState.CANCELLED)
    running = f.make_job(fleet.ml, name="c", state=JobState.RUNNING)

    r = submit(alice, dependencies=f"afterok:{failed.pk}?afterok:{cancelled.pk}")

    assert r.status_code == 400
    assert r.json()["errors"]["dependencies"] == [
        f"none of these any-of dependencies can ever be met: job {failed.pk} failed (exit 2) (afterok); job "
        f"{cancelled.pk} was cancelled (afterok); this job could never start"]
    job = submitted(alice, dependencies=f"afterok:{failed.pk}?afterok:{running.pk}")  # one alternative left
    assert job.dependency_mode == "any"
    assert job.pending_message.startswith(f"Waits for job {running.pk} to succeed (now running):")  # the live one
    # one met already: it waits on nothing
    done = f.make_job(fleet.ml, name="d", state=JobState.SUCCEEDED)
    job = submitted(alice, dependencies=f"afterok:{done.pk}?afterok:{running.pk}")
    assert job.pending_code == "Submitted" and dependencies.waits([job.pk]) == {}


def test_patch_replaces_with_any_of_and_back_saying_old_and_new(fleet, alice) -> None:
    a, b = f.make_job(fleet.ml, name="a"), f.make_job(fleet.ml, name="b")
    job = submitted(alice, dependencies=f"afterok:{a.pk}")

    r = alice.patch(f"{JOBS}{job.pk}/", {"dependencies": f"afterok:{a.pk}?afterany:{b.pk}"}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["changes"] == {"dependencies": [f"afterok:{a.pk}", f"afterok:{a.pk}?afterany:{b.pk}"]}
    assert r.json()["job"]["dependency_mode"] == "any"
    assert r.json()["job"]["pending_message"].startswith(f"Waits for any one of job {a.pk} to succeed (now pending) "
                                                         f"or job {b.pk} to end")
    (event,) = Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED)
    assert event.message == (f"Changed by alice while waiting: dependencies afterok:{a.pk} → "
                             f"afterok:{a.pk}?afterany:{b.pk}")

    r = alice.patch(f"{JOBS}{job.pk}/", {"dependencies": [{"job": a.pk}, {"job": b.pk, "condition": "afterany"}]},
                    format="json")
    assert r.status_code == 200 and r.json()["job"]["dependency_mode"] == "all"
    assert r.json()["changes"]["dependencies"][1] == f"afterok:{a.pk},afterany:{b.pk}"

    r = alice.patch(f"{JOBS}{job.pk}/", {"dependencies": [{"job": a.pk}, {"job": b.pk}], "dependency_mode": "any"},
                    format="json")
    assert r.status_code == 200 and Job.objects.get(pk=job.pk).dependency_mode == "any"
    r = alice.patch(f"{JOBS}{job.pk}/", {"dependency_mode": "all"}, format="json")
    assert r.status_code == 400 and "give it with them" in r.json()["errors"]["dependency_mode"][0]


def test_edits_keep_the_mode(fleet, alice) -> None:
    a, b, c, d = (f.make_job(fleet.ml, name=n) for n in "abcd")
    job = submitted(alice, dependencies=f"afterok:{a.pk}?afterok:{b.pk}")

    r = alice.patch(f"{JOBS}{job.pk}/", {"dependencies": f"+afterok:{c.pk}"}, format="json")
    assert r.status_code == 200, r.json()
    assert r.json()["changes"]["dependencies"][1] == f"afterok:{a.pk}?afterok:{b.pk}?afterok:{c.pk}"

    r = alice.patch(f"{JOBS}{job.pk}/", {"dependencies": f"+afterok:{d.pk},afterany:{d.pk}"}, format="json")
    assert r.status_code == 400
    assert "are any-of (any one met)" in r.json()["errors"]["dependencies"][0]

    r = alice.patch(f"{JOBS}{job.pk}/", {"dependencies": f"-afterok:{a.pk}?afterok:{b.pk}"}, format="json")
    assert r.status_code == 200, r.json()
    job.refresh_from_db()
    assert job.dependency_mode == "all"  # one left: all of itself
    assert dependencies.text_now(job.pk) == f"afterok:{c.pk}"


def test_a_cycle_is_one_only_if_no_alternative_leads_out(fleet, alice) -> None:
    """X any-of (Y or Z), Y waits on X: X can still start once Z succeeds, then Y: no cycle.
    X any-of (Y or W), both waiting on X: neither could ever start: refused."""
    z = f.make_job(fleet.ml, name="z", state=JobState.RUNNING)
    x = submitted(alice, "x")
    y = submitted(alice, "y", dependencies=f"afterok:{x.pk}")
    w = submitted(alice, "w", dependencies=f"afterany:{x.pk}")

    r = alice.patch(f"{JOBS}{x.pk}/", {"dependencies": f"afterok:{y.pk}?afterok:{z.pk}"}, format="json")
    assert r.status_code == 200, r.json()

    r = alice.patch(f"{JOBS}{x.pk}/", {"dependencies": f"afterok:{y.pk}?afterok:{w.pk}"}, format="json")
    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {
        "dependencies.0.job": [f"job {y.pk} waits on this job (job {x.pk}): a cycle, neither could ever start"],
        "dependencies.1.job": [f"job {w.pk} waits on this job (job {x.pk}): a cycle, neither could ever start"]}
    assert dependencies.text_now(x.pk, any_of=True) == f"afterok:{z.pk}?afterok:{y.pk}"  # ids ascending

    # an all-of job down the chain waiting on an any-of job with a way out closes nothing either
    v = submitted(alice, "v", dependencies=f"afterok:{z.pk}")
    r = alice.patch(f"{JOBS}{v.pk}/", {"dependencies": f"+afterok:{x.pk}"}, format="json")
    assert r.status_code == 200, r.json()
    r = alice.patch(f"{JOBS}{x.pk}/", {"dependencies": f"afterok:{v.pk}?afterok:{z.pk}"}, format="json")
    assert r.status_code == 200, r.json()  # x → v → z or x: z leads out


def test_the_job_page_says_any_one_of(fleet, alice) -> None:
    a, b = f.make_job(fleet.ml, name="a", state=JobState.RUNNING), f.make_job(fleet.ml, name="b")
    job = submitted(alice, dependencies=f"afterok:{a.pk}?afterany:{b.pk}")
    web = Client()
    web.force_login(fleet.users["owner"])

    page = web.get(f"/jobs/{job.pk}/").content.decode()

    assert '<span id="runs-after-any">any one of</span>' in page
    assert f'job {a.pk}</a> (a) succeeds <span class="muted">(now running)</span> or <a' in page
    assert f'value="afterok:{a.pk}?afterany:{b.pk}"' in page  # the Change form's "Runs after" text
    refreshed = web.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]  # the live refresh says it too
    assert '<span id="runs-after-any">any one of</span>' in refreshed
    assert JobDependency.objects.filter(job=job).count() == 2


def test_the_submit_forms_live_check_judges_any_of_as_the_submit(fleet, alice) -> None:
    failed = f.make_job(fleet.ml, name="a", state=JobState.FAILED, exit_code=2)
    running = f.make_job(fleet.ml, name="b", state=JobState.RUNNING)
    web = Client()
    web.force_login(fleet.users["owner"])

    def check(text: str) -> Any:
        return web.post("/ui/jobs/check.json", {"name": "eval", "gpus": 1, "dependencies": text},
                        content_type="application/json").json()

    assert check(f"afterok:{failed.pk}?afterok:{running.pk}")["runs"] is True  # one alternative left
    other_failed = f.make_job(fleet.ml, name="c", state=JobState.FAILED, exit_code=1)
    refused = check(f"afterok:{failed.pk}?afterok:{other_failed.pk}")
    assert refused["runs"] is False and "none of these any-of dependencies" in refused["errors"]["dependencies"][0]
    refused = check(f"afterok:{failed.pk},afterok:{running.pk}")  # all-of: the failed one can never be met
    assert refused["runs"] is False and "dependencies.0.condition" in refused["errors"]


def test_a_job_array_is_no_alternative_among_any_of(fleet, alice) -> None:
    # A job array waits on every task (Slurm's afterok:ARRAY: the whole array succeeded); as one
    # of any-of dependencies its tasks became alternatives each, so the first task to succeed
    # started the job ("runs after any of: job 9 ends or job 218 succeeds or job 219 …").
    r = alice.post("/api/v1/job-arrays/", {"name": "sweep", "gpus": 1, "array": "0-2"}, format="json")
    assert r.status_code == 201, r.json()
    sweep = r.json()["array_id"]
    other = f.make_job(fleet.ml, name="other", state=JobState.RUNNING)
    before = Job.objects.count()

    text = submit(alice, dependencies=f"afterok:{sweep}?afterany:{other.pk}")
    listed = submit(alice, dependencies=[{"array": sweep}, {"job": other.pk, "condition": "afterany"}],
                    dependency_mode="any")

    for refused in (text, listed):
        assert refused.status_code == 400, refused.json()
        assert refused.json()["errors"] == {"dependencies.0.array": [
            f"job array {sweep} cannot be one of any-of dependencies: it waits on every one of its tasks, and "
            "'?' on any one job; give it among all-of ones (afterok:ARRAY,afterany:12), or its tasks' job ids"]}
    assert Job.objects.count() == before


def test_a_change_to_any_of_with_a_job_array_is_refused_alike(fleet, alice) -> None:
    r = alice.post("/api/v1/job-arrays/", {"name": "sweep", "gpus": 1, "array": "0-1"}, format="json")
    sweep = r.json()["array_id"]
    other = f.make_job(fleet.ml, name="other", state=JobState.RUNNING)
    waiting = submitted(alice, dependencies=f"afterany:{other.pk}")

    changed = alice.patch(f"{JOBS}{waiting.pk}/", {"dependencies": f"afterok:{sweep}?afterany:{other.pk}"},
                          format="json")

    assert changed.status_code == 400, changed.json()
    assert list(changed.json()["errors"]) == ["dependencies.0.array"]
    assert sorted(JobDependency.objects.filter(job=waiting).values_list("upstream_id", flat=True)) == [other.pk]
