"""In Chromium: /showback/'s "Cost per hour/day" chart for a window of one bucket (the demo's
first day under "last 7 days", the first hour of "today") draws that bucket's bar across its
hour or day, on an axis of hours, not a one-millisecond bar on an axis of fractions of a second
("23:59:59.9996 … 00:00:00.0004"): plotly sizes a bar by the distance to its neighbour, and a lone
bar on a date axis has none. Each bar sits inside its own bucket (it was centred on the bucket's
start, half of it drawn in the hour before)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controlplane.services import accounting
from tests.frontend.page_data import both_teams_ran_for
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOUR_MS = 3600 * 1000

PLOT = """() => {
  const plot = document.querySelector('[data-chart="cost_over_time"] .chart');
  const range = plot._fullLayout.xaxis.range.map(v => new Date(v.replace(' ', 'T') + 'Z').getTime());
  const bars = [...plot.querySelectorAll('.point path')].map(p => p.getBBox().width);
  const ticks = [...plot.querySelectorAll('.xtick text')].map(t => t.textContent);
  // each bar's extent on the axis, in ms, with the bucket it charges (its x)
  const spans = plot.calcdata.flatMap((trace, i) => trace.map((bar, j) => ({
    bucket: new Date(plot.data[i].x[j].replace(' ', 'T') + 'Z').getTime(),
    from: bar.p - bar.w / 2, to: bar.p + bar.w / 2})));
  return {range, bars, ticks, spans, plotWidth: plot._fullLayout.xaxis._length};
}"""


def _one_hour(now: Any) -> str:
    end = accounting.floor_to(now, accounting.HOUR)
    start = end - timedelta(hours=1)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}"


def test_a_window_of_one_hour_draws_its_bar_across_the_hour(session: Any, submit_as: Any) -> None:  # noqa: F811
    now = both_teams_ran_for(submit_as, hours=2)  # the whole hour before this one was held
    finn = session("finn")
    finn.open(f"/showback/?window={_one_hour(now)}")
    drawn = finn.page.evaluate(PLOT)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=1)
    span = drawn["range"][1] - drawn["range"][0]
    # an axis of minutes around the hour, not of fractions of a second around its start
    assert span >= HOUR_MS / 2, drawn
    assert not any("." in tick for tick in drawn["ticks"]), drawn["ticks"]
    # the bar lies inside its hour, and is most of the plot's width (it was 1 ms wide)
    assert drawn["range"][0] >= start.timestamp() * 1000 - HOUR_MS * 0.25, drawn
    assert drawn["range"][1] <= start.timestamp() * 1000 + HOUR_MS * 1.25, drawn
    assert drawn["bars"] and min(drawn["bars"]) > drawn["plotWidth"] / 2, drawn
    for span in drawn["spans"]:
        assert span["bucket"] <= span["from"] < span["to"] <= span["bucket"] + HOUR_MS, span
    # its time range buttons: the hour, and no span shorter than it ("Last 5 min" and "Last 15 min"
    # drew slivers of the one bar until 6 Dec: tests/frontend/test_chart_figures.py)
    assert finn.page.evaluate("""() => [...document.querySelectorAll('[data-chart=cost_over_time] [data-range-list] button')]
      .map(b => b.textContent)""") == ["All", "Earlier", "Later"]
    assert finn.errors == []


def test_several_days_each_bar_inside_its_own_day(session: Any, submit_as: Any) -> None:  # noqa: F811
    now = both_teams_ran_for(submit_as, hours=26)  # two UTC days at least
    end = accounting.floor_to(now, accounting.DAY)
    start = end - timedelta(days=3)
    finn = session("finn")
    finn.open(f"/showback/?window={start:%Y-%m-%dT%H:%M:%SZ},{now:%Y-%m-%dT%H:%M:%SZ}")
    drawn = finn.page.evaluate(PLOT)
    assert len({span["bucket"] for span in drawn["spans"]}) >= 2, drawn
    for span in drawn["spans"]:  # inside its own day, not centred on its midnight
        assert span["bucket"] <= span["from"] < span["to"] <= span["bucket"] + 24 * HOUR_MS, span
    assert not any("." in tick for tick in drawn["ticks"]), drawn["ticks"]
    assert finn.errors == []
