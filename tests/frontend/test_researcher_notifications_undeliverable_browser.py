"""In Chromium: a researcher whose old plain-http hook to a public host stopped delivering (http is
now refused outside QM_WEBHOOK_ALLOWED_NETWORKS) sees it on /notifications/: a warning on that
hook, with the sender's reason and what to do, and none on her https hook. She switches it to
https with Edit, and the warning goes with the list's refresh."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.models import NotificationHook
from controlplane.services import notifications
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OLD_HTTP = "http://93.184.216.34/hooks/T0AAAA/abcdefghijKLMNOP1234"
SLACK = "https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefghijKLMNOPqrstuvwx"


def test_an_undeliverable_plain_http_hook_is_flagged_with_what_to_do(session: Any, settings: Any) -> None:  # noqa: F811
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_HOSTS": "", "WEBHOOK_ALLOWED_NETWORKS": "",
                   "WEBHOOK_ALLOW_HTTP": False}
    alice = session("alice")
    # Saved by an older release, before plain http was limited: no check of today's rules.
    old = NotificationHook.objects.create(user=user("alice"), url=OLD_HTTP, events=["failed"], secret="s" * 32,
                                          created_at=timezone.now())
    fine = notifications.create_hook(user("alice"), url=SLACK, events=["started"], team=None, actor="user:alice")
    reason = notifications.undeliverable_reason(OLD_HTTP)
    assert reason is not None and reason.startswith("93.184.216.34 is not inside QM_WEBHOOK_ALLOWED_NETWORKS")

    alice.open("/notifications/")
    page = alice.page
    bad_row, good_row = page.locator(f"#hook-{old.pk}"), page.locator(f"#hook-{fine.pk}")
    warning = bad_row.locator("[data-undeliverable]")

    expect(warning).to_be_visible()
    expect(warning).to_have_attribute("role", "alert")
    expect(warning).to_contain_text("This hook is not delivering: every POST to its URL is refused here, whatever "
                                    "the receiver would answer. " + reason)
    expect(warning.locator(".hook-fix")).to_contain_text("To fix it, switch it to https: press Edit and give the "
                                                         "receiver's https:// address")
    expect(bad_row.locator(".badge")).to_have_text("not delivering")
    expect(bad_row.locator(".hook-status")).to_have_text(
        f"not delivering: every POST to this URL is refused here: {reason}")
    expect(good_row.locator("[data-undeliverable]")).to_have_count(0)
    expect(good_row.locator(".badge")).to_have_count(0)
    assert "abcdefghijKLMNOP1234" not in page.content()  # the URL's hidden part is not in the page
    alice.screenshot("notifications-undeliverable")

    # The fix: Edit, the https address of the same receiver. The warning goes; the hook stays.
    bad_row.locator('[data-hook-action="edit"]').click()
    page.fill('#edit-hook-form [data-field="url"]', "https://93.184.216.34/hooks/T0AAAA/abcdefghijKLMNOP1234")
    page.click('#edit-hook-form button[type="submit"]')
    expect(page.locator("#hook-result")).to_contain_text(f"Hook {old.pk} changed", timeout=LIVE_TIMEOUT_MS)
    expect(warning).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    expect(bad_row.locator(".hook-status")).to_have_text("nothing sent yet")
    old.refresh_from_db()
    assert old.url.startswith("https://") and notifications.undeliverable_reason(old.url) is None
