"""GET notification-hooks/{id}/history/: a hook's own changes for whoever may read the hook.

The entries are the audit trail's `config.changed` events of that hook (created, changed), as
recorded: the URL masked, the secret never. Another user's hook (another team's) is a 404, as
the hook itself is.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from controlplane.models import Membership, NotificationHook
from controlplane.services import notifications
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, client_for
from tests.controlplane.webhook_receiver import LOOPBACK

URL = "/api/v1/notification-hooks/"
SLACK = "https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefghijKLMNOPqrstuvwx"
CHAT = "https://chat.example.org/hooks/xJd93kQpLmN0zzAAbb77?token=hunter2hunter2"


@pytest.fixture(autouse=True)
def _rules(settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK], "WEBHOOK_ALLOWED_HOSTS": [],
                   "WEBHOOK_ALLOW_HTTP": False}


@pytest.fixture
def bob(clients: dict[str, APIClient]) -> APIClient:
    return clients["other_team"]


def add(client: APIClient, **body: Any) -> dict[str, Any]:
    response = client.post(URL, {"url": SLACK, "events": ["failed"], **body}, format="json")
    assert response.status_code == 201, response.content
    return dict(response.json())


def history(client: APIClient, hook_id: int) -> list[dict[str, Any]]:
    response = client.get(f"{URL}{hook_id}/history/")
    assert response.status_code == 200, response.content
    return list(response.json())


def test_the_owner_reads_every_change_of_their_hook_newest_first_masked(alice: APIClient, admin: APIClient) -> None:
    created = add(alice)
    hook_id, first_secret = created["id"], created["secret"]
    assert alice.patch(f"{URL}{hook_id}/", {"url": CHAT, "events": ["started", "failed"]},
                       format="json").status_code == 200
    assert alice.patch(f"{URL}{hook_id}/", {"active": False}, format="json").status_code == 200
    rotated = alice.post(f"{URL}{hook_id}/rotate-secret/").json()["secret"]
    assert admin.patch(f"{URL}{hook_id}/", {"active": True}, format="json").status_code == 200  # an admin's

    response = alice.get(f"{URL}{hook_id}/history/")
    entries = response.json()

    assert [(e["change"], e["actor"]) for e in entries] == [
        ("changed", "user:root"), ("changed", "user:alice"), ("changed", "user:alice"), ("changed", "user:alice"),
        ("created", "user:alice")]
    assert [e["message"].removeprefix(f"Notification hook {hook_id} of alice ") for e in entries] == [
        "changed: resumed",
        "changed: signing secret replaced by a new random one",
        "changed: paused",
        "changed: url https://hooks.slack.com/services/T0AAAA/B0BBBB/abc… → "
        "https://chat.example.org/hooks/xJd…?token=hun…; events failed → started, failed",
        "created: failed of alice's own jobs to https://hooks.slack.com/services/T0AAAA/B0BBBB/abc…",
    ]
    assert entries[1]["secret"] == "generated" and entries[0]["secret"] is None
    assert entries[-1]["before"] is None and entries[-1]["after"]["url"].endswith("/abc…")
    assert entries[3]["before"]["url"] != entries[3]["after"]["url"]
    assert entries[0]["at"] >= entries[1]["at"] >= entries[-1]["at"]
    text = response.content.decode()
    for hidden in ("abcdefghijKLMNOPqrstuvwx", "xJd93kQpLmN0zzAAbb77", "hunter2hunter2", first_secret, rotated):
        assert hidden not in text


def test_each_hook_reads_only_its_own_changes(alice: APIClient) -> None:
    one, two = add(alice)["id"], add(alice, url=CHAT)["id"]
    alice.patch(f"{URL}{two}/", {"active": False}, format="json")

    assert [e["change"] for e in history(alice, one)] == ["created"]
    assert [e["change"] for e in history(alice, two)] == ["changed", "created"]
    assert {e["after"]["id"] for e in history(alice, two)} == {two}


def test_another_teams_hook_history_is_a_404_and_an_admin_reads_it(alice: APIClient, bob: APIClient,
                                                                   admin: APIClient) -> None:
    theirs = add(bob)["id"]

    refused = alice.get(f"{URL}{theirs}/history/")

    assert refused.status_code == 404
    assert "Notification hook" not in refused.content.decode()  # nothing of it leaks
    assert alice.get(f"{URL}{theirs}/").status_code == 404  # as the hook itself
    assert [e["actor"] for e in history(admin, theirs)] == ["user:bob"]
    assert alice.get(f"{URL}999999/history/").status_code == 404


def test_a_teammate_who_cannot_see_a_team_hook_cannot_read_its_history(fleet: Fleet, alice: APIClient) -> None:
    """The hook follows team ml; carol is in ml too, but hooks are their owner's: hers to read
    is only what she may see, and she does not see alice's hook."""
    hook_id = add(alice, team="ml")["id"]
    carol = f.make_user("carol", team=fleet.ml)
    assert Membership.objects.filter(user=carol, team=fleet.ml).exists()
    teammate = client_for(fleet, "owner")
    teammate.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(carol)}")

    assert teammate.get(f"{URL}{hook_id}/").status_code == 404
    assert teammate.get(f"{URL}{hook_id}/history/").status_code == 404
    assert [e["change"] for e in history(alice, hook_id)] == ["created"]


def test_a_deleted_hooks_history_is_no_longer_the_owners_to_read(alice: APIClient, admin: APIClient) -> None:
    hook_id = add(alice)["id"]
    assert alice.delete(f"{URL}{hook_id}/").status_code == 204

    assert alice.get(f"{URL}{hook_id}/history/").status_code == 404
    # The audit trail keeps it, for admins.
    trail = admin.get("/api/v1/events/", {"kind": "config.changed"}).json()["results"]
    assert [e["reason"] for e in trail if e["reason"].startswith("NotificationHook")] == [
        "NotificationHookDeleted", "NotificationHookCreated"]


def test_anonymous_callers_are_refused(clients: dict[str, APIClient], alice: APIClient) -> None:
    hook_id = add(alice)["id"]
    assert APIClient().get(f"{URL}{hook_id}/history/").status_code in (401, 403)


def test_the_history_is_one_query_of_the_events_however_many_changes(alice: APIClient) -> None:
    hook_id = add(alice)["id"]
    hook = NotificationHook.objects.get(pk=hook_id)
    for i in range(30):
        notifications.change_hook(hook, {"active": bool(i % 2)}, actor="user:alice")

    with CaptureQueriesContext(connection) as queries:
        entries = history(alice, hook_id)

    assert len(entries) == 31
    reads = [q["sql"] for q in queries.captured_queries if "controlplane_event" in q["sql"]]
    assert len(reads) == 1, reads
