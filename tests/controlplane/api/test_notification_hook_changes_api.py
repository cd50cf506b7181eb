"""Changing a webhook in place (PATCH notification-hooks/{id}/), rotating its secret
(POST {id}/rotate-secret/), and the audit trail of every creation, change and deletion.

The receiver is the real one on 127.0.0.1 (tests/controlplane/webhook_receiver.py), on plain
http: a legitimate setup because its network is in QM_WEBHOOK_ALLOWED_NETWORKS (an internal
relay), as the tests set.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.choices import EventKind
from controlplane.models import Event, NotificationHook
from tests.controlplane.fleet_fixture import Fleet
from tests.controlplane.webhook_receiver import LOOPBACK, Receiver, running

URL = "/api/v1/notification-hooks/"
SLACK = "https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefghijKLMNOPqrstuvwx"


@pytest.fixture(autouse=True)
def _loopback_relay_allowed(settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_TIMEOUT_S": 0.5, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK],
                   "WEBHOOK_ALLOWED_HOSTS": [], "WEBHOOK_ALLOW_HTTP": False}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from running()


def add(client: APIClient, **body: Any) -> dict[str, Any]:
    response = client.post(URL, {"url": SLACK, "events": ["failed"], **body}, format="json")
    assert response.status_code == 201, response.content
    return dict(response.json())


def hook_events() -> list[Event]:
    return list(Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason__startswith="NotificationHook")
                .order_by("id"))


def signed(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_a_patch_changes_url_events_team_and_active_at_once_and_is_recorded(alice: APIClient, fleet: Fleet,
                                                                          receiver: Receiver) -> None:
    created = add(alice)
    hook = NotificationHook.objects.get(pk=created["id"])
    NotificationHook.objects.filter(pk=hook.pk).update(consecutive_failures=7, last_status="HTTP 500 at ...")

    response = alice.patch(f"{URL}{hook.pk}/", {"url": receiver.url, "events": ["started", "succeeded"],
                                                "team": "ml", "active": False}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["url"] == receiver.url and body["events"] == ["started", "succeeded"] and body["team"] == "ml"
    assert body["active"] is False and "secret" not in body
    hook.refresh_from_db()
    assert (hook.url, hook.events, hook.team_id, hook.active) == (receiver.url, ["started", "succeeded"],
                                                                 fleet.ml.pk, False)
    assert hook.secret == created["secret"]
    # The failures counted were the old URL's: the new one starts afresh.
    assert hook.consecutive_failures == 0 and hook.last_status == "" and body["status"].startswith("paused")
    created_event, changed = hook_events()
    assert created_event.reason == "NotificationHookCreated" and created_event.actor == "user:alice"
    assert created_event.message == (f"Notification hook {hook.pk} of alice created: failed of alice's own jobs to "
                                     "https://hooks.slack.com/services/T0AAAA/B0BBBB/abc…")
    assert changed.reason == "NotificationHookChanged" and changed.actor == "user:alice"
    assert changed.message == (
        f"Notification hook {hook.pk} of alice changed: url https://hooks.slack.com/services/T0AAAA/B0BBBB/abc… → "
        f"{receiver.url}; events failed → started, succeeded; for alice's own jobs → every job of team ml; paused")
    assert changed.team_id is None  # the trail of a hook is the admins' to read
    assert changed.data["before"]["events"] == ["failed"] and changed.data["after"]["active"] is False
    # The credential in the old URL and the secret are nowhere in the trail.
    trail = json.dumps([e.data for e in hook_events()]) + " ".join(e.message for e in hook_events())
    assert "abcdefghijKLMNOPqrstuvwx" not in trail and created["secret"] not in trail


def test_a_change_of_the_hidden_part_of_the_url_still_reads_as_a_change(alice: APIClient) -> None:
    hook = add(alice)["id"]
    leaked = SLACK.replace("abcdefghijKLMNOPqrstuvwx", "abcZZZZZZZKLMNOPqrstuvwx")

    assert alice.patch(f"{URL}{hook}/", {"url": leaked}, format="json").status_code == 200

    changed = hook_events()[-1]
    assert changed.message.endswith("changed: url https://hooks.slack.com/services/T0AAAA/B0BBBB/abc… (changed inside "
                                    "its hidden part)")
    assert changed.data["before"]["url_digest"] != changed.data["after"]["url_digest"]


def test_a_patch_that_changes_nothing_records_nothing(alice: APIClient) -> None:
    hook = add(alice)["id"]

    assert alice.patch(f"{URL}{hook}/", {"events": ["failed"], "active": True}, format="json").status_code == 200
    assert alice.patch(f"{URL}{hook}/", {}, format="json").status_code == 200

    assert [e.reason for e in hook_events()] == ["NotificationHookCreated"]


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"url": "http://169.254.169.254/latest/meta-data/"}, "url", "169.254.169.254 is a cloud instance-metadata "
                                                                 "address, which webhooks may not reach here"),
    ({"url": "http://10.0.0.5/hook"}, "url", "10.0.0.5 is a private address"),
    ({"url": "http://93.184.216.34/hook"}, "url", "93.184.216.34 is not inside QM_WEBHOOK_ALLOWED_NETWORKS: a plain "
                                                  "http URL sends each notification unencrypted"),
    ({"url": "https://user:pw@example.org/x"}, "url", "user name or password"),
    ({"url": "ftp://example.org/x"}, "url", "is not an http or https URL"),
    ({"url": "https://example.org/" + "x" * 600}, "url", "no more than 500 characters"),
    ({"events": ["started", "exploded"]}, "events", "'exploded' is not an event"),
    ({"events": []}, "events", "give a list of one or more of"),
    ({"events": "failed"}, "events", "list"),
    ({"team": "vision"}, "team", "you are not in a team named 'vision': give one of yours (ml)"),
    ({"active": "maybe"}, "active", "is not true or false"),
    ({"secret": "short"}, "secret", "at least 16"),
], ids=["metadata", "private", "http-public", "credentials", "ftp", "too-long", "unknown-event", "no-events",
        "events-not-a-list", "team-not-yours", "active-not-boolean", "short-secret"])
def test_a_refused_change_names_the_field_and_writes_nothing(alice: APIClient, body: dict[str, Any], field: str,
                                                            words: str) -> None:
    created = add(alice)
    before = NotificationHook.objects.values().get(pk=created["id"])
    # A good change in the same request goes nowhere either: all or nothing.
    other = {"active": False} if field != "active" else {"events": ["started"]}

    response = alice.patch(f"{URL}{created['id']}/", {**other, **body}, format="json")

    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert list(errors) == [field] and words in " ".join(errors[field]), errors
    assert NotificationHook.objects.values().get(pk=created["id"]) == before
    assert [e.reason for e in hook_events()] == ["NotificationHookCreated"]


def test_an_admin_edits_a_members_hook_only_within_the_members_teams(alice: APIClient, admin: APIClient) -> None:
    hook = add(alice)["id"]

    refused = admin.patch(f"{URL}{hook}/", {"team": "vision"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"]["team"] == [
        "alice, whose hook this is, is not in a team named 'vision': give one of theirs (ml), or null for their "
        "own jobs."]
    changed = admin.patch(f"{URL}{hook}/", {"team": "ml", "events": ["failed", "cancelled"]}, format="json")
    assert changed.status_code == 200 and changed.json()["team"] == "ml" and changed.json()["user"] == "alice"
    back = admin.patch(f"{URL}{hook}/", {"team": None}, format="json")
    assert back.status_code == 200 and back.json()["team"] is None
    assert [(e.actor, e.message.split(": ", 1)[1]) for e in hook_events()[1:]] == [
        ("user:root", "events failed → failed, cancelled; for alice's own jobs → every job of team ml"),
        ("user:root", "for every job of team ml → alice's own jobs"),
    ]


def test_another_members_hook_cannot_be_changed_or_rotated(alice: APIClient, clients: dict[str, APIClient]) -> None:
    hook = add(alice)["id"]
    bob = clients["other_team"]

    assert bob.patch(f"{URL}{hook}/", {"url": "https://example.org/mine"}, format="json").status_code == 404
    assert bob.post(f"{URL}{hook}/rotate-secret/").status_code == 404
    assert NotificationHook.objects.get(pk=hook).url == SLACK and len(hook_events()) == 1


def test_rotating_the_secret_shows_the_new_one_once_and_signs_every_post_after_with_it(
        alice: APIClient, receiver: Receiver) -> None:
    created = add(alice, url=receiver.url)

    rotated = alice.post(f"{URL}{created['id']}/rotate-secret/")

    assert rotated.status_code == 200, rotated.content
    new = rotated.json()["secret"]
    assert len(new) >= 32 and new != created["secret"]
    assert rotated.json()["url"] == receiver.url and rotated.json()["events"] == ["failed"]
    assert "secret" not in alice.get(f"{URL}{created['id']}/").json()
    assert alice.post(f"{URL}{created['id']}/test/").json()["delivered"] is True
    (got,) = receiver.wait_for(1)
    assert got.headers["X-Quartermaster-Signature"] == signed(new, got.body)
    assert got.headers["X-Quartermaster-Signature"] != signed(created["secret"], got.body)
    event = hook_events()[-1]
    assert event.message == f"Notification hook {created['id']} of alice changed: signing secret replaced by a new " \
                            "random one"
    assert event.data["secret"] == "generated" and new not in json.dumps(event.data)


def test_a_secret_given_in_a_patch_is_shown_in_its_answer_and_recorded_without_it(alice: APIClient) -> None:
    hook = add(alice)["id"]

    response = alice.patch(f"{URL}{hook}/", {"secret": "a-secret-of-my-own-choice"}, format="json")

    assert response.status_code == 200 and response.json()["secret"] == "a-secret-of-my-own-choice"
    assert NotificationHook.objects.get(pk=hook).secret == "a-secret-of-my-own-choice"
    event = hook_events()[-1]
    assert event.message.endswith("changed: signing secret replaced") and event.data["secret"] == "given"
    assert "a-secret-of-my-own-choice" not in json.dumps(event.data)


def test_a_deletion_is_recorded_and_outlives_the_hook(alice: APIClient, admin: APIClient) -> None:
    hook = add(alice, team="ml", events=["started", "failed"])["id"]

    assert alice.delete(f"{URL}{hook}/").status_code == 204

    assert not NotificationHook.objects.exists()
    deleted = hook_events()[-1]
    assert deleted.reason == "NotificationHookDeleted" and deleted.data["after"] is None
    assert deleted.message == (f"Notification hook {hook} of alice deleted (it sent started, failed of every job of "
                               "team ml to https://hooks.slack.com/services/T0AAAA/B0BBBB/abc…)")
    # Readable later through the events API: an admin's to read, not a member's.
    seen = admin.get("/api/v1/events/", {"kind": "config.changed", "reason": "NotificationHookDeleted"}).json()
    assert [e["message"] for e in seen["results"]] == [deleted.message]
    mine = alice.get("/api/v1/events/", {"kind": "config.changed"}).json()
    assert mine["results"] == []



@pytest.mark.parametrize("call", ["patch", "rotate", "delete"])
def test_a_hook_deleted_between_the_read_and_the_change_is_a_404_and_nothing_is_written(
        alice: APIClient, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    """Another request deleted it after this one read it, before this one locked it."""
    from controlplane.services import notifications

    hook = add(alice)["id"]
    for name in ("change_hook", "delete_hook"):
        original = getattr(notifications, name)

        def deleted_first(*args: Any, _original: Any = original, **kw: Any) -> Any:
            NotificationHook.objects.filter(pk=hook).delete()
            return _original(*args, **kw)

        monkeypatch.setattr(notifications, name, deleted_first)

    response = {"patch": lambda: alice.patch(f"{URL}{hook}/", {"active": False}, format="json"),
                "rotate": lambda: alice.post(f"{URL}{hook}/rotate-secret/"),
                "delete": lambda: alice.delete(f"{URL}{hook}/")}[call]()

    assert response.status_code == 404, response.content
    assert f"Hook {hook} was deleted meanwhile" in response.json()["detail"]
    assert not NotificationHook.objects.exists()
    assert [e.reason for e in hook_events()] == ["NotificationHookCreated"]
