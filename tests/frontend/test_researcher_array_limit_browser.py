"""In Chromium: a researcher submits a job array with a task limit through the jobs page's form
(Slurm's `0-5%2`): a `%0` is refused next to the Array field in the submit's words, `%2` is
checked live ("at most 2 at a time"); the stored tasks carry the limit, and the array's summary
says "Runs at most 2 tasks at a time." once (not every task's row, as until 7 Dec), a task's page
"array runs at most 2 at a time"."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job
from tests.frontend.test_browser_pages import ANSWER_TIMEOUT_MS, browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_researcher_submits_an_array_of_six_at_most_two_at_a_time(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "sweep-limited")
    page.locator("[data-field=gpus]").fill("1")

    page.fill("[data-field=array]", "0-5%0")
    error = page.locator('[data-error-for="array"]')
    expect(error).to_be_visible(timeout=ANSWER_TIMEOUT_MS)
    expect(error).to_contain_text("a task limit of 0 would run none of its tasks")

    page.fill("[data-field=array]", "0-5%2")
    expect(page.locator("[data-verdict]")).to_contain_text("This fleet can run 6 tasks of 1 GPU, at most 2 at a time",
                                                           timeout=ANSWER_TIMEOUT_MS)
    expect(page.locator("[data-error-for]:visible")).to_have_count(0)
    page.click("#submit-job button[type=submit]")
    page.wait_for_url(re.compile(r".*array_id=.*"))

    tasks = list(Job.objects.filter(name="sweep-limited").order_by("array_index"))
    assert [t.array_index for t in tasks] == [0, 1, 2, 3, 4, 5]
    assert {t.array_task_limit for t in tasks} == {2}
    expect(page.locator("#array-summary-limit")).to_have_text("Runs at most 2 tasks at a time.")
    expect(page.locator("table.jobs tbody tr")).to_have_count(6)
    expect(page.locator("table.jobs")).not_to_contain_text("at most 2")
    alice.screenshot("jobs-array-limit")

    alice.open(f"/jobs/{tasks[3].pk}/")
    expect(page.locator("#array-limit")).to_have_text("(array runs at most 2 at a time)")
