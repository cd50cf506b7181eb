"""A period that starts before the accounting began says so (finance audit, 5 Dec).

The rollups begin with the accounting's first run: nothing before it was ever recorded. A
report over a period reaching back before it (the month the product was installed, "last 30
days" on a fleet a week old, or a month before it) showed its rows and a TOTAL as if the fleet
had cost $0.00 until then, on the page, in the JSON and in qm, without a word. The report now
names when the accounting began (`Showback.accounting_began`, the JSON's `accountingBegan`, a
banner on the page, a line under qm's table); a period that starts after it says nothing.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import Min
from django.utils import timezone

from controlplane.models import FleetRollup
from controlplane.services import accounting

pytestmark = pytest.mark.django_db


@pytest.fixture
def rolled(demo: None) -> dict[str, Any]:
    now = timezone.now()
    accounting.catch_up(now - timedelta(minutes=6))
    accounting.catch_up(now)
    began = FleetRollup.objects.filter(bucket=accounting.MINUTE).aggregate(t=Min("start"))["t"]
    assert began is not None
    return {"now": now, "began": began}


def _banner(html: str) -> str | None:
    found = re.search(r'<p class="banner" id="before-accounting">(.*?)</p>', html, re.S)
    return found.group(1) if found else None


@pytest.mark.parametrize("user", ["finn", "alice"])
def test_a_window_reaching_back_before_the_accounting_says_when_it_began(client_for: Any, rolled: dict[str, Any],
                                                                         user: str) -> None:
    response = client_for(user).get("/showback/?window=30d")
    report = response.context["report"]

    assert report.start < rolled["began"] and report.accounting_began == rolled["began"]
    banner = _banner(response.content.decode())
    assert banner, "the page counts nothing before the accounting began and does not say so"
    assert f"{rolled['began']:%Y-%m-%d %H:%M} UTC" in banner and "no record" in banner
    body = client_for(user).get("/api/v1/showback/?window=30d").json()
    assert body["accountingBegan"] == accounting.iso(rolled["began"])


def test_a_month_before_the_accounting_is_not_a_month_at_no_cost(client_for: Any, rolled: dict[str, Any]) -> None:
    before = accounting.floor_month(rolled["began"]) - timedelta(days=1)
    month = f"{before:%Y-%m}"
    response = client_for("finn").get(f"/showback/?month={month}")

    banner = _banner(response.content.decode())
    assert banner and "after this period" in banner and "not $0.00" in banner, banner
    body = client_for("finn").get(f"/api/v1/showback/?month={month}").json()
    assert body["accountingBegan"] == accounting.iso(rolled["began"])
    assert body["totals"]["totalCost"] == 0.0


def test_a_window_inside_the_accounting_says_nothing_of_it(client_for: Any, rolled: dict[str, Any]) -> None:
    start = accounting.ceil_to(rolled["began"], accounting.MINUTE) + timedelta(minutes=1)
    window = f"{accounting.iso(start)},{accounting.iso(rolled['now'])}"
    response = client_for("finn").get("/showback/", {"window": window})

    assert response.context["report"].accounting_began is None
    assert _banner(response.content.decode()) is None
    assert client_for("finn").get("/api/v1/showback/", {"window": window}).json()["accountingBegan"] is None
