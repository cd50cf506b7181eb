"""A period the accounting never recorded shows no figures (finance review, 6 Dec).

On the demo, the month before it started (`?month=2026-11`) and, on a fresh fleet, "last 7 days"
before its first whole minute, the page's banner said "nothing here was measured, so its figures
are not $0.00 of use but no record at all", while right above it the table read a "no job (idle
capacity)" row at $0.00 and a TOTAL of $0.00, the four charts said "No GPU time has been charged
in this window." and "Nothing was wasted in this window.", and *Download CSV* offered a table of
0.00 with no word of why. Such a period (`Showback.unrecorded`) now has no rows, its table and
charts say it was not recorded and when the accounting began, and the page offers no CSV. A
period the accounting covered with nothing charged keeps its words.
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

CHARTS = ("cost_over_time", "cost_split", "unit_costs", "waste")


@pytest.fixture
def began(demo: None) -> Any:
    now = timezone.now()
    accounting.catch_up(now - timedelta(minutes=6))
    accounting.catch_up(now)
    first = FleetRollup.objects.filter(bucket=accounting.MINUTE).aggregate(t=Min("start"))["t"]
    assert first is not None
    return first


def _month_before(began: Any) -> str:
    return f"{accounting.floor_month(began) - timedelta(days=1):%Y-%m}"


@pytest.mark.parametrize("user", ["finn", "alice", "admin"])
def test_a_month_before_the_accounting_shows_no_figures_and_says_it_was_not_recorded(
    client_for: Any, began: Any, user: str,
) -> None:
    response = client_for(user).get("/showback/", {"month": _month_before(began)})
    assert response.status_code == 200
    html = response.content.decode()
    assert response.context["report"].unrecorded

    table = re.search(r'<table class="showback" id="showback-table">.*?</table>', html, re.S)
    assert table
    assert "$0.00" not in table.group(0), "a period with no record reads as a fleet that cost nothing"
    assert "TOTAL" not in re.sub(r"<thead>.*?</thead>", "", table.group(0), flags=re.S)
    said = re.search(r'id="no-rows">(.*?)</td>', table.group(0), re.S)
    assert said and "Nothing was recorded in this period" in said.group(1)
    assert f"{began:%Y-%m-%d %H:%M} UTC" in said.group(1)

    charts = {c.key: c for c in response.context["charts"]}
    assert set(CHARTS) <= set(charts)
    for key in CHARTS:
        empty = charts[key].empty
        assert "Nothing was recorded in this period" in empty, (key, empty)
        assert "charged" not in empty and "Nothing was wasted" not in empty, (key, empty)

    assert 'id="csv-download"' not in html, "a CSV of $0.00 for a period nobody measured"
    assert 'id="unrecorded-period"' in html


def test_a_recorded_period_with_nothing_charged_keeps_its_words(client_for: Any, began: Any) -> None:
    """A window the accounting covered, no job in it: the fleet's idle capacity is its cost, and
    a group that ran nothing is charged nothing: "No GPU time has been charged" is true there."""
    start = accounting.ceil_to(began, accounting.MINUTE) + timedelta(minutes=1)
    window = f"{accounting.iso(start)},{accounting.iso(start + timedelta(minutes=2))}"
    response = client_for("alice").get("/showback/", {"window": window})
    report = response.context["report"]
    assert not report.unrecorded and report.end > report.start

    charts = {c.key: c for c in response.context["charts"]}
    assert "No GPU time has been charged in this window." in charts["cost_over_time"].empty
    assert "No GPU time has been charged in this window." in charts["unit_costs"].empty
    assert not any("recorded" in c.empty for c in charts.values())
    assert 'id="csv-download"' in response.content.decode()
    assert "TOTAL" in response.content.decode()
