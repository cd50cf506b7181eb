"""A run its agent could not launch tells its owner why, in the job's history.

The agent reports such a run exited 126 with `launch failed: <reason>` (controlplane/agent/node.py,
NodeAgent._launch): an env name the kernel's environment cannot hold, a rank's output file that
could not be opened. Until 5 Dec only the agent's log kept the reason; the job read "Job failed
with exit code 126" and its owner had to ask an operator for the node's log. Now the job's
finished event (and, in a gang across nodes, the member's exit and the stop of the rest) carries
the agent's words, in the message and as `agent_said` in its data. The agent's other words of
an exit (`stopped: limit`, `stopped: release`) are the control plane's own business, told by
its own events, and stay out. Agents speak the protocol over HTTP here; the real agent's side
is tests/controlplane/agent/test_sre_agent_launch_error_of_any_kind.py.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event
from controlplane.services import cycle
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, make_job, register_node

pytestmark = pytest.mark.django_db(transaction=True)

LAUNCH_FAILED = "launch failed: ValueError: illegal environment variable name"


def _report(token: str, node: str, report: dict) -> None:
    response = agent_client(token).post(f"/api/v1/agent/nodes/{node}/report", {"reports": [report]},
                                        format="json")
    assert response.status_code == 200, response.content


def _exited(generation: int, code: int, message: str) -> dict:
    return {"kind": "exited", "generation": generation, "at": timezone.now().isoformat(), "exit_code": code,
            "message": message}


@pytest.mark.parametrize(("message", "told"), [
    (LAUNCH_FAILED, LAUNCH_FAILED),
    (f"  {LAUNCH_FAILED}  ", LAUNCH_FAILED),
    ("", ""),
    ("never started on this node", ""),
], ids=["launch_failed", "launch_failed_spaced", "no_words", "other_words"])
def test_a_launch_failure_reason_reaches_the_jobs_finished_event(fleet: LoopFleet, message: str, told: str) -> None:
    _, token = register_node("gpu-0")
    job = make_job(fleet, name="bad-env", gpus=2)
    assert cycle.run_cycle("worker-1").binds == 1
    allocation = Allocation.objects.get(job=job)

    _report(token, "gpu-0", _exited(allocation.generation, 126, message))

    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.exit_code == 126
    finished = Event.objects.get(job=job, kind=EventKind.JOB_FINISHED)  # its node is the event's own
    if told:
        assert finished.message == f"Job failed with exit code 126: {told}" and finished.data["agent_said"] == told
    else:
        assert finished.message == "Job failed with exit code 126" and "agent_said" not in finished.data


def test_a_gang_member_that_could_not_launch_says_why_and_so_does_the_stop_of_the_rest(fleet: LoopFleet) -> None:
    tokens = dict((node.name, token) for node, token in (register_node("gpu-0"), register_node("gpu-1")))
    job = make_job(fleet, name="gang", gpus=16, gpus_per_node=8)
    assert cycle.run_cycle("worker-1").binds == 1
    allocation = Allocation.objects.get(job=job)
    assert set(AllocationGpu.objects.filter(allocation=allocation).values_list("node__name", flat=True)) == {
        "gpu-0", "gpu-1"}
    _report(tokens["gpu-1"], "gpu-1", {"kind": "started", "generation": allocation.generation,
                                       "at": timezone.now().isoformat()})

    _report(tokens["gpu-0"], "gpu-0", _exited(allocation.generation, 126, LAUNCH_FAILED))

    gone = Event.objects.get(job=job, kind=EventKind.ALLOCATION_RELEASED, reason="MemberExited")
    assert gone.message.startswith(f"Generation {allocation.generation}: the member on gpu-0 is gone "
                                   f"(exit code 126): {LAUNCH_FAILED}; its 8 GPUs are free")
    assert gone.data["agent_said"] == LAUNCH_FAILED
    stopping = Event.objects.get(job=job, kind=EventKind.JOB_STOPPING)
    assert f"The gang member on gpu-0 exited with code 126 ({LAUNCH_FAILED}); the rest of the gang" in stopping.message


def test_a_gang_that_ended_because_a_member_could_not_launch_says_why_in_its_finished_event(
        fleet: LoopFleet) -> None:
    # The gang is settled when its last member is gone (_member_gone → transitions.complete_release),
    # with the exit code of the member that ended it; until 5 Dec without its words: the job read
    # "Job failed with exit code 126 (on gpu-0, gpu-1)" and the reason was only in the member's event.
    tokens = dict((node.name, token) for node, token in (register_node("gpu-0"), register_node("gpu-1")))
    job = make_job(fleet, name="gang", gpus=16, gpus_per_node=8)
    assert cycle.run_cycle("worker-1").binds == 1
    allocation = Allocation.objects.get(job=job)
    _report(tokens["gpu-1"], "gpu-1", {"kind": "started", "generation": allocation.generation,
                                       "at": timezone.now().isoformat()})
    _report(tokens["gpu-0"], "gpu-0", _exited(allocation.generation, 126, LAUNCH_FAILED))

    # the rest of the gang stops as asked; its own words are the control plane's business
    _report(tokens["gpu-1"], "gpu-1", _exited(allocation.generation, 143, "stopped: release"))

    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.exit_code == 126
    finished = Event.objects.get(job=job, kind=EventKind.JOB_FINISHED)
    assert finished.message == f"Job failed with exit code 126 (on gpu-0, gpu-1): {LAUNCH_FAILED}"
    assert finished.data["agent_said"] == LAUNCH_FAILED and finished.data["exit_code"] == 126


def test_a_member_gone_alone_on_its_node_carries_the_agents_words_to_the_finished_event(fleet: LoopFleet) -> None:
    # _member_gone's single-node branch settles through transitions.complete_release, as the
    # gang's last member does: the agent's words reach the job's finished event there too, in the
    # words complete_releases gives a batch of exits (transitions.finished_words). (Over the API
    # every single-node exit goes through complete_releases; this branch is reached by a stop
    # confirmed at registration or by a 'lost' report, which carry no words of the owner's.)
    from controlplane.services.agent_protocol import _member_gone

    node, _ = register_node("gpu-0")
    job = make_job(fleet, name="alone", gpus=2)
    assert cycle.run_cycle("worker-1").binds == 1
    allocation = Allocation.objects.get(job=job)

    _member_gone(allocation.pk, allocation.generation, node, exit_code=126, at=timezone.now(), actor="agent:gpu-0",
                 said=LAUNCH_FAILED)

    finished = Event.objects.get(job=job, kind=EventKind.JOB_FINISHED)
    assert finished.message == f"Job failed with exit code 126: {LAUNCH_FAILED}"
    assert finished.data == {"state": "failed", "exit_code": 126, "nodes": ["gpu-0"], "agent_said": LAUNCH_FAILED}
