"""In Chromium: the overview's loop-stopped notice shows while the loop is silent, takes no room
while it runs, and appears by live update (no reload) once the loop stops."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.frontend.faked_clock import LivePolls, install, utc
from tests.frontend.page_data import sample
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_operator_the_loop_notice_appears_live_when_the_loop_stops(session: Any) -> None:  # noqa: F811
    now = timezone.now()
    for i in range(12):
        sample(now - timedelta(seconds=5 * i))
    admin = session("admin")
    # On the faked clock (tests/frontend/faked_clock.py): the overview's own refresh comes 5 s on.
    opened_at = utc(2026, 12, 7, 10, 57, 0)
    install(admin.page, opened_at)
    admin.open("/?window=1h")
    polls = LivePolls(admin.page, "**/ui/overview.json*", opened_at + timedelta(minutes=1))
    notice = admin.page.locator("#loop-stalled")
    expect(notice).to_be_hidden()
    # The loop stops: no sample comes any more; the page learns it by its live update.
    admin.page.evaluate("window.__notReloaded = true")
    from controlplane.models import FleetSample

    FleetSample.objects.all().update(at=timezone.now() - timedelta(minutes=3))
    polls.run_for(5_000, step_ms=5_000)
    assert polls.since(opened_at + timedelta(minutes=1)) == [5]
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("The scheduling loop has not run for")
    assert admin.page.evaluate("window.__notReloaded") is True
    admin.screenshot("overview-loop-stopped")
