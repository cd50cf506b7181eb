"""The admin's node list retires nodes and returns them to service, by the same rule as the API.

"Retire selected nodes" retires each selected node that runs nothing and says, for one that
still runs jobs, how many and to drain it first (services/nodes.retire_refusal); "Return
selected nodes to service" brings retired nodes back (down until their agents register)."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, Node
from controlplane.services import reconcile, transitions
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _act(browser: Any, action: str, selected: list[Node]) -> dict[str, list[str]]:
    """The action as its confirmation page's "Yes" posts it (a retire is asked first:
    tests/controlplane/test_admin_actions_confirmed.py)."""
    r = browser.post("/admin/controlplane/node/", {
        "action": action, "_selected_action": [n.pk for n in selected], "index": 0, "post": "yes",
    }, follow=True)
    assert r.status_code == 200
    said: dict[str, list[str]] = {}
    for m in get_messages(r.wsgi_request):
        said.setdefault(m.level_tag, []).append(str(m))
    return said


def test_retire_selected_nodes_retires_the_idle_and_refuses_the_busy_naming_its_jobs(fleet, browser) -> None:
    idle, busy = fleet.nodes[2], fleet.nodes[3]
    job = f.make_job(fleet.ml, fleet.research, name="busy", gpus=1)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=busy.pk, gpu_indices=[5])], lease=lease,
                             borrowed=False, at=timezone.now(), actor="test")

    said = _act(browser, "retire", [idle, busy])

    assert said["success"] == ["Retire selected nodes: h100-2 (ready → retired)"]
    [refusal] = said["error"]
    assert refusal.startswith("node h100-3 still runs 1 job on 1 of its 8 GPUs")
    assert "drain it first" in refusal
    assert Node.objects.get(pk=idle.pk).state == NodeState.RETIRED
    assert Node.objects.get(pk=busy.pk).state == NodeState.READY
    assert Event.objects.filter(kind=EventKind.NODE_STATE, reason="Retired", actor="user:boss").count() == 1


def test_return_selected_nodes_to_service(fleet, browser) -> None:
    node = fleet.nodes[2]
    _act(browser, "retire", [node])

    said = _act(browser, "return_to_service", [node, fleet.nodes[1]])

    assert said["success"] == ["Return selected nodes to service: h100-2 (retired → down)"]
    assert said["error"] == ["node h100-1 is ready, not retired: only a retired node can be returned to service"]
    node.refresh_from_db()
    assert node.state == NodeState.DOWN and node.retired_at is None


def test_the_delete_page_of_a_node_with_history_says_to_retire_it(fleet, browser) -> None:
    node = fleet.nodes[2]
    job = f.make_job(fleet.ml, fleet.research, name="old", gpus=1)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=node.pk, gpu_indices=[0])], lease=lease,
                             borrowed=False, at=timezone.now(), actor="test")

    page = html.unescape(" ".join(browser.get(f"/admin/controlplane/node/{node.pk}/delete/").content.decode().split()))

    assert "Cannot delete node" in page
    assert ("To retire it, drain it (Nodes: the Drain action), then retire it once it is cordoned (Nodes: the "
            "Retire action)") in page
