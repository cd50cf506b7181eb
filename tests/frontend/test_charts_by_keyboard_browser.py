"""What the pointer does in a chart, the keyboard does beside it (docs/dashboards.md,
Accessibility), in Chromium, with Tab, Enter and Space only: a heat map cell's click opens its
job's page, and so does that job's link in the chart's figures table; a click in a legend hides
a series, and so does its checkbox above the chart, the two kept as one state (a live update
keeps it). Until 6 Dec both were the pointer's only. So was (until later on 6 Dec) the legend's
double click showing one series alone, now "only" beside its checkbox."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page

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
    summary = tab_to(alice.page, lambda el: el["tag"] == "summary" and el["chart"] == "heatmap")
    assert summary["text"] == "Fleet heat map: the figures"
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
