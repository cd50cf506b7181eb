"""In Chromium: /showback/'s cost chart marks the start of each bar's period on its x-axis. A
bar covers its hour or day (drawn across it since 5 Dec), but plotly's own ticks fell where its
spacing chose: every 12 hours over day bars, every 30 or 15 minutes over hour bars, so a tick
and its label sat in the middle of a bar and read as the bar's time. The ticks now fall on the
buckets' starts, a whole number of buckets apart, and each label is centred on the period it
names (`ticklabelmode: "period"`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.services import accounting
from frontend.figures import MAX_PERIOD_TICKS, period_ticks
from tests.frontend.page_data import both_teams_ran_for
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOUR_MS = 3600 * 1000

TICKS = """() => {
  const plot = document.querySelector('[data-chart="cost_over_time"] .chart');
  const axis = plot._fullLayout.xaxis;
  const ms = v => typeof v === 'number' ? v : new Date(String(v).replace(' ', 'T') + 'Z').getTime();
  return {
    ticks: axis._vals.map(t => ({at: ms(t.x), label: t.text, labelAt: t.periodX === undefined ? null : ms(t.periodX)})),
    buckets: [...new Set(plot.data.flatMap(trace => trace.x.map(ms)))].sort((a, b) => a - b),
    range: axis.range.map(ms),
  };
}"""


def _window(start: Any, end: Any) -> str:
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}"


@pytest.mark.parametrize("hours, bucket_h", [(5, 1), (26, 1), (24 * 4, 24)])
def test_ticks_mark_the_starts_of_the_bars_periods(session: Any, submit_as: Any, hours: int, bucket_h: int) -> None:  # noqa: F811
    now = both_teams_ran_for(submit_as, hours=hours + 1)
    bucket = accounting.HOUR if bucket_h == 1 else accounting.DAY
    end = accounting.floor_to(now, bucket)
    start = end - timedelta(hours=hours) if bucket_h == 1 else end - timedelta(hours=hours)
    finn = session("finn")
    finn.open(f"/showback/?window={_window(start, end)}")
    drawn = finn.page.evaluate(TICKS)
    period = bucket_h * HOUR_MS
    first, last = drawn["buckets"][0], drawn["buckets"][-1]
    shown = [t for t in drawn["ticks"] if drawn["range"][0] <= t["at"] <= drawn["range"][1]]
    assert 2 <= len(shown) <= MAX_PERIOD_TICKS + 1, drawn
    for tick in drawn["ticks"]:
        # on a bucket's start (UTC hours and days are whole multiples from the epoch), where plotly
        # put them at 17:30, 18:30 … over hour bars and at noon over day bars
        assert tick["at"] % period == 0, (tick, drawn)
    if len(drawn["buckets"]) <= MAX_PERIOD_TICKS:
        # a tick on every bar; a day's label centred on its day, an hour's ("17:00") on its start
        assert {t["at"] for t in shown} >= set(drawn["buckets"]), drawn
        for tick in shown:
            if tick["at"] > last:
                continue
            if bucket_h == 24:
                assert tick["labelAt"] is not None and tick["at"] < tick["labelAt"] < tick["at"] + period, tick
            else:
                assert tick["labelAt"] in (None, tick["at"]), tick
    else:
        # every few bars, the same number apart; hour bars counted from midnight (00:00, 06:00, …)
        steps = {b - a for a, b in zip([t["at"] for t in shown], [t["at"] for t in shown][1:])}
        assert len(steps) == 1 and next(iter(steps)) % period == 0, drawn
        step = next(iter(steps))
        if bucket_h == 1:
            assert all(t["at"] % (24 * HOUR_MS) % step == 0 for t in shown), drawn
        else:
            assert all((t["at"] - first) % step == 0 for t in shown), drawn
    assert finn.errors == []


@pytest.mark.parametrize("days, every_days", [(7, 1), (30, 7), (31, 7), (90, 14), (365, 56)])
def test_long_windows_tick_every_few_days_from_the_first_bar(days: int, every_days: int) -> None:
    first = datetime(2026, 1, 1, tzinfo=UTC)
    axis = period_ticks(first, first + timedelta(days=days - 1), 86400)
    assert axis["dtick"] == every_days * 86400 * 1000
    assert axis["tick0"] == "2026-01-01 00:00:00"
    assert -(-days // every_days) <= MAX_PERIOD_TICKS
    assert ("ticklabelmode" in axis) == (every_days == 1)   # a label centred on its one day


def test_hour_bars_tick_from_midnight() -> None:
    first = datetime(2026, 1, 1, 17, tzinfo=UTC)
    axis = period_ticks(first, first + timedelta(hours=40), 3600)
    assert axis["tick0"] == "2026-01-01 00:00:00" and axis["dtick"] == 6 * 3600 * 1000
    assert "ticklabelmode" not in period_ticks(first, first + timedelta(hours=4), 3600)   # "17:00" names the start
