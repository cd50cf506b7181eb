"""/metrics: quartermaster_maintenance_nodes[pool, state] counts the nodes in a maintenance
window now (active) and in one to come (upcoming); every pool has both series, cancelled and
ended windows count nowhere."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import MaintenanceWindow, Node
from controlplane.services import maintenance
from tests.controlplane.fleet_fixture import Fleet, client_for
from tests.controlplane.test_metrics_nodes import scrape

pytestmark = pytest.mark.django_db


def test_nodes_in_active_and_upcoming_windows_are_counted_per_pool(fleet: Fleet) -> None:
    root = fleet.users["admin"]
    now = timezone.now()
    maintenance.create(root, nodes=["h100-0", "h100-1"], start_at=now - timedelta(minutes=1), duration_s=3600,
                       reason="now")
    maintenance.create(root, nodes=["h100-1", "h100-2"], start_at=now + timedelta(hours=1), duration_s=3600,
                       reason="later")
    maintenance.create(root, nodes=["h100-2"], start_at=now + timedelta(hours=3), duration_s=3600, reason="again")
    gone = maintenance.create(root, pool="a100", start_at=now + timedelta(hours=1), duration_s=60, reason="off")
    maintenance.cancel(gone.pk, root)
    ended = MaintenanceWindow.objects.create(start_at=now - timedelta(hours=2), end_at=now - timedelta(hours=1),
                                             reason="old", created_at=now - timedelta(days=1))
    ended.nodes.set(Node.objects.filter(pool="a100"))

    series, text = scrape(client_for(fleet, "admin"))

    got = {(dict(k)["pool"], dict(k)["state"]): v for k, v in series["quartermaster_maintenance_nodes"].items()}
    assert got == {("h100", "active"): 2, ("h100", "upcoming"): 2, ("a100", "active"): 0, ("a100", "upcoming"): 0}
    assert "# TYPE quartermaster_maintenance_nodes gauge" in text
