"""GPUs held idle for a waiting job's reservation are a figure of their own.

The engine counted them every cycle, but nothing kept them: an operator saw 11 stranded GPUs
and could not tell the 6 draining for the waiting 8-GPU job from the 5 left over by packing.
Now each cycle's sample keeps them (migration 0016), /metrics exports
`quartermaster_reserved_gpus`, and the fragmentation API says them as the last cycle counted."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.models import FleetSample, Node
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle
from tests.frontend.test_figures_agree_stranded_surfaces import scrape


def test_reserved_gpus_are_stored_exported_and_served(submit_as: Any, client_for: Any) -> None:
    admin = get_user_model().objects.get(username="admin")
    for node in Node.objects.exclude(name__in=["a100-01", "h100-01"]):
        nodes.cordon(node, admin)
    assert client_for("alice").get("/api/v1/metrics/fragmentation/").json()["reserved_gpus"] is None
    submit_as("alice", name="small-a", gpus=2, gpu_types=("A100-40GB",))
    submit_as("alice", name="small-h", gpus=3, gpu_types=("H100-80GB",))
    run_cycle("test", now=timezone.now() - timedelta(seconds=30))
    first = FleetSample.objects.order_by("-at", "-id").first()
    assert first is not None and first.reserved_gpus == 0  # nothing waits: nothing is held

    submit_as("bob", name="big", gpus=8, gpus_per_node=8)
    run_cycle("test")

    sample = FleetSample.objects.order_by("-at", "-id").first()
    assert sample is not None and sample.pk != first.pk
    # The 8-GPU job reserves a100-01 (the same reservation the stranded test describes): its 6
    # idle GPUs are held for it while it drains, and they are part of the 11 stranded.
    assert sample.reserved_gpus == 6 and sample.stranded_gpus == 11
    api = client_for("alice").get("/api/v1/metrics/fragmentation/").json()
    assert api["reserved_gpus"] == sample.reserved_gpus
    assert scrape(client_for("admin"))["quartermaster_reserved_gpus"][()] == sample.reserved_gpus
    chart = client_for("alice").get("/ui/overview.json").json()["charts"]["stranded"]["figure"]
    held = next(t for t in chart["data"] if t["name"] == "held for a reservation")
    stranded = next(t for t in chart["data"] if t["name"] == "stranded GPUs")
    assert held["y"][-2:] == [0, 6] and stranded["y"][-1] == 11
