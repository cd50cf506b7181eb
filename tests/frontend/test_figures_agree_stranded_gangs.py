"""A pool of two node sizes (an H100 node of 4 GPUs beside one of 8): the stranded GPUs read live
(metrics/fragmentation/, /metrics, the overview's tile, the Nodes page, qm sinfo) are those the
cycle counts, whatever the waiting job's gang. Until 7 Dec the live figures judged a job by its
GPUs per node alone (scheduler_core/stranded.py now holds the one rule both count by): a job of
6 GPUs, which fits on no 4-GPU node and leaves room on an 8-GPU one, stranded the 8-GPU node's
idle GPUs live and nothing in the cycle's figures; an elastic job was judged at its largest size,
not its smallest; and a job of 10 GPUs (a member of 8 and one of 2) stranded nothing on the
4-GPU node, where its member of 2 may run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, FleetSample, GpuType, Job, Node
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle
from controlplane.services.fleet_figures import fragmentation_figures
from tests.controlplane import factories as f

H100 = ("H100-80GB",)
CASES: dict[str, tuple[dict[str, Any], int]] = {
    # (the waiting job, the GPUs it strands: 5 idle on the 8-GPU node, 1 on the 4-GPU node)
    "6_gpus_need_no_whole_node": (dict(gpus=6, gpu_types=H100), 0),
    "elastic_6_to_8_judged_at_6": (dict(gpus=8, min_gpus=6, max_gpus=8, gpu_types=H100), 0),
    "10_gpus_strand_both_sizes": (dict(gpus=10, gpu_types=H100), 6),
    "4_per_node_strands_both_sizes": (dict(gpus=12, gpus_per_node=4, gpu_types=H100), 6),
    "8_per_node_strands_the_8_gpu_node": (dict(gpus=16, gpus_per_node=8, gpu_types=H100), 5),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pool_of_two_node_sizes_strands_what_the_cycle_counts(case: str, submit_as: Any) -> None:
    admin = get_user_model().objects.get(username="admin")
    for node in Node.objects.exclude(name="h100-01"):
        nodes.cordon(node, admin)
    f.make_node(GpuType.objects.get(name="H100-80GB"), name="h100-small", pool="h100", gpu_count=4,
                leaf_switch="leaf-h1", spine="spine-1")
    submit_as("alice", name="three-a", gpus=3, gpu_types=H100)
    submit_as("alice", name="three-b", gpus=3, gpu_types=H100)
    run_cycle("test", now=timezone.now() - timedelta(seconds=30))
    held = {name: AllocationGpu.held().filter(allocation__job__name__in=["three-a", "three-b"],
                                              node__name=name).count() for name in ("h100-01", "h100-small")}
    assert held == {"h100-01": 3, "h100-small": 3}  # both nodes partly used: 5 and 1 GPUs idle
    job, stranded = CASES[case]
    submit_as("bob", name="big", **job)
    run_cycle("test")
    assert Job.objects.get(name="big").state == JobState.PENDING
    sample = FleetSample.objects.order_by("-at", "-id").first()
    assert sample is not None
    assert sample.stranded_gpus == stranded  # the cycle's count, the reference
    assert fragmentation_figures().stranded_gpus == stranded
