"""The stranded GPUs read live (metrics/fragmentation/, /metrics, the overview, the Nodes page,
qm sinfo: `fleet_figures.fragmentation_of`) are those the cycle counts, whatever the waiting
job's roles, CPUs and memory. Until 7 Dec the live figures read a waiting job as its GPUs, GPUs
per node, GPU types and device memory alone, and its node kinds as GPU type, device memory and
GPUs: a heterogeneous gang counted as one job of its total GPUs, any node counted as able to
hold a member whatever CPUs or memory the member asks beside its GPUs, and a gang counted on
every GPU type it accepts, even one whose nodes can never hold it all. The cycle judges each
role's members on their own and leaves out the node kinds too small in CPUs or memory, and the
GPU types its gang can never run on (scheduler_core/stranded.py: one rule, now read alike).

The fleet: the demo's, every node cordoned but a100-01 (8 GPUs, 64 CPUs, 512 GB), h100-01
(8 GPUs, 96 CPUs, 1024 GB) and a 4-GPU H100 node h100-small, each partly used: 6, 5 and 1 GPUs
idle."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, FleetSample, GpuType, Job, Node
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle
from controlplane.services.fleet_figures import fragmentation_figures
from tests.controlplane import factories as f

H100 = ("H100-80GB",)
A100 = ("A100-40GB",)


def role(name: str, count: int, gpus: int, types: tuple[str, ...] = (), **more: Any) -> dict[str, Any]:
    return {"name": name, "count": count, "gpus_per_member": gpus, "gpu_types": list(types), **more}


CASES: dict[str, tuple[dict[str, Any], int]] = {
    # (the waiting job, the GPUs the cycle counts stranded)
    # 96 CPUs for 8 GPUs: only an H100 node has them (an A100 node has 64)
    "cpus_leave_out_the_a100_nodes": (dict(gpus=8, cpus_per_gpu=12), 5),
    # 800 GB for 8 GPUs: only an H100 node has it (an A100 node has 512 GB)
    "memory_leaves_out_the_a100_nodes": (dict(gpus=8, memory_gb_per_gpu=100), 5),
    # a learner of 4 H100 GPUs fills the 4-GPU node: the gang needs whole nodes (read as one
    # job of 6 GPUs it needed none)
    "a_role_that_fills_a_small_node": (
        dict(gpus=6, roles=(role("learner", 1, 4, H100), role("worker", 1, 2, H100))), 5 + 1),
    # members of 6 and 2 GPUs fill no node (read as one job of 8 GPUs they filled one)
    "roles_that_fill_no_node": (
        dict(gpus=8, roles=(role("learner", 1, 6, H100), role("worker", 1, 2, H100))), 0),
    # a trainer of 8 H100 GPUs needs a whole node; its members take H100 GPUs only, so the A100
    # node's idle GPUs are not stranded (read as one job of 9 GPUs of any type they were)
    "a_trainer_of_a_whole_node_strands_only_its_roles_types": (
        dict(gpus=9, roles=(role("trainer", 1, 8, H100), role("worker", 1, 1, H100))), 5 + 1),
    # 40 GPUs of any type: the four A100 nodes hold 32, so the gang can run on H100 nodes only
    "a_gang_larger_than_one_types_nodes_strands_only_the_other_type": (dict(gpus=40), 5),
    # agreed before: idle GPUs on a node whose CPUs are all taken are stranded all the same
    # (the rule counts idle GPUs; CPUs and memory only say which nodes a member may use)
    "idle_gpus_beside_no_free_cpus": (dict(gpus=8, gpu_types=H100), 5),
}


@pytest.fixture
def partly_used(submit_as: Any) -> None:
    admin = get_user_model().objects.get(username="admin")
    for node in Node.objects.exclude(name__in=["a100-01", "h100-01"]):
        nodes.cordon(node, admin)
    f.make_node(GpuType.objects.get(name="H100-80GB"), name="h100-small", pool="h100", gpu_count=4,
                leaf_switch="leaf-h1", spine="spine-1")
    submit_as("alice", name="two-a", gpus=2, gpu_types=A100)
    # 3 GPUs and all 96 CPUs of h100-01
    submit_as("alice", name="three-h", gpus=3, gpu_types=H100, cpus_per_gpu=32)
    submit_as("alice", name="three-s", gpus=3, gpu_types=H100)
    run_cycle("test", now=timezone.now() - timedelta(seconds=30))
    held = {name: AllocationGpu.held().filter(node__name=name).count() for name in ("a100-01", "h100-01", "h100-small")}
    assert held == {"a100-01": 2, "h100-01": 3, "h100-small": 3}


def stranded_on_every_surface(client: Client) -> tuple[int, int, int, int]:
    """The stranded GPUs as the API (and so `qm sinfo`), /metrics, the overview's tile and the
    Nodes page's pool headings say them."""
    api = client.get("/api/v1/metrics/fragmentation/").json()["stranded_gpus"]
    metrics = client.get("/metrics").content.decode()
    scraped = sum(sample.value for family in text_string_to_metric_families(metrics)
                  for sample in family.samples if sample.name == "quartermaster_stranded_gpus")
    tile = int(client.get("/ui/overview.json").json()["text"]["stranded_gpus"])
    headings = re.findall(r'data-pool-fragmentation="[^"]+"[^>]*>(.*?)</small>',
                          client.get("/ui/nodes.json").json()["html"]["nodes-table"], re.S)
    pools = sum(int(re.search(r"(\d+) stranded", h).group(1)) for h in headings)
    return api, int(scraped), tile, pools


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_live_figure_counts_what_the_cycle_counts(case: str, partly_used: None, submit_as: Any,
                                                     client_for: Any) -> None:
    job, stranded = CASES[case]
    submit_as("bob", name="big", **job)
    run_cycle("test")
    big = Job.objects.get(name="big")
    assert big.state == JobState.PENDING and big.pending_resolvable, big.pending_words
    sample = FleetSample.objects.order_by("-at", "-id").first()
    assert sample is not None
    assert sample.stranded_gpus == stranded  # the cycle's count, the reference
    assert fragmentation_figures().stranded_gpus == stranded
    assert stranded_on_every_surface(client_for("admin")) == (stranded,) * 4


def test_the_live_figure_reads_the_waiting_jobs_in_a_fixed_number_of_queries(partly_used: None,
                                                                            submit_as: Any) -> None:
    """Roles, CPUs and memory read with the waiting jobs' shapes: no query per job or node."""
    submit_as("bob", name="big", gpus=8, cpus_per_gpu=12)
    run_cycle("test")
    with CaptureQueriesContext(connection) as few:
        fragmentation_figures()
    for i in range(6):
        submit_as("bob", name=f"gang-{i}", gpus=6 + i % 4,
                  roles=(role("learner", 1, 4 + i % 4, H100, cpus_per_gpu=i), role("worker", 1, 2, H100)))
        submit_as("bob", name=f"wide-{i}", gpus=8, memory_gb_per_gpu=10 * i, cpus_per_gpu=i)
        f.make_node(GpuType.objects.get(name="A100-40GB"), name=f"a100-extra-{i}", pool="a100", cpus=32 + i)
    run_cycle("test")
    with CaptureQueriesContext(connection) as many:
        fragmentation_figures()
    assert len(many) == len(few)
