"""The admin's view of users' webhooks: every hook and how it delivers; an admin pauses one."""

from __future__ import annotations

from typing import Any

from django.test import Client
from django.utils import timezone

from controlplane.models import NotificationHook
from tests.controlplane import factories as f


def _hook() -> NotificationHook:
    user = f.make_user("hook-owner")
    return NotificationHook.objects.create(
        user=user, url="https://hooks.slack.com/services/T0/B0/x", events=["failed"], secret="never-shown-secret-x",
        created_at=timezone.now(), consecutive_failures=6, last_status="connection refused at 2026-11-30 08:00:00 UTC")


def test_the_admin_lists_every_hook_with_its_state_and_never_its_secret(browser: Client, fleet: Any) -> None:
    hook = _hook()
    page = browser.get("/admin/controlplane/notificationhook/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "hooks.slack.com/services/T0/B0/x" in text and "connection refused" in text and "hook-owner" in text
    detail = browser.get(f"/admin/controlplane/notificationhook/{hook.pk}/change/").content.decode()
    assert "never-shown-secret-x" not in detail and "never-shown-secret-x" not in text


def test_an_admin_pauses_a_hook_and_cannot_add_one(browser: Client, fleet: Any) -> None:
    hook = _hook()
    response = browser.post(f"/admin/controlplane/notificationhook/{hook.pk}/change/", {"active": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    hook.refresh_from_db()
    assert hook.active is False and hook.url == "https://hooks.slack.com/services/T0/B0/x"
    assert browser.get("/admin/controlplane/notificationhook/add/").status_code == 403


def test_a_pause_and_a_deletion_in_the_admin_are_recorded_as_the_apis_are(browser: Client, fleet: Any) -> None:
    from controlplane.choices import EventKind
    from controlplane.models import Event

    hook = _hook()

    assert browser.post(f"/admin/controlplane/notificationhook/{hook.pk}/change/", {"active": ""}).status_code == 302
    assert browser.post(f"/admin/controlplane/notificationhook/{hook.pk}/delete/", {"post": "yes"}).status_code == 302

    assert not NotificationHook.objects.exists()
    paused, deleted = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason__startswith="NotificationHook") \
        .order_by("id")
    assert paused.reason == "NotificationHookChanged" and paused.actor.startswith("user:")
    assert paused.message == f"Notification hook {hook.pk} of hook-owner changed: paused"
    assert deleted.reason == "NotificationHookDeleted" and deleted.data["before"]["active"] is False
    assert "never-shown-secret-x" not in str(paused.data) + str(deleted.data)
