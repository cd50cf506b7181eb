"""In Chromium: the jobs list keeps up without a reload. A job submitted through the API while
the list is open comes in at the top of its first page (newest first), the count follows, the
ages advance, and a screen reader hears of it once, politely (#live-said); a list sorted
otherwise says "1 new job … show it" and moves no row.

Found walking the product as a researcher (6 Dec): a job submitted from qm or the API did not
appear until the page was reloaded; the "N jobs" and the "N s ago" froze."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from playwright.sync_api import expect
from rest_framework.test import APIClient

from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.faked_clock import LivePolls, install, utc
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _submitted_through_the_api(name: str) -> int:
    api = APIClient()
    api.force_authenticate(user("alice"))
    response = api.post("/api/v1/jobs/", {"name": name, "gpus": 1}, format="json")
    assert response.status_code == 201, response.content[:300]
    return int(response.json()["id"])


def test_a_job_submitted_through_the_api_comes_in_at_the_top_and_is_said(session: Any) -> None:  # noqa: F811
    old = submit(user("alice"), SubmitRequest(name="read-before", gpus=1)).job
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(1)
    expect(page.locator("p.count")).to_have_text("1 job")
    age = page.locator(f'[data-live="job-age-{old.pk}"]')
    first_age = age.inner_text()
    page.evaluate("window.__notReloaded = true")

    new = _submitted_through_the_api("from-the-api")

    expect(rows.first).to_have_attribute("data-job", str(new), timeout=LIVE_TIMEOUT_MS)
    expect(rows.first).to_contain_text("from-the-api")
    expect(rows).to_have_count(2)
    expect(rows.nth(1)).to_have_attribute("data-job", str(old.pk))  # the row read stays, below
    expect(page.locator("p.count")).to_have_text("2 jobs")
    expect(page.locator("#live-said")).to_contain_text(f"New in this list: job {new} from-the-api",
                                                      timeout=LIVE_TIMEOUT_MS)
    expect(age).not_to_have_text(first_age, timeout=LIVE_TIMEOUT_MS)  # "0 s ago" moves on
    assert page.evaluate("window.__notReloaded") is True, "the page reloaded instead of updating live"
    # The next update asks after it: told once, not put in twice.
    page.evaluate("QM.poll()")
    expect(rows).to_have_count(2)
    alice.screenshot("jobs-list-keeps-up")


def test_a_list_sorted_otherwise_tells_how_many_and_moves_no_row(session: Any) -> None:  # noqa: F811
    old = submit(user("alice"), SubmitRequest(name="m-read-before", gpus=1)).job
    alice = session("alice")
    # On the faked clock (tests/frontend/faked_clock.py): the list's own refresh, 5 s on, brings
    # the notice, without the test waiting for it.
    opened_at = utc(2026, 12, 7, 10, 57, 0)
    install(alice.page, opened_at)
    alice.open("/jobs/?ordering=name")
    page = alice.page
    polls = LivePolls(page, "**/ui/jobs.json*", opened_at + timedelta(minutes=1))

    _submitted_through_the_api("a-from-the-api")
    polls.run_for(5_000, step_ms=5_000)

    notice = page.locator("#jobs-new-notice")
    expect(notice).to_contain_text("1 new job in this list since it was read")
    expect(page.locator("#live-said")).to_contain_text("1 new job in this list")
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-job", str(old.pk))
    expect(page.locator("p.count")).to_have_text("2 jobs")

    notice.get_by_role("link", name="show it").click()
    page.wait_for_selector("body[data-charts-ready=true]")
    expect(rows.first).to_contain_text("a-from-the-api")  # by name, in its place
