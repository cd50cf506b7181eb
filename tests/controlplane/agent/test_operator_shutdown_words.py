"""A job stopped because its node's agent shut down says so.

Found on the operator's night drill: SIGTERM to the agent of opsa-000 (taking the node out on
purpose) stopped its job and took the node down ("its agent shut down after stopping its work"),
but the job's history said "Requeued whole after being fenced: opsa-000's agent lost its
processes", as if they had crashed. The agent reports such a stop as `lost` with the message
"stopped: shutdown"; the fence and requeue now say the agent shut down, as a node that went away
with its lease does ("fenced off opsa-000, whose agent shut down"). Any other loss keeps its
words."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, Event, Job
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node


@pytest.mark.parametrize(("message", "words", "reason"), [
    ("stopped: shutdown", "fenced off gpu-01, whose agent shut down", "NodeUnavailable"),
    ("", "fenced: gpu-01's agent lost its processes", "WorkLostOnNode"),
])
def test_operator_a_job_stopped_by_its_agent_shutting_down_says_so(
    fleet: LoopFleet, message: str, words: str, reason: str,
) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet, gpus=8)
    allocation = bind(job, {node: list(range(8))})
    report = {"kind": "lost", "generation": allocation.generation, "at": timezone.now().isoformat(),
              "exit_code": -15, "message": message}

    response = agent_client(token).post("/api/v1/agent/nodes/gpu-01/report", {"running": [], "reports": [report]},
                                        format="json")

    assert response.status_code == 200, response.content
    allocation = Allocation.objects.get(pk=allocation.pk)
    assert allocation.state == AllocationState.FENCED and allocation.release_reason == reason
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert requeued.message.startswith(f"Requeued whole after being {words}"), requeued.message
