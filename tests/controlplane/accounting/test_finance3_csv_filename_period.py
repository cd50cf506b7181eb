"""Finance QA, round 3 (2 Dec): the showback CSV carries no dates (its first row is the header
that consumers read by position), and its file name carried the window as typed: every download
of the last seven days was `showback-team-7d.csv`, whenever it was made, and nothing said which
seven days. The file name now names the period the report covers, in UTC, as the JSON's
`window` says it; a month keeps its name.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.services import accounting
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

SHOWBACK = "/api/v1/showback/"


@pytest.fixture
def rolled(fleet: Fleet) -> datetime:
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(hours=1))
    hold(job, [(fleet.nodes[1], 8)], now - timedelta(hours=1))
    accounting.catch_up(now)
    return now


def _filename(response: object) -> str:
    match = re.search(r'filename="([^"]+)"', response["Content-Disposition"])  # type: ignore[index]
    assert match, response["Content-Disposition"]  # type: ignore[index]
    return match.group(1)


@pytest.mark.parametrize("window", ["7d", "24h", "today", "yesterday"])
def test_the_csv_file_names_the_period_it_covers(clients: dict[str, APIClient], rolled: datetime,
                                                 window: str) -> None:
    csv = clients["finance"].get(SHOWBACK, {"window": window, "format": "csv"})
    body = clients["finance"].get(SHOWBACK, {"window": window}).json()
    assert csv.status_code == 200

    name = _filename(csv)

    start, end = body["window"]["start"], body["window"]["end"]  # 2026-12-02T06:18:00Z
    assert name == f"showback-team-{start[:10]}T{start[11:].replace(':', '')}_{end[:10]}T{end[11:].replace(':', '')}.csv"
    assert window not in name


def test_a_start_end_window_is_named_by_what_it_covered_not_what_was_asked(clients: dict[str, APIClient],
                                                                            rolled: datetime) -> None:
    asked_end = rolled + timedelta(days=1)  # ends in the future: covers up to the last minute rolled
    asked = f"{(rolled - timedelta(hours=2)):%Y-%m-%dT%H:%M:00Z},{asked_end:%Y-%m-%dT%H:%M:00Z}"
    csv = clients["finance"].get(SHOWBACK, {"window": asked, "group_by": "job", "format": "csv"})
    body = clients["finance"].get(SHOWBACK, {"window": asked, "group_by": "job"}).json()

    name = _filename(csv)

    assert name.startswith("showback-job-") and f"{asked_end:%Y-%m-%dT%H%M}" not in name
    assert name.endswith(f"_{body['window']['end'][:10]}T{body['window']['end'][11:].replace(':', '')}.csv")


def test_a_finished_month_keeps_its_name(clients: dict[str, APIClient], rolled: datetime) -> None:
    month = f"{(rolled.replace(day=1) - timedelta(days=1)):%Y-%m}"
    assert _filename(clients["finance"].get(SHOWBACK, {"month": month, "format": "csv"})) == \
        f"showback-team-{month}.csv"


def test_a_month_still_running_is_named_by_what_it_covered(clients: dict[str, APIClient], rolled: datetime) -> None:
    # Finance walk, 7 Dec: `?month=2026-12&format=csv` read on 7 December was saved as
    # showback-team-2026-12.csv, the name of the whole month, for a file covering six days of it;
    # a second download later that month had the same name and other figures.
    month = f"{rolled:%Y-%m}"
    body = clients["finance"].get(SHOWBACK, {"month": month}).json()

    name = _filename(clients["finance"].get(SHOWBACK, {"month": month, "format": "csv"}))

    start, end = body["window"]["start"], body["window"]["end"]
    assert start == f"{month}-01T00:00:00Z"
    assert name == f"showback-team-{start[:10]}T{start[11:].replace(':', '')}_{end[:10]}T{end[11:].replace(':', '')}.csv"
