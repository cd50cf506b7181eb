"""In Chromium: a row of the jobs list whose job no longer matches the list's filters is marked
by the live update where it stands (a list of pending jobs, one of them started): it says so and
is gone at the next reload; the other rows stay as they are, and a screen reader hears it once.
Before, it stayed unmarked, reading Running in a list of pending jobs, until a reload."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.faked_clock import LivePolls, install, utc
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_started_job_is_marked_in_a_list_of_pending_jobs(session: Any) -> None:  # noqa: F811
    waits = submit(user("alice"), SubmitRequest(name="waits", gpus=1)).job
    starts = submit(user("alice"), SubmitRequest(name="starts", gpus=1)).job
    alice = session("alice")
    # On the faked clock (tests/frontend/faked_clock.py): the list's own refresh comes 5 s on.
    opened_at = utc(2026, 12, 7, 10, 57, 0)
    install(alice.page, opened_at)
    alice.open("/jobs/?state=pending")
    page = alice.page
    polls = LivePolls(page, "**/ui/jobs.json*", opened_at + timedelta(minutes=1))
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(2)
    page.evaluate("window.__notReloaded = true")

    Job.objects.filter(pk=starts.pk).update(state=JobState.RUNNING, started_at=timezone.now())
    polls.run_for(5_000, step_ms=5_000)

    started = page.locator(f'tr[data-job="{starts.pk}"]')
    expect(started).to_have_class("left-list")
    expect(started).to_contain_text("No longer matches this list's filters; gone at the next reload.")
    expect(started).to_contain_text("Running")
    expect(page.locator(f'tr[data-job="{waits.pk}"]')).not_to_have_class("left-list")
    expect(rows).to_have_count(2)  # marked, not taken away: no row moves under the reader
    expect(page.locator("p.count")).to_have_text("1 job")
    expect(page.locator("#live-said")).to_contain_text(
        f"No longer matching this list's filters: job {starts.pk}")
    assert page.evaluate("window.__notReloaded") is True, "the page reloaded instead of updating live"
    alice.screenshot("jobs-list-row-left")

    # back in the queue (requeued): it matches again, and its mark goes
    Job.objects.filter(pk=starts.pk).update(state=JobState.PENDING, started_at=None)
    polls.run_for(5_000, step_ms=5_000)
    expect(started).not_to_have_class("left-list")
    expect(started).not_to_contain_text("No longer matches")

    Job.objects.filter(pk=starts.pk).update(state=JobState.RUNNING, started_at=timezone.now())
    alice.open("/jobs/?state=pending")  # a reload lists what matches
    expect(rows).to_have_count(1)
