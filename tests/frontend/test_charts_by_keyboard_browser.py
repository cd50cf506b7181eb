"""What the pointer does in a chart, the keyboard does beside it (docs/dashboards.md,
Accessibility), in Chromium, with Tab and Enter only: a heat map cell's click opens its job's
page, and so does that job's link in the chart's figures table. Until 6 Dec that was the
pointer's only."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page

from tests.frontend.test_browser_pages import browser, fill_the_fleet, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FOCUSED = """() => { const el = document.activeElement; return el && el !== document.body
  ? {tag: el.tagName.toLowerCase(), text: (el.innerText || '').trim(), value: el.value || '', type: el.type || '',
     chart: (el.closest('[data-chart]') || {dataset: {}}).dataset.chart || '', href: el.getAttribute('href') || ''}
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
