"""/showback/'s "Cost per hour/day" chart says which of its bars the window cuts: a bar sits on
its whole hour or day, but counts only the window's part of it.

Demo walk, 6 Dec: a window of 19:10 to 19:30 drew one bar across 19:00 to 20:00 under "Cost per
hour", nothing saying it held twenty minutes, and "last 24 hours" (19:34 to 19:34) began and
ended with such bars."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from controlplane.services import accounting
from frontend import figures
from tests.frontend.page_data import both_teams_ran_for

T0 = datetime(2026, 12, 6, 19, 0, tzinfo=UTC)
HOUR = 3600


def _said(start: datetime, end: datetime, bucket: str = "hour", bucket_s: int = HOUR) -> str:
    return figures.cost_over_time({"vision": [(T0, 9.0)]}, "team", bucket, bucket_s, window=(start, end)).caption


def test_a_window_inside_one_hour_says_its_one_bar_is_partial() -> None:
    caption = _said(T0 + timedelta(minutes=10), T0 + timedelta(minutes=30))
    assert caption.endswith(" Each bar counts only the part of its hour inside the window, 2026-12-06 19:10:00 to "
                            "2026-12-06 19:30:00 UTC: its one hour is partial.")


def test_each_cut_end_is_said_and_whole_buckets_say_nothing() -> None:
    assert "the first hour and the last are partial" in _said(T0 - timedelta(hours=23, minutes=26),
                                                              T0 + timedelta(minutes=34))
    assert "the first hour is partial" in _said(T0 - timedelta(minutes=50), T0 + timedelta(hours=2))
    assert "the last hour is partial" in _said(T0 - timedelta(hours=2), T0 + timedelta(minutes=5))
    assert "partial" not in _said(T0 - timedelta(hours=2), T0 + timedelta(hours=1))
    # days: a month running, from its first midnight to 19:36
    days = _said(datetime(2026, 12, 1, tzinfo=UTC), T0 + timedelta(minutes=36), "day", 86400)
    assert "Each bar counts only the part of its day inside the window" in days and "the last day is partial" in days


@pytest.mark.django_db
def test_the_page_says_the_bars_its_window_cuts(client_for, submit_as) -> None:
    now = both_teams_ran_for(submit_as, hours=3)
    hour = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    start, end = hour + timedelta(minutes=10), hour + timedelta(minutes=70)
    page = client_for("finn").get(f"/showback/?window={start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}")
    chart = next(c for c in page.context["charts"] if c.key == "cost_over_time")
    assert not chart.empty
    said = (f"Each bar counts only the part of its hour inside the window, {figures.ts(start)} to {figures.ts(end)} "
            "UTC: the first hour and the last are partial.")
    assert said in chart.caption
    assert said in re.sub(r"\s+", " ", page.content.decode())
