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


ZOOM = """async ([from, to]) => {
  const plot = document.querySelector('[data-chart="cost_over_time"] .chart');
  const at = ms => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
  await Plotly.relayout(plot, from === null ? {'xaxis.autorange': true} : {'xaxis.range': [at(from), at(to)]});
}"""

IN_RANGE = """() => {
  const plot = document.querySelector('[data-chart="cost_over_time"] .chart');
  const axis = plot._fullLayout.xaxis;
  const ms = v => typeof v === 'number' ? v : new Date(String(v).replace(' ', 'T') + 'Z').getTime();
  const [a, b] = axis.range.map(ms);
  return axis._vals.map(t => ms(t.x)).filter(x => a <= x && x <= b);
}"""


def _zoomed(finn: Any, window: tuple[int, int] | None, holds: str) -> dict[str, Any]:
    """The chart zoomed to `window` (ms; None: plotly's autorange, a double click's reset) as a
    drag of the pointer does (Plotly.relayout), its ticks read once `holds` (a JS test of the
    ticks in the range drawn, `t`) does, or after 3 s; the test then says why they do not."""
    finn.page.evaluate(ZOOM, [None, None] if window is None else list(window))
    try:
        finn.page.wait_for_function(f"() => {{ const t = ({IN_RANGE})(); return {holds}; }}", timeout=3_000)
    except Exception:  # noqa: BLE001 (the assertions after say what the ticks are)
        pass
    return finn.page.evaluate(TICKS)


def _ticks_in(drawn: dict[str, Any]) -> list[int]:
    return [t["at"] for t in drawn["ticks"] if drawn["range"][0] <= t["at"] <= drawn["range"][1]]


def _whole_periods_apart(ticks: list[int], period: int) -> None:
    assert all(at % period == 0 for at in ticks), ticks
    assert len({b - a for a, b in zip(ticks, ticks[1:])}) <= 1, ticks
    assert all((b - a) % period == 0 for a, b in zip(ticks, ticks[1:])), ticks


def test_zoomed_hour_bars_keep_readable_ticks_on_their_starts(session: Any, submit_as: Any) -> None:  # noqa: F811
    """26 hour bars tick every 4 hours; zoomed to 8 of them that left two ticks (and a stretch of
    three hours none), zoomed out to ten days 60 of them, a smear of labels: the spacing was worked
    out once, for the whole window. Now it is worked out again for the range drawn."""
    now = both_teams_ran_for(submit_as, hours=27)
    end = accounting.floor_to(now, accounting.HOUR)
    finn = session("finn")
    finn.open(f"/showback/?window={_window(end - timedelta(hours=26), end)}")
    first = finn.page.evaluate(TICKS)["buckets"][0]

    zoom_in = (first + 6 * HOUR_MS + HOUR_MS // 3, first + 14 * HOUR_MS + HOUR_MS // 3)
    drawn = _zoomed(finn, zoom_in, "t.length >= 8")
    ticks = _ticks_in(drawn)
    assert len(ticks) >= 8, drawn   # a tick on each of the 8 hours' starts in view
    _whole_periods_apart(ticks, HOUR_MS)

    drawn = _zoomed(finn, (first - 5 * 24 * HOUR_MS, first + 5 * 24 * HOUR_MS), f"t.length <= {MAX_PERIOD_TICKS + 1}")
    ticks = _ticks_in(drawn)
    assert 4 <= len(ticks) <= MAX_PERIOD_TICKS + 1, drawn
    _whole_periods_apart(ticks, HOUR_MS)
    assert all(at % (24 * HOUR_MS) % (ticks[1] - ticks[0]) == 0 for at in ticks), ticks  # from midnight

    drawn = _zoomed(finn, None, "t.length <= 8 && t.length >= 6")   # reset: the figure's own, every 4 hours
    ticks = _ticks_in(drawn)
    assert {b - a for a, b in zip(ticks, ticks[1:])} == {4 * HOUR_MS}, drawn
    assert finn.errors == []


def test_zoomed_out_day_bars_tick_a_whole_number_of_days_apart(session: Any, submit_as: Any) -> None:  # noqa: F811
    """4 day bars tick every day, each label centred on its day; zoomed out to two months that
    was 60 ticks. Now every few days from the first bar, and back on every day zoomed in again."""
    now = both_teams_ran_for(submit_as, hours=24 * 4 + 1)
    end = accounting.floor_to(now, accounting.DAY)
    finn = session("finn")
    finn.open(f"/showback/?window={_window(end - timedelta(days=4), end)}")
    day = 24 * HOUR_MS
    first = finn.page.evaluate(TICKS)["buckets"][0]

    drawn = _zoomed(finn, (first - 30 * day, first + 30 * day), f"t.length <= {MAX_PERIOD_TICKS + 1}")
    ticks = _ticks_in(drawn)
    assert 4 <= len(ticks) <= MAX_PERIOD_TICKS + 1, drawn
    _whole_periods_apart(ticks, day)
    assert all((at - first) % (ticks[1] - ticks[0]) == 0 for at in ticks), ticks   # counted from the first bar
    # a label every few days names the instant it stands on, not the middle of one day
    assert all(t["labelAt"] in (None, t["at"]) for t in drawn["ticks"]), drawn

    drawn = _zoomed(finn, (first - day // 2, first + 2 * day + day // 2), "t.length >= 3")
    ticks = _ticks_in(drawn)
    assert ticks == [first, first + day, first + 2 * day], drawn
    assert all(t["labelAt"] is not None and t["at"] < t["labelAt"] < t["at"] + day
               for t in drawn["ticks"] if t["at"] in ticks), drawn   # each day's label on its day again
    assert finn.errors == []
