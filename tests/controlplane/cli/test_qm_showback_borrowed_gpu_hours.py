"""`qm showback --by team` says each team's borrowed GPU-hours, as the page does under its
allocated GPU-hours and the API's JSON (`borrowedGpuHours`, its `shown` figure) and the CSV
(`gpu_hours_borrowed`) do: until 7 Dec qm's table had no such column, so finance reading qm
could not tell who ran on capacity other teams lent. A guarantee is a team's: other groupings
leave the column out, as the page and the CSV leave it empty.

ml (16 H100 guaranteed) holds 24 H100 for an hour beside vision (idle): 8 GPU-hours borrowed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.services import accounting
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.cli.showback_table import table_columns, table_row

pytestmark = pytest.mark.slow

AT_80 = {"COLUMNS": "80"}


def _ml_borrowed_eight_gpu_hours(fleet: Any) -> str:
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=24, started_at=start, priority_class=fleet.research, borrowed=True)
    hold(job, [(fleet.nodes[1], 8), (fleet.nodes[2], 8), (fleet.nodes[3], 8)], start, start + timedelta(hours=1),
         borrowed=True)
    accounting.catch_up(now)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{start + timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}"


def test_showback_by_team_says_each_teams_borrowed_gpu_hours_as_the_api_shows_them(qm, fleet) -> None:
    window = _ml_borrowed_eight_gpu_hours(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    report = qm("showback", "--by", "team", "--window", window, "--json").json()
    assert report["data"][0]["ml"]["shown"]["borrowedGpuHours"] == 8.0

    r = qm("showback", "--by", "team", "--window", window)

    assert r.code == 0, r.err
    columns = table_columns(r.out)
    assert columns.index("GPU-H ALLOC") + 1 == columns.index("GPU-H BORROWED"), r.out
    assert table_row(r.out, "ml")["GPU-H BORROWED"] == "8.00"
    assert table_row(r.out, "vision")["GPU-H BORROWED"] == "0.00"
    assert table_row(r.out, "TOTAL")["GPU-H BORROWED"] == "8.00"
    assert table_row(r.out, "__idle__")["GPU-H BORROWED"] == "-"  # capacity no job held borrows nothing


def test_the_narrow_view_by_team_keeps_borrowed_within_80_columns(qm, fleet) -> None:
    window = _ml_borrowed_eight_gpu_hours(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--window", window, extra_env=AT_80)

    assert r.code == 0, r.err
    lines = r.out.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("TOTAL"))
    assert max(len(line) for line in lines[1:end + 1]) <= 80, r.out
    assert table_row(r.out, "ml")["BORROWED"] == "8.00", r.out


@pytest.mark.parametrize("by", ["project", "job", "priority_class"])
def test_other_groupings_leave_borrowed_out_as_the_page_does(qm, fleet, by: str) -> None:
    window = _ml_borrowed_eight_gpu_hours(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", by, "--window", window, "--wide")

    assert r.code == 0, r.err
    assert not any("BORROWED" in c for c in table_columns(r.out)), r.out
