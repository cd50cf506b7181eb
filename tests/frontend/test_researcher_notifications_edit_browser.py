"""In Chromium: a researcher edits a webhook in place on /notifications/ (no delete and add
again): a plain-http public URL and no events are refused under their fields and nothing
changes; a live refresh while she types keeps what she typed; then the URL (to the real local
receiver, on an allowed internal network), the events, the team and Enabled change at once, the
list shows them and the audit trail has them. Then she gives the hook a new secret, shown once,
and the receiver's signature checks with it, not with the old one."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.choices import EventKind
from controlplane.models import Event, NotificationHook, Team
from controlplane.services import notifications
from tests.controlplane.webhook_receiver import Receiver, running
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLACK = "https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefghijKLMNOPqrstuvwx"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from running()


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_researcher_edits_a_hook_in_place_and_gives_it_a_new_secret(session: Any, receiver: Receiver,  # noqa: F811
                                                                   settings: Any) -> None:
    # The receiver is an internal relay on loopback: its network allowed, as an admin would.
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_HOSTS": "", "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32",
                   "WEBHOOK_ALLOW_HTTP": False}
    alice = session("alice")
    team = Team.objects.filter(memberships__user__username="alice").order_by("name").first()
    assert team is not None
    hook = notifications.create_hook(user("alice"), url=SLACK, events=["failed"], team=None, actor="user:alice")
    old_secret = hook.secret
    alice.open("/notifications/")
    page = alice.page
    row = page.locator(f"#hook-{hook.pk}")
    editor = page.locator("#edit-hook")
    expect(editor).to_be_hidden()

    # Edit: the form opens with the hook as it is; the URL is not in the page, only its masked form.
    row.locator('[data-hook-action="edit"]').click()
    expect(editor).to_be_visible()
    expect(page.locator("#edit-hook-id")).to_have_text(str(hook.pk))
    url_input = editor.locator('[data-field="url"]')
    expect(url_input).to_have_value("")
    expect(page.locator("#edit-hook-shown-url")).to_have_text("https://hooks.slack.com/services/T0AAAA/B0BBBB/abc…")
    expect(editor.locator('input[data-event][value="failed"]')).to_be_checked()
    expect(editor.locator('input[data-event][value="started"]')).not_to_be_checked()
    expect(editor.locator('[data-field="team"]')).to_have_value("")
    expect(editor.locator('[data-field="active"]')).to_be_checked()
    assert "abcdefghijKLMNOPqrstuvwx" not in page.content()

    # Plain http to a public address, and no event: each field says why; nothing changes.
    url_input.fill("http://93.184.216.34/hook")
    editor.locator('input[data-event][value="failed"]').uncheck()
    editor.locator('button[type="submit"]').click()
    url_error = editor.locator('[data-error-for="url"]')
    expect(url_error).to_contain_text("93.184.216.34 is not inside QM_WEBHOOK_ALLOWED_NETWORKS: a plain http URL "
                                      "sends each notification unencrypted", timeout=LIVE_TIMEOUT_MS)
    expect(url_input).to_have_attribute("aria-invalid", "true")
    expect(editor.locator('[data-error-for="events"]')).to_contain_text("give a list of one or more of: started")
    expect(editor.locator("[data-verdict]")).to_have_text("Not changed: each field marked says why.")
    alice.expect_refusal(f"/api/v1/notification-hooks/{hook.pk}/", 400)
    alice.screenshot("notifications-edit-refused")
    # On a phone the open form and its errors fit: nothing scrolls the page sideways.
    page.set_viewport_size({"width": 390, "height": 900})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    alice.screenshot("notifications-edit-refused-390px")
    page.set_viewport_size({"width": 1400, "height": 1000})
    stored = NotificationHook.objects.get(pk=hook.pk)
    assert (stored.url, stored.events, stored.active) == (SLACK, ["failed"], True)

    # A live refresh of the list while she types sweeps nothing away: the form is not in it.
    url_input.fill(receiver.url)
    before = int(page.evaluate("document.body.dataset.liveUpdates || '0'"))
    page.evaluate("QM.poll()")
    page.wait_for_function(f"Number(document.body.dataset.liveUpdates || '0') > {before}", timeout=LIVE_TIMEOUT_MS)
    expect(url_input).to_have_value(receiver.url)
    expect(editor).to_be_visible()

    # URL, events, team and Enabled at once: one PATCH; the list shows the hook as changed.
    editor.locator('input[data-event][value="started"]').check()
    editor.locator('input[data-event][value="succeeded"]').check()
    editor.locator('[data-field="team"]').select_option(team.name)
    editor.locator('[data-field="active"]').uncheck()
    editor.locator('button[type="submit"]').click()
    expect(page.locator("#hook-result")).to_have_text(
        f"Hook {hook.pk} changed: it POSTs started, succeeded of every job of team {team.name}, paused: nothing is "
        "sent until it is resumed. Deliveries still queued go to the new URL at their next attempt: send a test to "
        "check it.", timeout=LIVE_TIMEOUT_MS)
    expect(editor).to_be_hidden()
    expect(row.locator(".hook-events")).to_have_text("started, succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(row.locator(".hook-scope")).to_have_text(f"every job of team {team.name}")
    expect(row.locator(".hook-active")).to_have_text("no: paused")
    expect(row.locator(".hook-url")).to_have_text(receiver.url)
    stored.refresh_from_db()
    assert (stored.url, stored.events, stored.team_id, stored.active) == (
        receiver.url, ["started", "succeeded"], team.pk, False)
    assert NotificationHook.objects.count() == 1 and stored.secret == old_secret
    changed = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="NotificationHookChanged").get()
    assert changed.actor == "user:alice" and "events failed → started, succeeded" in changed.message

    # Open again: it shows the hook as it is now; Enabled back on, only that is sent.
    row.locator('[data-hook-action="edit"]').click()
    expect(editor.locator('[data-field="team"]')).to_have_value(team.name)
    expect(editor.locator('[data-field="active"]')).not_to_be_checked()
    expect(editor.locator('input[data-event][value="succeeded"]')).to_be_checked()
    expect(editor.locator('[data-error-for="url"]')).to_be_hidden()
    editor.locator('[data-field="active"]').check()
    editor.locator('button[type="submit"]').click()
    expect(row.locator(".hook-active")).to_have_text("yes", timeout=LIVE_TIMEOUT_MS)
    stored.refresh_from_db()
    assert stored.active is True and stored.url == receiver.url and stored.team_id == team.pk
    alice.screenshot("notifications-edited")

    # A new secret (the confirmation accepted by the session): shown once, and it signs the test.
    row.locator('[data-hook-action="rotate"]').click()
    secret_panel = page.locator("#new-secret")
    expect(secret_panel).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect(secret_panel.locator("h2")).to_have_text(f"Hook {hook.pk}: its new signing secret")
    stored.refresh_from_db()
    assert stored.secret != old_secret
    expect(page.locator("#new-secret-value")).to_have_text(stored.secret)
    expect(page.locator("#hook-result")).to_have_text(
        f"Hook {hook.pk} has a new signing secret, shown above this once: the old one is refused from now on.")
    row.locator('[data-hook-action="test"]').click()
    expect(page.locator("#hook-result")).to_contain_text(
        f"Hook {hook.pk}: Delivered: the receiver answered HTTP 200 in", timeout=LIVE_TIMEOUT_MS)
    (got,) = receiver.wait_for(1)
    shown = page.locator("#new-secret-value").inner_text()
    assert got.headers["X-Quartermaster-Signature"] == signature(shown, got.body)
    assert got.headers["X-Quartermaster-Signature"] != signature(old_secret, got.body)
    # After a reload the secret is gone from the page: shown once.
    alice.open("/notifications/")
    expect(page.locator("#new-secret")).to_be_hidden()
    assert stored.secret not in page.content()
