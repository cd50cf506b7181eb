"""/showback/'s "Cost per hour/day" chart covers the table's window, not more: its bars add up to
the table's cost per group, to the cent (each group's cents shared out over its bars:
`showback.cost_over_time`), also when the window starts in the middle of an hour or a day.

The hundred hours of use are built once for the file (their rollup took ~45 s a test, most of the
file's time) inside a transaction of the module's own, rolled back after its last test; each test
runs in a savepoint inside it, as pytest-django's `db` always does, so what a test writes is
still undone before the next. The tests only read pages."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import override_settings

from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import Job
from controlplane.services import accounting
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.page_data import both_teams_ran_for

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def _hundred_hours(django_db_setup: Any, django_db_blocker: Any) -> Iterator[datetime]:
    """The demo fleet, and vision and language each holding 8 H100 from 100 hours ago until now
    with the rollups caught up (the conftest's `demo` and `submit_as`, once); returns now."""

    def submit_as(username: str, **fields: Any) -> Job:
        user = get_user_model().objects.get(username=username)
        fields.setdefault("name", "job")
        fields.setdefault("gpus", 8)
        return submit(user, SubmitRequest(**fields)).job

    with django_db_blocker.unblock(), transaction.atomic():
        with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
            seed_demo_fleet()
        yield both_teams_ran_for(submit_as, hours=100)
        transaction.set_rollback(True)


@pytest.fixture
def demo(_hundred_hours: datetime, db: None) -> None:
    """The module's demo fleet (seeded once, with its hundred hours), in place of the conftest's."""


@pytest.fixture
def hundred_hours_of_use(_hundred_hours: datetime, demo: None) -> datetime:
    """vision and language each hold 8 H100 from 100 hours ago until now; rollups caught up."""
    return _hundred_hours


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
    for name, (total, _) in bars.items():
        assert costs[name] > Decimal(0)
        assert Decimal(str(total)).quantize(Decimal("0.01")) == costs[name], (name, total, costs[name])


def test_a_member_reads_bars_of_their_own_team_only(client_for, hundred_hours_of_use):
    start, end, _ = hourly(hundred_hours_of_use)
    response = client_for("alice").get("/showback/", {"window": f"{_iso(start)},{_iso(end)}"})
    costs, bars = table_costs(response), bar_sums(response)
    assert set(bars) == {"vision"} == set(costs)
    assert Decimal(str(bars["vision"][0])).quantize(Decimal("0.01")) == costs["vision"]

