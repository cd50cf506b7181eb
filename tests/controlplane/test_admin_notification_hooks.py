"""The admin's view of users' webhooks: every hook and how it delivers; an admin pauses one."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from controlplane.models import NotificationHook
from controlplane.services import notifications
from tests.controlplane import factories as f

#: The service's own deletion, as another request calls it (tests below wrap the module's name).
DELETE_HOOK = notifications.delete_hook


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


# ------------------------------------------------- a hook deleted while an admin had it open


def _deleted_elsewhere(hook_id: int) -> None:
    """The owner deletes the hook through the API's service in another request: its own
    connection, committed at once (the admin view's transaction cannot undo it)."""
    from django.db import connection

    done: list[bool] = []

    def owner_deletes() -> None:
        try:
            found = NotificationHook.objects.filter(pk=hook_id).select_related("user", "team").first()
            done.append(found is not None and DELETE_HOOK(found, actor="user:hook-owner"))
        finally:
            connection.close()

    other = threading.Thread(target=owner_deletes)
    other.start()
    other.join(30)
    assert done == [True], "the other request's deletion did not happen"


def _deleted_by_its_owner_before_the_lock(monkeypatch: pytest.MonkeyPatch, hook: NotificationHook,
                                          name: str) -> None:
    """After the admin's view read the hook, before its change (or deletion) locks it."""
    original = getattr(notifications, name)

    def owner_deletes_first(*args: Any, **kw: Any) -> Any:
        _deleted_elsewhere(hook.pk)
        return original(*args, **kw)

    monkeypatch.setattr(notifications, name, owner_deletes_first)


def _hook_events() -> list[tuple[str, str]]:
    from controlplane.choices import EventKind
    from controlplane.models import Event

    return [(e.reason, e.actor) for e in Event.objects.filter(kind=EventKind.CONFIG_CHANGED,
                                                              reason__startswith="NotificationHook").order_by("id")]


def _admin_log(hook: NotificationHook) -> list[int]:
    from django.contrib.admin.models import LogEntry

    return list(LogEntry.objects.filter(object_id=str(hook.pk)).values_list("action_flag", flat=True))


@pytest.mark.django_db(transaction=True)
def test_saving_a_hook_deleted_meanwhile_redirects_to_the_list_saying_so(browser: Client, fleet: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    hook = _hook()
    _deleted_by_its_owner_before_the_lock(monkeypatch, hook, "change_hook")

    response = browser.post(f"/admin/controlplane/notificationhook/{hook.pk}/change/", {"active": ""})

    assert response.status_code == 302, response.content.decode()[:2000]
    assert response["Location"] == "/admin/controlplane/notificationhook/"
    page = browser.get(response["Location"]).content.decode()
    assert (f"Notification hook {hook.pk} no longer exists: it was deleted meanwhile (by another admin, or by its "
            "owner through the API or the Notifications page), so nothing was changed.") in page
    assert not NotificationHook.objects.exists()
    assert _hook_events() == [("NotificationHookDeleted", "user:hook-owner")]  # no change recorded
    assert _admin_log(hook) == []  # nor a change in the admin's own log


@pytest.mark.django_db(transaction=True)
def test_deleting_a_hook_deleted_meanwhile_redirects_to_the_list_saying_so(browser: Client, fleet: Any,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    hook = _hook()
    _deleted_by_its_owner_before_the_lock(monkeypatch, hook, "delete_hook")

    response = browser.post(f"/admin/controlplane/notificationhook/{hook.pk}/delete/", {"post": "yes"}, follow=True)

    assert response.status_code == 200
    assert response.redirect_chain == [("/admin/controlplane/notificationhook/", 302)]
    page = response.content.decode()
    assert f"Notification hook {hook.pk} no longer exists" in page and "there was nothing left to delete" in page
    assert "deleted successfully" not in page
    assert _hook_events() == [("NotificationHookDeleted", "user:hook-owner")]  # one deletion, the owner's
    assert _admin_log(hook) == []


@pytest.mark.django_db(transaction=True)
def test_the_delete_action_skips_a_hook_deleted_meanwhile_and_counts_only_those_it_deleted(
        browser: Client, fleet: Any) -> None:
    """Its owner deletes one of two selected hooks while the admin's "Delete selected" waits for
    their rows (the list locks them: admin_forms.DeletesSelectedLocked): the admin is told 1
    deleted and 1 deleted meanwhile. Before, Django's "Successfully deleted 2 notification
    hooks." stood beside "1 hook … had already been deleted meanwhile"."""
    from django.db import transaction

    from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread

    hook = _hook()
    other = NotificationHook.objects.create(user=hook.user, url="https://chat.example.org/hook", events=["started"],
                                            secret="another-secret-of-16", created_at=timezone.now())
    with transaction.atomic():  # the owner's deletion (the API's), committed while the admin's waits
        list(NotificationHook.objects.select_for_update().filter(pk__in=[hook.pk, other.pk]))
        deleting, out = in_thread(lambda: browser.post("/admin/controlplane/notificationhook/", {
            "action": "delete_selected", "_selected_action": [hook.pk, other.pk], "index": 0, "post": "yes"}))
        assert blocked_on_a_lock()
        assert DELETE_HOOK(hook, actor="user:hook-owner")
    deleting.join(20)

    assert "error" not in out and out["result"].status_code == 302, out
    said = sorted(str(m) for m in get_messages(out["result"].wsgi_request))
    assert said == [f"1 notification hook ({hook.pk}) had been deleted meanwhile (by another admin, or through the "
                    "API): not deleted nor recorded again here.", "Successfully deleted 1 notification hook."], said
    assert not NotificationHook.objects.exists()
    assert _hook_events() == [("NotificationHookDeleted", "user:hook-owner"), ("NotificationHookDeleted", "user:boss")]


def test_opening_or_saving_a_hook_already_gone_is_no_500(browser: Client, fleet: Any) -> None:
    """Deleted before the admin's view read it: Django's own answer, a redirect with a message."""
    hook = _hook()
    NotificationHook.objects.filter(pk=hook.pk).delete()

    for response in (browser.get(f"/admin/controlplane/notificationhook/{hook.pk}/change/", follow=True),
                     browser.post(f"/admin/controlplane/notificationhook/{hook.pk}/change/", {"active": ""},
                                  follow=True),
                     browser.post(f"/admin/controlplane/notificationhook/{hook.pk}/delete/", {"post": "yes"},
                                  follow=True)):
        assert response.status_code == 200 and response.redirect_chain
        assert f"with ID “{hook.pk}” doesn’t exist. Perhaps it was deleted?" in response.content.decode()
    assert _hook_events() == []
