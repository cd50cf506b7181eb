"""In Chromium: a researcher opens the job history from the top bar, filters it to her failed
jobs with the form, is told which filter is wrong when she types a bad exit code, and follows a
job's link to its page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import JobState
from controlplane.services import accounting
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)
from tests.frontend.test_history_page import _ended, _held, _node

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_researcher_filters_her_history_and_opens_a_failed_job(session: Any) -> None:  # noqa: F811
    now = timezone.now().replace(second=0, microsecond=0)
    t0 = now - timedelta(hours=2)
    done = _ended("vision", "resnet-ok", t0, 30, user="alice", gpus=4)
    oom = _ended("vision", "resnet-oom", t0 + timedelta(minutes=40), 15, JobState.FAILED, user="alice", gpus=2,
                 exit_code=137)
    theirs = _ended("language", "llm-secret", t0, 20, user="bob", gpus=1)
    _held(done, _node("h100-01"), t0, t0 + timedelta(minutes=30), gpus=4)
    _held(oom, _node("h100-02"), t0 + timedelta(minutes=40), t0 + timedelta(minutes=55), gpus=2)
    _held(theirs, _node("h100-03"), t0, t0 + timedelta(minutes=20), gpus=1)
    accounting.catch_up(now)

    alice = session("alice")
    page = alice.page
    alice.open("/")
    page.click('nav a[data-nav="history"]')
    page.wait_for_url("**/history/")
    rows = page.locator("#history-table tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("resnet-oom")  # the newest end first
    expect(page.locator("#history-totals")).to_contain_text("2 jobs ended")
    expect(page.locator("#history-totals strong")).to_have_text("2.50")  # 4 GPUs × 30 min + 2 × 15 min
    # the cost, as the CSV says it: 2.5 GPU-hours on reserved H100s at the demo's $2.50 an hour
    expect(page.locator("#history-total-cost")).to_have_text("$6.25")
    expect(rows.nth(0).locator("td.cost")).to_have_text("$1.25")
    assert "llm-secret" not in page.content()
    alice.screenshot("history")
    page.set_viewport_size({"width": 390, "height": 900})  # a phone: the table scrolls in its box
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    alice.screenshot("history-390px")
    page.set_viewport_size({"width": 1400, "height": 1000})

    page.check('#history-filters input[name=state][value=failed]')
    page.click("#history-filters button[type=submit]")
    page.wait_for_url("**/history/?*state=failed*")
    expect(rows).to_have_count(1)
    expect(rows.nth(0)).to_contain_text("resnet-oom")
    expect(rows.nth(0).locator(":is(th, td)").nth(6)).to_have_text("137")  # Exit, after the row's head (Job) and 5 cells
    expect(page.locator("#history-totals")).to_contain_text("1 job ended")
    href = page.locator("#history-csv").get_attribute("href")
    assert href is not None and href.startswith("/history.csv?") and "state=failed" in href
    assert page.locator('#history-filters input[name=state][value=failed]').is_checked()  # kept

    page.fill("#history-filters input[name=exit_code]", "oom")
    page.click("#history-filters button[type=submit]")
    page.wait_for_url("**/history/?*exit_code=oom*")
    expect(page.locator('#history-errors [data-error-for="exit_code"]')).to_contain_text("exit_code")
    expect(page.locator("#history-table")).to_have_count(0)
    alice.expect_refusal("/history/", 400)

    page.fill("#history-filters input[name=exit_code]", "137")
    page.click("#history-filters button[type=submit]")
    expect(rows).to_have_count(1)
    rows.nth(0).locator(f'a[href="/jobs/{oom.pk}/"]').click()
    page.wait_for_url(f"**/jobs/{oom.pk}/")
    expect(page.locator("h1")).to_contain_text("resnet-oom")
