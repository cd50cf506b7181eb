"""/metrics: the "pool short of ready GPUs" alert reads `quartermaster_schedulable_gpus[pool]`, the
GPUs of nodes that take work now: ready and inside no active maintenance window. A node inside an
active window is not free on any surface (the cycle's figures, metrics/fragmentation/, the Nodes
page), and until 2 Dec the alert's figure (`quartermaster_node_gpus{state="ready"}`) counted it as
ready: a pool whose every node was in a window read 100 % ready and the alert stayed quiet."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Node
from controlplane.services import maintenance, nodes
from controlplane.services.fleet_figures import fragmentation_figures
from tests.controlplane.fleet_fixture import Fleet, client_for
from tests.controlplane.test_metrics_nodes import scrape

pytestmark = pytest.mark.django_db


def _by_pool(series: dict, name: str) -> dict[str, float]:
    return {dict(labels)["pool"]: v for labels, v in series[name].items()}


def test_gpus_inside_an_active_window_are_not_counted_as_taking_work(fleet: Fleet) -> None:
    root = fleet.users["admin"]
    now = timezone.now()
    # h100: two nodes inside a window now, one cordoned (and in the window too: counted once), one ready
    maintenance.create(root, nodes=["h100-0", "h100-1", "h100-2"], start_at=now - timedelta(minutes=1),
                       duration_s=3600, reason="firmware")
    nodes.cordon(fleet.nodes[2], root)
    # a100: one quarantined, one ready whose window has not begun (it takes work until it does)
    Node.objects.filter(name="a100-0").update(state=NodeState.QUARANTINED)
    maintenance.create(root, nodes=["a100-1"], start_at=now + timedelta(hours=1), duration_s=3600, reason="later")

    series, text = scrape(client_for(fleet, "admin"))

    assert _by_pool(series, "quartermaster_schedulable_gpus") == {"h100": 8, "a100": 8}
    assert "# TYPE quartermaster_schedulable_gpus gauge" in text
    # The alert of docs/operations.md, evaluated by hand: h100 has 8 of its 32 GPUs taking work.
    total = {}
    for labels, v in series["quartermaster_node_gpus"].items():
        total[dict(labels)["pool"]] = total.get(dict(labels)["pool"], 0) + v
    short = {pool for pool, g in _by_pool(series, "quartermaster_schedulable_gpus").items() if g / total[pool] < 0.8}
    assert short == {"h100", "a100"}
    # The node state stays ready for the two in the window (no cordon is written), as qm nodes says.
    assert _by_pool({"x": {k: v for k, v in series["quartermaster_node_gpus"].items()
                           if dict(k)["state"] == "ready"}}, "x") == {"h100": 24, "a100": 8}
    # The same figure as metrics/fragmentation/ on an idle fleet: free GPUs are those of such nodes.
    assert {p.pool: p.free_gpus for p in fragmentation_figures().pools} == {"h100": 8, "a100": 8}


def test_a_pool_with_no_node_taking_work_has_a_zero_series_not_none(fleet: Fleet) -> None:
    root = fleet.users["admin"]
    maintenance.create(root, pool="a100", start_at=timezone.now() - timedelta(minutes=1), duration_s=600,
                       reason="rack move")
    series, _ = scrape(client_for(fleet, "admin"))
    assert _by_pool(series, "quartermaster_schedulable_gpus") == {"h100": 32, "a100": 0}
