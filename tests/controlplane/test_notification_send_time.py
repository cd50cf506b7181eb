"""A delivery goes to the URL its hook has when it is sent, signed with the secret it has then.

The sender reads each hook's URL and secret right before each POST (services/notifications,
`_send_in_order`), not when the delivery was queued or claimed. Here the hook is changed by
another request (its own connection, committed: the tests run with real transactions) while a
POST of it is on the wire, from inside the real local receiver's handler: that one POST reaches
the old URL, and every later one the new.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from controlplane.models import NotificationDelivery, NotificationHook
from controlplane.services import notifications
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    bind,
    build_loop_fleet,
    make_job,
    register_node,
)
from tests.controlplane.webhook_receiver import LOOPBACK, Received, running

pytestmark = pytest.mark.django_db(transaction=True)

OLD_SECRET = "the-old-secret-of-the-hook"
NEW_SECRET = "the-new-secret-of-the-hook"


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP, "WEBHOOK_TIMEOUT_S": 2.0,
                   "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK]}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fleet() -> LoopFleet:
    return build_loop_fleet()


@pytest.fixture
def alice(fleet: LoopFleet) -> Any:
    return f.make_user("alice", team=fleet.team)


def queue_started(fleet: LoopFleet, alice: Any, url: str, jobs: int) -> NotificationHook:
    """A hook of alice's on `url` and `jobs` jobs bound: that many `started` deliveries queued."""
    hook = NotificationHook.objects.create(user=alice, url=url, events=["started"], secret=OLD_SECRET,
                                           created_at=timezone.now())
    node, _ = register_node("n-1")
    for gpu in range(jobs):
        bind(make_job(fleet, name=f"j{gpu}", submitter=alice), {node: [gpu]})
    assert NotificationDelivery.objects.filter(hook=hook).count() == jobs
    return hook


def elsewhere(change: Callable[[NotificationHook], Any], hook_id: int) -> Callable[[Received], None]:
    """An `on_post` for the receiver: on the first POST only, another request (this handler's
    thread, its own connection) changes the hook and commits, before the POST is answered."""
    done: list[bool] = []

    def on_post(_: Received) -> None:
        if done:
            return
        done.append(True)
        try:
            change(NotificationHook.objects.select_related("user", "team").get(pk=hook_id))
        finally:
            connection.close()

    return on_post


def send_all() -> notifications.Sent:
    return notifications.deliver_due(now=timezone.now() + timedelta(seconds=1))


def signed(received: Received, secret: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), received.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(received.headers["X-Quartermaster-Signature"], expected)


def test_a_url_changed_while_deliveries_wait_sends_them_to_the_new_url(fleet: LoopFleet, alice: Any) -> None:
    for old in running():
        for new in running():
            hook = queue_started(fleet, alice, old.url, 2)
            notifications.change_hook(hook, {"url": new.url, "secret": NEW_SECRET}, actor="user:alice")

            assert send_all().delivered == 2

            assert old.received == []
            assert [r.json()["job_name"] for r in new.received] == ["j0", "j1"]
            assert all(signed(r, NEW_SECRET) for r in new.received)


def test_a_url_changed_while_a_post_is_on_the_wire_sends_the_rest_to_the_new_url(fleet: LoopFleet,
                                                                                  alice: Any) -> None:
    """The round claimed all three rows when the URL was the old one; the change commits while
    the first POST is on the wire. That one reaches the old URL (once); the two after it, and
    their signatures, follow the change."""
    for new in running():
        for old in running():
            hook = queue_started(fleet, alice, old.url, 3)
            old.on_post = elsewhere(lambda h: notifications.change_hook(
                h, {"url": new.url, "secret": NEW_SECRET}, actor="user:alice"), hook.pk)

            sent = send_all()

            assert sent.delivered == 3 and sent.failed == 0
            assert [r.json()["job_name"] for r in old.received] == ["j0"]
            assert signed(old.received[0], OLD_SECRET)
            assert [r.json()["job_name"] for r in new.received] == ["j1", "j2"]
            assert all(signed(r, NEW_SECRET) for r in new.received)
            assert not NotificationDelivery.objects.filter(hook=hook, delivered_at=None).exists()
            hook.refresh_from_db()
            assert hook.url == new.url and hook.last_status.startswith("HTTP 200")


def test_a_failure_at_the_old_url_is_tried_again_at_once_at_the_new_one(fleet: LoopFleet, alice: Any) -> None:
    """The old receiver answers 500 to the POST on the wire when the change commits: the attempt
    is on the row, but no backoff and no failure against the new URL's health."""
    for new in running():
        for old in running(statuses=[500]):
            hook = queue_started(fleet, alice, old.url, 2)
            old.on_post = elsewhere(lambda h: notifications.change_hook(h, {"url": new.url}, actor="user:alice"),
                                    hook.pk)
            at = timezone.now() + timedelta(seconds=1)

            first = notifications.deliver_due(now=at)

            assert (first.delivered, first.failed, first.postponed) == (0, 1, 1)
            failed, behind = NotificationDelivery.objects.filter(hook=hook).order_by("id")
            assert failed.attempts == 1 and failed.last_status == 500 and failed.delivered_at is None
            assert failed.last_error == ("HTTP 500: receiver says no (sent to the hook's previous URL: the URL changed "
                                         "while this POST was on its way; tried again at the new one)")
            assert failed.next_attempt_at is not None and failed.next_attempt_at <= timezone.now()  # not in 30 s
            assert behind.attempts == 0 and behind.next_attempt_at == failed.next_attempt_at
            hook.refresh_from_db()
            assert (hook.consecutive_failures, hook.last_status, hook.last_delivery_at) == (0, "", None)
            assert notifications.health(hook) == (False, "nothing sent yet")

            second = notifications.deliver_due(now=timezone.now() + timedelta(seconds=1))

            assert second.delivered == 2
            assert [r.json()["job_name"] for r in new.received] == ["j0", "j1"]  # in order, the failed one first
            assert len(old.received) == 1


@pytest.mark.parametrize("what", ["paused", "deleted"])
def test_a_hook_paused_or_deleted_while_a_post_is_on_the_wire_sends_no_more(fleet: LoopFleet, alice: Any,
                                                                            what: str) -> None:
    for receiver in running():
        hook = queue_started(fleet, alice, receiver.url, 3)
        receiver.on_post = elsewhere(
            (lambda h: notifications.change_hook(h, {"active": False}, actor="user:alice")) if what == "paused"
            else (lambda h: notifications.delete_hook(h, actor="user:alice")), hook.pk)

        sent = send_all()

        assert [r.json()["job_name"] for r in receiver.received] == ["j0"]
        assert (sent.delivered, sent.failed, sent.postponed) == (1, 0, 2)
        if what == "deleted":
            assert not NotificationDelivery.objects.exists()
            continue
        waiting = NotificationDelivery.objects.filter(hook=hook, delivered_at=None).order_by("id")
        assert [(r.attempts, r.next_attempt_at is not None) for r in waiting] == [(0, True), (0, True)]
        assert send_all().found_work is False  # paused: nothing is claimed

        notifications.change_hook(hook, {"active": True}, actor="user:alice")
        assert send_all().delivered == 2
        assert [r.json()["job_name"] for r in receiver.received] == ["j0", "j1", "j2"]
