"""A gang whose member ended on its own is being stopped (`GangMemberExited`,
`GangMemberFailed`): that stop ends the job, with the first member's exit code, once the rest
of the gang is gone. When the rest's node stops answering before confirming, the fence ends the
job the same way, as it does a cancel's or a runtime limit's stop ("a stop committed meanwhile
decides the outcome", docs/architecture.md).

Until 5 Dec the fence requeued it: a gang whose rank on one node had finished with exit code 0
ran again from its last checkpoint because the other node went quiet during the grace period
(its cancel had been refused meanwhile: "its stop already ends it"), and a failed one was
retried as if a node failure had stopped it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, Event, Job, Node
from controlplane.services import reconcile
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("code", "state", "reason"), [(0, JobState.SUCCEEDED, "GangMemberExited"),
                                                       (3, JobState.FAILED, "GangMemberFailed")])
def test_a_gang_whose_member_ended_is_not_requeued_when_the_rest_is_fenced(
        fleet: LoopFleet, code: int, state: JobState, reason: str) -> None:
    a, token_a = register_node("gang-end-a")
    b, _ = register_node("gang-end-b")
    job = make_job(fleet, name="two-nodes", gpus=16, gpus_per_node=8)
    allocation = bind(job, {a: range(8), b: range(8)})
    at = timezone.now()
    r = agent_client(token_a).post(f"/api/v1/agent/nodes/{a.name}/report", {"reports": [
        {"kind": "exited", "generation": allocation.generation, "at": at.isoformat(), "exit_code": code}]},
        format="json")
    assert r.status_code == 200, r.content
    allocation.refresh_from_db()
    assert (allocation.state, allocation.release_reason) == (AllocationState.RELEASING, reason)

    # gang-end-b stops answering before its agent confirms the stop
    now = timezone.now()
    Node.objects.filter(pk=b.pk).update(agent_lease_expires_at=now - timedelta(seconds=1))
    reconcile.expire_node(b.pk, now=now)

    job = Job.objects.get(pk=job.pk)
    assert job.state == state and job.exit_code == code, (job.state, job.exit_code, job.pending_words)
    assert job.requeue_count == 0
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.FENCED
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_REQUEUED).exists()
    finished = Event.objects.get(job=job, kind=EventKind.JOB_FINISHED)
    assert finished.data["exit_code"] == code and finished.data["state"] == state
    assert f"exit code {code}" in finished.message and "gang-end-b stopped answering" in finished.message
