"""`qm notify add|list|rm|test`, run as a real subprocess against a live server, with a real
HTTP receiver for the test delivery."""

from __future__ import annotations

import json
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


def test_edit_changes_url_events_scope_and_pause_in_place(alice_qm: Callable[..., Any], receiver: Receiver) -> None:
    assert alice_qm("notify", "add", "https://example.org/h", "--events", "failed").code == 0
    hook = NotificationHook.objects.get()

    edited = alice_qm("notify", "edit", str(hook.pk), "--hook-url", receiver.url, "--events", "begin,fail",
                      "--team", "ml", "--pause")

    assert edited.code == 0, edited.err
    assert edited.out.startswith(f"Hook {hook.pk} now POSTs started, failed, timed_out of every job of team ml to "
                                 f"{receiver.url}. It is paused: nothing is sent until you resume it.")
    assert f"Try it: qm notify test {hook.pk}" in edited.out
    hook.refresh_from_db()
    assert (hook.url, hook.events, hook.team.name, hook.active) == (receiver.url, ["started", "failed", "timed_out"],
                                                                   "ml", False)
    back = alice_qm("notify", "edit", str(hook.pk), "--own-jobs", "--resume")
    assert back.code == 0 and "of your own jobs" in back.out
    hook.refresh_from_db()
    assert hook.team is None and hook.active is True and hook.pk == NotificationHook.objects.get().pk


def test_edit_refusals_name_the_field_and_the_flag_and_change_nothing(alice_qm: Callable[..., Any]) -> None:
    assert alice_qm("notify", "add", "https://example.org/h", "--events", "failed").code == 0
    hook = NotificationHook.objects.get()

    bad = alice_qm("notify", "edit", str(hook.pk), "--hook-url", "http://93.184.216.34/hook", "--events", "nope")

    assert bad.code == 1 and not bad.out and "Traceback" not in bad.err
    assert ("url (--hook-url http://93.184.216.34/hook): 93.184.216.34 is not inside QM_WEBHOOK_ALLOWED_NETWORKS: "
            "a plain http URL sends each notification unencrypted") in bad.err
    assert "events (--events nope): 'nope' is not an event" in bad.err
    nothing = alice_qm("notify", "edit", str(hook.pk))
    assert nothing.code == 2 and nothing.err.startswith("error: Nothing to change: give --hook-url")
    both = alice_qm("notify", "edit", str(hook.pk), "--pause", "--resume")
    assert both.code == 2 and "not allowed with argument" in both.err
    assert NotificationHook.objects.get().url == "https://example.org/h"
    assert NotificationHook.objects.get().events == ["failed"]


def test_rotate_prints_the_new_secret_once_and_the_test_delivery_is_signed_with_it(
        alice_qm: Callable[..., Any], receiver: Receiver) -> None:
    import hashlib
    import hmac

    assert alice_qm("notify", "add", receiver.url).code == 0
    hook = NotificationHook.objects.get()
    old = hook.secret

    rotated = alice_qm("notify", "rotate", str(hook.pk))

    assert rotated.code == 0, rotated.err
    hook.refresh_from_db()
    assert hook.secret != old and hook.secret in rotated.out and old not in rotated.out
    assert "X-Quartermaster-Signature" in rotated.out and "the old one is refused from now on" in rotated.out
    assert alice_qm("notify", "test", str(hook.pk)).code == 0
    (got,) = receiver.wait_for(1)
    assert got.headers["X-Quartermaster-Signature"] == "sha256=" + hmac.new(
        hook.secret.encode(), got.body, hashlib.sha256).hexdigest()
    assert hook.secret not in alice_qm("notify", "list").out


def test_list_says_which_hook_is_not_delivering_why_and_how_to_fix_it(alice_qm: Callable[..., Any], fleet: Any,
                                                                       receiver: Receiver) -> None:
    """A plain http hook to a public host, saved before http was limited to the allowed
    networks: every POST of it is refused; the list says so beside a hook that delivers."""
    from django.utils import timezone

    old = NotificationHook.objects.create(user=fleet.users["owner"], url="http://93.184.216.34/hook",
                                          events=["failed"], secret="x" * 20, created_at=timezone.now())
    assert alice_qm("notify", "add", receiver.url).code == 0
    fine = NotificationHook.objects.exclude(pk=old.pk).get()

    listed = alice_qm("notify", "list")

    assert listed.code == 0, listed.err
    lines = listed.out.splitlines()
    (old_row,) = [line for line in lines if line.split() and line.split()[0] == str(old.pk)]
    (fine_row,) = [line for line in lines if line.split() and line.split()[0] == str(fine.pk)]
    assert old_row.endswith("NOT DELIVERING: see below") and fine_row.endswith("nothing sent yet")
    assert (f"Hook {old.pk} is not delivering: every POST to http://93.184.216.34/hook is refused here: "
            "93.184.216.34 is not inside QM_WEBHOOK_ALLOWED_NETWORKS: a plain http URL sends each notification "
            "unencrypted") in listed.out
    assert f"  Fix it: qm notify edit {old.pk} --hook-url https://... (the receiver's https address)" in listed.out
    assert f"Hook {fine.pk} is not delivering" not in listed.out

    as_json = alice_qm("notify", "list", "--json")
    rows = {h["id"]: h for h in json.loads(as_json.out)["results"]}
    assert rows[old.pk]["deliverable"] is False and rows[fine.pk]["deliverable"] is True


def test_history_prints_who_changed_the_hook_when_and_what_masked(alice_qm: Callable[..., Any],
                                                                  fleet: Any) -> None:
    from django.utils import timezone

    slack = "https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefghijKLMNOPqrstuvwx"
    assert alice_qm("notify", "add", slack, "--events", "failed").code == 0
    hook = NotificationHook.objects.get()
    assert alice_qm("notify", "edit", str(hook.pk), "--pause").code == 0
    assert alice_qm("notify", "rotate", str(hook.pk)).code == 0
    hook.refresh_from_db()

    shown = alice_qm("notify", "history", str(hook.pk))

    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0].split() == ["AT", "(UTC)", "BY", "CHANGE"]
    assert [line.split("  alice  ")[1].strip() for line in lines[1:]] == [
        f"Notification hook {hook.pk} of alice changed: signing secret replaced by a new random one",
        f"Notification hook {hook.pk} of alice changed: paused",
        f"Notification hook {hook.pk} of alice created: failed of alice's own jobs to "
        "https://hooks.slack.com/services/T0AAAA/B0BBBB/abc…",
    ]
    assert lines[1].startswith(timezone.now().strftime("%Y-%m-%d "))
    assert "abcdefghijKLMNOPqrstuvwx" not in shown.out and hook.secret not in shown.out

    as_json = json.loads(alice_qm("notify", "history", str(hook.pk), "--json").out)
    assert [c["change"] for c in as_json] == ["changed", "changed", "created"]

    theirs = NotificationHook.objects.create(user=fleet.users["other_team"], url="https://example.org/b",
                                             events=["failed"], secret="x" * 20, created_at=timezone.now())
    refused = alice_qm("notify", "history", str(theirs.pk))
    assert refused.code == 1 and not refused.out and "Traceback" not in refused.err


def test_a_hook_url_given_as_url_is_refused_pointing_to_the_hook_form(alice_qm: Callable[..., Any]) -> None:
    """`--url` names the Quartermaster server (every command's); `qm notify add --url HOOK` was
    refused by argparse with "the following arguments are required: URL" under a usage line that
    shows `--url URL` too: it said neither what --url is nor how to give the hook."""
    given = alice_qm("notify", "add", "--url", "https://hooks.example/x", "--events", "end")

    assert given.code == 2 and not given.out
    assert ("error: no hook URL given: --url https://hooks.example/x names the Quartermaster server to talk to, "
            "not the hook. Give the hook's URL: qm notify add https://hooks.example/x (or --hook-url "
            "https://hooks.example/x)") in given.err
    assert not NotificationHook.objects.exists()


def test_the_hook_url_may_be_given_as_hook_url_as_notify_edit_takes_it(alice_qm: Callable[..., Any]) -> None:
    added = alice_qm("notify", "add", "--hook-url", "https://example.org/h", "--events", "failed")

    assert added.code == 0, added.err
    assert NotificationHook.objects.get().url == "https://example.org/h"

    both = alice_qm("notify", "add", "https://example.org/a", "--hook-url", "https://example.org/b")
    assert both.code == 2 and "two hook URLs given" in both.err
    assert NotificationHook.objects.count() == 1


def test_a_hook_added_without_events_is_told_when_its_job_becomes_borrowed(alice_qm: Callable[..., Any]) -> None:
    """A running job that now counts as borrowed is the first a lender reclaims: `qm notify add`
    subscribes to it by default (requeued and unschedulable stay opt-in), and `all` includes it."""
    assert alice_qm("notify", "add", "https://example.org/h").code == 0
    assert alice_qm("notify", "add", "https://example.org/all", "--events", "all").code == 0

    by_url = dict(NotificationHook.objects.values_list("url", "events"))
    assert by_url["https://example.org/h"] == ["started", "succeeded", "failed", "timed_out", "cancelled",
                                               "preempted", "borrowed"]
    assert "borrowed" in by_url["https://example.org/all"] and "unschedulable" in by_url["https://example.org/all"]
