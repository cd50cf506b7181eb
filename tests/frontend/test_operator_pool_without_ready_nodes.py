"""A pool with no ready node has a largest free block of 0, everywhere the operator looks.

Found on the operator's night drill: with every H100 node cordoned and a simulated pool's
agents killed (quarantined), the API's fragmentation said `largest_free_block` 0 for both
pools, but /metrics had no `quartermaster_largest_free_block_gpus` series for them at all (the
cycle's sample leaves out a pool with no ready node), so an alert such as
`quartermaster_largest_free_block_gpus{pool="h100"} < 8` never fired exactly when the pool
could take nothing; the overview's chart dropped the pool's line too (a gap, read as "no data").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from controlplane.models import Node
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle


def _largest_in_metrics(client: Client) -> dict[str, float]:
    text = client.get("/metrics").content.decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "quartermaster_largest_free_block_gpus":
                out[s.labels["pool"]] = s.value
    return out


def test_operator_a_pool_whose_nodes_are_all_cordoned_reads_0_in_metrics_api_and_chart(
    client_for: Callable[[str], Client], submit_as: Any,
) -> None:
    admin_user = get_user_model().objects.get(username="admin")
    for node in Node.objects.filter(pool="a100"):
        nodes.cordon(node, admin_user)
    submit_as("alice", name="small", gpus=2, gpu_types=("H100-80GB",))
    run_cycle("test")
    admin = client_for("admin")

    in_metrics = _largest_in_metrics(admin)
    api = admin.get("/api/v1/metrics/fragmentation/").json()
    in_api = {p["pool"]: float(p["largest_free_block"]) for p in api["pools"]}

    assert in_metrics == in_api == {"a100": 0.0, "h100": 8.0}
    chart = admin.get("/ui/overview.json?window=1h").json()["charts"]["free_block"]
    lines = {trace["name"]: trace["y"] for trace in chart["figure"]["data"]}
    assert lines["a100"][-1] == 0 and lines["h100"][-1] == 8
