"""Finance QA, round 3 (2 Dec): GPU time of a GPU type and capacity tier without any price rate
was counted at $0 with nothing but a log line ("usage without a price") to say so: the showback
read a cheaper fleet, and a team's $ / GPU-h fell, with no word on the page, in the JSON or in
qm. The report now names that time (fleet readers: `Showback.unpriced`, the JSON's `unpriced`, a
banner on the page); a rate starting inside the window leaves only the time before it.

The demo fleet with the A100-40GB spot rate removed: its A100 nodes are all spot, so every
A100 GPU-second is unpriced.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Sum
from django.utils import timezone

from controlplane.models import FleetRollup, GpuType, PriceRate
from controlplane.services import accounting

pytestmark = pytest.mark.django_db


@pytest.fixture
def unpriced_fleet(demo: None) -> dict[str, Any]:
    a100 = GpuType.objects.get(name="A100-40GB")
    PriceRate.objects.filter(gpu_type=a100, capacity_tier="spot").delete()
    now = timezone.now()
    accounting.catch_up(now - timedelta(minutes=6))
    accounting.catch_up(now)
    return {"a100": a100, "now": now}


def test_the_report_names_gpu_time_without_a_price(client_for: Any, unpriced_fleet: dict[str, Any]) -> None:
    response = client_for("finn").get("/showback/?window=24h")
    report = response.context["report"]
    rows = FleetRollup.objects.filter(accounting.in_bucket(accounting.MINUTE, report.start, report.end),
                                      gpu_type=unpriced_fleet["a100"])
    sums = rows.aggregate(capacity=Sum("capacity_gpu_seconds"), allocated=Sum("allocated_gpu_seconds"),
                          cost=Sum("capacity_cost_usd"))
    assert sums["capacity"] > 0 and sums["cost"] == 0

    assert [(u.gpu_type, u.capacity_tier) for u in report.unpriced] == [("A100-40GB", "spot")]
    unpriced = report.unpriced[0]
    assert unpriced.capacity_gpu_seconds == sums["capacity"] and unpriced.allocated_gpu_seconds == sums["allocated"]
    assert unpriced.priced_from is None

    banner = re.search(r'<p class="banner" id="unpriced">(.*?)</p>', response.content.decode(), re.S)
    assert banner, "the page says nothing of GPU time counted at $0"
    assert "A100-40GB spot" in banner.group(1) and f"{sums['capacity'] / 3600:,.1f} GPU-h" in banner.group(1)

    body = client_for("finn").get("/api/v1/showback/?window=24h").json()
    assert body["unpriced"] == [{"gpuType": "A100-40GB", "capacityTier": "spot",
                                 "capacityGpuHours": float((sums["capacity"] / 3600).quantize(Decimal("0.0001"))),
                                 "allocatedGpuHours": float((sums["allocated"] / 3600).quantize(Decimal("0.0001"))),
                                 "pricedFrom": None}]


def test_a_rate_from_inside_the_window_leaves_the_time_before_it(client_for: Any,
                                                                unpriced_fleet: dict[str, Any]) -> None:
    first = accounting.floor_to(unpriced_fleet["now"], accounting.MINUTE) - timedelta(minutes=3)
    PriceRate.objects.create(gpu_type=unpriced_fleet["a100"], capacity_tier="spot", usd_per_gpu_hour=Decimal("0.8"),
                             effective_from=first)
    report = client_for("finn").get("/showback/?window=24h").context["report"]
    before = FleetRollup.objects.filter(accounting.in_bucket(accounting.MINUTE, report.start, first),
                                        gpu_type=unpriced_fleet["a100"]).aggregate(c=Sum("capacity_gpu_seconds"))["c"]

    assert len(report.unpriced) == 1 and report.unpriced[0].priced_from == first
    assert report.unpriced[0].capacity_gpu_seconds == before > 0


def test_members_and_a_fully_priced_fleet_read_no_banner(client_for: Any, demo: None) -> None:
    now = timezone.now()
    accounting.catch_up(now - timedelta(minutes=6))
    accounting.catch_up(now)
    finance = client_for("finn").get("/showback/?window=24h")
    assert finance.context["report"].unpriced == [] and 'id="unpriced"' not in finance.content.decode()
    assert client_for("finn").get("/api/v1/showback/?window=24h").json()["unpriced"] == []
    member = client_for("alice").get("/api/v1/showback/?window=24h").json()
    assert "unpriced" not in member
