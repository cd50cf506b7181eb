"""A time without a time zone is refused in the same words wherever the API takes an instant:
showback's window, a price rate's effective_from, a maintenance window's start_at and end_at
(services/instants.no_zone_said, one home). Showback said only "add Z or an offset." until 2 Dec,
with no example of what to send."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from tests.controlplane.fleet_fixture import Fleet

SAID = "'{0}' has no time zone; add Z or an offset, e.g. {1}Z or {1}+00:00 for UTC"


def test_showback_price_rates_and_maintenance_windows_say_it_alike(admin: APIClient, fleet: Fleet) -> None:
    naive = (timezone.now() + timedelta(hours=2)).strftime("%Y-%m-%dT%H:00")
    full = naive + ":00"
    said = SAID.format(naive, full)

    showback = admin.get("/api/v1/showback/", {"window": f"{naive},{naive[:11]}23:00Z"})
    rate = admin.post("/api/v1/price-rates/", {"gpu_type": "H100-80GB", "capacity_tier": "on_demand",
                                               "usd_per_gpu_hour": "3.00", "effective_from": naive}, format="json")
    window = admin.post("/api/v1/maintenance-windows/", {"nodes": ["h100-1"], "start_at": naive, "duration_s": 60,
                                                         "reason": "fw"}, format="json")

    assert showback.status_code == 400 and showback.json()["errors"]["window"] == [f"{said}."], showback.json()
    assert rate.status_code == 400 and rate.json()["errors"]["effective_from"] == [said], rate.json()
    assert window.status_code == 400 and window.json()["errors"]["start_at"] == [said], window.json()
