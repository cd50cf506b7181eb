"""In Chromium: a row of the jobs list whose job no longer matches the list's filters is marked
by the live update where it stands (a list of pending jobs, one of them started): it says so and
is gone at the next reload; the other rows stay as they are, and a screen reader hears it once.
Before, it stayed unmarked, reading Running in a list of pending jobs, until a reload."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_started_job_is_marked_in_a_list_of_pending_jobs(session: Any) -> None:  # noqa: F811
    waits = submit(user("alice"), SubmitRequest(name="waits", gpus=1)).job
    starts = submit(user("alice"), SubmitRequest(name="starts", gpus=1)).job
    alice = session("alice")
    alice.open("/jobs/?state=pending")
    page = alice.page
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(2)
    page.evaluate("window.__notReloaded = true")

    Job.objects.filter(pk=starts.pk).update(state=JobState.RUNNING, started_at=timezone.now())

    started = page.locator(f'tr[data-job="{starts.pk}"]')
    expect(started).to_have_class("left-list", timeout=LIVE_TIMEOUT_MS)
    expect(started).to_contain_text("No longer matches this list's filters; gone at the next reload.")
    expect(started).to_contain_text("Running")
    expect(page.locator(f'tr[data-job="{waits.pk}"]')).not_to_have_class("left-list")
    expect(rows).to_have_count(2)  # marked, not taken away: no row moves under the reader
    expect(page.locator("p.count")).to_have_text("1 job")
    expect(page.locator("#live-said")).to_contain_text(
        f"No longer matching this list's filters: job {starts.pk}", timeout=LIVE_TIMEOUT_MS)
    assert page.evaluate("window.__notReloaded") is True, "the page reloaded instead of updating live"
    alice.screenshot("jobs-list-row-left")

    # back in the queue (requeued): it matches again, and its mark goes
    Job.objects.filter(pk=starts.pk).update(state=JobState.PENDING, started_at=None)
    expect(started).not_to_have_class("left-list", timeout=LIVE_TIMEOUT_MS)
    expect(started).not_to_contain_text("No longer matches")

    Job.objects.filter(pk=starts.pk).update(state=JobState.RUNNING, started_at=timezone.now())
    alice.open("/jobs/?state=pending")  # a reload lists what matches
    expect(rows).to_have_count(1)
