"""In Chromium: a researcher adds a webhook on /notifications/ pointing at a real local receiver,
is told next to the URL field why a bad URL is refused, keeps the secret shown once (the
receiver's signature checks with it), sends a test and sees its delivery row, pauses and resumes
the hook, then deletes it."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import NotificationDelivery, NotificationHook
from tests.controlplane.webhook_receiver import Receiver, running
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from running()


def test_researcher_adds_tests_pauses_and_deletes_a_hook(session: Any, receiver: Receiver,  # noqa: F811
                                                        settings: Any) -> None:
    # The receiver listens on loopback: allowed by name and by network, as an admin would.
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1,hooks.slack.com",
                   "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32"}
    alice = session("alice")
    alice.open("/")
    alice.page.click('[data-nav="notifications"]')
    alice.page.wait_for_url("**/notifications/")
    page = alice.page
    expect(page.locator("#no-hooks")).to_be_visible()

    # A host outside QM_WEBHOOK_ALLOWED_HOSTS: the API's words, under the URL field.
    page.fill('#add-hook [data-field="url"]', "https://chat.elsewhere.example/hook")
    page.check('#add-hook input[data-event][value="started"]')
    page.click('#add-hook button[type="submit"]')
    url_error = page.locator('#add-hook [data-error-for="url"]')
    expect(url_error).to_have_text(
        "chat.elsewhere.example is not among the hosts webhooks may reach here (QM_WEBHOOK_ALLOWED_HOSTS: "
        "127.0.0.1, hooks.slack.com); ask an admin.", timeout=LIVE_TIMEOUT_MS)
    expect(page.locator('#add-hook [data-field="url"]')).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#add-hook [data-verdict]")).to_have_text("Not added: each field marked says why.")
    alice.expect_refusal("/api/v1/notification-hooks/", 400)

    # Not http(s), and no event chosen: each field says its own problem.
    page.fill('#add-hook [data-field="url"]', "ftp://127.0.0.1/hook")
    page.uncheck('#add-hook input[data-event][value="started"]')
    page.click('#add-hook button[type="submit"]')
    expect(url_error).to_contain_text("'ftp://127.0.0.1/hook' is not an http or https URL", timeout=LIVE_TIMEOUT_MS)
    expect(page.locator('#add-hook [data-error-for="events"]')).to_contain_text("give a list of one or more of: started")
    alice.expect_refusal("/api/v1/notification-hooks/", 400)
    assert not NotificationHook.objects.exists()

    # The receiver's URL, two events: added, the secret shown once, the errors gone.
    page.fill('#add-hook [data-field="url"]', receiver.url)
    page.check('#add-hook input[data-event][value="started"]')
    page.check('#add-hook input[data-event][value="failed"]')
    page.click('#add-hook button[type="submit"]')
    expect(page.locator("#new-secret")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    hook = NotificationHook.objects.get()
    assert hook.user == user("alice") and hook.events == ["started", "failed"] and hook.team is None
    expect(page.locator("#new-secret-value")).to_have_text(hook.secret)
    expect(page.locator("#new-secret")).to_contain_text("X-Quartermaster-Signature: sha256=")
    expect(url_error).to_be_hidden()
    row = page.locator(f"#hook-{hook.pk}")
    expect(row).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect(row.locator(".hook-events")).to_have_text("started, failed")
    expect(row.locator(".hook-scope")).to_have_text("my own jobs")
    expect(row.locator(".hook-active")).to_have_text("yes")
    expect(row.locator(".no-deliveries")).to_be_visible()

    # A test delivery: the receiver gets it, signed with the secret the page showed; the page
    # says what came back and lists the delivery.
    row.locator('[data-hook-action="test"]').click()
    expect(page.locator("#hook-result")).to_contain_text(
        f"Hook {hook.pk}: Delivered: the receiver answered HTTP 200 in", timeout=LIVE_TIMEOUT_MS)
    (got,) = receiver.wait_for(1)
    shown_secret = page.locator("#new-secret-value").inner_text()
    assert got.headers["X-Quartermaster-Signature"] == "sha256=" + hmac.new(
        shown_secret.encode(), got.body, hashlib.sha256).hexdigest()
    assert got.json()["event"] == "test"
    sent = NotificationDelivery.objects.get(hook=hook)
    delivered = page.locator(f'#hook-{hook.pk} tr[data-delivery="{sent.pk}"]')
    expect(delivered).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect(delivered.locator("td").nth(1)).to_have_text("test")
    expect(delivered.locator("td").nth(2)).to_have_text("delivered: HTTP 200")
    expect(delivered.locator("td").nth(3)).to_have_text("1")
    expect(delivered.locator("td").nth(4)).to_have_text("–")
    expect(row.locator(".hook-status")).to_contain_text("delivering: HTTP 200 at")
    alice.screenshot("notifications")
    # On a phone the form, the secret and the deliveries fit: nothing scrolls the page sideways.
    page.set_viewport_size({"width": 390, "height": 900})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.evaluate("document.querySelector('.topbar .who button').getBoundingClientRect().right") <= 390
    alice.screenshot("notifications-390px")
    page.set_viewport_size({"width": 1400, "height": 1000})

    # Pause: the API's PATCH; the page says it, and offers Resume.
    row.locator('[data-hook-action="pause"]').click()
    expect(row.locator(".hook-active")).to_have_text("no: paused", timeout=LIVE_TIMEOUT_MS)
    expect(row.locator(".badge.paused")).to_be_visible()
    expect(row.locator('[data-hook-action="resume"]')).to_be_visible()
    hook.refresh_from_db()
    assert hook.active is False
    row.locator('[data-hook-action="resume"]').click()
    expect(row.locator(".hook-active")).to_have_text("yes", timeout=LIVE_TIMEOUT_MS)
    expect(row.locator(".badge.paused")).to_have_count(0)
    hook.refresh_from_db()
    assert hook.active is True

    # Delete (the confirmation is accepted by the session): gone from the page and the database.
    row.locator('[data-hook-action="delete"]').click()
    expect(page.locator("#hook-result")).to_have_text(
        f"Hook {hook.pk} deleted, with the deliveries it still had to send.", timeout=LIVE_TIMEOUT_MS)
    expect(page.locator(f"#hook-{hook.pk}")).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#no-hooks")).to_be_visible()
    assert not NotificationHook.objects.exists() and not NotificationDelivery.objects.exists()
