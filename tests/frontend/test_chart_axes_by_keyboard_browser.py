"""An axis' range by keyboard (docs/dashboards.md, Conventions every chart keeps), in Chromium, with
Tab, Enter, the arrow keys and typing alone. Until 6 Dec a chart over no time (the heat map, bars
per team) and every chart's value axis zoomed by a drag of the mouse alone; now each chart's
"…: axis range" sets either axis from the keyboard, says a range it refuses, and follows the
mouse's zoom."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Page

from tests.frontend.test_browser_pages import browser, fill_the_fleet, session  # noqa: F401 (fixtures)
from tests.frontend.test_charts_by_keyboard_browser import (
    FOCUSED,
    _drag,
    _pressed,
    _the_chart_ends_a_minute_ago,
    tab_to,
)
from tests.frontend.test_teams_page_slowdown_axis_browser import _finished

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUEUE = "Queue depth by priority class"


def _layout_axis(page: Page, key: str, name: str) -> dict[str, Any]:
    """The axis as the chart's own layout has it now (what plotly draws)."""
    return page.evaluate("([key, name]) => { const a = document.getElementById('chart-' + key).layout[name];"
                         " return {range: a.range, autorange: a.autorange}; }", [key, name])


def _fields(page: Page, key: str, name: str) -> list[str]:
    return page.evaluate("""([key, name]) => [...document.querySelectorAll(
      `[data-chart="${key}"] [data-axis="${name}"] [data-end]`)].map(f => f.value)""", [key, name])


def _said(page: Page, key: str) -> str:
    return page.evaluate("key => document.querySelector(`[data-chart=\"${key}\"] [data-axes-said]`).textContent", key)


def _type(page: Page, text: str) -> None:
    """Over what the focused field holds, by keyboard."""
    page.keyboard.press("Control+A")
    page.keyboard.type(text)


def _open_axes(page: Page, key: str, title: str) -> None:
    tab_to(page, lambda el: el["tag"] == "summary" and el["chart"] == key and el["text"] == f"{title}: axis range")
    page.keyboard.press("Enter")
    assert page.evaluate("key => document.querySelector(`[data-chart=\"${key}\"] [data-chart-axes]`).open", key)


def test_the_value_axis_is_set_by_keyboard_refused_when_wrong_and_follows_a_mouse_zoom(session: Any) -> None:  # noqa: F811
    fill_the_fleet()
    _the_chart_ends_a_minute_ago()
    alice = session("alice")
    alice.open("/")
    page = alice.page
    assert _layout_axis(page, "queue", "yaxis")["autorange"] is True
    _open_axes(page, "queue", QUEUE)

    # Tab to the y axis' From: each field and button named by its axis and its chart.
    start = tab_to(page, lambda el: el["label"].startswith("From, y axis"))
    assert start["label"] == f"From, y axis (pending jobs) of {QUEUE}", start
    names = page.evaluate("""() => [...document.querySelectorAll('[data-chart=queue] [data-axis=yaxis] input, '
      + '[data-chart=queue] [data-axis=yaxis] button')].map(el => el.getAttribute('aria-label'))""")
    assert names == [f"From, y axis (pending jobs) of {QUEUE}", f"To, y axis (pending jobs) of {QUEUE}",
                     f"Apply the range of the y axis (pending jobs) of {QUEUE}",
                     f"Reset the range of the y axis (pending jobs) of {QUEUE}"]

    # 0 to 2, Enter: the chart draws 0 to 2, and says so.
    _type(page, "0")
    page.keyboard.press("Tab")
    _type(page, "2")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('chart-queue').layout.yaxis.autorange === false")
    assert _layout_axis(page, "queue", "yaxis")["range"] == [0, 2]
    assert _said(page, "queue") == f"y axis (pending jobs) of {QUEUE}: from 0 to 2."
    assert page.evaluate(FOCUSED)["label"] == f"To, y axis (pending jobs) of {QUEUE}"

    # A live update keeps it, the fields as they were.
    page.evaluate("() => QM.poll()")
    assert _layout_axis(page, "queue", "yaxis") == {"range": [0, 2], "autorange": False}
    assert _fields(page, "queue", "yaxis") == ["0", "2"]

    # No number: refused, said in the chart's status line and on the field, the chart as it was.
    page.keyboard.press("Shift+Tab")
    _type(page, "lots")
    page.keyboard.press("Enter")
    refused = f"y axis (pending jobs) of {QUEUE}: From \u201clots\u201d is not a number; the range is as it was."
    page.wait_for_function("key => document.querySelector(`[data-chart=\"${key}\"] [data-axes-said]`).textContent.includes('lots')",
                           arg="queue")
    assert _said(page, "queue") == refused
    assert _layout_axis(page, "queue", "yaxis") == {"range": [0, 2], "autorange": False}
    status = page.evaluate("""() => { const s = document.querySelector('[data-chart=queue] [data-axes-said]');
      const f = document.querySelector('[data-chart=queue] [data-axis=yaxis] [data-end="0"]');
      return [s.getAttribute('role'), f.getAttribute('aria-invalid'), f.getAttribute('aria-describedby') === s.id]; }""")
    assert status == ["status", "true", True]

    # From not below To: refused too.
    _type(page, "5")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('[data-chart=queue] [data-axes-said]').textContent.includes('below')")
    assert _said(page, "queue") == f"y axis (pending jobs) of {QUEUE}: From (5) must be below To (2); the range is as it was."
    assert _layout_axis(page, "queue", "yaxis") == {"range": [0, 2], "autorange": False}

    # Reset (Tab past To and Apply, Enter): plotly's own range again, the fields showing it, the
    # field no longer marked.
    for _ in range(3):
        page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED)["text"] == "Reset"
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('chart-queue').layout.yaxis.autorange === true")
    drawn = page.evaluate("() => document.getElementById('chart-queue')._fullLayout.yaxis.range")
    assert drawn[0] == 0 and drawn[1] > 2
    assert [float(v) for v in _fields(page, "queue", "yaxis")] == pytest.approx(drawn, abs=0.01)
    assert _said(page, "queue").startswith(f"y axis (pending jobs) of {QUEUE}, as the chart draws it by itself: from 0 to ")
    assert page.evaluate("() => document.querySelector('[data-chart=queue] [aria-invalid]')") is None

    # The time axis of a time series too: a stretch typed is drawn, and no time range is pressed.
    end = page.evaluate("() => document.getElementById('chart-queue').data[0].x.slice(-1)[0]")
    since = (datetime.fromisoformat(end) - timedelta(minutes=20)).strftime("%Y-%m-%d %H:%M:%S")
    until = (datetime.fromisoformat(end) - timedelta(minutes=10)).strftime("%Y-%m-%d %H:%M:%S")
    tab_to(page, lambda el: el["label"] == f"From, x axis (time (UTC)) of {QUEUE}")
    _type(page, since)
    page.keyboard.press("Tab")
    _type(page, until)
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('chart-queue').layout.xaxis.autorange === false")
    assert [str(end)[:19] for end in _layout_axis(page, "queue", "xaxis")["range"]] == [since, until]
    assert _pressed(page, "queue") == []
    _type(page, "yesterday")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('[data-chart=queue] [data-axes-said]').textContent.includes('yesterday')")
    assert "To \u201cyesterday\u201d is not a time in UTC, as 2026-12-06 10:00:00" in _said(page, "queue")
    assert [str(end)[:19] for end in _layout_axis(page, "queue", "xaxis")["range"]] == [since, until]

    # The mouse: a zoom drawn across the plot, and the fields show the range it drew.
    _drag(page, "queue", 0.3, 0.7)
    page.wait_for_function(f"() => document.getElementById('chart-queue').layout.xaxis.range[0] > '{since}'")
    x = _layout_axis(page, "queue", "xaxis")["range"]
    assert _fields(page, "queue", "xaxis") == [str(x[0])[:19], str(x[1])[:19]]
    y = page.evaluate("() => document.getElementById('chart-queue')._fullLayout.yaxis.range")
    assert [float(v) for v in _fields(page, "queue", "yaxis")] == pytest.approx(y, abs=0.01)


def test_a_chart_over_no_time_sets_both_axes_by_keyboard_and_follows_the_mouse(session: Any) -> None:  # noqa: F811
    """The heat map: slots across (a number), nodes down (categories, the first at the top)."""
    fill_the_fleet()
    alice = session("alice")
    alice.open("/")
    page = alice.page
    nodes = page.evaluate("() => document.getElementById('chart-heatmap').data[0].y")
    assert len(nodes) > 4
    title = page.evaluate("() => document.querySelector('[data-chart=heatmap]').getAttribute('aria-label')")
    _open_axes(page, "heatmap", title)

    # Slots 1 to 3.
    tab_to(page, lambda el: el["chart"] == "heatmap" and el["label"].startswith("From, x axis"))
    _type(page, "1")
    page.keyboard.press("Tab")
    _type(page, "3")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('chart-heatmap').layout.xaxis.range[1] === 3")
    assert _layout_axis(page, "heatmap", "xaxis")["range"] == [1, 3]

    # The nodes: From the second to the fourth, top down, chosen with the arrow keys.
    field = tab_to(page, lambda el: el["chart"] == "heatmap" and el["label"].startswith("From, y axis"))
    assert field["tag"] == "select"
    assert page.evaluate("""() => [...document.querySelector('[data-chart=heatmap] [data-axis=yaxis] select').options]
      .map(o => o.value)""") == nodes
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Tab")
    page.keyboard.press("Home")
    for _ in range(3):
        page.keyboard.press("ArrowDown")
    assert _fields(page, "heatmap", "yaxis") == [nodes[1], nodes[3]]
    page.keyboard.press("Tab")  # Apply
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('chart-heatmap').layout.yaxis.autorange === false")
    # (the nodes top down, as the figure draws them: the axis still reversed)
    assert _layout_axis(page, "heatmap", "yaxis")["range"] == [3.5, 0.5]
    shown = page.evaluate("""() => [...document.querySelectorAll('#chart-heatmap .ytick text')]
      .map(t => t.textContent)""")
    assert sorted(shown) == sorted(nodes[1:4]), shown
    assert _layout_axis(page, "heatmap", "xaxis")["range"] == [1, 3]  # the other axis as set

    # To above From: refused.
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Home")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('[data-chart=heatmap] [data-axes-said]').textContent.includes('comes after')")
    assert _said(page, "heatmap").endswith(f": From ({nodes[1]}) comes after To ({nodes[0]}); the range is as it was.")
    assert _layout_axis(page, "heatmap", "yaxis")["range"] == [3.5, 0.5]

    # Reset: every node again, the figure's own way (top down).
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('chart-heatmap').layout.yaxis.autorange === true")
    reset = _layout_axis(page, "heatmap", "yaxis")["range"]
    assert reset[0] > len(nodes) - 1 and reset[1] < 0, reset  # (plotly's reversed autorange: its range top down)
    assert _fields(page, "heatmap", "yaxis") == [nodes[0], nodes[-1]]

    # A live update keeps the slots chosen.
    page.evaluate("() => QM.poll()")
    assert _layout_axis(page, "heatmap", "xaxis")["range"] == [1, 3]

    # The mouse: a zoom across the slots, and the fields show it.
    _drag(page, "heatmap", 0.2, 0.8)
    page.wait_for_function("() => document.getElementById('chart-heatmap').layout.xaxis.range[1] !== 3")
    x = _layout_axis(page, "heatmap", "xaxis")["range"]
    assert 1 < x[0] < x[1] < 3, x
    assert [float(v) for v in _fields(page, "heatmap", "xaxis")] == pytest.approx(x, abs=0.01)


def test_a_log_axis_takes_its_values_as_they_read_and_refuses_zero(session: Any, submit_as: Any) -> None:  # noqa: F811
    """The teams page's bounded slowdown: a log axis, whose range plotly keeps in powers of ten."""
    for i, waited in enumerate((0, 600, 3000)):
        _finished(submit_as, f"run-{i}", waited_s=waited, ran_s=600)
    alice = session("alice")
    alice.open("/teams/?window=24h")
    page = alice.page
    title = page.evaluate("() => document.querySelector('[data-chart=slowdown]').getAttribute('aria-label')")
    _open_axes(page, "slowdown", title)
    tab_to(page, lambda el: el["chart"] == "slowdown" and el["label"].startswith("From, y axis"))
    _type(page, "0")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('[data-chart=slowdown] [data-axes-said]').textContent.includes('above 0')")
    assert _said(page, "slowdown").endswith(": From must be above 0 on its log scale; the range is as it was.")
    _type(page, "1")
    page.keyboard.press("Tab")
    _type(page, "100")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('chart-slowdown').layout.yaxis.range[1] === 2")
    assert _layout_axis(page, "slowdown", "yaxis")["range"] == [0, 2]
    assert _fields(page, "slowdown", "yaxis") == ["1", "100"]
