"""/metrics: `quartermaster_away_gpus[pool]`, the idle GPUs on nodes that take no work (cordoned,
draining, in a maintenance window now, or whose agent is suspect, quarantined or down), the
figure the Nodes page's "away on nodes that take no work", `qm sinfo`'s AWAY and the API's
`metrics/fragmentation/` `unavailable_gpus` give. Found by an operator audit: every other surface
said it, and /metrics had no series, so no alert could say "a quarter of pool h100 is away"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Node
from controlplane.services import maintenance, nodes, reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, client_for
from tests.controlplane.test_metrics_nodes import scrape

pytestmark = pytest.mark.django_db


def _by_pool(series: dict, name: str) -> dict[str, float]:
    return {dict(labels)["pool"]: v for labels, v in series[name].items()}


def test_idle_gpus_on_nodes_that_take_no_work_are_away_as_the_api_says(fleet: Fleet) -> None:
    root = fleet.users["admin"]
    # h100-0 runs a 3-GPU job and is then cordoned: its 5 idle GPUs are away, the 3 in use are not.
    job = f.make_job(fleet.ml, fleet.research, name="busy", gpus=3, runtime_limit_s=3600)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=fleet.nodes[0].pk, gpu_indices=[0, 1, 2])],
                             lease=lease, borrowed=False, at=timezone.now(), actor="test")
    nodes.cordon(Node.objects.get(name="h100-0"), root)
    # h100-1 in a maintenance window now: 8 away; h100-2, h100-3 ready and idle: none away.
    maintenance.create(root, nodes=["h100-1"], start_at=timezone.now() - timedelta(minutes=1), duration_s=600,
                       reason="firmware")
    # a100-0's agent is down: 8 away; a100-1 ready.
    Node.objects.filter(name="a100-0").update(state=NodeState.DOWN)

    series, text = scrape(client_for(fleet, "admin"))

    assert _by_pool(series, "quartermaster_away_gpus") == {"h100": 13, "a100": 8}
    assert "# TYPE quartermaster_away_gpus gauge" in text
    api = client_for(fleet, "admin").get("/api/v1/metrics/fragmentation/").json()
    assert {p["pool"]: p["unavailable_gpus"] for p in api["pools"]} == {"h100": 13, "a100": 8}


def test_a_pool_with_nothing_away_has_a_zero_series(fleet: Fleet) -> None:
    series, _ = scrape(client_for(fleet, "admin"))

    assert _by_pool(series, "quartermaster_away_gpus") == {"h100": 0, "a100": 0}
