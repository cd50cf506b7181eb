"""In Chromium: typing a job's 128-character name and two
characters more into the jobs page's Name filter keeps the 128 the server takes (the input's
`maxlength`, the filterset's, filtersets.text_filter_lengths), and the filter lists the job:
until 7 Dec the box took all 130 and the page answered its error line, "is 130 characters long:
at most 128 are taken"."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_typing_beyond_the_servers_length_stops_at_it(session: Any) -> None:  # noqa: F811
    longest = "sweep-" + "x" * 122  # 128 characters: as long as a job's name may be
    job = submit(user("alice"), SubmitRequest(name=longest, gpus=1)).job

    alice = session("alice")
    page = alice.page
    alice.open("/jobs/")
    name = page.locator("#job-filters input[name=name]")
    name.press_sequentially(longest + "yz")

    assert name.input_value() == longest
    with page.expect_navigation():
        page.click("#job-filters button[type=submit]")
    expect(page.locator("#jobs-filter-errors")).to_have_count(0)
    expect(page.locator("tr[data-job]")).to_have_count(1)
    expect(page.locator(f'tr[data-job="{job.pk}"]')).to_have_count(1)
