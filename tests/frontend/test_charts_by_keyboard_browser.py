"""What the pointer does in a chart, the keyboard does beside it (docs/dashboards.md,
Accessibility), in Chromium, with Tab, Enter and Space only: a heat map cell's click opens its
job's page, and so does that job's link in the chart's figures table; a click in a legend hides
a series, and so does its checkbox above the chart, the two kept as one state (a live update
keeps it). Until 6 Dec both were the pointer's only. So were (until later on 6 Dec) plotly's
zoom and pan on a time series, now its time range buttons (Earlier, Later), the legend's double
click showing one series alone, now "only" beside its checkbox, and a hover's exact value at
each point, now the chart's values table, which follows the range drawn."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page

from controlplane.models import FleetSample
from frontend.figures import ts
from tests.frontend.page_data import sample
from tests.frontend.test_browser_pages import browser, fill_the_fleet, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FOCUSED = """() => { const el = document.activeElement; return el && el !== document.body
  ? {tag: el.tagName.toLowerCase(), text: (el.innerText || '').trim(), value: el.value || '', type: el.type || '',
     chart: (el.closest('[data-chart]') || {dataset: {}}).dataset.chart || '', href: el.getAttribute('href') || '',
     label: el.getAttribute('aria-label') || '', pressed: el.getAttribute('aria-pressed') || ''}
  : null; }"""


def tab_to(page: Page, wanted: Any, limit: int = 400) -> dict[str, Any]:
    """Press Tab from the page's start until the focused element is `wanted` (a predicate)."""
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); }")
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = page.evaluate(FOCUSED)
        if now is not None and wanted(now):
            return now
    raise AssertionError("Tab never reached it")


def _visible(page: Page, key: str, name: str) -> Any:
    return page.evaluate("([key, name]) => document.getElementById('chart-' + key).data.find(t => t.name === name).visible",
                         [key, name])


def _ticked(page: Page, key: str, name: str) -> bool:
    return bool(page.evaluate("""([key, name]) => [...document.querySelectorAll(`[data-chart="${key}"] [data-series-list] input`)]
      .find(i => i.value === name).checked""", [key, name]))


def test_a_heat_map_cell_opens_its_job_by_pointer_and_by_keyboard(session: Any) -> None:  # noqa: F811
    fill_the_fleet()
    alice = session("alice")
    alice.open("/")
    # The pointer: a click on the first cell of a job alice may read.
    cell = alice.page.evaluate("""() => {
      const plot = document.getElementById('chart-heatmap');
      plot.scrollIntoView();
      const jobs = plot.data[0].customdata;
      const row = jobs.findIndex(r => r.some(j => typeof j === 'number'));
      const col = jobs[row].findIndex(j => typeof j === 'number');
      const frame = plot.querySelector('.nsewdrag').getBoundingClientRect();
      const {xaxis: xa, yaxis: ya} = plot._fullLayout;
      return {job: jobs[row][col], x: frame.left + xa.l2p(col), y: frame.top + ya.l2p(row)};
    }""")
    with alice.page.expect_navigation():
        alice.page.mouse.click(cell["x"], cell["y"])
    assert alice.page.url == f"{alice.base}/jobs/{cell['job']}/"

    # The keyboard: Tab to the heat map's figures, Enter opens them, Tab to the job's link, Enter.
    # (After a live update: the links as qm.js writes them, not only as the server did.)
    alice.open("/")
    alice.page.evaluate("() => QM.poll()")
    summary = tab_to(alice.page, lambda el: el["tag"] == "summary" and el["chart"] == "heatmap"
                     and el["text"] == "Fleet heat map: the figures")
    assert summary
    alice.page.keyboard.press("Enter")
    assert alice.page.evaluate("() => document.getElementById('figures-heatmap').open")
    link = tab_to(alice.page, lambda el: el["tag"] == "a" and el["text"] == f"job {cell['job']}")
    assert link["chart"] == "heatmap"
    with alice.page.expect_navigation():
        alice.page.keyboard.press("Enter")
    assert alice.page.url == f"{alice.base}/jobs/{cell['job']}/"


def test_a_legend_click_and_a_series_checkbox_hide_the_same_series(session: Any) -> None:  # noqa: F811
    fill_the_fleet()
    alice = session("alice")
    alice.open("/")
    page = alice.page
    names = page.evaluate("() => [...document.querySelectorAll('[data-chart=queue] [data-series-list] input')].map(i => i.value)")
    assert names == ["research", "batch"], names
    assert _visible(page, "queue", "research") is None and _ticked(page, "queue", "research")

    # The pointer: a click on "research" in the legend hides it; its checkbox unticks.
    legend_item = page.locator("#chart-queue .legend .traces", has_text="research")
    legend_item.click()
    page.wait_for_function("() => document.getElementById('chart-queue').data[0].visible === 'legendonly'")
    assert not _ticked(page, "queue", "research")
    legend_item.click()
    page.wait_for_function("() => document.getElementById('chart-queue').data[0].visible === true")
    assert _ticked(page, "queue", "research")

    # The keyboard: Tab to its checkbox, Space hides it as the click did, the legend's item dimmed.
    box = tab_to(page, lambda el: el["type"] == "checkbox" and el["chart"] == "queue" and el["value"] == "research")
    assert box["value"] == "research"
    page.keyboard.press("Space")
    assert _visible(page, "queue", "research") == "legendonly" and not _ticked(page, "queue", "research")
    assert legend_item.evaluate("el => getComputedStyle(el).opacity") == "0.5"
    assert _visible(page, "queue", "batch") is None  # the other series untouched

    # A live update redraws the chart: the series stays hidden, the focus on its box.
    page.evaluate("() => QM.poll()")
    assert _visible(page, "queue", "research") == "legendonly" and not _ticked(page, "queue", "research")
    assert page.evaluate(FOCUSED)["value"] == "research"

    page.keyboard.press("Space")
    assert _visible(page, "queue", "research") is True and _ticked(page, "queue", "research")
    assert legend_item.evaluate("el => getComputedStyle(el).opacity") == "1"


def _x_range(page: Page, key: str) -> list[str]:
    """The x range the chart draws now, as plotly's layout has it, to the second (a zoom's are
    finer; an autorange on a whole minute is said without its seconds, "2026-12-06 18:07")."""
    ends = page.evaluate("key => document.getElementById('chart-' + key).layout.xaxis.range", key)
    return [datetime.fromisoformat(str(end)[:19]).strftime("%Y-%m-%d %H:%M:%S") for end in ends]


def _pressed(page: Page, key: str) -> list[str]:
    return page.evaluate("""key => [...document.querySelectorAll(`[data-chart="${key}"] [data-range-list] [aria-pressed=true]`)]
      .map(b => b.textContent)""", key)


def _last_x(page: Page, key: str) -> str:
    return page.evaluate("key => document.getElementById('chart-' + key).data[0].x.slice(-1)[0]", key)


def _minus(at: str, minutes: float) -> str:
    return ts(datetime.fromisoformat(at + "+00:00") - timedelta(minutes=minutes))


def _drag(page: Page, key: str, start: float, end: float) -> None:
    """A mouse zoom: press on the plot at `start` of its width (0 to 1), release at `end`."""
    page.locator(f"#chart-{key}").scroll_into_view_if_needed()
    frame = page.locator(f"#chart-{key} .nsewdrag").bounding_box()
    assert frame is not None
    y = frame["y"] + frame["height"] / 2
    page.mouse.move(frame["x"] + frame["width"] * start, y)
    page.mouse.down()
    page.mouse.move(frame["x"] + frame["width"] * (start + end) / 2, y, steps=4)
    page.mouse.move(frame["x"] + frame["width"] * end, y, steps=4)
    page.mouse.up()


def _the_chart_ends_a_minute_ago() -> None:
    """The fleet's samples (a minute apart) up to a minute ago, so a new one moves the chart's
    end, well before the two steps after which the chart shades a stretch with no cycle up to
    now (figures.cycle_gaps; until 7 Dec three steps, and the chart ended two minutes ago)."""
    FleetSample.objects.filter(at__gt=timezone.now() - timedelta(seconds=45)).delete()


def test_a_time_range_button_draws_its_last_span_a_live_update_keeps_it_and_a_mouse_zoom_presses_none(
        session: Any) -> None:  # noqa: F811
    fill_the_fleet()
    _the_chart_ends_a_minute_ago()
    alice = session("alice")
    alice.open("/")
    page = alice.page
    assert page.evaluate("""() => { const set = document.querySelector('[data-chart=queue] [data-chart-ranges]');
      return [set.hidden, set.querySelector('legend').textContent]; }""") == [False, "Time range of Queue depth by priority class"]
    assert _pressed(page, "queue") == ["All"]
    end = _last_x(page, "queue")
    first = page.evaluate("() => document.getElementById('chart-queue').data[0].x[0]")
    assert _x_range(page, "queue") == [first, end]

    # The keyboard: Tab to "Last 5 min", Enter: the plot draws the last five minutes.
    button = tab_to(page, lambda el: el["chart"] == "queue" and el["text"] == "Last 5 min")
    assert button["tag"] == "button" and button["pressed"] == "false"
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('[data-chart=queue] [data-span=\"300\"]').getAttribute('aria-pressed') === 'true'")
    assert _x_range(page, "queue") == [_minus(end, 5), end]
    assert _pressed(page, "queue") == ["Last 5 min"]

    # A live update with a newer cycle: the chart's end moves, the last five minutes with it,
    # the button still pressed and the keyboard still on it.
    sample(timezone.now(), pending_by_priority={"research": 3, "batch": 1})
    page.evaluate("() => QM.poll()")
    new_end = _last_x(page, "queue")
    assert new_end > end
    assert _x_range(page, "queue") == [_minus(new_end, 5), new_end]
    assert _pressed(page, "queue") == ["Last 5 min"]
    assert page.evaluate(FOCUSED)["text"] == "Last 5 min"

    # (The chart now holds more than an hour: "Last hour" came with the update, after the button
    # with the keyboard's focus, which stayed.)
    assert page.evaluate("""() => [...document.querySelectorAll('[data-chart=queue] [data-range-list] button')]
      .map(b => b.textContent)""") == ["Last 5 min", "Last 15 min", "Last hour", "All", "Earlier", "Later"]

    # Earlier (Tab past the other spans, Space): the five minutes before; none pressed.
    for _ in range(4):
        page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED)["text"] == "Earlier"
    page.keyboard.press("Space")
    page.wait_for_function("() => !document.querySelector('[data-chart=queue] [data-range-list] [aria-pressed=true]')")
    assert _x_range(page, "queue") == [_minus(new_end, 10), _minus(new_end, 5)]
    page.evaluate("() => QM.poll()")  # a range reached by Earlier stays where it is
    assert _x_range(page, "queue") == [_minus(new_end, 10), _minus(new_end, 5)]
    # Later: back to the end, which is the last five minutes again.
    page.keyboard.press("Tab")
    page.keyboard.press("Space")
    page.wait_for_function("() => document.querySelector('[data-chart=queue] [data-span=\"300\"]').getAttribute('aria-pressed') === 'true'")
    assert _x_range(page, "queue") == [_minus(new_end, 5), new_end]
    assert page.evaluate("() => document.querySelector('[data-chart=queue] [data-pan=\"1\"]').getAttribute('aria-disabled')") == "true"

    # The mouse: a zoom drawn across the plot still zooms, and presses no button; a live update
    # keeps it; a double click draws it all again, as "All".
    _drag(page, "queue", 0.2, 0.6)
    page.wait_for_function("() => !document.querySelector('[data-chart=queue] [data-range-list] [aria-pressed=true]')")
    zoomed = _x_range(page, "queue")
    assert _minus(new_end, 5) < zoomed[0] < zoomed[1] < new_end, zoomed
    page.evaluate("() => QM.poll()")
    assert _x_range(page, "queue") == zoomed and _pressed(page, "queue") == []
    frame = page.locator("#chart-queue .nsewdrag").bounding_box()
    assert frame is not None
    page.mouse.dblclick(frame["x"] + frame["width"] / 2, frame["y"] + frame["height"] / 2)
    page.wait_for_function("() => document.querySelector('[data-chart=queue] [data-span=all]').getAttribute('aria-pressed') === 'true'")
    assert _x_range(page, "queue") == [first, new_end]

    # "All" by keyboard after "Last 15 min": the whole series again.
    button = tab_to(page, lambda el: el["chart"] == "queue" and el["text"] == "Last 15 min")
    page.keyboard.press("Space")
    page.wait_for_function("() => document.querySelector('[data-chart=queue] [data-span=\"900\"]').getAttribute('aria-pressed') === 'true'")
    assert _x_range(page, "queue") == [_minus(new_end, 15), new_end]
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED)["text"] == "All"
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('[data-chart=queue] [data-span=all]').getAttribute('aria-pressed') === 'true'")
    assert _x_range(page, "queue") == [first, new_end]


def _shown_in_legend(page: Page, key: str) -> list[str]:
    """The legend's items drawn at full strength (plotly dims a hidden series' item to 0.5)."""
    return page.evaluate("""key => [...document.querySelectorAll(`#chart-${key} .legend .traces`)]
      .filter(item => getComputedStyle(item).opacity === '1').map(item => item.textContent.trim())""", key)


def _ticked_names(page: Page, key: str) -> list[str]:
    return page.evaluate("""key => [...document.querySelectorAll(`[data-chart="${key}"] [data-series-list] input`)]
      .filter(i => i.checked).map(i => i.value)""", key)


def test_only_shows_one_series_alone_in_the_legend_and_its_checkboxes_as_the_legends_double_click(
        session: Any) -> None:  # noqa: F811
    fill_the_fleet()
    alice = session("alice")
    alice.open("/")
    page = alice.page
    every = ["stranded GPUs", "free GPUs", "held for a reservation"]
    assert _ticked_names(page, "stranded") == every and sorted(_shown_in_legend(page, "stranded")) == sorted(every)

    # The pointer: a double click on "free GPUs" in the legend shows it alone; its checkbox alone
    # ticked, its "only" pressed; a double click again shows them all.
    legend_item = page.locator("#chart-stranded .legend .traces", has_text="free GPUs")
    legend_item.dblclick()
    page.wait_for_function("() => document.getElementById('chart-stranded').data[0].visible === 'legendonly'")
    assert _ticked_names(page, "stranded") == ["free GPUs"] and _shown_in_legend(page, "stranded") == ["free GPUs"]
    assert page.evaluate("() => document.querySelector('[data-chart=stranded] [data-only=\"free GPUs\"]').getAttribute('aria-pressed')") == "true"
    legend_item.dblclick()
    page.wait_for_function("() => document.getElementById('chart-stranded').data.every(t => t.visible === true)")
    assert _ticked_names(page, "stranded") == every

    # The keyboard: Tab to "Show only held for a reservation", Enter: that series alone, in the
    # plot, the legend and the checkboxes.
    only = tab_to(page, lambda el: el["chart"] == "stranded" and el["label"] == "Show only held for a reservation")
    assert only["tag"] == "button" and only["text"] == "only" and only["pressed"] == "false"
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.getElementById('chart-stranded').data.map(t => t.visible)") == [
        "legendonly", "legendonly", True]
    assert _ticked_names(page, "stranded") == ["held for a reservation"]
    assert _shown_in_legend(page, "stranded") == ["held for a reservation"]
    assert page.evaluate(FOCUSED)["pressed"] == "true"

    # A live update keeps it so, the focus on the button.
    page.evaluate("() => QM.poll()")
    assert _ticked_names(page, "stranded") == ["held for a reservation"]
    assert page.evaluate(FOCUSED)["label"] == "Show only held for a reservation"

    # Enter again (it is alone): all again, as the legend's second double click.
    page.keyboard.press("Enter")
    assert _ticked_names(page, "stranded") == every and sorted(_shown_in_legend(page, "stranded")) == sorted(every)
    assert page.evaluate(FOCUSED)["pressed"] == "false"

    # Another way back: "stranded GPUs" alone, then "Show all" (Tab to it, Space).
    tab_to(page, lambda el: el["chart"] == "stranded" and el["label"] == "Show only stranded GPUs")
    page.keyboard.press("Space")
    assert _ticked_names(page, "stranded") == ["stranded GPUs"] and _shown_in_legend(page, "stranded") == ["stranded GPUs"]
    show_all = tab_to(page, lambda el: el["chart"] == "stranded" and el["text"] == "Show all")
    assert show_all["tag"] == "button"
    page.keyboard.press("Space")
    assert _ticked_names(page, "stranded") == every and sorted(_shown_in_legend(page, "stranded")) == sorted(every)


VALUES = """key => [...document.querySelectorAll(`#values-${key} tbody tr`)].filter(r => !r.hidden)
  .map(r => [...r.cells].map(c => c.textContent))"""


def _points(page: Page, key: str, since: str = "", until: str = "9999") -> list[list[str]]:
    """The figure's own points (whole numbers) from `since` to `until`, newest first, as rows."""
    return page.evaluate("""([key, since, until]) => {
      const data = document.getElementById('chart-' + key).data;
      return data[0].x.map((x, i) => [x, ...data.map(t => String(t.y[i]))])
        .filter(([x]) => x >= since && x <= until).reverse(); }""", [key, since, until])


def test_the_values_table_holds_each_point_of_the_drawn_range_newest_first_and_says_when_it_is_cut(
        session: Any) -> None:  # noqa: F811
    # 85 samples more before the fleet's hour, a minute apart: more points than the table shows at
    # once (written first: the scheduler writes them in time order, which the charts' thinning reads).
    start = timezone.now() - timedelta(minutes=146)
    for i in range(85):
        sample(start + timedelta(minutes=i), stranded_gpus=i % 5, allocated_gpus=30, reserved_gpus=i % 2)
    fill_the_fleet()
    _the_chart_ends_a_minute_ago()
    alice = session("alice")
    alice.open("/")
    page = alice.page

    # The keyboard opens it: Tab to its summary, Enter.
    summary = tab_to(page, lambda el: el["tag"] == "summary" and el["chart"] == "stranded"
                     and el["text"] == "Stranded GPUs: the value at each point")
    assert summary
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.getElementById('values-stranded').open")
    columns = page.evaluate("() => [...document.querySelectorAll('#values-stranded thead th')].map(th => th.textContent)")
    assert columns == ["time (UTC)", "stranded GPUs", "free GPUs", "held for a reservation"]

    # All: the newest 100 of the points, as the figure has them, and a note saying so.
    points = _points(page, "stranded")
    assert len(points) > 100
    assert page.evaluate(VALUES, "stranded") == points[:100]
    note = page.locator("#values-stranded [data-values-note]").inner_text()
    assert note.startswith(f"The newest 100 of the {len(points)} points from {points[-1][0]} to {points[0][0]} UTC"), note

    # Last 15 min (Tab back to the chart's range buttons: Shift+Tab from the summary): its points
    # alone, every one; the note says which.
    button = tab_to(page, lambda el: el["chart"] == "stranded" and el["text"] == "Last 15 min")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('[data-chart=stranded] [data-span=\"900\"]').getAttribute('aria-pressed') === 'true'")
    end = _last_x(page, "stranded")
    last_15 = _points(page, "stranded", _minus(end, 15), end)
    assert page.evaluate(VALUES, "stranded") == last_15 and 10 < len(last_15) < 20
    assert page.locator("#values-stranded [data-values-note]").inner_text() == (
        f"The {len(last_15)} points from {last_15[-1][0]} to {end} UTC (the chart's time range), newest first.")

    # A live update with a newer cycle: its point heads the table; the oldest of the range goes.
    sample(timezone.now(), stranded_gpus=6, allocated_gpus=50, reserved_gpus=1)
    page.evaluate("() => QM.poll()")
    new_end = _last_x(page, "stranded")
    assert new_end > end
    rows = page.evaluate(VALUES, "stranded")
    assert rows == _points(page, "stranded", _minus(new_end, 15), new_end)
    assert rows[0][0] == new_end and rows[0][1] == "6" and rows[0][3] == "1"
    assert button["text"] == page.evaluate(FOCUSED)["text"]

    # A mouse zoom: the table follows the range drawn.
    _drag(page, "stranded", 0.1, 0.5)
    page.wait_for_function("() => !document.querySelector('[data-chart=stranded] [data-range-list] [aria-pressed=true]')")
    since, until = page.evaluate("() => document.getElementById('chart-stranded').layout.xaxis.range")
    assert page.evaluate(VALUES, "stranded") == _points(page, "stranded", since, until)


def test_the_mode_bar_zooms_in_by_keyboard_and_offers_no_upload_to_plotlys_cloud(session: Any) -> None:  # noqa: F811
    """plotly.js 4 draws its mode bar as buttons named by their titles, in the Tab order, with a
    "Share chart..." that opens cloud.plotly.com and hands it the figure (teams, jobs, costs) once
    one signs in there: it was on every chart until 6 Dec."""
    fill_the_fleet()
    alice = session("alice")
    alice.open("/")
    page = alice.page
    titles = page.evaluate("() => [...new Set([...document.querySelectorAll('.modebar-btn')].map(b => b.getAttribute('aria-label')))]")
    assert "Zoom in" in titles and "Download plot as a PNG" in titles, titles
    assert not [t for t in titles if "Share" in t or "cloud" in t.lower()], titles

    # Tab to the queue's "Zoom in", Enter: the range drawn narrows, as a mouse zoom, no span pressed.
    whole = _x_range(page, "queue")
    zoom_in = tab_to(page, lambda el: el["chart"] == "queue" and el["label"] == "Zoom in")
    assert zoom_in["tag"] == "button"
    page.keyboard.press("Enter")
    page.wait_for_function("() => !document.querySelector('[data-chart=queue] [data-range-list] [aria-pressed=true]')")
    narrowed = _x_range(page, "queue")
    assert whole[0] < narrowed[0] < narrowed[1] < whole[1], (whole, narrowed)
