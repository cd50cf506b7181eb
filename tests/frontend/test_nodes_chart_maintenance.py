"""The Nodes page's chart "GPUs by pool and node state" counts a node inside a maintenance window
now as in maintenance, not as Ready: the overview's tile counts its GPUs away, `qm sinfo` and the
fragmentation API as `unavailable_gpus`, and the chart said they were ready for work. Found by the
admin/operator review (6 Dec). A window that has not begun yet leaves the node Ready."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import MaintenanceWindow, Node

pytestmark = pytest.mark.django_db


def _bars(client: Any) -> dict[str, dict[str, int]]:
    """Per bar (its name), the GPUs of each pool that has some in it."""
    data = client.get("/ui/nodes.json").json()["charts"]["node_states"]["figure"]["data"]
    return {bar["name"]: {pool: gpus for pool, gpus in zip(bar["x"], bar["y"], strict=True) if gpus} for bar in data}


def _window(start_min: int, node: str) -> None:
    now = timezone.now()
    window = MaintenanceWindow.objects.create(start_at=now + timedelta(minutes=start_min),
                                              end_at=now + timedelta(minutes=start_min + 60),
                                              reason="firmware", created_at=now - timedelta(minutes=10))
    window.nodes.set(Node.objects.filter(name=node))


def test_a_node_in_a_maintenance_window_now_is_charted_in_maintenance_not_ready(client_for: Any) -> None:
    admin = client_for("admin")
    node = Node.objects.get(name="a100-01")
    before = _bars(admin)
    assert before["Ready"][node.pool] >= node.gpu_count
    assert "In maintenance" not in before

    _window(-5, node.name)
    after = _bars(admin)
    assert after["In maintenance"] == {node.pool: node.gpu_count}
    assert after["Ready"].get(node.pool, 0) == before["Ready"][node.pool] - node.gpu_count
    # Every GPU is still in the chart once.
    assert sum(sum(pools.values()) for pools in after.values()) == sum(sum(p.values()) for p in before.values())


def test_a_window_not_begun_leaves_the_node_ready_in_the_chart(client_for: Any) -> None:
    admin = client_for("admin")
    before = _bars(admin)
    _window(30, "a100-01")
    assert _bars(admin) == before
