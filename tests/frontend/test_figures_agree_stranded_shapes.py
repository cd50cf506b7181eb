"""Stranded GPUs and the largest free block: the API's fragmentation (read live) and the
cycle's sample (/metrics, the overview) count the same GPUs right after a cycle, whatever the
shape of the waiting job (first written by the operator QA helper, who found them apart when
the waiting job held GPUs for its reservation)."""

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
    "any_type_8_per_node": dict(gpus=8, gpus_per_node=8),
    "any_type_8_no_per_node": dict(gpus=8),
    "any_type_12_no_per_node": dict(gpus=12),
    "any_type_16_per_node_8": dict(gpus=16, gpus_per_node=8),
    "h100_only": dict(gpus=8, gpu_types=("H100-80GB",)),
    "a100_only": dict(gpus=8, gpu_types=("A100-40GB",)),
    "needs_80gb": dict(gpus=8, min_gpu_memory_gb=80),
    "elastic_4_to_8": dict(gpus=8, min_gpus=4, max_gpus=8),
    "same_node_6": dict(gpus=6, topology="same_node"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_stranded_gpus_and_largest_block_agree_between_the_cycle_and_the_api(case: str, submit_as: Any) -> None:
    admin = get_user_model().objects.get(username="admin")
    for node in Node.objects.exclude(name__in=["a100-01", "h100-01"]):
        nodes.cordon(node, admin)
    submit_as("alice", name="small-a", gpus=2, gpu_types=("A100-40GB",))
    submit_as("alice", name="small-h", gpus=3, gpu_types=("H100-80GB",))
    run_cycle("test", now=timezone.now() - timedelta(seconds=30))
    submit_as("bob", name="big", **CASES[case])
    run_cycle("test")
    sample = FleetSample.objects.order_by("-at", "-id").first()
    assert sample is not None
    live = fragmentation_figures()
    assert sample.stranded_gpus == live.stranded_gpus
    assert sample.largest_free_block_by_pool == {p.pool: p.largest_free_block for p in live.pools}
