"""A hook's test notification (`POST notification-hooks/{id}/test/`) racing the hook's deletion
or a new secret, each by another request on its own connection, committed while the test's
POST is on the wire (from inside the real local receiver's handler)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from controlplane.models import NotificationDelivery, NotificationHook
from controlplane.services import notifications
from controlplane.services.notifications import SIGNATURE_HEADER, sign
from tests.controlplane.fleet_fixture import build_fleet, client_for
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread
from tests.controlplane.webhook_receiver import LOOPBACK, Received, running

URL = "/api/v1/notification-hooks/"


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_TIMEOUT_S": 2.0, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK]}


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Any:
    return build_fleet()


def _meanwhile(change: Callable[[NotificationHook], Any], hook_id: int) -> Callable[[Received], None]:
    def on_post(_: Received) -> None:
        try:
            change(NotificationHook.objects.select_related("user", "team").get(pk=hook_id))
        finally:
            connection.close()
    return on_post


def test_a_hook_deleted_while_its_test_notification_is_on_the_wire_is_told_so_not_a_500(committed_fleet) -> None:
    alice = client_for(committed_fleet, "owner")
    for receiver in running():
        hook = alice.post(URL, {"url": receiver.url, "events": ["failed"]}, format="json").json()["id"]
        receiver.on_post = _meanwhile(lambda h: notifications.delete_hook(h, actor="user:alice"), hook)

        answer = alice.post(f"{URL}{hook}/test/")

        assert len(receiver.received) == 1
        assert answer.status_code == 404, answer.content
        assert answer.json()["detail"] == (
            f"Hook {hook} was deleted while its test notification was sent: the receiver answered HTTP 200, "
            "and nothing of it is kept.")
        assert not NotificationHook.objects.filter(pk=hook).exists()
        assert not NotificationDelivery.objects.exists()


def test_a_hook_deleted_just_before_its_test_notification_sends_nothing_and_says_so(committed_fleet) -> None:
    alice = client_for(committed_fleet, "owner")
    for receiver in running():
        hook = alice.post(URL, {"url": receiver.url, "events": ["failed"]}, format="json").json()["id"]
        with transaction.atomic():  # the deletion, committed while the test waits for the hook's row
            stored = NotificationHook.objects.select_for_update(of=("self",)).select_related("user", "team").get(pk=hook)
            testing, tested = in_thread(lambda: alice.post(f"{URL}{hook}/test/"))
            assert blocked_on_a_lock()
            notifications.delete_hook(stored, actor="user:alice")
        testing.join(20)

        answer = tested["result"]
        assert answer.status_code == 404, answer.content
        assert answer.json()["detail"] == f"Hook {hook} was deleted meanwhile: nothing was sent."
        assert receiver.received == [] and not NotificationDelivery.objects.exists()


def test_a_test_notification_after_a_new_secret_is_signed_with_the_new_one(committed_fleet) -> None:
    alice = client_for(committed_fleet, "owner")
    for receiver in running():
        hook = alice.post(URL, {"url": receiver.url, "events": ["failed"]}, format="json").json()["id"]
        with transaction.atomic():  # the rotation, committed while the test waits for the hook's row
            stored = NotificationHook.objects.select_for_update(of=("self",)).select_related("user", "team").get(pk=hook)
            testing, tested = in_thread(lambda: alice.post(f"{URL}{hook}/test/"))
            assert blocked_on_a_lock()
            secret = notifications.rotate_secret(stored, actor="user:alice").secret
        testing.join(20)

        assert tested["result"].status_code == 200, tested["result"].content
        (got,) = receiver.received
        assert got.headers[SIGNATURE_HEADER] == sign(secret, got.body)
