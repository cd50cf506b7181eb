"""/showback/'s "Cost per hour/day" chart covers the table's window, not more: its bars add up to
the table's cost per group (to the rounding of each bar), also when the window starts in the
middle of an hour or a day."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from controlplane.services import accounting
from controlplane.services.cycle import run_cycle
from tests.frontend.page_data import both_teams_ran_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def hundred_hours_of_use(submit_as):
    """vision and language each hold 8 H100 from 100 hours ago until now; rollups caught up."""
    return both_teams_ran_for(submit_as, hours=100)


def _iso(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def bar_sums(response):
    chart = next(c for c in response.context["charts"] if c.key == "cost_over_time")
    return {trace["name"]: (sum(trace["y"]), len(trace["y"])) for trace in chart.figure["data"]}


def table_costs(response):
    return {r["name"]: r["cost_usd"] for r in response.context["rows"] if not (r["is_idle"] or r["is_total"])}


def hourly(now):
    """20 hours from half past an hour: each end bar held the whole hour (+$10 a team each)."""
    start = accounting.floor_to(now - timedelta(hours=26), accounting.HOUR) + timedelta(minutes=30)
    return start, start + timedelta(hours=20), 3600


def daily(now):
    """From 13:17 three days back to 21:42 yesterday (over two days, so daily bars): the first
    and last bars held whole days."""
    day = accounting.floor_to(now, accounting.DAY)
    return day - timedelta(days=3) + timedelta(hours=13, minutes=17), day - timedelta(hours=2, minutes=18), 86400


def to_now(now):
    """From 13:17 three days back to now: only the first bar is partial."""
    start, _, bucket = daily(now)
    return start, None, bucket


@pytest.mark.parametrize("shape", [hourly, daily, to_now])
def test_the_bars_add_up_to_the_tables_cost(client_for, hundred_hours_of_use, shape):
    start, end, bucket = shape(hundred_hours_of_use)
    window = f"{_iso(start)},{_iso(end)}" if end else f"{_iso(start)},{_iso(start + timedelta(days=30))}"
    response = client_for("finn").get("/showback/", {"window": window})
    assert response.status_code == 200
    assert not response.context["errors"], response.context["errors"]
    chart = next(c for c in response.context["charts"] if c.key == "cost_over_time")
    assert chart.figure["data"][0]["xperiod"] == bucket * 1000
    costs, bars = table_costs(response), bar_sums(response)
    assert set(bars) == {"vision", "language"}
    for name, (total, count) in bars.items():
        assert costs[name] > Decimal(0)
        # each bar is rounded to the cent: the sum may differ by half a cent per bar
        assert abs(Decimal(str(total)) - costs[name]) <= Decimal("0.005") * count + Decimal("0.01"), (
            name, total, costs[name])


def test_a_member_reads_bars_of_their_own_team_only(client_for, hundred_hours_of_use):
    start, end, _ = hourly(hundred_hours_of_use)
    response = client_for("alice").get("/showback/", {"window": f"{_iso(start)},{_iso(end)}"})
    costs, bars = table_costs(response), bar_sums(response)
    assert set(bars) == {"vision"} == set(costs)
    assert abs(Decimal(str(bars["vision"][0])) - costs["vision"]) <= Decimal("0.12")


def test_each_teams_bars_are_in_the_teams_own_colour(client_for, submit_as):
    """Every page draws a team in one colour (figures.team_colour of its id); the showback's bars
    were coloured by their rank among the teams this chart happened to show."""
    from controlplane.models import Team
    from frontend import figures

    now = timezone.now()
    submit_as("alice", name="v", gpus=8, gpu_types=("H100-80GB",))
    submit_as("bob", name="l", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test", now=now - timedelta(hours=2))
    accounting.catch_up(now)
    chart = next(c for c in client_for("finn").get("/showback/", {"window": "24h"}).context["charts"]
                 if c.key == "cost_over_time")
    colours = {t["name"]: t["marker"]["color"] for t in chart.figure["data"]}
    assert colours == {name: figures.team_colour(Team.objects.get(name=name).pk) for name in ("language", "vision")}
