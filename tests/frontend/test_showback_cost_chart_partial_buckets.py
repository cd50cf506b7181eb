"""/showback/'s "Cost per hour/day" chart says which of its bars the window cuts: a bar sits on
its whole hour or day, but counts only the window's part of it. A cut bucket with no bar (the
window's start before the accounting began) is not named.

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


def _said(start: datetime, end: datetime, bars: list[datetime], bucket: str = "hour", bucket_s: int = HOUR) -> str:
    return figures.cost_over_time({"vision": [(at, 9.0) for at in bars]}, "team", bucket, bucket_s,
                                  window=(start, end)).caption


def test_a_window_inside_one_hour_says_its_one_bar_counts_only_its_part() -> None:
    caption = _said(T0 + timedelta(minutes=10), T0 + timedelta(minutes=30), [T0])
    assert caption.endswith(" The window, 2026-12-06 19:10:00 to 2026-12-06 19:30:00 UTC, cuts the hour of "
                            "2026-12-06 19:00: its bar counts only the part inside it.")


def test_each_cut_bar_is_named_and_whole_buckets_or_no_bar_say_nothing() -> None:
    hours = [T0 + timedelta(hours=h) for h in range(-24, 1)]
    both = _said(T0 - timedelta(hours=23, minutes=26), T0 + timedelta(minutes=34), hours)
    assert "cuts the hour of 2026-12-05 19:00 and that of 2026-12-06 19:00: their bars count only" in both
    assert "cuts the hour of 2026-12-06 18:00: its bar" in _said(T0 - timedelta(minutes=50), T0 + timedelta(hours=2),
                                                                   [T0 - timedelta(hours=1), T0, T0 + timedelta(hours=1)])
    assert "cuts" not in _said(T0 - timedelta(hours=2), T0 + timedelta(hours=1), [T0 - timedelta(hours=2), T0])
    # The demo's last 24 hours, 20:02 to 20:02 with nothing before 19:04: its first bar, 19:00, is
    # whole in the window; only the last hour's is cut (it said "the first hour and the last")
    demo = _said(T0 - timedelta(hours=23, minutes=58), T0 + timedelta(hours=1, minutes=2), [T0, T0 + timedelta(hours=1)])
    assert "cuts the hour of 2026-12-06 20:00: its bar counts only the part inside it." in demo
    # days: a month running, from its first midnight to 19:36
    days = _said(datetime(2026, 12, 1, tzinfo=UTC), T0 + timedelta(minutes=36), [datetime(2026, 12, d, tzinfo=UTC)
                                                                                 for d in range(1, 7)], "day", 86400)
    assert "cuts the day of 2026-12-06: its bar counts only the part inside it." in days


@pytest.mark.django_db
def test_the_page_says_the_bars_its_window_cuts(client_for, submit_as) -> None:
    now = both_teams_ran_for(submit_as, hours=3)
    hour = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    start, end = hour + timedelta(minutes=10), hour + timedelta(minutes=70)
    page = client_for("finn").get(f"/showback/?window={start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}")
    chart = next(c for c in page.context["charts"] if c.key == "cost_over_time")
    assert not chart.empty
    said = (f"The window, {figures.ts(start)} to {figures.ts(end)} UTC, cuts the hour of {hour:%Y-%m-%d %H:%M} and "
            f"that of {hour + timedelta(hours=1):%Y-%m-%d %H:%M}: their bars count only the part inside it.")
    assert said in chart.caption
    assert said in re.sub(r"\s+", " ", page.content.decode())
