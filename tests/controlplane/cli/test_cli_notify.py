"""`qm notify add|list|rm|test`, run as a real subprocess against a live server, with a real
HTTP receiver for the test delivery."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controlplane.models import NotificationHook
from tests.controlplane.webhook_receiver import LOOPBACK, Receiver, dead_url, running


@pytest.fixture(autouse=True)
def _loopback_receiver_allowed(settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK]}  # the receiver is on 127.0.0.1


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from running()


def test_add_list_test_and_remove_a_hook(alice_qm: Callable[..., Any], receiver: Receiver) -> None:
    added = alice_qm("notify", "add", receiver.url, "--events", "started,failed")
    assert added.code == 0, added.err
    hook = NotificationHook.objects.get()
    assert added.out.startswith(f"Hook {hook.pk} POSTs started, failed of your own jobs to {receiver.url}.")
    assert hook.secret in added.out and hook.events == ["started", "failed"]

    listed = alice_qm("notify", "list")
    assert listed.code == 0 and receiver.url in listed.out and "nothing sent yet" in listed.out

    tested = alice_qm("notify", "test", str(hook.pk))
    assert tested.code == 0, tested.err
    assert tested.out.startswith("Delivered: the receiver answered HTTP 200")
    assert receiver.events() == ["test"]
    assert "delivering: HTTP 200" in alice_qm("notify", "list").out

    removed = alice_qm("notify", "rm", str(hook.pk))
    assert removed.code == 0 and f"Hook {hook.pk} removed" in removed.out
    assert not NotificationHook.objects.exists()
    assert "No notification hooks" in alice_qm("notify", "list").out


def test_slurm_mail_types_are_understood(alice_qm: Callable[..., Any]) -> None:
    assert alice_qm("notify", "add", "https://example.org/h", "--events", "begin,end,requeue").code == 0
    assert NotificationHook.objects.get().events == ["started", "succeeded", "failed", "timed_out", "cancelled",
                                                     "requeued"]


def test_a_team_hook(alice_qm: Callable[..., Any]) -> None:
    added = alice_qm("notify", "add", "https://example.org/h", "--team", "ml", "--events", "failed")
    assert added.code == 0 and "every job of team ml" in added.out


def test_refusals_name_the_field_and_the_flag(alice_qm: Callable[..., Any]) -> None:
    bad = alice_qm("notify", "add", "https://example.org/h", "--events", "started,exploded", "--team", "vision")
    assert bad.code == 1 and not bad.out
    assert "events (--events started,exploded): 'exploded' is not an event" in bad.err
    assert "team (--team vision): you are not in a team named 'vision'" in bad.err
    assert "Traceback" not in bad.err


def test_a_failed_test_delivery_exits_1_and_says_why(alice_qm: Callable[..., Any]) -> None:
    assert alice_qm("notify", "add", dead_url()).code == 0
    tested = alice_qm("notify", "test", str(NotificationHook.objects.get().pk))
    assert tested.code == 1 and "Not delivered: connection refused" in tested.out


def test_another_users_hook_is_not_found(alice_qm: Callable[..., Any], fleet: Any) -> None:
    from django.utils import timezone

    theirs = NotificationHook.objects.create(user=fleet.users["other_team"], url="https://example.org/b",
                                             events=["failed"], secret="x" * 20, created_at=timezone.now())
    gone = alice_qm("notify", "rm", str(theirs.pk))
    assert gone.code == 1 and NotificationHook.objects.filter(pk=theirs.pk).exists()
    assert alice_qm("notify", "rm", "abc").err.startswith("error: 'abc' is not a hook id")
