"""In Chromium: a researcher opens a hook's History on /notifications/ and reads who created and
changed it (an admin's pause among them), with its URLs masked; the History stays open through
the list's live refresh, and her own edit appears at its top when the list re-renders."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.services import notifications
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLACK = "https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefghijKLMNOPqrstuvwx"
CHAT = "https://chat.example.org/hooks/xJd93kQpLmN0zzAAbb77"


def refresh(page: Any) -> None:
    """One live refresh now, as the page's timer does every 10 s, and wait for it to land."""
    before = int(page.evaluate("document.body.dataset.liveUpdates || '0'"))
    page.evaluate("QM.poll()")
    page.wait_for_function(f"Number(document.body.dataset.liveUpdates || '0') > {before}", timeout=LIVE_TIMEOUT_MS)


def test_researcher_reads_her_hooks_history_and_it_stays_open(session: Any, settings: Any) -> None:  # noqa: F811
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_HOSTS": "", "WEBHOOK_ALLOWED_NETWORKS": "",
                   "WEBHOOK_ALLOW_HTTP": False}
    alice = session("alice")
    hook = notifications.create_hook(user("alice"), url=SLACK, events=["failed"], team=None, actor="user:alice")
    hook = notifications.change_hook(hook, {"url": CHAT}, actor="user:alice")
    notifications.change_hook(hook, {"active": False}, actor="user:admin")
    other = notifications.create_hook(user("alice"), url=SLACK, events=["started"], team=None, actor="user:alice")

    alice.open("/notifications/")
    page = alice.page
    row = page.locator(f"#hook-{hook.pk}")
    history = row.locator(f'details[data-history="{hook.pk}"]')
    table = history.locator("table.history")
    expect(history.locator("summary")).to_have_text("History (3 changes)")
    expect(table).to_be_hidden()

    history.locator("summary").click()
    expect(table).to_be_visible()
    changes = table.locator("tbody tr")
    expect(changes).to_have_count(3)
    expect(changes.nth(0).locator("td").nth(1)).to_have_text("admin")
    expect(changes.nth(0).locator("td").nth(2)).to_have_text("changed: paused")
    expect(changes.nth(1).locator("td").nth(2)).to_have_text(
        "changed: url https://hooks.slack.com/services/T0AAAA/B0BBBB/abc… → https://chat.example.org/hooks/xJd…")
    expect(changes.nth(2).locator("td").nth(2)).to_have_text(
        "created: failed of alice's own jobs to https://hooks.slack.com/services/T0AAAA/B0BBBB/abc…")
    expect(page.locator(f'details[data-history="{other.pk}"] table.history')).to_be_hidden()  # only the one opened
    content = page.content()
    assert "abcdefghijKLMNOPqrstuvwx" not in content and "xJd93kQpLmN0zzAAbb77" not in content
    alice.screenshot("notifications-history")

    # The list re-renders every 10 s (here asked for at once): the History opened stays open,
    # the other stays closed.
    refresh(page)
    expect(table).to_be_visible()
    expect(page.locator(f'details[data-history="{other.pk}"] table.history')).to_be_hidden()

    # Her own edit: recorded, and at the top of the open History once the list re-renders.
    row.locator('[data-hook-action="edit"]').click()
    page.check('#edit-hook-form input[data-event][value="started"]')
    page.click('#edit-hook-form button[type="submit"]')
    expect(page.locator("#hook-result")).to_contain_text(f"Hook {hook.pk} changed", timeout=LIVE_TIMEOUT_MS)
    expect(changes).to_have_count(4, timeout=LIVE_TIMEOUT_MS)
    expect(table).to_be_visible()
    expect(history.locator("summary")).to_have_text("History (4 changes)")
    expect(changes.nth(0).locator("td").nth(1)).to_have_text("alice")
    expect(changes.nth(0).locator("td").nth(2)).to_have_text("changed: events failed → started, failed")

    # Closed again, it stays closed through the next refresh.
    history.locator("summary").click()
    expect(table).to_be_hidden()
    refresh(page)
    expect(table).to_be_hidden()
