"""Showback and utilization queries at their edges, as finance and auditors type them: windows
in the future, windows reaching back to year 1 or to the end of time, a window written with a
third instant, and a misspelt parameter. Each is a 400 naming the parameter, never a 500, a
window that ends before it starts, or a silent default."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.services import accounting, showback
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

SHOWBACK = "/api/v1/showback/"
UTILIZATION = "/api/v1/metrics/utilization/"


@pytest.fixture
def rolled(fleet: Fleet) -> None:
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(hours=1))
    hold(job, [(fleet.nodes[1], 8)], now - timedelta(hours=1))
    accounting.catch_up(now)


def _future(days: int) -> str:
    return (timezone.now() + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("window", [
    # wholly in the future: answered 200 with a window ending before it starts and negative minutes
    "2099-01-01T00:00:00Z,2099-02-01T00:00:00Z",
    # near the end of the calendar: a 500 (date value out of range)
    "9999-12-31T23:59:59Z,9999-12-31T23:59:59.5Z",
    # an offset that takes the instant past year 9999 or before year 1 once in UTC: a 500
    "9999-12-31T23:00:00-05:00,9999-12-31T23:30:00-05:00",
    "0001-01-01T00:00:00+05:00,0001-01-02T00:00:00Z",
    # two thousand years: a 500 on SQLite (too many SQL variables), hundreds of thousands of
    # day starts in one query on PostgreSQL; relative windows stop at ten years already
    "0001-01-01T00:00:00Z,2026-11-29T00:00:00Z",
    # a third instant was read as part of the second and ignored
    "2026-11-01T00:00:00Z,2026-11-02T00:00:00Z,2026-11-03T00:00:00Z",
])
@pytest.mark.parametrize("path", [SHOWBACK, UTILIZATION])
def test_an_impossible_window_is_a_400_naming_window(clients: dict[str, APIClient], rolled: None, window: str,
                                                     path: str) -> None:
    for params in ({"window": window}, {"window": window, "format": "csv"} if path == SHOWBACK else {"window": window}):
        response = clients["finance"].get(path, params)
        assert response.status_code == 400, (params, response.status_code, response.content[:300])
        if params.get("format") != "csv":
            assert "window" in response.json()["errors"], response.json()


def test_a_window_reaching_into_the_future_covers_up_to_now(clients: dict[str, APIClient], rolled: None) -> None:
    start = (timezone.now() - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = clients["finance"].get(SHOWBACK, {"window": f"{start},{_future(30)}"}).json()
    # compared as instants: as text, "…23:12:00Z" sorts after "…23:12:00.546898Z" ("Z" > ".")
    window, rolled_until = body["window"], datetime.fromisoformat(body["rolledUntil"])
    assert datetime.fromisoformat(window["start"]) <= datetime.fromisoformat(window["end"]) <= rolled_until
    # up to the last whole minute rolled: the hour held less at most the minute rolled in part
    assert 8.0 - 8 / 60 <= body["totals"]["gpuHours"] <= 8.0
    assert body["totals"]["minutes"] > 0


def test_ten_years_back_is_still_answered(clients: dict[str, APIClient], rolled: None) -> None:
    start = (timezone.now() - timedelta(days=3650)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for group_by in ("team", "job"):
        response = clients["finance"].get(SHOWBACK, {"window": f"{start},{_future(1)}", "group_by": group_by})
        assert response.status_code == 200, response.content[:300]
        assert 8.0 - 8 / 60 <= response.json()["totals"]["gpuHours"] <= 8.0   # to the last whole minute


@pytest.mark.parametrize("path, params, unknown", [
    # ?windw=30d answered the default 7 days, ?tema=ml the whole fleet: a typo read as a figure
    (SHOWBACK, {"windw": "30d"}, "windw"),
    (SHOWBACK, {"window": "1d", "groupby": "project"}, "groupby"),
    (SHOWBACK, {"window": "1d", "team": "ml"}, "team"),
    (UTILIZATION, {"window": "1h", "tema": "ml"}, "tema"),
])
def test_an_unknown_parameter_is_a_400_naming_it(clients: dict[str, APIClient], rolled: None, path: str,
                                                params: dict[str, str], unknown: str) -> None:
    response = clients["finance"].get(path, params)
    assert response.status_code == 400, response.content[:300]
    assert unknown in response.json()["errors"]


def test_the_parameters_each_endpoint_takes_are_still_taken(clients: dict[str, APIClient], rolled: None) -> None:
    assert clients["finance"].get(SHOWBACK, {"window": "1d", "group_by": "job", "format": "csv"}).status_code == 200
    assert clients["finance"].get(SHOWBACK, {"month": timezone.now().strftime("%Y-%m"), "format": "json"}
                                  ).status_code == 200
    assert clients["owner"].get(UTILIZATION, {"window": "3h", "team": "ml", "bucket": "minute"}).status_code == 200


def test_the_window_parser_refuses_the_same_windows(rolled: None) -> None:
    now = timezone.now()
    for text in ("2099-01-01T00:00:00Z,2099-01-02T00:00:00Z", "0001-01-01T00:00:00Z,2026-01-01T00:00:00Z",
                 "9999-12-31T23:59:59Z,9999-12-31T23:59:59.5Z"):
        with pytest.raises(showback.AccountingQueryError) as error:
            showback.parse_window(text, now)
        assert error.value.field == "window"


def test_the_showback_page_names_an_impossible_window_and_falls_back(fleet: Fleet, rolled: None, client: Any) -> None:
    client.force_login(fleet.users["finance"])
    response = client.get("/showback/", {"window": "2099-01-01T00:00:00Z,2099-02-01T00:00:00Z"})
    assert response.status_code == 200
    page = response.content.decode()
    assert 'role="alert">window:' in page
    assert response.context["report"].start < response.context["report"].end
