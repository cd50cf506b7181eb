"""Each pool's heading on the Nodes page adds up: its GPUs in use, free on ready nodes and away
on nodes that take no work make its total, the figures `qm sinfo` (HELD, FREE, AWAY) and
`metrics/fragmentation/` (allocated, free, unavailable) give.

Found by the operator review (7 Dec): the heading read "69 of 88 GPUs in use · 3 free on ready
nodes …" and never said the other 16 were away (cordoned, in maintenance, agent down); with
every agent down it read "0 of 88 GPUs in use · 0 free" with no word that all 88 were away."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.choices import NodeState
from controlplane.models import Node
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle


def _headings(html: str) -> dict[str, str]:
    return {pool: " ".join(text.split())
            for pool, text in re.findall(r'data-pool-fragmentation="([^"]+)"[^>]*>(.*?)</small>', html, re.S)}


def _adds_up(admin: Client, html: str) -> dict[str, str]:
    api = {p["pool"]: p for p in admin.get("/api/v1/metrics/fragmentation/").json()["pools"]}
    said = _headings(html)
    assert set(said) == set(api), said
    for pool, p in api.items():
        assert p["allocated_gpus"] + p["free_gpus"] + p["unavailable_gpus"] == p["total_gpus"]  # the API's own sum
        assert said[pool].startswith(
            f"{p['allocated_gpus']} of {p['total_gpus']} GPUs in use · {p['free_gpus']} free on ready nodes · "
            f"{p['unavailable_gpus']} away on nodes that take no work · "), said[pool]
    return said


def test_operator_a_pool_with_cordoned_nodes_says_its_away_gpus(client_for: Callable[[str], Client],
                                                                  submit_as: Any) -> None:
    admin_user = get_user_model().objects.get(username="admin")
    submit_as("alice", name="held", gpus=3, gpu_types=("H100-80GB",))
    run_cycle("test")
    for node in Node.objects.filter(pool="h100").order_by("name")[:2]:  # one of them holds the job
        nodes.cordon(node, admin_user)
    admin = client_for("admin")
    away = admin.get("/api/v1/metrics/fragmentation/").json()
    assert any(p["unavailable_gpus"] for p in away["pools"])  # the test's premise

    for html in (admin.get("/nodes/").content.decode(), admin.get("/ui/nodes.json").json()["html"]["nodes-table"]):
        _adds_up(admin, html)


def test_operator_a_pool_whose_agents_are_all_down_says_all_its_gpus_are_away(
        client_for: Callable[[str], Client]) -> None:
    Node.objects.filter(pool="a100").update(state=NodeState.DOWN)
    admin = client_for("admin")
    total = sum(n.gpu_count for n in Node.objects.filter(pool="a100"))

    said = _adds_up(admin, admin.get("/nodes/").content.decode())
    assert said["a100"].startswith(f"0 of {total} GPUs in use · 0 free on ready nodes · {total} away on nodes "
                                   "that take no work · largest free block 0"), said["a100"]
