"""In Chromium: /showback/ grouped by project says the jobs that named no project as "vision (no
project)" in its table and on its charts; the CSV keeps the API's `vision/__unallocated__`
(docs/accounting.md), and the rows still add up to the team's total.

Found walking through the demo as finance and as a member (5 Dec): the page's table, legends and
axes said "vision/__unallocated__", the API's placeholder, where every other row was a project."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from tests.frontend.page_data import both_teams_ran_for
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHART_TEXT = """() => Array.from(document.querySelectorAll('[data-chart] .main-svg text'))
  .map(t => t.textContent)"""


def test_jobs_without_a_project_are_said_in_words_on_the_page_and_as_the_api_names_them_in_the_csv(
        session: Any, submit_as: Any) -> None:  # noqa: F811
    both_teams_ran_for(submit_as, 2)  # one job of vision and one of language, neither naming a project

    finn = session("finn")
    page = finn.page
    finn.open("/showback/?window=24h&group_by=project")
    finn.screenshot("showback-project-no-project")

    names = page.locator("#showback-table tbody tr th:first-child").all_inner_texts()
    assert [n.strip() for n in names] == ["language (no project)", "vision (no project)",
                                          "no job (idle capacity)", "TOTAL"], names
    assert "__unallocated__" not in page.locator("main").inner_text()
    texts = page.evaluate(CHART_TEXT)
    assert not [t for t in texts if "__unallocated__" in t], texts
    for chart in ("cost_over_time", "cost_split", "unit_costs"):  # waste: none here, its empty state
        shown = " ".join(page.locator(f"[data-chart={chart}] .main-svg").all_text_contents())
        assert "vision (no project)" in shown, (chart, shown)
    assert finn.assert_charts_rendered() == 4

    csv_text = page.request.get(finn.base + (page.locator("#csv-download").get_attribute("href") or "")).text()
    rows = {r["project"]: r for r in csv.DictReader(io.StringIO(csv_text))}
    assert {"vision/__unallocated__", "language/__unallocated__", "__idle__", "TOTAL"} == set(rows)
    cost = {name.strip(): text.strip() for name, text in zip(
        names, page.locator("#showback-table tbody tr td:nth-child(5)").all_inner_texts(), strict=True)}
    assert cost["vision (no project)"] == f"${rows['vision/__unallocated__']['cost_usd']}"
