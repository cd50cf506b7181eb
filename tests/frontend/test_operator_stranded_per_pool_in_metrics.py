"""/metrics says the stranded GPUs per pool, as `qm sinfo`, the Nodes page and the API do.

Found on the operator's walk (7 Dec): `qm sinfo`, the Nodes page and metrics/fragmentation/
said which pool strands its GPUs ("a100 … STRANDED 6", "h100 … 0"), but
`quartermaster_stranded_gpus` was one series for the whole fleet, so no alert or graph could
tell a pool whose whole-node jobs wait behind fragmentation from one that is fine, nor match
the figure against `quartermaster_largest_free_block_gpus{pool=…}` beside it; it was read
from the last cycle's sample, while every other surface counts it live from the allocations.
Now it has a `pool` label and is the API's figure for each pool (`sum without(pool)` is the
fleet's); the largest free block is read the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from controlplane.models import Node
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle
from tests.frontend.metrics_series import series


def test_operator_stranded_gpus_are_said_per_pool_as_sinfo_and_the_api_say_them(
    client_for: Callable[[str], Client], submit_as: Any,
) -> None:
    admin_user = get_user_model().objects.get(username="admin")
    for node in Node.objects.exclude(name__in=["a100-01", "h100-01"]):
        nodes.cordon(node, admin_user)
    submit_as("alice", name="small-a", gpus=2, gpu_types=("A100-40GB",))
    submit_as("alice", name="small-h", gpus=3, gpu_types=("H100-80GB",))
    run_cycle("test", now=timezone.now() - timedelta(seconds=30))
    # Only the A100 pool's partly used node strands GPUs: the whole-node job takes no H100.
    submit_as("bob", name="big-a", gpus=8, gpus_per_node=8, gpu_types=("A100-40GB",))
    run_cycle("test")
    admin = client_for("admin")

    api = admin.get("/api/v1/metrics/fragmentation/").json()
    per_pool = {(("pool", p["pool"]),): float(p["stranded_gpus"]) for p in api["pools"]}
    assert per_pool == {(("pool", "a100"),): 6.0, (("pool", "h100"),): 0.0}

    assert series(admin, "quartermaster_stranded_gpus") == per_pool
    assert series(admin, "quartermaster_largest_free_block_gpus") == {
        (("pool", p["pool"]),): float(p["largest_free_block"]) for p in api["pools"]}
