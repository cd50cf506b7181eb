"""An agent's shutdown (SIGTERM to qm-agent: `goodbye`) takes its node down, and the node's own
event names the jobs requeued off it, as a lease that ran out does ("fenced job 7 (…, also on
sim-000)"). Found on the demo (2 Dec): "sim-001: ready → down, its agent shut down after stopping
its work" while two jobs were requeued off it; the node's history did not say which."""

from __future__ import annotations

from django.utils import timezone

from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Event, Job
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node


def _goodbye(name: str, token: str) -> None:
    r = agent_client(token).post(f"/api/v1/agent/nodes/{name}/heartbeat", {"goodbye": True}, format="json")
    assert r.status_code == 200, r.content


def test_the_node_event_of_a_shutdown_names_the_jobs_requeued_off_it(fleet: LoopFleet) -> None:
    one, token = register_node("gpu-01")
    two, _ = register_node("gpu-02")
    gang = make_job(fleet, gpus=16, name="pretrain", gpus_per_node=8)
    bind(gang, {one: list(range(8)), two: list(range(8))})

    _goodbye("gpu-01", token)

    event = Event.objects.get(node=one, kind=EventKind.NODE_STATE, reason="AgentShutdown")
    assert event.message == ("gpu-01: ready → down, its agent shut down after stopping its work; requeued whole: "
                             f"job {gang.pk} pretrain (also on gpu-02)")
    assert event.data["requeued"] == [gang.pk]
    assert Job.objects.get(pk=gang.pk).state == JobState.PENDING


def test_an_idle_node_says_nothing_ran_on_it(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-03")

    _goodbye("gpu-03", token)

    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason="AgentShutdown")
    assert event.message == "gpu-03: ready → down, its agent shut down after stopping its work; nothing ran on it"
    assert event.data["requeued"] == []
    node.refresh_from_db()
    assert node.state == NodeState.DOWN


def _stopped_for_shutdown(name: str, token: str, generation: int, *, goodbye: bool, kind: str = "lost") -> None:
    """What qm-agent sends on SIGTERM: each job it stopped, as `lost` "stopped: shutdown", and the
    goodbye once nothing runs (in the same heartbeat when the jobs exit at once)."""
    report = {"kind": kind, "generation": generation, "at": timezone.now().isoformat(), "exit_code": -15,
              "message": "stopped: shutdown"}
    body: dict[str, object] = {"running": [], "reports": [report]}
    if goodbye:
        body["goodbye"] = True
    r = agent_client(token).post(f"/api/v1/agent/nodes/{name}/heartbeat", body, format="json")
    assert r.status_code == 200, r.content


def test_a_shutdown_names_the_jobs_its_agent_stopped_in_the_goodbye_heartbeat(fleet: LoopFleet) -> None:
    # Found on the demo (4 Dec): "h100-05: draining → down, its agent shut down after stopping its
    # work; nothing ran on it" while job 17 (8 GPUs) was requeued off it in the same heartbeat.
    node, token = register_node("gpu-04")
    job = make_job(fleet, gpus=8, name="finetune")
    allocation = bind(job, {node: list(range(8))})

    _stopped_for_shutdown("gpu-04", token, allocation.generation, goodbye=True)

    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason="AgentShutdown")
    assert event.message == ("gpu-04: ready → down, its agent shut down after stopping its work; requeued whole: "
                             f"job {job.pk} finetune")
    assert event.data["requeued"] == [job.pk]
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


def test_a_shutdown_names_a_gang_its_agent_stopped_before_the_goodbye(fleet: LoopFleet) -> None:
    one, token = register_node("gpu-05")
    two, _ = register_node("gpu-06")
    gang = make_job(fleet, gpus=16, name="pretrain", gpus_per_node=8)
    allocation = bind(gang, {one: list(range(8)), two: list(range(8))})

    _stopped_for_shutdown("gpu-05", token, allocation.generation, goodbye=False)
    _goodbye("gpu-05", token)

    event = Event.objects.get(node=one, kind=EventKind.NODE_STATE, reason="AgentShutdown")
    # draining since its agent reported the stop (test_shutdown_drains_node.py)
    assert event.message == ("gpu-05: draining → down, its agent shut down after stopping its work; requeued whole: "
                             f"job {gang.pk} pretrain (also on gpu-06)")
    assert event.data["requeued"] == [gang.pk]
    # gpu-06's agent stopped nothing: the gang was gpu-05's to name.
    _, token_two = register_node("gpu-06")
    _goodbye("gpu-06", token_two)
    other = Event.objects.get(node=two, kind=EventKind.NODE_STATE, reason="AgentShutdown")
    assert other.data["requeued"] == [], other.message


def test_a_later_shutdown_of_an_idle_node_does_not_name_the_jobs_of_an_earlier_one(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-07")
    job = make_job(fleet, gpus=8, name="finetune")
    allocation = bind(job, {node: list(range(8))})
    _stopped_for_shutdown("gpu-07", token, allocation.generation, goodbye=True)
    _, token = register_node("gpu-07")

    _goodbye("gpu-07", token)

    last = Event.objects.filter(node=node, kind=EventKind.NODE_STATE, reason="AgentShutdown").order_by("-id").first()
    assert last is not None
    assert last.message.endswith("its agent shut down after stopping its work; nothing ran on it"), last.message
    assert last.data["requeued"] == []


def test_a_job_bound_while_its_agent_shut_down_is_refused_and_requeued_as_the_node_going_away(
    fleet: LoopFleet,
) -> None:
    # qm-agent refuses, without starting it, a job bound on its node while it stops its jobs to
    # shut down ("refused", "stopped: shutdown"): requeued because the agent shut down, not
    # because an agent refused to run it, and named by the node's event.
    node, token = register_node("gpu-08")
    job = make_job(fleet, gpus=2, name="late")
    allocation = bind(job, {node: [0, 1]})

    _stopped_for_shutdown("gpu-08", token, allocation.generation, goodbye=True, kind="refused")

    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert requeued.message.startswith("Requeued whole after being fenced off gpu-08, whose agent shut down"), \
        requeued.message
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason="AgentShutdown")
    assert event.data["requeued"] == [job.pk]
