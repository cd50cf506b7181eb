"""Nodes inside a maintenance window take no work, and every surface says so.

Found on the demo (2 Dec): with a window active on a100-02 and a100-03 (idle) and a100-01
cordoned, the cycle's figures (/metrics, the overview's chart) said the a100 pool's largest free
block was 0, while GET metrics/fragmentation/ and the Nodes page said "16 free on ready nodes ·
largest free block 8" (two whole free nodes) and the overview's heat map drew their GPUs as free,
though the scheduler starts nothing there until the window ends. Now the API, the Nodes page and
the heat map count their idle GPUs as unavailable, as the cycle does."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.models import FleetSample, Node
from controlplane.services import maintenance, nodes
from controlplane.services.cycle import run_cycle
from frontend.heatmap import fleet_grid
from frontend.views.nodes import nodes_payload
from tests.frontend.test_figures_agree_stranded_surfaces import scrape


def test_nodes_in_an_active_window_are_not_free_on_any_surface(client_for: Any, rf: Any) -> None:
    admin = get_user_model().objects.get(username="admin")
    for name in ("a100-01", "a100-04"):
        nodes.cordon(Node.objects.get(name=name), admin)
    window = maintenance.create(admin, nodes=["a100-02", "a100-03"], start_at=timezone.now(), duration_s=3600,
                                reason="PSU swap")
    later = maintenance.create(admin, nodes=["h100-01"], start_at=timezone.now() + timedelta(hours=2),
                               duration_s=3600, reason="firmware")
    run_cycle("test")

    sample = FleetSample.objects.order_by("-at", "-id").first()
    assert sample is not None and (sample.largest_free_block_by_pool or {}).get("a100", 0) == 0
    m = scrape(client_for("admin"))
    assert m["quartermaster_largest_free_block_gpus"][(("pool", "a100"),)] == 0

    api = {p["pool"]: p for p in client_for("alice").get("/api/v1/metrics/fragmentation/").json()["pools"]}
    assert (api["a100"]["free_gpus"], api["a100"]["largest_free_block"], api["a100"]["whole_free_nodes"],
            api["a100"]["unavailable_gpus"]) == (0, 0, 0, 32)
    # A window still to come closes nothing yet: h100-01 is free until it begins.
    assert (api["h100"]["free_gpus"], api["h100"]["largest_free_block"]) == (96, 8)

    request = rf.get("/nodes/")
    request.user = admin
    pools = {p["pool"]: p for p in nodes_payload(request)["pools"]}
    assert (pools["a100"]["free_ready"], pools["a100"]["largest_free_block"]) == (0, 0)
    assert (pools["h100"]["free_ready"], pools["h100"]["largest_free_block"]) == (96, 8)
    grid = {row.name: row for row in fleet_grid(admin)}
    assert grid["a100-02"].in_maintenance and not grid["a100-02"].schedulable
    assert not grid["h100-01"].in_maintenance and grid["h100-01"].schedulable

    overview = client_for("admin").get("/ui/overview.json").json()
    heatmap = overview["charts"]["heatmap"]
    cells = heatmap["figure"]["data"][0]
    categories = cells["colorbar"]["ticktext"]
    row = cells["y"].index("a100 / a100-02")
    assert {categories[z] for z in cells["z"][row]} == {"away"}
    assert "ready, in maintenance" in cells["text"][row][0]

    # Once the window is cancelled the nodes are free again, on the API as in the cycle.
    maintenance.cancel(window.pk, admin)
    api = {p["pool"]: p for p in client_for("alice").get("/api/v1/metrics/fragmentation/").json()["pools"]}
    assert (api["a100"]["free_gpus"], api["a100"]["largest_free_block"]) == (16, 8)
    assert later.pk != window.pk


def test_a_node_page_says_its_window_keeps_it_from_work(client_for: Any) -> None:
    """The node's page said "GPUs in use 0 of 8 (8 free)" for a ready node inside a maintenance
    window, which takes no work until the window ends."""
    admin = get_user_model().objects.get(username="admin")
    maintenance.create(admin, nodes=["a100-02"], start_at=timezone.now(), duration_s=3600, reason="PSU swap")

    inside = client_for("admin").get("/nodes/a100-02/").content.decode()
    outside = client_for("admin").get("/nodes/a100-03/").content.decode()

    assert "0 of 8; takes no new work during its maintenance window (below: 8 idle until it ends)" in inside
    assert "(8 free)" not in inside
    assert "0 of 8 (8 free)" in outside


def test_the_windows_panel_says_jobs_are_inside_an_active_window_now(client_for: Any) -> None:
    from django.db import transaction

    from controlplane.services import reconcile, transitions
    from controlplane.services.jobs import SubmitRequest, submit

    admin = get_user_model().objects.get(username="admin")
    node = Node.objects.get(name="a100-02")
    job = submit(get_user_model().objects.get(username="alice"),
                 SubmitRequest(name="inside", gpus=2, gpu_types=("A100-40GB",))).job
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=node.pk, gpu_indices=[0, 1])], lease=lease,
                             borrowed=False, at=timezone.now(), actor="test")
    now = maintenance.create(admin, nodes=["a100-02"], start_at=timezone.now(), duration_s=3600, reason="PSU swap")
    later = maintenance.create(admin, nodes=["a100-02"], start_at=timezone.now() + timedelta(hours=30),
                               duration_s=3600, reason="firmware")

    html = client_for("admin").get("/nodes/").content.decode()

    active = html[html.index(f'data-maintenance-window="{now.pk}"'):]
    active = active[:active.index("</tr>")]
    assert '<small class="muted">inside it now:</small> 1: ' in active and f">{job.pk}</a> inside" in active
    upcoming = html[html.index(f'data-maintenance-window="{later.pk}"'):]
    assert "inside it now" not in upcoming[:upcoming.index("</tr>")]
