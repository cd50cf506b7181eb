"""A job its agent stopped at its runtime limit ends timed out, not succeeded.

Found on the SRE drill (docs/operations.md, *Stopping*: "as a fallback the agent itself stops a
job still running --limit-grace past its limit without having been told to"): with the loop
workers stopped, job 12 (`runtime_limit_s` 20, a command that exits 0 on SIGTERM, as a job that
checkpoints on SIGTERM does) was stopped by its agent 25 s after its start ("runtime limit
passed without a stop from the control plane; stopping it"), and the control plane recorded
"Job succeeded with exit code 0" (`job.finished` `Succeeded`): the job page, `qm status`, the
finished-jobs counter and showback all said it completed, where the control plane's own stop
at the limit says `job.timed_out` and ends it `timed_out`. Now an exit the agent reports as
`stopped: limit` for a job whose limit has passed ends the same way as the control plane's stop:
a `job.timed_out` event naming the node whose agent stopped it, then `TimedOut`. An agent's word
alone does not end a job as timed out before its limit (the job's own exit then, as before).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Job, Node
from controlplane.services import cycle
from tests.controlplane.loop_fixtures import (
    LoopFleet,
    agent_client,
    bind,
    build_loop_fleet,
    make_job,
    register_node,
)

# What `qm-agent` says of a member it stopped at its runtime limit (controlplane/agent/node.py).
LIMIT_STOP = "stopped: limit"


def _report(token: str, name: str, *reports: dict) -> None:
    response = agent_client(token).post(f"/api/v1/agent/nodes/{name}/report", {"reports": list(reports)},
                                        format="json")
    assert response.status_code == 200, response.content


def _started_long_ago(allocation: Allocation, seconds: float) -> None:
    Allocation.objects.filter(pk=allocation.pk).update(started_at=timezone.now() - timedelta(seconds=seconds))


def test_sre_an_exit_the_agent_caused_at_the_runtime_limit_ends_the_job_timed_out(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet, runtime_limit_s=20)
    allocation = bind(job, {node: [0]})
    _started_long_ago(allocation, 26)

    _report(token, "gpu-01", {"kind": "exited", "generation": allocation.generation, "exit_code": 0,
                              "at": timezone.now().isoformat(), "message": LIMIT_STOP})

    job.refresh_from_db()
    assert job.state == JobState.TIMED_OUT
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.RELEASED
    timed_out = Event.objects.get(job=job, kind=EventKind.JOB_TIMED_OUT)
    assert "gpu-01" in timed_out.message and "runtime limit of 20 s" in timed_out.message
    finished = Event.objects.get(job=job, kind=EventKind.JOB_FINISHED)
    assert finished.data["state"] == JobState.TIMED_OUT and "succeeded" not in finished.message


def test_sre_a_gang_member_stopped_at_the_limit_times_the_whole_gang_out(fleet: LoopFleet) -> None:
    a, token_a = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    job = make_job(fleet, gpus=16, gpus_per_node=8, runtime_limit_s=60)
    allocation = bind(job, {a: range(8), b: range(8)})
    _started_long_ago(allocation, 95)

    _report(token_a, "gpu-a", {"kind": "exited", "generation": allocation.generation, "exit_code": -15,
                               "at": timezone.now().isoformat(), "message": LIMIT_STOP})

    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.RELEASING
    assert Allocation.objects.get(pk=allocation.pk).release_reason == "RuntimeLimitExceeded"
    _report(token_b, "gpu-b", {"kind": "exited", "generation": allocation.generation, "exit_code": -15,
                               "at": timezone.now().isoformat(), "message": "stopped: release"})
    job.refresh_from_db()
    assert job.state == JobState.TIMED_OUT
    assert Event.objects.filter(job=job, kind=EventKind.JOB_TIMED_OUT).count() == 1


def test_sre_the_agents_word_alone_does_not_time_a_job_out_before_its_limit(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet, runtime_limit_s=3600)
    allocation = bind(job, {node: [0]})
    _started_long_ago(allocation, 30)

    _report(token, "gpu-01", {"kind": "exited", "generation": allocation.generation, "exit_code": 0,
                              "at": timezone.now().isoformat(), "message": LIMIT_STOP})

    assert Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_TIMED_OUT).exists()


@pytest.mark.django_db(transaction=True)
def test_sre_a_real_agent_stopping_a_job_at_its_limit_with_the_loop_down_times_it_out(live_server: Any) -> None:
    from tests.controlplane.agent.test_agent_end_to_end import drive, sim_agent

    fleet = build_loop_fleet()
    agent = sim_agent(live_server.url, limit_grace_s=0.3)
    drive([agent], lambda: Node.objects.filter(name="sim-000", state=NodeState.READY).exists())
    job = make_job(fleet, runtime_limit_s=1)  # a simulated job that runs until stopped
    assert cycle.run_cycle("test").binds == 1

    # No cycle runs from here on: the control plane never stops it; its agent does.
    drive([agent], lambda: Job.objects.get(pk=job.pk).state not in (JobState.PENDING, JobState.RUNNING,
                                                                        JobState.PREEMPTING), timeout=20)

    assert Job.objects.get(pk=job.pk).state == JobState.TIMED_OUT
    assert agent.counters["limit_stopped"] == 1
    assert "the agent on sim-000 stopped it" in Event.objects.get(job=job, kind=EventKind.JOB_TIMED_OUT).message


def test_sre_the_agents_stop_says_the_runtime_limit_as_qm_and_the_job_page_do(fleet: LoopFleet) -> None:
    """Said "runtime limit of 5400 s" where qm, the change sentence and the page say `1 h 30 min`."""
    node, token = register_node("gpu-01")
    job = make_job(fleet, runtime_limit_s=5400)
    allocation = bind(job, {node: [0]})
    _started_long_ago(allocation, 5406)

    _report(token, "gpu-01", {"kind": "exited", "generation": allocation.generation, "exit_code": 0,
                              "at": timezone.now().isoformat(), "message": LIMIT_STOP})

    timed_out = Event.objects.get(job=job, kind=EventKind.JOB_TIMED_OUT)
    assert "runtime limit of 1 h 30 min" in timed_out.message, timed_out.message
