"""A node whose agent shuts down takes no new work while the agent stops its jobs.

Found on the demo (4 Dec): SIGTERM to `qm-agent --name real-01` with two jobs, one stopping at
once and one ignoring SIGTERM until its 20 s grace ran out. The node stayed `ready` until the
goodbye, so every cycle bound a waiting job on the four GPUs just freed, which the agent
refused: job 76 was bound and requeued nine times in 20 s. Now the first job the agent reports
stopped for its shutdown makes the node `draining` (no new work, `AgentShuttingDown`); the
goodbye takes it down, and it comes back ready, as before, when its agent registers again."""

from __future__ import annotations

from django.utils import timezone

from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, Node
from controlplane.services import reconcile
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node


def _heartbeat(name: str, token: str, *, stopped: list[int], goodbye: bool = False) -> None:
    reports = [{"kind": "lost", "generation": g, "at": timezone.now().isoformat(), "exit_code": -15,
                "message": "stopped: shutdown"} for g in stopped]
    body: dict[str, object] = {"running": [], "reports": reports}
    if goodbye:
        body["goodbye"] = True
    r = agent_client(token).post(f"/api/v1/agent/nodes/{name}/heartbeat", body, format="json")
    assert r.status_code == 200, r.content


def test_a_node_whose_agent_shuts_down_takes_no_new_work_until_its_goodbye(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    fast = bind(make_job(fleet, gpus=4, name="fast-stop"), {node: [0, 1, 2, 3]})
    slow = bind(make_job(fleet, gpus=4, name="slow-stop"), {node: [4, 5, 6, 7]})

    _heartbeat("gpu-01", token, stopped=[fast.generation])  # the slow one still has its grace

    node = Node.objects.get(pk=node.pk)
    assert node.state == NodeState.DRAINING and not node.unschedulable
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason="AgentShuttingDown")
    assert event.message == ("gpu-01: ready → draining, its agent is stopping its jobs to shut down; no new work "
                             "goes there, and it goes down once they have stopped")

    _heartbeat("gpu-01", token, stopped=[slow.generation])
    assert reconcile.reconcile_nodes().cordoned == 0  # empty, but not an operator's drain
    assert Node.objects.get(pk=node.pk).state == NodeState.DRAINING

    _heartbeat("gpu-01", token, stopped=[], goodbye=True)
    assert Node.objects.get(pk=node.pk).state == NodeState.DOWN
    shutdown = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason="AgentShutdown")
    assert shutdown.message.startswith("gpu-01: draining → down, its agent shut down after stopping its work; "
                                       "requeued whole: ")

    register_node("gpu-01")
    assert Node.objects.get(pk=node.pk).state == NodeState.READY  # no operator wished it cordoned


def test_an_operators_cordon_survives_its_agent_shutting_down(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-02")
    job = bind(make_job(fleet, gpus=4, name="train"), {node: [0, 1, 2, 3]})
    Node.objects.filter(pk=node.pk).update(state=NodeState.CORDONED, unschedulable=True)

    _heartbeat("gpu-02", token, stopped=[job.generation], goodbye=True)
    register_node("gpu-02")

    assert Node.objects.get(pk=node.pk).state == NodeState.CORDONED
    assert not Event.objects.filter(node=node, reason="AgentShuttingDown").exists()


def test_an_agent_that_says_it_shuts_down_leaves_its_idle_gpus_free_of_new_work(fleet: LoopFleet) -> None:
    """Before any of its jobs has stopped, its idle GPUs were still bound: the node turned
    draining only at the first `stopped: shutdown` report. The agent now says `shutting_down`
    from its first contact after SIGTERM."""
    node, token = register_node("gpu-03")
    bind(make_job(fleet, gpus=4, name="slow-stop"), {node: [0, 1, 2, 3]})  # 4 GPUs idle

    r = agent_client(token).post("/api/v1/agent/nodes/gpu-03/heartbeat",
                                 {"running": [], "reports": [], "shutting_down": True}, format="json")

    assert r.status_code == 200, r.content
    assert Node.objects.get(pk=node.pk).state == NodeState.DRAINING
    assert Event.objects.filter(node=node, reason="AgentShuttingDown").count() == 1
    agent_client(token).post("/api/v1/agent/nodes/gpu-03/heartbeat",
                             {"running": [], "reports": [], "shutting_down": True}, format="json")
    assert Event.objects.filter(node=node, reason="AgentShuttingDown").count() == 1  # said once


def test_shutting_down_must_be_a_boolean(fleet: LoopFleet) -> None:
    _, token = register_node("gpu-04")
    r = agent_client(token).post("/api/v1/agent/nodes/gpu-04/heartbeat", {"shutting_down": "maybe"}, format="json")
    assert r.status_code == 400 and "shutting_down" in r.json()["errors"]
