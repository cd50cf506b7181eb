"""The nodes page says each pool's stranded GPUs, as the overview, `qm sinfo` and the API count them
(operator review, 6 Dec).

The overview's headline "Stranded GPUs 8" could not be found on the Nodes page: each pool said its
GPUs in use, free on ready nodes and largest free block, never which of the free ones were
stranded (idle on partly used ready nodes while a job that needs a whole node of the pool waits),
so an operator checking the tile against the nodes saw 7 free on one pool and no 8 anywhere. Each
pool's heading now says them, by the API's definition (`fleet_figures.fragmentation_of`), and how
many whole-node jobs wait.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.models import Node
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle


def _headings(html: str) -> dict[str, str]:
    return {pool: " ".join(text.split())
            for pool, text in re.findall(r'data-pool-fragmentation="([^"]+)"[^>]*>(.*?)</small>', html, re.S)}


def test_operator_each_pool_says_its_stranded_gpus_as_the_overview_and_the_api(
    client_for: Callable[[str], Client], submit_as: Any,
) -> None:
    admin_user = get_user_model().objects.get(username="admin")
    for node in Node.objects.exclude(name__in=["a100-01", "h100-01"]):
        nodes.cordon(node, admin_user)
    submit_as("alice", name="small-a", gpus=2, gpu_types=("A100-40GB",))
    submit_as("alice", name="small-h", gpus=3, gpu_types=("H100-80GB",))
    run_cycle("test")
    submit_as("bob", name="whole", gpus=8, gpus_per_node=8)

    admin = client_for("admin")
    api = {p["pool"]: p for p in admin.get("/api/v1/metrics/fragmentation/").json()["pools"]}
    assert {pool: p["stranded_gpus"] for pool, p in api.items()} == {"a100": 6, "h100": 5}  # the premise
    tile = admin.get("/ui/overview.json").json()["text"]["stranded_gpus"]
    assert tile == "11"

    for html in (admin.get("/nodes/").content.decode(),
                 admin.get("/ui/nodes.json").json()["html"]["nodes-table"],
                 client_for("alice").get("/nodes/").content.decode()):
        headings = _headings(html)
        assert set(headings) == set(api)
        for pool, figures in api.items():
            assert f"{figures['stranded_gpus']} stranded (1 job waits for whole nodes)" in headings[pool], headings
            assert f"{figures['free_gpus']} free on ready nodes" in headings[pool], headings
        assert sum(int(re.search(r"(\d+) stranded", h).group(1)) for h in headings.values()) == int(tile)
    assert "stranded: idle on partly used ready nodes" in admin.get("/nodes/").content.decode()


def test_operator_a_pool_with_nothing_stranded_says_0(client_for: Callable[[str], Client], submit_as: Any) -> None:
    submit_as("alice", name="small-h", gpus=3, gpu_types=("H100-80GB",))
    run_cycle("test")
    headings = _headings(client_for("finn").get("/nodes/").content.decode())
    assert all(text.endswith("· 0 stranded") for text in headings.values()), headings
