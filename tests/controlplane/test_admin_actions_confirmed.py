"""The admin asks before an action that takes nodes out of the fleet or ends a maintenance
window, as it asks before deleting: "Retire selected nodes" and "Cancel selected windows" first
show what each selected record would become, with "Yes" and "No, take me back", and do
nothing until the admin says yes. Until 7 Dec both ran at the press of Go: one wrong pick in the
action list retired every idle node selected (out of the fleet for good, their agents refused),
or cancelled a window for good (a cancelled window cannot be changed back)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, MaintenanceWindow, Node
from controlplane.services import maintenance, reconcile, transitions
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

NODES = "/admin/controlplane/node/"
WINDOWS = "/admin/controlplane/maintenancewindow/"


def _messages(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _yes(page: str) -> dict[str, list[str]]:
    """What the confirmation page's form posts when the admin presses its Yes: its hidden fields
    (no `index`: Django's delete confirmation posts the same way)."""
    posted: dict[str, list[str]] = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page):
        if name != "csrfmiddlewaretoken":
            posted.setdefault(name, []).append(value)
    return posted


def test_retire_asks_first_saying_what_each_node_becomes_and_retires_only_on_yes(fleet, browser) -> None:
    idle, busy = fleet.nodes[2], fleet.nodes[3]
    job = f.make_job(fleet.ml, fleet.research, name="busy", gpus=1)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=busy.pk, gpu_indices=[5])], lease=lease,
                             borrowed=False, at=timezone.now(), actor="test")
    chosen = {"action": "retire", "_selected_action": [idle.pk, busy.pk], "index": 0}

    asked = browser.post(NODES, chosen)

    assert asked.status_code == 200
    page = asked.content.decode()
    assert "Retire 2 nodes?" in page
    assert f"{idle.name} (ready, 8 GPUs): leaves the fleet" in page
    assert f"node {busy.name} still runs 1 job on 1 of its 8 GPUs" in page and "drain it first" in page
    assert 'name="post" value="yes"' in page and 'value="retire"' in page
    for node in (idle, busy):
        assert f'name="_selected_action" value="{node.pk}"' in page
    assert "No, take me back" in page
    assert Node.objects.get(pk=idle.pk).state == NodeState.READY
    assert not Event.objects.filter(kind=EventKind.NODE_STATE, reason="Retired").exists()

    assert _yes(page) == {"_selected_action": [str(idle.pk), str(busy.pk)], "action": ["retire"], "post": ["yes"]}
    done = browser.post(NODES, _yes(page), follow=True)

    assert done.status_code == 200
    assert f"Retire selected nodes: {idle.name} (ready → retired)" in _messages(done)
    assert Node.objects.get(pk=idle.pk).state == NodeState.RETIRED
    assert Node.objects.get(pk=busy.pk).state == NodeState.READY


def test_cancel_windows_asks_first_and_cancels_only_on_yes(fleet, browser) -> None:
    root = fleet.users["admin"]
    start = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    window = maintenance.create(root, nodes=["h100-1", "h100-2"], start_at=start, duration_s=3600,
                                reason="fw upgrade")
    chosen = {"action": "cancel_windows", "_selected_action": [window.pk], "index": 0}

    asked = browser.post(WINDOWS, chosen)

    assert asked.status_code == 200
    page = asked.content.decode()
    assert "Cancel 1 maintenance window?" in page
    assert f"Window {window.pk} (fw upgrade) on h100-1, h100-2, upcoming" in page
    assert "kept in the history" in page and 'name="post" value="yes"' in page
    MaintenanceWindow.objects.get(pk=window.pk, cancelled_at__isnull=True)

    done = browser.post(WINDOWS, _yes(page), follow=True)

    assert any(m.startswith(f"Cancelled maintenance window {window.pk}") for m in _messages(done))
    assert MaintenanceWindow.objects.get(pk=window.pk).cancelled_at is not None


def test_cordon_and_drain_need_no_second_step(fleet, browser) -> None:
    """Undone by Uncordon: the list's cordon and drain run at once, with the reason typed."""
    node = fleet.nodes[2]
    done = browser.post(NODES, {"action": "drain", "_selected_action": [node.pk], "index": 0,
                                "reason": "XID 79"}, follow=True)
    assert any(m.startswith("Drain: ") for m in _messages(done))
    assert Node.objects.get(pk=node.pk).state in (NodeState.DRAINING, NodeState.CORDONED)
