"""Requeueing a running job (Slurm's `scontrol requeue` / `requeuehold`): POST jobs/{id}/requeue/
for each state a job can be in, who may, what a refusal says, and what the stop leaves behind
until the agents confirm it (then: pending again, requeue_count + 1, the work lost, held or not,
webhooks subscribed to `requeued` told once)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobHold, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, NotificationDelivery, NotificationHook
from controlplane.services import transitions
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for
from tests.controlplane.stopping_jobs import make_stopping_jobs

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def _running(fleet, *, gpus: int = 2, ran_s: float = 3600, checkpoint_s: float | None = 1800, generation: int = 7,
             node: int = 1, **kw) -> tuple[Job, Allocation]:
    """A job of team ml running `ran_s` on `gpus` GPUs of h100-1, its last checkpoint `checkpoint_s` ago."""
    now = timezone.now()
    started = now - timedelta(seconds=ran_s)
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], gpus=gpus, state=JobState.RUNNING, started_at=started,
                     last_checkpoint_at=now - timedelta(seconds=checkpoint_s) if checkpoint_s is not None else None,
                     **kw)
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=started, started_at=started,
                                           state=AllocationState.ACTIVE)
    for index in range(gpus):
        AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[node], gpu_index=index, live=True)
    return job, allocation


def test_a_running_job_is_stopped_with_its_class_grace_and_a_notice_saying_who_and_why(fleet, alice) -> None:
    job, allocation = _running(fleet)
    before = timezone.now()

    r = alice.post(f"{J}{job.pk}/requeue/", {"reason": "h100-1 throws XID 79"}, format="json")

    assert r.status_code == 200, r.content[:400]
    grace = fleet.research.grace_period_s
    body = r.json()
    assert body["changed"] is True
    assert body["detail"] == (f"Job {job.pk} is stopping to be requeued: its processes get {grace} s to exit, then it "
                              "goes back to the queue with the same id, from its last checkpoint.")
    assert body["job"]["state"] == JobState.PREEMPTING and body["job"]["state_label"] == "stopping: requeue"
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.RELEASING
    assert allocation.release_reason == transitions.RELEASE_REQUEUED
    assert allocation.generation == 7  # the stop keeps the generation: the agents still own the GPUs
    deadline = allocation.release_deadline
    assert before + timedelta(seconds=grace) <= deadline <= timezone.now() + timedelta(seconds=grace)
    assert AllocationGpu.objects.filter(allocation=allocation, live=True).count() == 2
    # A requeue someone asked for is no preemption: its notice is a job.stopping, none a job.preempting.
    notice = Event.objects.get(job=job, kind=EventKind.JOB_STOPPING)
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_PREEMPTING).exists()
    assert notice.reason == transitions.RELEASE_REQUEUED and notice.actor == "user:alice"
    assert notice.message == (f"Requeued by alice: h100-1 throws XID 79; its processes get {grace} s to exit, then it "
                              "goes back to the queue")
    assert notice.data["requested_by"] == "alice" and notice.data["reason"] == "h100-1 throws XID 79"
    assert notice.data["hold"] == "" and notice.allocation_id == allocation.pk
    # What the user reads while it stops: the notice, in `qm explain`'s and the page's words.
    explain = alice.get(f"{J}{job.pk}/explain/").json()
    assert explain["state_label"] == "stopping: requeue"
    assert "Requeued by alice: h100-1 throws XID 79" in explain["reason"]
    # Nothing else moved yet: not requeued, nothing lost.
    job.refresh_from_db()
    assert (job.requeue_count, job.lost_gpu_seconds, job.preemption_count) == (0, 0.0, 0)


def test_once_its_processes_exit_it_waits_again_with_its_lost_work_counted(fleet, alice) -> None:
    job, allocation = _running(fleet, gpus=2, ran_s=3600, checkpoint_s=1800)
    assert alice.post(f"{J}{job.pk}/requeue/", {"reason": "restart from the checkpoint"}, format="json").status_code == 200
    at = timezone.now()

    assert transitions.complete_release(allocation.pk, exit_code=143, at=at, actor="agent:h100-1")

    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.started_at is None and job.hold == JobHold.NONE
    assert job.requeue_count == 1 and job.preemption_count == 0  # not against the preemption budget
    assert job.lost_gpu_seconds == pytest.approx(2 * 1800, abs=2 * 5)  # 2 GPUs since the checkpoint
    assert job.pending_code == "Requeued"
    assert job.pending_message.startswith("Requeued by alice: restart from the checkpoint; 1.00 GPU-hours")
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.RELEASED
    assert not AllocationGpu.objects.filter(allocation=allocation, live=True).exists()
    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert requeued.reason == transitions.RELEASE_REQUEUED
    assert requeued.message == "Requeued by alice: restart from the checkpoint; lost 1.00 GPU-hours since the last checkpoint"
    assert requeued.data["requested_by"] == "alice" and requeued.data["generation"] == 7
    # The API says it in requeue_count (what `qm history` and `qm status` read).
    payload = alice.get(f"{J}{job.pk}/").json()
    assert payload["requeue_count"] == 1 and payload["preemption_count"] == 0 and payload["state"] == "pending"


def test_a_loss_below_a_hundredth_of_a_gpu_hour_is_said_as_such_not_as_none(fleet, alice) -> None:
    # Before: "lost 0.00 GPU-hours since the last checkpoint", "0.00 GPU-hours of work ... were
    # lost" and "requeued held (0.00 GPU-hours lost)" of 2 GPUs x 5 s, where the pages say "< 0.01".
    job, allocation = _running(fleet, gpus=2, checkpoint_s=5)
    assert alice.post(f"{J}{job.pk}/requeue/", {"reason": "flaky"}, format="json").status_code == 200
    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")
    job.refresh_from_db()
    assert 0 < job.lost_gpu_seconds < 0.005 * 3600
    assert job.pending_message == ("Requeued by alice: flaky; less than 0.01 GPU-hours of work since the last "
                                   "checkpoint were lost")
    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert requeued.message == "Requeued by alice: flaky; lost less than 0.01 GPU-hours since the last checkpoint"

    held_job, held_allocation = _running(fleet, gpus=2, checkpoint_s=5, node=2, generation=8)
    assert alice.post(f"{J}{held_job.pk}/requeue/", {"hold": True}, format="json").status_code == 200
    transitions.complete_release(held_allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-2")
    held = Event.objects.get(job=held_job, kind=EventKind.JOB_HELD)
    assert "requeued held (less than 0.01 GPU-hours lost)" in held.message, held.message


def test_with_hold_it_comes_back_held_by_whoever_asked_and_release_puts_it_in_line(fleet, alice) -> None:
    job, allocation = _running(fleet)
    r = alice.post(f"{J}{job.pk}/requeue/", {"hold": True, "reason": "wait for dataset v3"}, format="json")
    assert r.status_code == 200, r.content[:400]
    assert r.json()["job"]["state_label"] == "stopping: requeue held"
    assert f"back to the queue held (release it with qm release {job.pk})" in r.json()["detail"]
    assert Allocation.objects.get(pk=allocation.pk).release_reason == transitions.RELEASE_REQUEUED_HELD

    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")

    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.requeue_count == 1
    assert (job.hold, job.held_by_id, job.hold_reason) == (JobHold.USER, fleet.users["owner"].pk, "wait for dataset v3")
    assert job.pending_code == "Held"
    held = Event.objects.get(job=job, kind=EventKind.JOB_HELD)
    assert held.data["requeued"] is True and held.data["held_by"] == "alice"
    kinds = list(Event.objects.filter(job=job).order_by("created_at", "id").values_list("kind", flat=True))
    assert kinds.index(EventKind.JOB_STOPPING) < kinds.index(EventKind.JOB_REQUEUED) < kinds.index(EventKind.JOB_HELD)
    # The existing release action puts it back in line.
    released = alice.post(f"{J}{job.pk}/release/")
    assert released.status_code == 200, released.content[:300]
    job.refresh_from_db()
    assert job.hold == JobHold.NONE and job.state == JobState.PENDING


def test_an_admins_requeue_with_hold_is_an_admins_hold(fleet, alice, admin) -> None:
    job, allocation = _running(fleet)
    assert admin.post(f"{J}{job.pk}/requeue/", {"hold": True}, format="json").status_code == 200
    transitions.complete_release(allocation.pk, exit_code=0, at=timezone.now(), actor="agent:h100-1")
    job.refresh_from_db()
    assert job.hold == JobHold.ADMIN and job.held_by_id == fleet.users["admin"].pk
    refused = alice.post(f"{J}{job.pk}/release/")
    assert refused.status_code == 403  # only an admin releases an admin's hold
    assert admin.post(f"{J}{job.pk}/release/").status_code == 200


def test_webhooks_subscribed_to_requeued_are_told_once_when_it_is_back_in_the_queue(fleet, alice) -> None:
    hook = NotificationHook.objects.create(user=fleet.users["owner"], url="https://hooks.example.com/qm",
                                           events=["requeued", "preempted", "cancelled"], secret="s" * 32,
                                           created_at=timezone.now())
    job, allocation = _running(fleet)
    assert alice.post(f"{J}{job.pk}/requeue/", {"reason": "bad node"}, format="json").status_code == 200
    # The stop's notice is no preemption and no cancel: nothing yet.
    assert not NotificationDelivery.objects.filter(hook=hook).exists()

    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")

    delivery = NotificationDelivery.objects.get(hook=hook)
    assert delivery.event == "requeued" and delivery.job_id == job.pk
    assert delivery.payload["state"] == "pending" and delivery.payload["actor"] == "agent:h100-1"
    assert delivery.payload["message"].startswith("Requeued by alice: bad node; lost ")
    assert delivery.payload["lost_gpu_hours"] == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("role,status", [("other_team", 404), ("finance", 403), ("anonymous", 401), ("admin", 200),
                                         ("owner", 200)])
def test_who_may_requeue_is_who_may_cancel(fleet, role, status) -> None:
    job, allocation = _running(fleet)
    r = client_for(fleet, role).post(f"{J}{job.pk}/requeue/")
    assert r.status_code == status, r.content[:300]
    cancel = client_for(fleet, role).post(f"{J}{job.pk}/cancel/") if status != 200 else None
    if cancel is not None:
        assert cancel.status_code == status  # the same rule as cancel
    allocation.refresh_from_db()
    assert (allocation.state == AllocationState.RELEASING) == (status == 200)
    if status != 200:
        assert not Event.objects.filter(job=job).exists()


def test_a_team_member_who_did_not_submit_it_may_requeue_it(fleet) -> None:
    job, _ = _running(fleet)
    carol = client_for_user(f.make_user("carol", team=fleet.ml))
    assert carol.post(f"{J}{job.pk}/requeue/").status_code == 200


def client_for_user(user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(user)}")
    return client


def test_a_waiting_job_is_refused_it_waits_already(fleet, alice) -> None:
    waiting = f.make_job(fleet.ml, submitter=fleet.users["owner"])
    r = alice.post(f"{J}{waiting.pk}/requeue/")
    assert r.status_code == 409
    assert r.json()["detail"] == f"Job {waiting.pk} is waiting already: only a running or ended job can be requeued."
    held = f.make_job(fleet.ml, submitter=fleet.users["owner"], hold=JobHold.USER)
    r = alice.post(f"{J}{held.pk}/requeue/", {"hold": True}, format="json")
    assert r.status_code == 409
    assert r.json()["detail"] == (f"Job {held.pk} is waiting already: only a running or ended job can be requeued. It is "
                                  f"held: release it when it may start (qm release {held.pk}).")
    assert not Event.objects.filter(job__in=[waiting, held]).exists()


def test_an_unschedulable_job_is_refused(fleet, alice) -> None:
    never = f.make_job(fleet.ml, submitter=fleet.users["owner"], state=JobState.UNSCHEDULABLE)
    r = alice.post(f"{J}{never.pk}/requeue/")
    assert r.status_code == 409 and r.json()["detail"].startswith(f"Job {never.pk} never ran")


EXPECTED_STOPPING = {
    "preempted": "it is being preempted and goes back to the queue by itself when its processes exit.",
    "cancelled": "it is being cancelled and ends when its processes exit; requeue it then to run it again.",
    "timed-out": None,  # at its runtime limit: said below
    "resized": "it is being stopped to resize and goes back to the queue by itself when its processes exit.",
    "gang-exit": "it ends when its processes exit.",
}


def test_a_job_already_stopping_is_refused_whatever_stops_it(fleet, alice) -> None:
    jobs = make_stopping_jobs(fleet)
    for name, words in EXPECTED_STOPPING.items():
        job = jobs[name]
        allocation = Allocation.objects.get(job=job)
        r = alice.post(f"{J}{job.pk}/requeue/", {"hold": True}, format="json")
        assert r.status_code == 409, (name, r.content[:300])
        if words is None:
            assert r.json()["detail"] == (f"Job {job.pk} is already stopping at its runtime limit: it ends timed out "
                                          "when its processes exit; requeue it then to run it again.")
        else:
            assert r.json()["detail"] == f"Job {job.pk} is already stopping: {words}", name
        again = Allocation.objects.get(pk=allocation.pk)
        assert (again.state, again.release_reason) == (allocation.state, allocation.release_reason)
        assert not Event.objects.filter(job=job).exists()


def test_a_second_requeue_is_refused_and_a_cancel_during_it_ends_the_job_cancelled(fleet, alice) -> None:
    job, allocation = _running(fleet)
    assert alice.post(f"{J}{job.pk}/requeue/", {"hold": True}, format="json").status_code == 200
    again = alice.post(f"{J}{job.pk}/requeue/")
    assert again.status_code == 409
    assert again.json()["detail"] == (f"Job {job.pk} is already stopping to be requeued: it goes back to the queue "
                                      "held when its processes exit.")

    cancel = alice.post(f"{J}{job.pk}/cancel/")
    assert cancel.status_code == 200, cancel.content[:300]
    assert "instead of being requeued" in cancel.json()["detail"]
    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:h100-1")
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.requeue_count == 0 and job.hold == JobHold.NONE


@pytest.mark.parametrize("body,field", [
    ({"hold": "maybe"}, "hold"),
    ({"reason": "two\nlines"}, "reason"),
    ({"reason": "x" * 1001}, "reason"),
    ({"force": True}, "force"),
])
def test_a_bad_body_is_a_400_naming_the_field_and_nothing_is_written(fleet, alice, body, field) -> None:
    job, allocation = _running(fleet)
    r = alice.post(f"{J}{job.pk}/requeue/", body, format="json")
    assert r.status_code == 400, r.content[:300]
    assert field in r.json()["errors"] if "errors" in r.json() else field in r.json()
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.ACTIVE and not Event.objects.filter(job=job).exists()


def test_a_job_whose_processes_exited_before_the_requeue_is_requeued_from_its_end(fleet, alice) -> None:
    """An exit that got there first wins: no stop, no lost work; the job, ended, goes back to
    the queue at once (tests/controlplane/api/test_requeue_ended_jobs.py)."""
    job, allocation = _running(fleet)
    transitions.complete_release(allocation.pk, exit_code=0, at=timezone.now(), actor="agent:h100-1")
    r = alice.post(f"{J}{job.pk}/requeue/")
    assert r.status_code == 200, r.content[:300]
    assert r.json()["detail"].startswith(f"Job {job.pk} had succeeded and is back in the queue")
    assert not Event.objects.filter(job=job, kind__in=transitions.STOP_NOTICE_KINDS).exists()
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.lost_gpu_seconds == 0.0


def test_a_node_fenced_before_confirming_the_stop_still_requeues_it_as_asked(fleet, alice) -> None:
    from django.db import transaction

    from controlplane.services.reconcile import lock_scheduler_lease

    job, allocation = _running(fleet)
    assert alice.post(f"{J}{job.pk}/requeue/", {"hold": True, "reason": "flaky"}, format="json").status_code == 200
    with transaction.atomic():
        lease = lock_scheduler_lease()
        lease.generation_counter = max(lease.generation_counter, 100)  # past the hand-made generation 7
        assert transitions.fence_allocation(allocation.pk, lease=lease, at=timezone.now(), actor="reconciler",
                                            reason="NodeLeaseExpired")
    job.refresh_from_db()
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.FENCED and allocation.generation > 7
    assert job.state == JobState.PENDING and job.requeue_count == 1 and job.hold == JobHold.USER
    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert requeued.message.startswith("Requeued by alice: flaky (h100-1 stopped answering before confirming the stop)")


def test_an_array_requeue_is_for_its_team_and_admins_and_refuses_a_bad_body(fleet, alice, admin) -> None:
    import uuid

    array_id = uuid.uuid4()
    tasks = []
    for index in range(2):
        job, _ = _running(fleet, gpus=1, array_id=array_id, array_index=index, generation=30 + index, node=1 + index)
        tasks.append(job)
    url = f"/api/v1/job-arrays/{array_id}/requeue/"
    assert client_for(fleet, "other_team").post(url).status_code == 404
    assert client_for(fleet, "finance").post(url).status_code == 403
    bad = alice.post(url, {"hold": "later"}, format="json")
    assert bad.status_code == 400 and "hold" in bad.json()["errors"]
    assert not Event.objects.filter(job__in=tasks).exists()

    r = admin.post(url, {"reason": "rack maintenance"}, format="json")

    assert r.status_code == 200, r.content[:300]
    assert sorted(r.json()["requeued"]) == sorted(t.pk for t in tasks) and r.json()["not_running"] == 0
    assert Event.objects.filter(job__in=tasks, kind=EventKind.JOB_STOPPING, actor="user:root").count() == 2
