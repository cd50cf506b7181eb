"""A hook every POST of which is refused here reads `deliverable: false` with the reason.

Such hooks exist: plain http to a public host was allowed before http was limited to
QM_WEBHOOK_ALLOWED_NETWORKS, and a host may since have left QM_WEBHOOK_ALLOWED_HOSTS. The
reason is the sender's own refusal (services/notifications.sending_problem, one home for the
rule): each test also sends the hook's delivery for real and finds the same words on it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import NotificationDelivery, NotificationHook
from controlplane.services import notifications
from tests.controlplane.webhook_receiver import LOOPBACK

URL = "/api/v1/notification-hooks/"
PUBLIC_HTTP = "http://93.184.216.34/hooks/T0AAAA/abcdefghijKLMNOP1234"  # saved before the http rule
HTTP_WORDS = ("93.184.216.34 is not inside QM_WEBHOOK_ALLOWED_NETWORKS: a plain http URL sends each notification "
              "unencrypted (job names, users, teams; the signature proves who sent it but hides nothing), so http "
              "may only reach those networks (an internal relay), or any host if an admin sets "
              "QM_WEBHOOK_ALLOW_HTTP. Use https://.")


@pytest.fixture(autouse=True)
def _rules(settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_TIMEOUT_S": 0.5, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK],
                   "WEBHOOK_ALLOWED_HOSTS": [], "WEBHOOK_ALLOW_HTTP": False}


def saved(user: Any, url: str, **kw: Any) -> NotificationHook:
    """A hook as an older release stored it: no check of today's rules."""
    return NotificationHook.objects.create(user=user, url=url, events=["failed"], secret="s" * 20,
                                           created_at=timezone.now(), **kw)


def sent_words(hook: NotificationHook) -> str:
    """What the sender wrote on a delivery of the hook, sent for real now."""
    now = timezone.now()
    row = NotificationDelivery.objects.create(hook=hook, event="failed", payload={"text": "x"}, created_at=now,
                                              next_attempt_at=now)
    notifications.deliver_due(now=now + timedelta(seconds=1))
    row.refresh_from_db()
    return row.last_error


def test_an_old_plain_http_hook_to_a_public_host_reads_undeliverable_with_the_senders_words(
        alice: APIClient, fleet: Any) -> None:
    hook = saved(fleet.users["owner"], PUBLIC_HTTP)

    body = alice.get(f"{URL}{hook.pk}/").json()

    assert body["deliverable"] is False
    assert body["undeliverable_reason"] == HTTP_WORDS
    assert body["status"] == f"not delivering: every POST to this URL is refused here: {HTTP_WORDS}"
    assert [h["deliverable"] for h in alice.get(URL).json()["results"]] == [False]
    assert sent_words(hook) == f"not sent: {HTTP_WORDS}"  # the sender's refusal, word for word
    assert "abcdefghij" not in body["undeliverable_reason"] + body["status"]  # names the host, not the path


def test_https_hooks_and_an_allowed_relay_are_deliverable(alice: APIClient, fleet: Any) -> None:
    owner = fleet.users["owner"]
    for url in ("https://hooks.slack.com/services/T0/B0/x", "http://127.0.0.1:9/relay"):
        saved(owner, url)

    rows = alice.get(URL).json()["results"]

    assert [(h["deliverable"], h["undeliverable_reason"]) for h in rows] == [(True, None), (True, None)]
    assert not [h for h in rows if h["status"].startswith("not delivering")]


def test_the_settings_that_allow_http_make_it_deliverable_again(alice: APIClient, fleet: Any,
                                                                settings: Any) -> None:
    hook = saved(fleet.users["owner"], PUBLIC_HTTP)
    assert alice.get(f"{URL}{hook.pk}/").json()["deliverable"] is False

    settings.QM = {**settings.QM, "WEBHOOK_ALLOW_HTTP": True}
    assert alice.get(f"{URL}{hook.pk}/").json()["deliverable"] is True

    settings.QM = {**settings.QM, "WEBHOOK_ALLOW_HTTP": False, "WEBHOOK_ALLOWED_NETWORKS": ["93.184.216.0/24"]}
    assert alice.get(f"{URL}{hook.pk}/").json()["deliverable"] is True


def test_a_name_is_judged_by_the_addresses_it_resolves_to_as_the_sender_does(alice: APIClient, fleet: Any,
                                                                              settings: Any) -> None:
    """localhost: deliverable while its loopback addresses are allowed; refused, in the sender's
    words, once they are not."""
    hook = saved(fleet.users["owner"], "http://localhost:9/relay")
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK, "::1/128"]}
    assert alice.get(f"{URL}{hook.pk}/").json()["undeliverable_reason"] is None

    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_NETWORKS": []}
    body = alice.get(f"{URL}{hook.pk}/").json()

    assert body["deliverable"] is False
    assert body["undeliverable_reason"].startswith("localhost resolves to ")
    assert "a loopback address, which webhooks may not reach here" in body["undeliverable_reason"]
    assert sent_words(hook) == f"not sent: {body['undeliverable_reason']}"


def test_a_host_no_longer_among_the_allowed_hosts_reads_undeliverable(alice: APIClient, fleet: Any,
                                                                      settings: Any) -> None:
    hook = saved(fleet.users["owner"], "https://chat.elsewhere.example/hook")
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_HOSTS": ["hooks.slack.com"]}

    body = alice.get(f"{URL}{hook.pk}/").json()

    assert body["deliverable"] is False
    assert body["undeliverable_reason"] == ("chat.elsewhere.example is not among the hosts webhooks may reach here "
                                            "(QM_WEBHOOK_ALLOWED_HOSTS: hooks.slack.com); ask an admin.")
    assert sent_words(hook) == f"not sent: {body['undeliverable_reason']}"


def test_a_paused_undeliverable_hook_says_paused_and_still_undeliverable(alice: APIClient, fleet: Any) -> None:
    hook = saved(fleet.users["owner"], PUBLIC_HTTP, active=False)

    body = alice.get(f"{URL}{hook.pk}/").json()

    assert body["status"].startswith("paused") and body["deliverable"] is False
    assert body["undeliverable_reason"] == HTTP_WORDS


def test_switching_it_to_https_makes_it_deliverable(alice: APIClient, fleet: Any) -> None:
    hook = saved(fleet.users["owner"], PUBLIC_HTTP)

    changed = alice.patch(f"{URL}{hook.pk}/", {"url": "https://93.184.216.34/hooks/T0AAAA/abcdefghijKLMNOP1234"},
                          format="json")

    assert changed.status_code == 200, changed.content
    assert changed.json()["deliverable"] is True and changed.json()["undeliverable_reason"] is None
