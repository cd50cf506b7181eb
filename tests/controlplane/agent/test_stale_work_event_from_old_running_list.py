"""A node's `StaleWorkStopped` event says its agent "still runs generation(s) … that are no longer
its to run": it must not say so of a run the agent itself reported ended.

A wake-up's desired state (`nodes/wait` with `desired`, `qm-agent --wake-with-state`) is computed
from the `running` list the agent sent when it began the wait, up to 20 s before; a heartbeat
held up on the way can arrive after a later one too. Until 5 Dec such a reply recorded the run
the agent had reported ended meanwhile (its allocation released on that report) as stale work
still running there: every job ending on a node shortly before a bind woke it wrote a false
event into the node's history. A released generation is no longer counted; a fenced one (the
agent may really still run it) still is."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind
from controlplane.models import Allocation, Event
from controlplane.services import reconcile
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node

pytestmark = pytest.mark.django_db
WAIT = "/api/v1/agent/nodes/wait"


def _stale_events(node) -> list[Event]:  # type: ignore[no-untyped-def]
    return list(Event.objects.filter(node=node, kind=EventKind.NODE_STATE, reason="StaleWorkStopped"))


def test_a_wake_up_computed_from_a_running_list_older_than_an_exit_records_no_stale_work(
        fleet: LoopFleet, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    node, token = register_node("stale-event-0")
    first = bind(make_job(fleet, gpus=2, name="first"), {node: [0, 1]})
    client = agent_client("-")
    since = client.post(WAIT, {"nodes": [{"name": node.name, "token": token}]}, format="json").json()["seq"]
    # The wait begins while the first job runs; then the job exits, reported at once ...
    exited = agent_client(token).post(f"/api/v1/agent/nodes/{node.name}/report", {"running": [], "reports": [
        {"kind": "exited", "generation": first.generation, "at": timezone.now().isoformat(), "exit_code": 0}]},
        format="json")
    assert exited.status_code == 200, exited.content
    assert Allocation.objects.get(pk=first.pk).state == AllocationState.RELEASED
    # ... and the next cycle binds a job on its GPUs, which wakes the wait.
    with django_capture_on_commit_callbacks(execute=True):
        second = bind(make_job(fleet, gpus=2, name="second"), {node: [0, 1]})

    woken = client.post(WAIT, {"nodes": [{"name": node.name, "token": token, "running": [first.generation]}],
                               "since": since, "timeout_s": 5, "desired": True}, format="json")

    assert woken.status_code == 200, woken.content
    desired = woken.json()["desired"][node.name]
    assert [a["generation"] for a in desired["allocations"]] == [second.generation]
    assert _stale_events(node) == [], [e.message for e in _stale_events(node)]


def test_a_fenced_run_the_agent_still_lists_is_still_recorded(fleet: LoopFleet) -> None:
    a, token_a = register_node("stale-event-a")
    b, _ = register_node("stale-event-b")
    gang = bind(make_job(fleet, gpus=4, gpus_per_node=2, name="gang"), {a: [0, 1], b: [0, 1]})
    old = gang.generation
    from datetime import timedelta

    from controlplane.models import Node
    Node.objects.filter(pk=b.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))
    reconcile.expire_node(b.pk, now=timezone.now())  # the gang is fenced; a's agent still runs it

    r = agent_client(token_a).post(f"/api/v1/agent/nodes/{a.name}/heartbeat", {"running": [old], "reports": []},
                                   format="json")

    assert r.status_code == 200 and r.json()["stop"] == [old], r.json()
    assert [e.data["generations"] for e in _stale_events(a)] == [[old]]
