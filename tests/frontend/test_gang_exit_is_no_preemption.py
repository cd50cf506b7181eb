"""A gang job that ends by itself is no preempted job. When one member of a multi-node gang
exits, the rest of the gang is stopped under a `job.preempting` notice (reason
GangMemberExited: "The gang member on h100-01 exited with code 0; the rest of the gang gets 30 s
to exit"), and the succeeded job's page showed a "Preempted" panel with those words, as `qm
status` showed "last preempted:". Only a stop that puts the job back in the queue (a preemption,
a resize, a requeue someone asked for: services/stopping.REQUEUEING_STOPS) is its last
preemption; a job preempted and requeued before its gang ended keeps that notice."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node
from controlplane.services import agent_protocol, transitions
from controlplane.services.cycle import run_cycle
from frontend.views.jobs import last_preemption

pytestmark = pytest.mark.django_db

WHY = "Preempted: team language reclaims its H100-80GB quota for job 99. It has 120 s to checkpoint and stop."


def gang_ends_by_itself(job: Job, at: Any) -> None:
    """Each member exits 0 in turn: the first one's exit stops the rest, which then go too."""
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    nodes = Node.objects.filter(pk__in=AllocationGpu.objects.filter(allocation=allocation).values("node_id"))
    for i, node in enumerate(nodes.order_by("name")):
        agent_protocol._member_gone(allocation.pk, allocation.generation, node, exit_code=0,
                                    at=at + timedelta(seconds=i), actor=f"agent:{node.name}")


def events_of(job: Job) -> list[dict[str, Any]]:
    return list(job.events.order_by("created_at", "id").values("created_at", "kind", "reason", "message", "data"))


def test_a_gang_that_ended_by_itself_shows_no_preemption(client_for, submit_as) -> None:
    job = submit_as("alice", name="pretrain", gpus=16, gpus_per_node=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    gang_ends_by_itself(job, timezone.now())

    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert any(e["reason"] == "GangMemberExited" for e in events_of(job))  # the notice that misled
    assert last_preemption(events_of(job)) is None
    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="preemption-notice"' not in html


def test_a_gang_preempted_then_ended_by_itself_keeps_its_preemption(client_for, submit_as) -> None:
    job = submit_as("alice", name="pretrain", gpus=16, gpus_per_node=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    first = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    now = timezone.now()
    assert transitions.signal_stop(first.pk, first.generation, reason=transitions.RELEASE_PREEMPTED,
                                   grace_period_s=120, at=now, actor="scheduler@epoch:1", message=WHY)
    transitions.complete_release(first.pk, exit_code=None, at=now + timedelta(seconds=30), actor="agent:h100-01")
    run_cycle("test")
    gang_ends_by_itself(job, now + timedelta(minutes=5))

    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    notice = last_preemption(events_of(job))
    assert notice is not None and notice["signal"]["message"].startswith(WHY)
    assert notice["requeue"] is not None
