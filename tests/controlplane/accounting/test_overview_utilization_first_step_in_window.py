"""The overview's utilization chart draws its first step from where the window's part of that
bucket begins, not from the bucket's start: a 7-hour window from 05:01 reads (and averages) the
05:00 hour from 05:01 on (utilization_series, since 7 Dec), and the chart drew that step from
05:00, a minute outside the window drawn as if measured (operator review, 7 Dec: under *24
hours* the first hour's step began up to 59 minutes before the window).

8 GPUs held from 02:00 to 11:20; the rollup ran to 12:00:50; now 12:01."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controlplane.services import accounting
from frontend import figures
from frontend.utilization import utilization_points
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

ROLLED = datetime(2026, 12, 1, 12, 0, 50, tzinfo=UTC)
NOW = datetime(2026, 12, 1, 12, 1, tzinfo=UTC)
TWO = datetime(2026, 12, 1, 2, tzinfo=UTC)


@pytest.fixture
def held_from_two(fleet: Fleet) -> None:
    hold(running_job(fleet.ml, gpus=8, started_at=TWO), [(fleet.nodes[1], 8)], TWO,
         TWO + timedelta(hours=9, minutes=20))
    accounting.catch_up(ROLLED)


@pytest.mark.usefixtures("held_from_two")
def test_the_first_step_begins_where_the_window_does_not_at_its_hours_start() -> None:
    since = NOW - timedelta(hours=7)   # 05:01
    points, note = utilization_points(since, NOW, "7h", NOW)

    assert "One point per hour" in note
    assert points[0]["at"] == since   # it said 05:00
    assert points[0]["until"] == datetime(2026, 12, 1, 6, tzinfo=UTC)   # the step ends with its hour
    assert [p["at"] for p in points[1:]] == [datetime(2026, 12, 1, h, tzinfo=UTC) for h in range(6, 13)]
    assert points[-1]["until"] == ROLLED   # the newest still ends where the rollups reached
    chart = figures.utilization_tiers(points, source_note=note)
    assert {trace["x"][0] for trace in chart.figure["data"]} == {"2026-12-01 05:01:00"}
