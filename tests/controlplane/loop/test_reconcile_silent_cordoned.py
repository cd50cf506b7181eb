"""A cordoned or draining node whose agent falls silent goes suspect, as a ready one does.

Before, reconcile marked only ready nodes suspect: a cordoned or draining node whose agent went
silent still read "cordoned"/"draining" (healthy-looking) until its lease ran out. Now it goes
suspect after SUSPECT_AFTER_S too, keeps the operator's wish (`unschedulable`), its running work
is left alone exactly as on a silent ready node, and when its heartbeats resume it comes back as
the operator left it (cordoned, or draining), not ready. Lease expiry then quarantines and fences
as for any node.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Node
from controlplane.services import agent_protocol, nodes, reconcile
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, bind, make_job, register_node


@pytest.fixture
def admin(fleet: LoopFleet) -> Any:
    return f.make_user("root", role="admin")


def _silent(settings: Any) -> datetime:
    return timezone.now() + timedelta(seconds=settings.QM["SUSPECT_AFTER_S"] + 1)


@pytest.mark.parametrize("action", ["cordon", "drain"])
def test_a_silent_cordoned_or_draining_node_goes_suspect_and_keeps_its_work(fleet: LoopFleet, admin, settings,
                                                                             action: str) -> None:
    node, _ = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    getattr(nodes, action)(node, admin)
    was = Node.objects.get(pk=node.pk).state

    result = reconcile.reconcile_nodes(now=_silent(settings))

    assert result.suspect == 1 and result.fenced == 0
    node.refresh_from_db()
    assert node.state == NodeState.SUSPECT and node.unschedulable
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.ACTIVE
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason="MissedHeartbeats")
    assert event.message.startswith(f"gpu-01: {was} → suspect, last heard ")
    assert f"it returns {was} when heartbeats resume" in event.message
    assert event.data["from"] == was and event.data["returns"] == was


@pytest.mark.parametrize("action", ["cordon", "drain"])
def test_a_silent_cordoned_node_comes_back_as_the_operator_left_it_when_heartbeats_resume(
        fleet: LoopFleet, admin, settings, action: str) -> None:
    node, token = register_node("gpu-01")
    bind(make_job(fleet), {node: [0]})  # a draining node with work stays draining
    getattr(nodes, action)(node, admin)
    was = Node.objects.get(pk=node.pk).state
    later = _silent(settings)
    reconcile.reconcile_nodes(now=later)

    node = Node.objects.get(pk=node.pk)
    desired = agent_protocol.sync(node, reports=[], running=[], renew=True, now=later)

    node.refresh_from_db()
    assert node.state == was and desired.node_state == was
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason="HeartbeatsResumed")
    assert event.message == f"gpu-01: suspect → {was}, heartbeats resumed before its lease ran out (it stays {was}, " \
                            "as an operator left it)"


def test_a_silent_ready_node_still_comes_back_ready(fleet: LoopFleet, settings) -> None:
    node, _ = register_node("gpu-01")
    later = _silent(settings)
    reconcile.reconcile_nodes(now=later)
    desired = agent_protocol.sync(Node.objects.get(pk=node.pk), reports=[], running=[], renew=True, now=later)
    node.refresh_from_db()
    assert node.state == NodeState.READY and desired.node_state == "ready"


def test_uncordoning_a_silent_cordoned_node_changes_how_it_returns(fleet: LoopFleet, admin, settings) -> None:
    node, _ = register_node("gpu-01")
    nodes.cordon(node, admin)
    later = _silent(settings)
    reconcile.reconcile_nodes(now=later)

    nodes.uncordon(node, admin)

    node.refresh_from_db()
    assert node.state == NodeState.SUSPECT and not node.unschedulable
    said = Event.objects.filter(node=node, reason="Uncordoned").latest("id").message
    assert said == "gpu-01: uncordoned by root while suspect; it returns ready when its agent heartbeats again"
    agent_protocol.sync(Node.objects.get(pk=node.pk), reports=[], running=[], renew=True, now=later)
    assert Node.objects.get(pk=node.pk).state == NodeState.READY


def test_a_silent_cordoned_node_whose_lease_runs_out_is_fenced_as_a_ready_one_and_returns_cordoned(
        fleet: LoopFleet, admin, settings) -> None:
    node, _ = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})
    nodes.cordon(node, admin)
    reconcile.reconcile_nodes(now=_silent(settings))
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))

    result = reconcile.reconcile_nodes(now=timezone.now())

    assert result.quarantined == 1 and result.fenced == 1
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.FENCED
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    back, _ = register_node("gpu-01")
    assert back.state == NodeState.CORDONED
