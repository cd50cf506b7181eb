"""In Chromium: finance reading a monthly report on /showback/ changes "Group by" and still reads
that month, now by project; the Window select says the month, not "today"; choosing a window
there leaves the month for that window, with the grouping kept.

Found walking through the demo as finance (5 Dec): on "Monthly report for 2026-11" the Window
select read "today" (no option was selected, so the browser showed the first), and choosing
"project" under Group by sent `?window=today&group_by=project`: the page showed today's costs by
project, the month gone, with nothing but the heading's missing "Monthly report" to tell."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.frontend.page_data import both_teams_ran_for
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query, keep_blank_values=True)


def _shown(page: Any) -> str:
    return str(page.locator("select[name=window]").evaluate("s => s.options[s.selectedIndex].text"))


def test_a_monthly_report_keeps_its_month_when_the_grouping_changes(session: Any, submit_as: Any) -> None:  # noqa: F811
    now = both_teams_ran_for(submit_as, 2)
    month = f"{now:%Y-%m}"

    finn = session("finn")
    page = finn.page
    finn.open(f"/showback/?month={month}&group_by=team")
    assert page.locator("p.sub").first.inner_text().startswith(f"Monthly report for {month}.")
    assert _shown(page) == f"month {month}"
    # The template's note on this is a comment, not words on the page (a one-line `{# #}`
    # spread over three lines was printed above the filters).
    assert "{#" not in page.locator(".page-head").inner_text()

    with page.expect_navigation():
        page.select_option("select[name=group_by]", "project")
    page.wait_for_selector("body[data-charts-ready=true]")
    finn.screenshot("showback-month-by-project")

    assert _query(page) == {"month": [month], "group_by": ["project"]}
    assert page.locator("p.sub").first.inner_text().startswith(f"Monthly report for {month}.")
    assert page.locator("#showback-table th").first.inner_text() == "Project"
    assert _shown(page) == f"month {month}"
    assert not page.locator("p.error").count()

    # A window chosen from the select leaves the month, and keeps the grouping.
    with page.expect_navigation():
        page.select_option("select[name=window]", "7d")
    page.wait_for_selector("body[data-charts-ready=true]")

    assert _query(page) == {"window": ["7d"], "group_by": ["project"]}
    assert "Monthly report" not in page.locator("p.sub").first.inner_text()
    assert _shown(page) == "last 7 days"
    assert not page.locator("p.error").count()
