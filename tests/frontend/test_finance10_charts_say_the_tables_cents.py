"""The showback page's charts say the table's cents (finance review, 7 Dec).

Money is summed exact and rounded once, where it is presented, by the showback service's
apportionment (`showback.presented_money`): the table, the CSV, the JSON and `qm showback` read
those cents. The cost chart rounded each bar on its own instead: ml holding one H100 for two
hours at $2.1450 per GPU-hour cost $4.29 in the table (2 × $2.145, rounded once) while its two
hourly bars read $2.15 + $2.15 (the float 2.145 is a hair above it), whose total the chart's
figures table said: $4.30. Its bars are now the row's cents shared out over its buckets, so they
add up to the table's figure; "Where the money went" splits a row's cents over its tiers the same
way (three thirds of $10.00 read $3.33 each, $9.99), and "Price of a GPU-hour" draws the table's
prices, rounded once ($2.145 per GPU-hour read $2.14 in the table and $2.15 in the chart)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.services import accounting, showback
from frontend import chart_figures, figures
from frontend.showback_data import report_rows
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet, build_fleet

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(db: Any) -> Fleet:
    return build_fleet()


def _ml_held_one_gpu_for_two_hours_at_half_cents(fleet: Fleet) -> str:
    """ml holds one H100 for two whole hours at $2.1450 per GPU-hour ($2.145 an hour, $4.29 in
    all); returns the showback window of those two hours."""
    f.make_price_rate(fleet.h100, "2.1450", effective_from=datetime(2026, 6, 1, tzinfo=UTC))
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=3)
    end = start + timedelta(hours=2)
    job = running_job(fleet.ml, gpus=1, started_at=start, priority_class=fleet.research)
    hold(job, [(fleet.nodes[1], 1)], start, end)
    accounting.catch_up(now)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}"


def _page(fleet: Fleet, window: str) -> Any:
    client = Client()
    client.force_login(fleet.users["finance"])
    response = client.get("/showback/", {"window": window})
    assert response.status_code == 200
    assert not response.context["errors"], response.context["errors"]
    return response


def _chart(response: Any, key: str) -> figures.Chart:
    return next(c for c in response.context["charts"] if c.key == key)


def test_a_teams_cost_bars_add_up_to_its_cents_in_the_table(fleet: Fleet) -> None:
    response = _page(fleet, _ml_held_one_gpu_for_two_hours_at_half_cents(fleet))
    row = next(r for r in response.context["rows"] if r["name"] == "ml")
    assert row["cost_usd"] == Decimal("4.29")
    trace = next(t for t in _chart(response, "cost_over_time").figure["data"] if t["name"] == "ml")
    assert len(trace["y"]) == 2
    assert sum(Decimal(str(y)) for y in trace["y"]) == Decimal("4.29"), trace["y"]
    # every bar is whole cents, one of the two a cent above the other
    assert sorted(Decimal(str(y)) for y in trace["y"]) == [Decimal("2.14"), Decimal("2.15")]


def test_the_cost_charts_figures_table_totals_what_the_table_charges(fleet: Fleet) -> None:
    response = _page(fleet, _ml_held_one_gpu_for_two_hours_at_half_cents(fleet))
    table = chart_figures.figures_table(_chart(response, "cost_over_time").figure)
    total = table["columns"].index("total")
    assert {r[0]: r[total] for r in table["rows"]} == {"ml": "$4.29"}


def test_the_price_chart_draws_the_tables_prices(fleet: Fleet) -> None:
    response = _page(fleet, _ml_held_one_gpu_for_two_hours_at_half_cents(fleet))
    row = next(r for r in response.context["rows"] if r["name"] == "ml")
    assert row["prices_shown"]["usd_per_gpu_hour"] == Decimal("2.14")  # $2.145 rounded once, half to even
    table = chart_figures.figures_table(_chart(response, "unit_costs").figure)
    allocated = table["columns"].index("per allocated GPU-hour")
    assert {r[0]: r[allocated] for r in table["rows"]}["ml"] == "$2.14"


def _report(cost: str, allocated: int, active: int, productive: int) -> showback.Showback:
    """A one-team report (no database): `cost` over GPU-seconds held, active and productive."""
    window = showback.Window(datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC), "1d")
    entry = showback.ShowbackEntry(key="1", name="ml", properties={"team_id": 1, "team": "ml"},
                                   allocated_gpu_seconds=Decimal(allocated), active_gpu_seconds=Decimal(active),
                                   productive_gpu_seconds=Decimal(productive), cost_usd=Decimal(cost))
    return showback.Showback(window=window, start=window.start, end=window.end, group_by="team", entries=[entry],
                             idle=None, capacity_gpu_seconds=None, capacity_cost_usd=None, rolled_until=window.end)


def test_where_the_money_went_splits_a_rows_cents_without_losing_one() -> None:
    rows = report_rows(_report("10.00", allocated=3, active=2, productive=1))
    ml = next(r for r in rows if r["name"] == "ml")
    parts = [ml["cost_productive_usd"], ml["cost_active_only_usd"], ml["cost_allocated_only_usd"]]
    assert sum(parts, Decimal(0)) == Decimal("10.00"), parts
    chart = figures.cost_breakdown(rows, "team")
    bars = [Decimal(str(trace["x"][trace["y"].index("ml")])) for trace in chart.figure["data"]]
    assert sum(bars, Decimal(0)) == Decimal("10.00"), bars
    assert sorted(bars) == [Decimal("3.33"), Decimal("3.33"), Decimal("3.34")]
