"""An agent's shutdown (SIGTERM to qm-agent: `goodbye`) takes its node down, and the node's own
event names the jobs requeued off it, as a lease that ran out does ("fenced job 7 (…, also on
sim-000)"). Found on the demo (2 Dec): "sim-001: ready → down, its agent shut down after stopping
its work" while two jobs were requeued off it; the node's history did not say which."""

from __future__ import annotations

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
