"""The one time the page words itself from the browser's clock: when its live updates stop, "What
this page shows is as it was at 10:58:10 UTC", the instant of the last answer (qm.js `keptUpAt`).
Times on the pages are UTC (docs/dashboards.md), so it is said in UTC whatever the reader's time
zone, and with its date when that is not the day the notice is written: until 7 Dec a page whose
last answer came before a UTC midnight said only the clock, which read as today's.

On Playwright's faked clock (tests/frontend/faked_clock.py) the instants are exact; Asia/Kolkata
is UTC+05:30 all year (no daylight saving), so a local time or a local day would show."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Node
from tests.frontend.faked_clock import LivePolls, install, utc
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NODE_PACE_MS = 10_000  # the node page's (frontend/views/nodes.py live_every)


def _stopped_words(session: Any, opened_at: Any, answered_for_s: int, timezone_id: str | None) -> str:  # noqa: F811
    """The notice of a node page whose node is deleted after `answered_for_s` seconds of answers."""
    admin = session("admin", timezone_id=timezone_id)
    install(admin.page, opened_at)
    admin.open("/nodes/a100-04/")
    polls = LivePolls(admin.page, "**/ui/nodes/a100-04.json*", opened_at + timedelta(minutes=1))
    polls.run_for(answered_for_s * 1000, step_ms=NODE_PACE_MS)
    Node.objects.filter(name="a100-04").delete()
    polls.run_for(NODE_PACE_MS, step_ms=NODE_PACE_MS)
    banner = admin.page.locator("#live-banner")
    expect(banner).to_contain_text("Live updates stopped")
    admin.expect_refusal("/ui/nodes/a100-04.json", 404)
    return banner.inner_text()


@pytest.mark.parametrize("timezone_id", ["UTC", "Asia/Kolkata"])
def test_the_last_answer_of_the_same_day_is_said_by_its_utc_time(session: Any, timezone_id: str) -> None:  # noqa: F811
    words = _stopped_words(session, utc(2026, 12, 7, 10, 57, 0), 10, timezone_id)
    assert words == ("Live updates stopped: No node is named 'a100-04'. What this page shows is as it was "
                     "at 10:58:10 UTC and is no longer kept up.")


@pytest.mark.parametrize("timezone_id", ["UTC", "Asia/Kolkata"])
def test_the_last_answer_before_a_utc_midnight_is_said_with_its_date(session: Any, timezone_id: str) -> None:  # noqa: F811
    # Answered at 23:59:50 UTC, refused at 00:00:00 UTC the next day; in Kolkata both are on
    # 8 Dec (05:29:50 and 05:30:00), so a local day would leave the date out.
    words = _stopped_words(session, utc(2026, 12, 7, 23, 57, 0), 110, timezone_id)
    assert words == ("Live updates stopped: No node is named 'a100-04'. What this page shows is as it was "
                     "at 2026-12-07 23:59:50 UTC and is no longer kept up.")
