"""Showback windows as finance typed them during a month-end close (QA round, 30 Nov):

- a window starting in the last seconds the accounting has not rolled yet (it rolls every 15 s):
  answered 200 with a window ending before it started and negative minutes;
- a window whose offset was typed unencoded in a URL (`+05:00` arrives as ` 05:00`): refused as
  "not an RFC 3339 instant" while quoting an instant that looked right;
- a parameter given twice (`?window=7d&window=1d`): the last silently won.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.services import accounting, showback
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

SHOWBACK = "/api/v1/showback/"


def _z(moment: object) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")  # type: ignore[attr-defined]


@pytest.fixture
def lagging(fleet: Fleet) -> None:
    """8 GPUs held for an hour, the accounting rolled up to two minutes ago."""
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(hours=1))
    hold(job, [(fleet.nodes[1], 8)], now - timedelta(hours=1))
    accounting.catch_up(now - timedelta(minutes=2))


@pytest.mark.parametrize("form", ["json", "csv"])
def test_a_window_starting_after_the_rollup_is_empty_not_negative(clients: dict[str, APIClient], lagging: None,
                                                                 form: str) -> None:
    start = timezone.now() - timedelta(seconds=30)
    response = clients["finance"].get(SHOWBACK, {"window": f"{_z(start)},{_z(start + timedelta(hours=1))}",
                                                 "format": form})
    assert response.status_code == 200, response.content[:300]
    if form == "csv":
        assert response.content.decode().splitlines()[-1].startswith("TOTAL,0.0000,")
        return
    body = response.json()
    assert body["window"]["start"] <= body["window"]["end"], body["window"]
    assert body["totals"]["minutes"] >= 0, body["totals"]["minutes"]
    assert body["totals"]["gpuHours"] == 0.0
    assert body["totals"]["totalCost"] == 0.0


def test_the_report_never_ends_before_it_starts(lagging: None, fleet: Fleet) -> None:
    from controlplane.services.access import access_of

    now = timezone.now()
    rolled = showback.rolled_until()
    assert rolled is not None
    for offset in (1, 30, 59, 61):
        start = rolled + timedelta(seconds=offset)
        if start >= now:
            continue
        report = showback.showback(showback.Window(start, now, "w"), "team", access_of(fleet.users["finance"]), now)
        assert report.start <= report.end, (offset, report.start, report.end)
        if report.start >= rolled:  # a window aligned to whole minutes may begin before `start`
            assert report.total.allocated_gpu_seconds == 0


def test_an_offset_whose_plus_arrived_as_a_space_is_read(clients: dict[str, APIClient], lagging: None) -> None:
    start, end = timezone.now() - timedelta(hours=3), timezone.now() - timedelta(minutes=20)
    five = timezone.get_fixed_timezone(300)
    text = f"{start.astimezone(five):%Y-%m-%dT%H:%M:%S} 05:00,{end.astimezone(five):%Y-%m-%dT%H:%M:%S} 05:00"
    # What `curl '...?window=2026-11-30T06:00:00+05:00,...'` sends: the query string's '+' is a space.
    response = clients["finance"].get(SHOWBACK + "?window=" + text.replace(" ", "+"))
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    same = clients["finance"].get(SHOWBACK, {"window": f"{_z(start)},{_z(end)}"}).json()
    assert body["window"] == same["window"]
    assert body["totals"]["gpuHours"] == same["totals"]["gpuHours"] > 4


def test_a_window_that_is_not_an_instant_still_names_window(clients: dict[str, APIClient], lagging: None) -> None:
    response = clients["finance"].get(SHOWBACK, {"window": "2026-11-30T06:00:00 05,2026-11-30T07:00:00Z"})
    assert response.status_code == 400
    assert "window" in response.json()["errors"]


@pytest.mark.parametrize("params", ["window=7d&window=1d", "group_by=team&group_by=project",
                                    "month=2026-11&month=2026-10", "window=1d&format=json&format=csv"])
def test_a_parameter_given_twice_is_a_400_naming_it(clients: dict[str, APIClient], lagging: None,
                                                   params: str) -> None:
    response = clients["finance"].get(SHOWBACK + "?" + params)
    assert response.status_code == 400, response.content[:300]
    name = params.split("&")[-1].split("=")[0]
    text = response.content.decode()
    assert f"{name}" in text and "twice" in text, text[:300]
