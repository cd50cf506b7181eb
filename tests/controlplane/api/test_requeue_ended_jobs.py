"""Requeueing an ended job (Slurm's `scontrol requeue` of a finished batch job): POST
jobs/{id}/requeue/ on a succeeded, failed, cancelled or timed-out job puts it back in the queue
with the same id and a new run, its earlier runs kept; the refusals (a dependency never met, no
longer valid as a submit, still stopping), who may, and what its dependents do."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, DependencyCondition, EventKind, JobHold, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, JobDependency, PriorityClass
from controlplane.services import cycle, transitions
from controlplane.services.dependencies import NEVER_SATISFIED
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def _ended(fleet, state: str = JobState.FAILED, *, exit_code: int | None = 3, generation: int = 41, **kw) -> Job:
    """A job of team ml that ran one run (generation `generation`, released) and ended in `state`."""
    now = timezone.now()
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], state=state, started_at=now - timedelta(hours=1),
                     finished_at=now - timedelta(minutes=5), exit_code=exit_code, **kw)
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=now - timedelta(hours=1),
                                           started_at=now - timedelta(hours=1), released_at=now - timedelta(minutes=5),
                                           state=AllocationState.RELEASED)
    AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[1], gpu_index=0, live=False)
    return job


@pytest.mark.parametrize("state,exit_code,words", [
    (JobState.FAILED, 3, "failed (exit 3)"),
    (JobState.SUCCEEDED, 0, "succeeded"),
    (JobState.CANCELLED, None, "been cancelled"),
    (JobState.TIMED_OUT, None, "timed out"),
])
def test_an_ended_job_can_be_requeued_back_in_the_queue_with_the_same_id(fleet, alice, state, exit_code,
                                                                         words) -> None:
    job = _ended(fleet, state, exit_code=exit_code)

    r = alice.post(f"{J}{job.pk}/requeue/", {"reason": "rerun with the fixed dataset"}, format="json")

    assert r.status_code == 200, r.content[:400]
    assert r.json()["detail"] == (f"Job {job.pk} had {words} and is back in the queue with the same id; its earlier "
                                  "runs are kept.")
    assert r.json()["job"]["id"] == job.pk and r.json()["job"]["state"] == "pending"
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.requeue_count == 1 and job.preemption_count == 0
    # Its end is reset for the new run, as a running job's requeue resets its start.
    assert (job.exit_code, job.finished_at, job.started_at) == (None, None, None)
    assert job.lost_gpu_seconds == 0.0  # nothing was running: nothing lost
    assert job.pending_code == "Requeued" and job.pending_message.startswith("Requeued by alice: rerun with the fixed")
    event = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert event.actor == "user:alice" and event.reason == transitions.REQUEUED_AFTER_END
    assert event.data["from_state"] == state and event.data["exit_code"] == exit_code
    assert event.data["reason"] == "rerun with the fixed dataset" and event.data["generation"] == 41
    assert "(its last run, generation 41, is kept)" in event.message
    # The earlier run's record is untouched.
    old = Allocation.objects.get(job=job)
    assert old.generation == 41 and old.state == AllocationState.RELEASED and old.released_at is not None


def test_a_failed_job_can_be_requeued_with_a_new_generation(fleet, alice) -> None:
    """End to end through the real cycle: bound (a generation), failed, requeued, bound again
    under a new generation; both runs' allocations and events stay."""
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], gpus=1)
    assert cycle.run_cycle("worker-1").binds == 1
    first = Allocation.objects.get(job=job)
    transitions.complete_release(first.pk, exit_code=2, at=timezone.now(), actor="agent:h100-0")
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.exit_code == 2

    assert alice.post(f"{J}{job.pk}/requeue/").status_code == 200
    assert cycle.run_cycle("worker-1").binds == 1

    job.refresh_from_db()
    runs = list(Allocation.objects.filter(job=job).order_by("generation").values_list("generation", "state"))
    assert len(runs) == 2 and runs[0] == (first.generation, AllocationState.RELEASED)
    assert runs[1][0] > first.generation and runs[1][1] == AllocationState.ACTIVE
    assert job.state == JobState.RUNNING and job.exit_code is None and job.requeue_count == 1
    kinds = list(Event.objects.filter(job=job).order_by("created_at", "id").values_list("kind", flat=True))
    assert kinds.count(EventKind.JOB_BOUND) == 2 and EventKind.JOB_FINISHED in kinds
    assert kinds.index(EventKind.JOB_FINISHED) < kinds.index(EventKind.JOB_REQUEUED)


def test_an_ended_job_requeued_with_hold_comes_back_held_by_whoever_asked(fleet, alice, admin) -> None:
    job = _ended(fleet)
    r = alice.post(f"{J}{job.pk}/requeue/", {"hold": True, "reason": "after the data fix"}, format="json")
    assert r.status_code == 200, r.content[:300]
    assert f"back in the queue held (release it with qm release {job.pk})" in r.json()["detail"]
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.pending_code == "Held"
    assert (job.hold, job.held_by_id, job.hold_reason) == (JobHold.USER, fleet.users["owner"].pk, "after the data fix")
    assert Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED).reason == transitions.REQUEUED_HELD_AFTER_END
    assert Event.objects.get(job=job, kind=EventKind.JOB_HELD).data["requeued"] is True
    assert alice.post(f"{J}{job.pk}/release/").status_code == 200

    by_admin = _ended(fleet, generation=42)
    assert admin.post(f"{J}{by_admin.pk}/requeue/", {"hold": True}, format="json").status_code == 200
    by_admin.refresh_from_db()
    assert by_admin.hold == JobHold.ADMIN
    assert alice.post(f"{J}{by_admin.pk}/release/").status_code == 403


@pytest.mark.parametrize("role,status", [("other_team", 404), ("finance", 403), ("anonymous", 401), ("admin", 200),
                                         ("owner", 200)])
def test_who_may_requeue_an_ended_job_is_who_may_requeue_a_running_one(fleet, role, status) -> None:
    job = _ended(fleet)
    r = client_for(fleet, role).post(f"{J}{job.pk}/requeue/")
    assert r.status_code == status, r.content[:300]
    job.refresh_from_db()
    assert (job.state == JobState.PENDING) == (status == 200)
    if status != 200:
        assert job.state == JobState.FAILED and not Event.objects.filter(job=job).exists()


def test_a_team_member_who_did_not_submit_it_may_requeue_an_ended_job(fleet) -> None:
    from rest_framework.test import APIClient

    job = _ended(fleet)
    carol = APIClient()
    carol.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(f.make_user('carol', team=fleet.ml))}")
    assert carol.post(f"{J}{job.pk}/requeue/").status_code == 200


def test_requeue_of_a_job_whose_dependency_can_never_be_met_is_refused(fleet, alice) -> None:
    """A dependent cancelled because its afterok upstream failed would wait for ever: refused
    (409) naming the dependency, nothing written. Once the upstream is requeued it may be, and
    the upstream's new end settles it (its dependency met, an event saying so)."""
    upstream = _ended(fleet, JobState.FAILED, exit_code=1, generation=50)
    dependent = f.make_job(fleet.ml, submitter=fleet.users["owner"], state=JobState.CANCELLED,
                           finished_at=timezone.now(), pending_code=NEVER_SATISFIED, pending_resolvable=False)
    JobDependency.objects.create(job=dependent, upstream=upstream, condition=DependencyCondition.AFTER_OK)

    r = alice.post(f"{J}{dependent.pk}/requeue/")

    assert r.status_code == 409, r.content[:300]
    body = r.json()
    assert body["errors"] == {"dependencies": [f"afterok:{upstream.pk} can never be met: job {upstream.pk} failed "
                                               f"(exit 1), so afterok on it can never be met"]}
    assert body["detail"].startswith(f"Job {dependent.pk} cannot be requeued: job {upstream.pk} failed (exit 1)")
    assert "Requeue that job first" in body["detail"]
    dependent.refresh_from_db()
    assert dependent.state == JobState.CANCELLED and dependent.requeue_count == 0
    assert not Event.objects.filter(job=dependent).exists()

    # The upstream requeued: the dependent may be now, and waits on it.
    assert alice.post(f"{J}{upstream.pk}/requeue/").status_code == 200
    assert alice.post(f"{J}{dependent.pk}/requeue/").status_code == 200
    dependent.refresh_from_db()
    assert dependent.state == JobState.PENDING

    # The upstream's next run succeeds: its end settles the dependent.
    upstream.refresh_from_db()
    now = timezone.now()
    Job.objects.filter(pk=upstream.pk).update(state=JobState.RUNNING, started_at=now)
    run = Allocation.objects.create(job=upstream, generation=51, epoch=1, created_at=now, started_at=now,
                                    state=AllocationState.ACTIVE)
    AllocationGpu.objects.create(allocation=run, node=fleet.nodes[1], gpu_index=0, live=True)
    assert transitions.complete_release(run.pk, exit_code=0, at=now, actor="agent:h100-1")

    assert JobDependency.objects.get(job=dependent).satisfied_at is not None
    met = Event.objects.get(job=dependent, reason="DependencySatisfied")
    assert met.message.startswith(f"Job {upstream.pk} succeeded: its dependency afterok is met")
    dependent.refresh_from_db()
    assert dependent.state == JobState.PENDING


def test_an_afterok_dependent_still_waiting_any_of_is_settled_by_the_requeued_jobs_new_end(fleet, alice) -> None:
    """Any-of (Slurm's `?`): a dependent waits on afterok:A?afterok:B; A failed (that alternative
    can no longer be met by that end, the dependent waits on B). A requeued and then succeeding
    meets it."""
    a = _ended(fleet, JobState.FAILED, exit_code=1, generation=60)
    b = f.make_job(fleet.ml, submitter=fleet.users["owner"])
    dependent = f.make_job(fleet.ml, submitter=fleet.users["owner"], dependency_mode="any")
    JobDependency.objects.create(job=dependent, upstream=a, condition=DependencyCondition.AFTER_OK)
    JobDependency.objects.create(job=dependent, upstream=b, condition=DependencyCondition.AFTER_OK)
    assert alice.post(f"{J}{a.pk}/requeue/").status_code == 200
    now = timezone.now()
    Job.objects.filter(pk=a.pk).update(state=JobState.RUNNING, started_at=now)
    run = Allocation.objects.create(job=a, generation=61, epoch=1, created_at=now, started_at=now,
                                    state=AllocationState.ACTIVE)
    AllocationGpu.objects.create(allocation=run, node=fleet.nodes[1], gpu_index=0, live=True)
    transitions.complete_release(run.pk, exit_code=0, at=now, actor="agent:h100-1")
    assert JobDependency.objects.get(job=dependent, upstream=a).satisfied_at is not None
    assert Event.objects.filter(job=dependent, reason="DependencySatisfied").count() == 1


def test_requeue_of_an_ended_job_no_longer_valid_as_a_submit_is_refused_naming_the_field(fleet, alice) -> None:
    job = _ended(fleet, runtime_limit_s=2 * 86400)
    PriorityClass.objects.filter(pk=fleet.research.pk).update(max_runtime_limit_s=86400)

    r = alice.post(f"{J}{job.pk}/requeue/")

    assert r.status_code == 400, r.content[:300]
    assert "beyond the maximum of priority class 'research'" in r.json()["errors"]["runtime_limit_s"][0]
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.requeue_count == 0 and job.exit_code == 3
    assert not Event.objects.filter(job=job).exists()


def test_requeue_of_an_ended_job_still_holding_gpus_is_refused_until_it_has_ended(fleet, alice) -> None:
    job = _ended(fleet)
    Allocation.objects.filter(job=job).update(state=AllocationState.RELEASING)

    r = alice.post(f"{J}{job.pk}/requeue/")

    assert r.status_code == 409
    assert r.json()["detail"] == (f"Job {job.pk} has ended (failed) but is still stopping: generation 41 holds its "
                                  "GPUs until its agents confirm its processes are gone (or its node is fenced). "
                                  "Requeue it once it has.")
    job.refresh_from_db()
    assert job.state == JobState.FAILED and not Event.objects.filter(job=job).exists()
    Allocation.objects.filter(job=job).update(state=AllocationState.FENCED)
    assert alice.post(f"{J}{job.pk}/requeue/").status_code == 200


def test_a_job_that_can_never_run_is_still_refused(fleet, alice) -> None:
    never = f.make_job(fleet.ml, submitter=fleet.users["owner"], state=JobState.UNSCHEDULABLE)
    r = alice.post(f"{J}{never.pk}/requeue/")
    assert r.status_code == 409 and r.json()["detail"].startswith(f"Job {never.pk} never ran")


def test_requeueing_an_arrays_failed_tasks_reruns_them_and_leaves_the_running_ones(fleet, alice) -> None:
    import uuid

    array_id = uuid.uuid4()
    common = {"array_id": array_id, "array_task_limit": 2}
    failed = _ended(fleet, JobState.FAILED, generation=70, array_index=0, **common)
    timed_out = _ended(fleet, JobState.TIMED_OUT, exit_code=None, generation=71, array_index=1, **common)
    done = _ended(fleet, JobState.SUCCEEDED, exit_code=0, generation=72, array_index=2, **common)
    now = timezone.now()
    running = f.make_job(fleet.ml, submitter=fleet.users["owner"], state=JobState.RUNNING, started_at=now,
                         array_index=3, **common)
    live = Allocation.objects.create(job=running, generation=73, epoch=1, created_at=now, started_at=now,
                                     state=AllocationState.ACTIVE)
    AllocationGpu.objects.create(allocation=live, node=fleet.nodes[2], gpu_index=0, live=True)
    url = f"/api/v1/job-arrays/{array_id}/requeue/"

    bad = alice.post(url, {"states": ["pending"]}, format="json")
    assert bad.status_code == 400
    assert bad.json()["errors"] == {"states.0": ['"pending" cannot be requeued; choose among running, succeeded, '
                                                 'failed, cancelled, timed_out']}

    r = alice.post(url, {"states": ["failed", "timed_out"], "reason": "flaky loader"}, format="json")

    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert sorted(body["rerun"]) == sorted([failed.pk, timed_out.pk]) and body["requeued"] == []
    assert body["not_running"] == 2 and body["not_requeued"] == []
    assert body["detail"] == (f"Array {array_id} ({failed.name}, 4 tasks): 2 ended (failed, timed out) back in the "
                              "queue, 2 not failed or timed out. The array runs at most 2 tasks at a time.")
    states = dict(Job.objects.filter(array_id=array_id).values_list("pk", "state"))
    assert states == {failed.pk: JobState.PENDING, timed_out.pk: JobState.PENDING, done.pk: JobState.SUCCEEDED,
                      running.pk: JobState.RUNNING}
    assert Allocation.objects.get(pk=live.pk).state == AllocationState.ACTIVE  # the running task left alone
    # Without states: the running tasks only, as before.
    again = alice.post(url, {}, format="json").json()
    assert again["requeued"] == [running.pk] and again["rerun"] == []


def test_an_array_requeue_lists_each_ended_task_refused_with_why(fleet, alice) -> None:
    import uuid

    array_id = uuid.uuid4()
    ok = _ended(fleet, generation=80, array_id=array_id, array_index=0)
    stuck = _ended(fleet, generation=81, array_id=array_id, array_index=1)
    Allocation.objects.filter(job=stuck).update(state=AllocationState.RELEASING)

    r = alice.post(f"/api/v1/job-arrays/{array_id}/requeue/", {"states": ["failed"]}, format="json")

    assert r.status_code == 200, r.content[:300]
    body = r.json()
    assert body["rerun"] == [ok.pk]
    assert [(t["job"], t["state"]) for t in body["not_requeued"]] == [(stuck.pk, "failed")]
    assert "still stopping" in body["not_requeued"][0]["detail"] and "1 refused (below)" in body["detail"]


def test_a_second_requeue_of_the_same_ended_job_finds_it_waiting_already(fleet, alice) -> None:
    job = _ended(fleet)
    assert alice.post(f"{J}{job.pk}/requeue/").status_code == 200
    again = alice.post(f"{J}{job.pk}/requeue/")
    assert again.status_code == 409
    assert again.json()["detail"] == f"Job {job.pk} is waiting already: only a running or ended job can be requeued."
    job.refresh_from_db()
    assert job.requeue_count == 1 and Event.objects.filter(job=job, kind=EventKind.JOB_REQUEUED).count() == 1
