"""The overview's utilization chart starts where the accounting's record starts (its first rolled
minute), not at the start of the bucket that record begins in.

Demo walk, 6 Dec: on a fresh demo whose accounting first rolled up at 19:03:39, the chart (one
point per hour under the last 24 hours) drew its only step from 19:00, a stretch before the fleet
existed drawn as if it had been measured at the hour's share. The step's value was right (the
tiers are shares of the same time); where it began was not.

Fleet: two simulated agents (8 H100 each) register at 10:37:24, the accounting's first run at
10:37:15 (no node yet), then every 15 s to 10:50: its record begins with the minute 10:37.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controlplane.services import accounting, utilization_series
from frontend import figures
from frontend.utilization import utilization_points
from tests.controlplane.accounting.builders import T0, h100, minutes
from tests.controlplane.loop_fixtures import BOOTSTRAP, register_node

pytestmark = pytest.mark.django_db
SECONDS = timedelta(seconds=1)
JOINED = T0 + minutes(37) + 24 * SECONDS
NOW = T0 + minutes(50)
RECORD_BEGINS = T0 + minutes(37)


@pytest.fixture(autouse=True)
def _bootstrap(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@pytest.fixture
def fleet_that_joined_at_10_37_24() -> None:
    h100()
    accounting.roll_up(JOINED - 9 * SECONDS)  # the accounting's first run: no node yet
    for name in ("sim-1", "sim-2"):
        register_node(name, now=JOINED, capacity_tier="reserved")
    t = JOINED + 6 * SECONDS
    while t <= NOW:
        accounting.roll_up(t)
        t += 15 * SECONDS


@pytest.mark.usefixtures("fleet_that_joined_at_10_37_24")
@pytest.mark.parametrize(("window", "bucket"), [(timedelta(hours=24), "hour"), (timedelta(days=30), "day")])
def test_the_chart_starts_with_the_record_not_at_the_start_of_its_bucket(window: timedelta, bucket: str) -> None:
    points, note = utilization_points(NOW - window, NOW, "w", NOW)
    assert [p["at"] for p in points] == [RECORD_BEGINS]  # it said 10:00:00 (and 00:00:00), before any node
    assert points[-1]["until"] == NOW  # the step still ends where the rollups reached
    assert f"One point per {bucket}" in note
    assert "The accounting's record begins at 2026-11-02 10:37:00 UTC: nothing was measured before." in note

    chart = figures.utilization_tiers(points, source_note=note)
    assert {trace["x"][0] for trace in chart.figure["data"]} == {"2026-11-02 10:37:00"}
    assert chart.ranges is not None and chart.ranges["start"] == "2026-11-02 10:37:00"
    assert chart.values is not None and chart.values["rows"][-1][0] == "2026-11-02 10:37:00"
    assert note in chart.caption


@pytest.mark.usefixtures("fleet_that_joined_at_10_37_24")
def test_a_window_whose_first_bucket_was_all_recorded_starts_at_that_bucket() -> None:
    # minute buckets from 10:40, all rolled: nothing moved, nothing said
    points, note = utilization_points(T0 + minutes(40), NOW, "10m", NOW)
    assert points[0]["at"] == T0 + minutes(40) and "record begins" not in note
    # the hour 11:00, rolled from its start: its record begins with it (nothing to move); the hour
    # and the day 10:37 began in, later
    t = NOW
    while t <= T0 + minutes(65):
        t += 15 * SECONDS
        accounting.roll_up(t)
    assert utilization_series.record_began_within(T0 + minutes(60), accounting.HOUR) is None
    assert utilization_series.record_began_within(T0, accounting.HOUR) == RECORD_BEGINS
    assert utilization_series.record_began_within(T0 - timedelta(hours=10), accounting.DAY) == RECORD_BEGINS
