"""The nodes page shows each pool's fragmentation, in the API's words and numbers.

Found on the operator's night drill: the nodes page said only "Pool sim 4 of 4 GPUs in use" per
pool; how many GPUs were free to take work, and the largest block on one node (what decides
whether an 8-GPU job can start), were on the overview's chart or in the API only, and a pool
with its nodes cordoned read "0 of 96 in use" as if it were all free. Each pool now says its GPUs
free on ready nodes and its largest free block, the same figures as
`/api/v1/metrics/fragmentation/`."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.models import Node
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle


def test_operator_each_pool_on_the_nodes_page_says_what_the_api_says(
    client_for: Callable[[str], Client], submit_as: Any,
) -> None:
    admin_user = get_user_model().objects.get(username="admin")
    for node in Node.objects.filter(pool="h100").exclude(name__in=["h100-01", "h100-02"]):
        nodes.cordon(node, admin_user)
    submit_as("alice", name="small", gpus=3, gpu_types=("H100-80GB",))
    submit_as("bob", name="a", gpus=8, gpu_types=("A100-40GB",))
    run_cycle("test")
    admin = client_for("admin")
    api = {p["pool"]: p for p in admin.get("/api/v1/metrics/fragmentation/").json()["pools"]}
    assert api["h100"]["free_gpus"] == 13 and api["h100"]["largest_free_block"] == 8  # the test's premise

    for html in (admin.get("/nodes/").content.decode(),
                 admin.get("/ui/nodes.json").json()["html"]["nodes-table"],
                 client_for("alice").get("/nodes/").content.decode()):
        for pool, figures in api.items():
            said = re.search(rf'data-pool-fragmentation="{pool}"[^>]*>(.*?)</', html, re.S)
            assert said, pool
            text = " ".join(said.group(1).split())
            assert f"{figures['free_gpus']} free on ready nodes" in text, text
            assert f"largest free block {figures['largest_free_block']}" in text, text
