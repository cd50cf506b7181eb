"""Cancelling a job while the scheduler preempts it, end to end on PostgreSQL.

Found by QA: a cancel during a preemption's grace period was refused with 409 ("it will be
requeued when its processes exit"), so the user had to cancel again after the requeue. The
user wants the job gone: the cancel is accepted (200, as for a running job), recorded as an
event, and when the agents confirm the stop the job ends CANCELLED instead of being requeued.
Nothing is cut short: the allocation keeps its GPUs and its deadline until the agents confirm
(or its node is fenced), exactly as a preemption's stop does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node, PriorityClass
from controlplane.services import cycle, reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, make_job, register_node

pytestmark = pytest.mark.django_db(transaction=True)


def _report(token: str, node: str, *reports: dict) -> None:
    response = agent_client(token).post(f"/api/v1/agent/nodes/{node}/report", {"reports": list(reports)},
                                        format="json")
    assert response.status_code == 200, response.content


def _preempting(fleet: LoopFleet, nodes: int) -> tuple[Job, Allocation, Job, list[tuple[Node, str]]]:
    """A research job on `nodes` whole nodes, started by its agents 90 minutes ago, then
    preempted by a job of a higher class through a real cycle: its allocation is stopping under
    a deadline, the job PREEMPTING."""
    PriorityClass.objects.filter(pk=fleet.research.pk).update(min_runtime_s=0, grace_period_s=60)
    PriorityClass.objects.create(name="prod", value=1000, preemptible=False)
    registered = [register_node(f"gpu-{i}") for i in range(nodes)]
    victim = make_job(fleet, name="victim", gpus=8 * nodes, gpus_per_node=8, runtime_limit_s=8 * 3600,
                      submitted_at=timezone.now() - timedelta(hours=2))
    assert cycle.run_cycle("worker-1").binds == 1
    allocation = Allocation.objects.get(job=victim)
    started = (timezone.now() - timedelta(minutes=90)).isoformat()
    for node, token in registered:
        _report(token, node.name, {"kind": "started", "generation": allocation.generation, "at": started})
    Allocation.objects.filter(pk=allocation.pk).update(started_at=timezone.now() - timedelta(minutes=90))
    Job.objects.filter(pk=victim.pk).update(state=JobState.RUNNING, started_at=timezone.now() - timedelta(minutes=90))

    urgent = Job.objects.create(team=fleet.team, name="urgent", priority_class=PriorityClass.objects.get(name="prod"),
                                gpus=8, runtime_limit_s=3600, submitted_at=timezone.now(),
                                state_changed_at=timezone.now())
    assert cycle.run_cycle("worker-1").stops == 1
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.RELEASING
    assert allocation.release_reason == transitions.RELEASE_PREEMPTED
    assert Job.objects.get(pk=victim.pk).state == JobState.PREEMPTING
    return victim, allocation, urgent, registered


def _owner(fleet: LoopFleet) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(f.make_user('alice', team=fleet.team))}")
    return client


@pytest.mark.parametrize("nodes", [1, 2], ids=["single-node", "gang"])
def test_a_cancel_during_the_grace_period_ends_the_job_cancelled_not_requeued(fleet: LoopFleet, nodes: int) -> None:
    victim, allocation, urgent, registered = _preempting(fleet, nodes)
    deadline = allocation.release_deadline
    alice = _owner(fleet)

    r = alice.post(f"/api/v1/jobs/{victim.pk}/cancel/")

    assert r.status_code == 200, r.json()
    assert r.json()["job"]["state"] == JobState.PREEMPTING
    assert "cancelled" in r.json()["detail"] and "instead of being requeued" in r.json()["detail"]
    # The stop goes on as it was: GPUs still owned, same generation and deadline, until the
    # agents confirm.
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.RELEASING and allocation.release_deadline == deadline
    assert allocation.release_reason == transitions.RELEASE_CANCELLED
    assert AllocationGpu.objects.filter(allocation=allocation, live=True).count() == 8 * nodes
    cancel = Event.objects.get(job=victim, kind=EventKind.JOB_CANCELLED)
    assert cancel.actor == "user:alice" and cancel.allocation_id == allocation.pk
    assert "preempted" in cancel.message
    # A second cancel: already being cancelled.
    again = alice.post(f"/api/v1/jobs/{victim.pk}/cancel/")
    assert again.status_code == 409
    assert again.json()["detail"] == f"Job {victim.pk} is already stopping; it will be cancelled when its processes exit."
    # A cycle meanwhile neither rebinds nor signals anything new.
    assert cycle.run_cycle("worker-1").stops == 0

    for node, token in registered:  # the agents confirm the stop (SIGTERM's exit code)
        _report(token, node.name, {"kind": "exited", "generation": allocation.generation,
                                   "at": timezone.now().isoformat(), "exit_code": 143})

    victim.refresh_from_db()
    assert victim.state == JobState.CANCELLED and victim.finished_at is not None
    assert victim.preemption_count == 0
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.RELEASED
    assert not AllocationGpu.objects.filter(allocation=allocation, live=True).exists()
    kinds = list(Event.objects.filter(job=victim).order_by("created_at", "id").values_list("kind", "reason"))
    assert kinds.index((EventKind.JOB_PREEMPTING, transitions.RELEASE_PREEMPTED)) < kinds.index(
        (EventKind.JOB_CANCELLED, "Cancelled")) < kinds.index((EventKind.JOB_FINISHED, "Cancelled"))
    assert not any(kind in (EventKind.JOB_PREEMPTED, EventKind.JOB_REQUEUED) for kind, _ in kinds)
    # The preemptor gets the freed GPUs; the cancelled job is never placed again.
    assert cycle.run_cycle("worker-1").binds == 1
    assert Job.objects.get(pk=urgent.pk).state != JobState.PENDING
    assert Allocation.objects.filter(job=victim).count() == 1
    assert Job.objects.get(pk=victim.pk).state == JobState.CANCELLED


def test_a_node_fenced_after_the_cancel_still_ends_the_job_cancelled(fleet: LoopFleet) -> None:
    """The allocation still goes through the normal fenced stop when its node stops answering
    before confirming: fenced, GPUs taken back, and the job cancelled (not requeued)."""
    victim, allocation, _, _ = _preempting(fleet, 1)
    assert _owner(fleet).post(f"/api/v1/jobs/{victim.pk}/cancel/").status_code == 200

    from django.db import transaction

    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        assert transitions.fence_allocation(allocation.pk, lease=lease, at=timezone.now(), actor="reconcile",
                                            reason="NodeLost")

    victim.refresh_from_db()
    assert victim.state == JobState.CANCELLED and victim.preemption_count == 0
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.FENCED
    assert not Event.objects.filter(job=victim, kind__in=[EventKind.JOB_PREEMPTED, EventKind.JOB_REQUEUED]).exists()


def test_a_job_stopping_at_its_runtime_limit_is_not_switched(fleet: LoopFleet) -> None:
    """A job already stopping for its runtime limit ends timed out: the cancel is refused with a
    409 saying so (not "requeued"), and nothing changes."""
    node, token = register_node("gpu-0")
    job = make_job(fleet, name="over", gpus=8, gpus_per_node=8, runtime_limit_s=60,
                   submitted_at=timezone.now() - timedelta(hours=1))
    assert cycle.run_cycle("worker-1").binds == 1
    allocation = Allocation.objects.get(job=job)
    Allocation.objects.filter(pk=allocation.pk).update(started_at=timezone.now() - timedelta(minutes=10))
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=timezone.now() - timedelta(minutes=10))
    assert cycle.run_cycle("worker-1").stops == 1

    r = _owner(fleet).post(f"/api/v1/jobs/{job.pk}/cancel/")

    assert r.status_code == 409
    assert r.json()["detail"] == (
        f"Job {job.pk} is already stopping at its runtime limit; it will end timed out when its processes exit."
    )
    assert Allocation.objects.get(pk=allocation.pk).release_reason == transitions.RELEASE_RUNTIME_LIMIT
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_CANCELLED).exists()
