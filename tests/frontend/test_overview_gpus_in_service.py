"""The overview's "GPUs allocated X / Y": Y is the GPUs in service, and the tile says how many are
away, as `qm sinfo` (AWAY) and the fragmentation API (`unavailable_gpus`) count them: idle GPUs on
nodes that take no work (not ready: quarantined, down, suspect, cordoned, draining; or inside a
maintenance window now). Found by the operator journey (2 Dec): with two nodes quarantined the
tile read "80 / 144", the 16 GPUs that could run nothing counted as capacity."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import FleetSample, MaintenanceWindow, Node
from controlplane.services.cycle import run_cycle
from controlplane.services.fleet_figures import fragmentation_figures


def _take_three_nodes_away() -> None:
    Node.objects.filter(name="h100-01").update(state=NodeState.QUARANTINED)
    Node.objects.filter(name="h100-02").update(state=NodeState.DOWN)
    now = timezone.now()
    window = MaintenanceWindow.objects.create(start_at=now - timedelta(minutes=5), end_at=now + timedelta(hours=1),
                                              reason="firmware", created_at=now - timedelta(minutes=10))
    window.nodes.set(Node.objects.filter(name="a100-01"))


def _away_by_sinfo() -> int:
    return sum(p.unavailable_gpus for p in fragmentation_figures().pools)


def test_before_any_cycle_the_tile_reads_the_gpus_in_service_and_those_away(client_for: Any) -> None:
    admin = client_for("admin")
    calm = admin.get("/ui/overview.json").json()["text"]
    assert (calm["allocated_gpus"], calm["in_service_gpus"], calm["away_gpus"]) == ("0", "128", "0")

    _take_three_nodes_away()
    assert not FleetSample.objects.exists()
    text = admin.get("/ui/overview.json").json()["text"]
    assert (text["allocated_gpus"], text["in_service_gpus"], text["away_gpus"], text["total_gpus"]) == \
        ("0", "104", "24", "128")
    assert int(text["away_gpus"]) == _away_by_sinfo()
    page = admin.get("/").content.decode()
    assert 'data-live="in_service_gpus">104<' in page and "in service" in page
    assert 'data-live="away_gpus">24<' in page and "away" in page


def test_after_a_cycle_the_tile_reads_the_cycle_sample_the_same_way(client_for: Any, submit_as: Any) -> None:
    _take_three_nodes_away()
    submit_as("alice", name="v", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    assert FleetSample.objects.exists()
    text = client_for("alice").get("/ui/overview.json").json()["text"]
    # 8 held of the 104 GPUs on nodes that take work; 24 idle on nodes that take none
    assert (text["allocated_gpus"], text["in_service_gpus"], text["away_gpus"], text["total_gpus"]) == \
        ("8", "104", "24", "128")
    assert int(text["away_gpus"]) == _away_by_sinfo()


def test_a_cordoned_node_running_a_job_counts_its_held_gpus_in_service_and_its_idle_ones_away(
        client_for: Any, submit_as: Any) -> None:
    # As sinfo: GPUS = HELD + FREE + AWAY; a job still running on a cordoned node holds its GPUs.
    submit_as("alice", name="v", gpus=4, gpu_types=("H100-80GB",))
    run_cycle("test", now=timezone.now() - timedelta(seconds=30))  # a sample at most every 5 s
    node = Node.objects.filter(allocation_gpus__live=True).distinct().get()
    Node.objects.filter(pk=node.pk).update(state=NodeState.CORDONED)
    run_cycle("test")
    text = client_for("alice").get("/ui/overview.json").json()["text"]
    assert (text["allocated_gpus"], text["in_service_gpus"], text["away_gpus"]) == ("4", "124", "4")
    assert int(text["away_gpus"]) == _away_by_sinfo()
