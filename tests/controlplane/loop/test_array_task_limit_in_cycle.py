"""A job array's task limit in real scheduling cycles: an array of 6 one-GPU tasks submitted with
`%2` on a free 8-GPU node runs 2 at once, the other 4 waiting with the engine's reason
JobArrayTaskLimit (as the API's explanation says it); raised to 4 by its owner
(`PATCH job-arrays/{id}/`), the next cycle starts 2 more and no more."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Job
from controlplane.services import cycle
from controlplane.services import jobs as job_service
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, register_node


@pytest.fixture
def alice(fleet: LoopFleet) -> Any:
    return f.make_user("alice", team=fleet.team)


def _states(array_id: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for state in Job.objects.filter(array_id=array_id).values_list("state", flat=True):
        counts[state] = counts.get(state, 0) + 1
    return counts


def test_six_tasks_at_most_two_at_a_time_then_four(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")  # 8 free GPUs: room for all six without the limit
    submitted = job_service.submit(alice, job_service.SubmitRequest(name="sweep", gpus=1, array="0-5%2",
                                                                    runtime_limit_s=3600))
    array_id = submitted.array_id

    cycle.run_cycle("worker-1")

    assert _states(array_id) == {JobState.RUNNING: 2, JobState.PENDING: 4}
    assert AllocationGpu.objects.filter(allocation__job__array_id=array_id, live=True).count() == 2
    running = list(Job.objects.filter(array_id=array_id, state=JobState.RUNNING)
                   .order_by("array_index").values_list("array_index", flat=True))
    assert running == [0, 1]  # in queue order
    waiting = list(Job.objects.filter(array_id=array_id, state=JobState.PENDING))
    assert {job.pending_code for job in waiting} == {"JobArrayTaskLimit"}
    assert all("at most 2 tasks at a time" in job.pending_message for job in waiting), waiting[0].pending_message
    # The explanation path says it as the cycle stored it (the job page and qm explain read it).
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(alice)}")
    explained = client.get(f"/api/v1/jobs/{waiting[0].pk}/explain/").json()
    assert explained["reason_code"] == "JobArrayTaskLimit", explained
    assert "Its array runs at most 2 tasks at a time" in explained["reason"]
    assert explained["would_start_if"] == "a running task of its array ends, or the array's task limit is raised"

    raised = client.patch(f"/api/v1/job-arrays/{array_id}/", {"array_task_limit": 4}, format="json")
    assert raised.status_code == 200, raised.json()
    cycle.run_cycle("worker-1")

    assert _states(array_id) == {JobState.RUNNING: 4, JobState.PENDING: 2}
    assert AllocationGpu.objects.filter(allocation__job__array_id=array_id, live=True).count() == 4
    still = Job.objects.filter(array_id=array_id, state=JobState.PENDING)
    assert {job.pending_code for job in still} == {"JobArrayTaskLimit"}
    assert all("at most 4 tasks at a time" in job.pending_message for job in still)

    # Lowered to 1: nothing running is stopped, and nothing more starts.
    client.patch(f"/api/v1/job-arrays/{array_id}/", {"array_task_limit": 1}, format="json")
    cycle.run_cycle("worker-1")
    assert _states(array_id) == {JobState.RUNNING: 4, JobState.PENDING: 2}

    # Lifted: the rest start.
    client.patch(f"/api/v1/job-arrays/{array_id}/", {"array_task_limit": None}, format="json")
    cycle.run_cycle("worker-1")
    assert _states(array_id) == {JobState.RUNNING: 6}
