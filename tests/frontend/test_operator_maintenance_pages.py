"""Maintenance windows on the pages: the Nodes page lists the active and upcoming ones (nodes,
times, reason, the running jobs still there when each begins) and offers admins a form and a
cancel button; a node's page lists its windows. Read in a number of queries that does not grow
with the windows."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.models import AllocationGpu, Job, MaintenanceWindow, Node
from controlplane.services import maintenance
from controlplane.services.cycle import run_cycle


def _admin():  # noqa: ANN202
    return get_user_model().objects.get(username="admin")


def test_the_nodes_page_lists_active_and_upcoming_windows_with_their_running_jobs(
        client_for: Callable[[str], Client], submit_as: Callable[..., Job]) -> None:
    job = submit_as("alice", name="long-run", gpus=1, runtime_limit_s=20 * 3600)
    run_cycle("test")
    node = Node.objects.get(pk=AllocationGpu.objects.filter(allocation__job=job, live=True).values("node_id")[:1])
    upcoming = maintenance.create(_admin(), nodes=[node.name], start_at=timezone.now() + timedelta(hours=2),
                                  duration_s=3 * 3600, reason="firmware upgrade")
    other = Node.objects.exclude(pk=node.pk).order_by("name").first()
    cancelled = maintenance.create(_admin(), nodes=[other.name], start_at=timezone.now() + timedelta(hours=1),
                                   duration_s=3600, reason="called off")
    maintenance.cancel(cancelled.pk, _admin())

    admin = client_for("admin")
    for html in (admin.get("/nodes/").content.decode(), admin.get("/ui/nodes.json").json()["html"]["maintenance-windows"]):
        assert f'data-maintenance-window="{upcoming.pk}" data-state="upcoming"' in html
        assert f'data-maintenance-window="{cancelled.pk}"' not in html
        row = re.search(rf'data-maintenance-window="{upcoming.pk}".*?</tr>', html, re.S).group(0)
        assert node.name in row and "firmware upgrade" in row and "(3 h)" in row
        assert 'data-affected="1"' in row and f'href="/jobs/{job.pk}/"' in row and "long-run" in row
        assert f'data-api-post="/api/v1/maintenance-windows/{upcoming.pk}/cancel/"' in row
    assert 'id="maintenance-form"' in admin.get("/nodes/").content.decode()
    # The node's row in its pool's table says it too; the cancelled window's node says nothing.
    for html in (admin.get("/nodes/").content.decode(), admin.get("/ui/nodes.json").json()["html"]["nodes-table"]):
        row = re.search(rf'<tr data-node="{node.name}">.*?</tr>', html, re.S).group(0)
        # two hours ahead, less the seconds the test took: "2.0 h", the unit the figure rounds to
        # (until 7 Dec "120 min"), or a minute or more later "1xx min"
        assert f'data-node-maintenance="{upcoming.pk}"' in row and re.search(r"maintenance in (2\.0 h|1[01]\d min)", row)
        other_row = re.search(rf'<tr data-node="{other.name}">.*?</tr>', html, re.S).group(0)
        assert "data-node-maintenance" not in other_row

    # Bob (another team) sees the window and that a job of team vision is there, not which.
    bob = client_for("bob").get("/nodes/").content.decode()
    row = re.search(rf'data-maintenance-window="{upcoming.pk}".*?</tr>', bob, re.S).group(0)
    assert "a job of team vision" in row and "long-run" not in row and "data-api-post" not in row
    assert 'id="maintenance-form"' not in bob

    # The node's page lists its windows, with the history of cancelled ones.
    page = admin.get(f"/nodes/{other.name}/").content.decode()
    section = re.search(r'id="node-maintenance">(.*?)</section>', page, re.S).group(1)
    assert f'data-maintenance-window="{cancelled.pk}" data-state="cancelled"' in section
    assert "called off" in section and "data-api-post" not in section
    assert "MaintenanceCancelled" in page  # its event, in the node's events


def test_a_page_without_windows_says_so_and_the_reads_do_not_grow_with_windows(
        client_for: Callable[[str], Client]) -> None:
    admin = client_for("admin")
    assert "No maintenance window is active or upcoming." in admin.get("/nodes/").content.decode()
    node = Node.objects.order_by("name").first()
    assert "No maintenance window has named this node." in admin.get(f"/nodes/{node.name}/").content.decode()

    maintenance.create(_admin(), nodes=[node.name], start_at=timezone.now() + timedelta(hours=1), duration_s=60,
                       reason="w")
    counts = []
    for extra in (0, 6):
        for i in range(extra):
            maintenance.create(_admin(), pool=node.pool, start_at=timezone.now() + timedelta(hours=2 + i),
                               duration_s=60, reason=f"w{i}")
        with CaptureQueriesContext(connection) as nodes_page:
            assert admin.get("/nodes/").status_code == 200
        with CaptureQueriesContext(connection) as node_page:
            assert admin.get(f"/nodes/{node.name}/").status_code == 200
        with CaptureQueriesContext(connection) as node_json:
            live = admin.get(f"/ui/nodes/{node.name}.json").json()["html"]["node-maintenance-windows"]
        assert live.count("data-maintenance-window=") == 1 + extra
        counts.append((len(nodes_page), len(node_page), len(node_json)))
    assert MaintenanceWindow.objects.count() == 7
    assert counts[0] == counts[1]


def test_a_window_stored_overlapping_another_is_marked_on_the_pages(client_for: Callable[[str], Client]) -> None:
    # written straight to the table, as windows were before writes refused overlaps
    node, other = Node.objects.order_by("name")[:2]
    now = timezone.now()

    def stored(nodes: list[Node], start_h: float, end_h: float, reason: str) -> MaintenanceWindow:
        window = MaintenanceWindow.objects.create(start_at=now + timedelta(hours=start_h),
                                                  end_at=now + timedelta(hours=end_h), reason=reason, created_at=now)
        window.nodes.set(nodes)
        return window

    first = stored([node, other], 1, 4, "firmware")
    second = stored([node], 3, 5, "cabling")             # overlaps first on node
    alone = stored([other], 4, 6, "cooling")             # back to back with first: fine
    admin = client_for("admin")
    for html in (admin.get(f"/nodes/{node.name}/").content.decode(),
                 admin.get(f"/ui/nodes/{node.name}.json").json()["html"]["node-maintenance-windows"],
                 admin.get("/nodes/").content.decode()):
        rows = {int(pk): row for pk, row in re.findall(r'data-maintenance-window="(\d+)"(.*?)</tr>', html, re.S)}
        assert f'data-overlaps="{second.pk}"' in rows[first.pk]
        assert f"⚠ overlaps window {second.pk} on a shared node" in rows[first.pk]
        assert f"⚠ overlaps window {first.pk} on a shared node" in rows[second.pk]
        assert "window-overlap" not in rows.get(alone.pk, "")
    other_page = admin.get(f"/nodes/{other.name}/").content.decode()
    rows = {int(pk): row for pk, row in re.findall(r'data-maintenance-window="(\d+)"(.*?)</tr>', other_page, re.S)}
    assert set(rows) == {first.pk, alone.pk} and "window-overlap" not in rows[alone.pk]
    assert f"overlaps window {second.pk}" in rows[first.pk]   # the window overlaps, on a node it shares
    maintenance.cancel(second.pk, _admin())
    assert "window-overlap" not in admin.get(f"/nodes/{node.name}/").content.decode()
