"""A pool whose nodes are not all of one GPU type (an admin moved a node into it, or agents
declared one pool for two kinds of machine): the stranded GPUs read live (metrics/fragmentation/,
/metrics, the overview's tile, the Nodes page, qm sinfo) are those the cycle counts (the
overview's chart), node by node. Until 7 Dec the live count took the type and memory of the
pool's first node for the whole pool: with an A100 node listed first, an H100 job waiting for a
whole node stranded nothing live while the cycle counted the H100 node's idle GPUs, and an A100
job stranded the H100 node's idle GPUs too."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.models import FleetSample, Node
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle
from controlplane.services.fleet_figures import fragmentation_figures

CASES = {
    "h100_only": dict(gpus=8, gpu_types=("H100-80GB",)),
    "a100_only": dict(gpus=8, gpu_types=("A100-40GB",)),
    "needs_80gb": dict(gpus=8, min_gpu_memory_gb=80),
    "any_type_8_per_node": dict(gpus=8, gpus_per_node=8),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pool_of_two_gpu_types_strands_what_the_cycle_counts(case: str, submit_as: Any) -> None:
    admin = get_user_model().objects.get(username="admin")
    for node in Node.objects.exclude(name__in=["a100-01", "h100-01"]):
        nodes.cordon(node, admin)
    # One pool, two kinds of node; the A100 node is listed first (leaf-a1 before leaf-h1).
    Node.objects.filter(name="a100-01").update(pool="h100")
    submit_as("alice", name="small-a", gpus=2, gpu_types=("A100-40GB",))
    submit_as("alice", name="small-h", gpus=3, gpu_types=("H100-80GB",))
    run_cycle("test", now=timezone.now() - timedelta(seconds=30))
    submit_as("bob", name="big", **CASES[case])
    run_cycle("test")
    sample = FleetSample.objects.order_by("-at", "-id").first()
    assert sample is not None
    live = fragmentation_figures()
    assert sample.stranded_gpus > 0  # the case strands something: the comparison is not of two zeros
    assert live.stranded_gpus == sample.stranded_gpus
    # (pool a100 is left with cordoned nodes only: the cycle names no block for it, the live figure 0)
    live_blocks = {p.pool: p.largest_free_block for p in live.pools if p.pool in sample.largest_free_block_by_pool}
    assert live_blocks == sample.largest_free_block_by_pool


def test_a_pool_of_two_gpu_types_names_both(client_for: Any) -> None:
    """metrics/fragmentation/ (and qm sinfo's GPU TYPE, read from it) named the pool's first
    node's type alone: pool h100 with a100-01 moved into it read "A100-40GB", its eight H100
    nodes unsaid."""
    Node.objects.filter(name="a100-01").update(pool="h100")
    pools = {p["pool"]: p for p in client_for("admin").get("/api/v1/metrics/fragmentation/").json()["pools"]}
    assert pools["h100"]["gpu_type"] == "A100-40GB, H100-80GB"
    assert pools["a100"]["gpu_type"] == "A100-40GB"
