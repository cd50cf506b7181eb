"""/api/v1/notification-hooks/: a user's webhooks, their refusals and the test delivery."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.models import NotificationDelivery, NotificationHook
from tests.controlplane.fleet_fixture import Fleet
from tests.controlplane.webhook_receiver import LOOPBACK, Receiver, dead_url, running

URL = "/api/v1/notification-hooks/"


@pytest.fixture(autouse=True)
def _short_timeout(settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_TIMEOUT_S": 0.5, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK]}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from running()


@pytest.fixture
def bob(clients: dict[str, APIClient]) -> APIClient:
    return clients["other_team"]


def add(client: APIClient, **body: Any) -> Any:
    return client.post(URL, {"url": "https://hooks.slack.com/services/T0/B0/x", "events": ["failed"], **body},
                       format="json")


def test_a_user_creates_a_hook_and_sees_its_secret_once(alice: APIClient, receiver: Receiver) -> None:
    created = add(alice, url=receiver.url, events=["started", "failed"])
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["user"] == "alice" and body["team"] is None and body["events"] == ["started", "failed"]
    assert len(body["secret"]) >= 32 and body["active"] is True and body["failing"] is False
    assert body["status"] == "nothing sent yet"

    again = alice.get(f"{URL}{body['id']}/").json()
    assert "secret" not in again
    assert NotificationHook.objects.get(pk=body["id"]).secret == body["secret"]


def test_a_user_sees_only_their_own_hooks_and_admins_see_all(alice: APIClient, bob: APIClient,
                                                            admin: APIClient) -> None:
    mine = add(alice).json()["id"]
    theirs = add(bob).json()["id"]

    assert [h["id"] for h in alice.get(URL).json()["results"]] == [mine]
    assert alice.get(f"{URL}{theirs}/").status_code == 404
    assert alice.delete(f"{URL}{theirs}/").status_code == 404
    assert alice.patch(f"{URL}{theirs}/", {"active": False}, format="json").status_code == 404
    assert sorted(h["id"] for h in admin.get(URL).json()["results"]) == sorted([mine, theirs])
    assert [h["id"] for h in admin.get(URL, {"user": "bob"}).json()["results"]] == [theirs]


def test_an_admin_asking_for_the_hooks_of_no_user_is_told_so(alice: APIClient, admin: APIClient) -> None:
    """A typo in `?user=` listed nothing, which read as "this user has no hooks"."""
    add(alice)
    refused = admin.get(URL, {"user": "alcie"})
    assert refused.status_code == 400, refused.content
    assert refused.json()["errors"]["user"] == ["no user named 'alcie'."]
    # a user with no hooks is still an empty list, and members still list their own
    assert admin.get(URL, {"user": "root"}).json()["results"] == []
    assert len(alice.get(URL, {"user": "nobody"}).json()["results"]) == 1


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"url": "ftp://example.org/x"}, "url", "is not an http or https URL"),
    ({"url": "not a url"}, "url", "is not an http or https URL"),
    ({"url": "https://user:pw@example.org/x"}, "url", "user name or password"),
    ({"events": ["started", "exploded"]}, "events", "'exploded' is not an event: use started, succeeded"),
    ({"events": []}, "events", "give a list of one or more of"),
    ({"team": "vision"}, "team", "you are not in a team named 'vision': give one of yours (ml)"),
    ({"team": "nosuch"}, "team", "you are not in a team named 'nosuch'"),
    ({"secret": "short"}, "secret", "at least 16"),
], ids=["ftp", "no-url", "credentials-in-url", "unknown-event", "no-events", "team-not-yours", "no-such-team",
        "short-secret"])
def test_refusals_name_the_field(alice: APIClient, body: dict[str, Any], field: str, words: str) -> None:
    response = add(alice, **body)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert list(errors) == [field] and words in " ".join(errors[field]), errors
    assert not NotificationHook.objects.exists()


def test_a_team_hook_for_a_team_of_yours(alice: APIClient) -> None:
    response = add(alice, team="ml")
    assert response.status_code == 201 and response.json()["team"] == "ml"


def test_admins_may_follow_any_team(admin: APIClient) -> None:
    assert add(admin, team="vision").status_code == 201


def test_the_allowed_hosts_setting_refuses_other_hosts(alice: APIClient, settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_HOSTS": ["hooks.slack.com", ".corp.example"]}
    assert add(alice, url="https://hooks.slack.com/services/x").status_code == 201
    assert add(alice, url="https://chat.corp.example/hook").status_code == 201
    refused = add(alice, url="http://127.0.0.1:9/hook")
    assert refused.status_code == 400
    assert "127.0.0.1 is not among the hosts webhooks may reach here" in refused.json()["errors"]["url"][0]


def test_finance_users_cannot_follow_a_team(clients: dict[str, APIClient]) -> None:
    response = add(clients["finance"], team="ml")
    assert response.status_code == 400 and "team" in response.json()["errors"]


def test_anonymous_callers_are_refused(clients: dict[str, APIClient]) -> None:
    assert clients["anonymous"].get(URL).status_code == 401


def test_patch_changes_events_and_pauses(alice: APIClient) -> None:
    hook = add(alice).json()["id"]
    response = alice.patch(f"{URL}{hook}/", {"events": ["succeeded", "failed"], "active": False}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["events"] == ["succeeded", "failed"] and response.json()["active"] is False
    assert response.json()["status"].startswith("paused")
    bad = alice.patch(f"{URL}{hook}/", {"events": ["nope"]}, format="json")
    assert bad.status_code == 400 and list(bad.json()["errors"]) == ["events"]


def test_delete_removes_the_hook_and_its_deliveries(alice: APIClient, receiver: Receiver) -> None:
    hook = add(alice, url=receiver.url).json()["id"]
    assert alice.post(f"{URL}{hook}/test/").status_code == 200
    assert alice.delete(f"{URL}{hook}/").status_code == 204
    assert not NotificationHook.objects.exists() and not NotificationDelivery.objects.exists()


def test_the_test_action_posts_a_signed_test_and_reports_the_status(alice: APIClient, receiver: Receiver) -> None:
    created = add(alice, url=receiver.url).json()
    response = alice.post(f"{URL}{created['id']}/test/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["delivered"] is True and body["status"] == 200
    assert body["detail"].startswith("Delivered: the receiver answered HTTP 200 in ")
    (got,) = receiver.received
    assert got.json()["event"] == "test" and "it works" in got.json()["text"]
    assert got.headers["X-Quartermaster-Signature"] == "sha256=" + hmac.new(
        created["secret"].encode(), got.body, hashlib.sha256).hexdigest()
    listed = alice.get(f"{URL}{created['id']}/deliveries/").json()
    assert listed[0]["event"] == "test" and listed[0]["last_status"] == 200 and listed[0]["delivered_at"]
    assert alice.get(f"{URL}{created['id']}/").json()["status"].startswith("delivering: HTTP 200 at ")


def test_the_test_action_says_why_it_was_not_delivered(alice: APIClient) -> None:
    for receiver in running(statuses=[503]):
        hook = add(alice, url=receiver.url).json()["id"]
        body = alice.post(f"{URL}{hook}/test/").json()
        assert body["delivered"] is False and body["status"] == 503
        assert body["detail"].startswith("Not delivered: HTTP 503: receiver says no.")
    hook = add(alice, url=dead_url()).json()["id"]
    body = alice.post(f"{URL}{hook}/test/").json()
    assert body["delivered"] is False and body["status"] is None and "connection refused" in body["detail"]


def test_the_list_names_an_unknown_parameter(alice: APIClient) -> None:
    response = alice.get(URL, {"colour": "red"})
    assert response.status_code == 400 and "colour" in response.json()["errors"]


def test_the_list_reads_in_a_fixed_number_of_queries(alice: APIClient, fleet: Fleet,
                                                     django_assert_max_num_queries: Any) -> None:
    for i in range(12):
        add(alice, url=f"https://example.org/{i}")
    with django_assert_max_num_queries(4):
        assert len(alice.get(URL).json()["results"]) == 12


def test_a_node_agent_token_is_refused(clients: dict[str, APIClient]) -> None:
    assert clients["agent"].get(URL).status_code == 401
    assert add(clients["agent"]).status_code == 401


def test_a_url_on_a_metadata_private_or_loopback_address_is_refused_naming_url(alice: APIClient,
                                                                                settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_NETWORKS": []}
    for url, words in [("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud instance-metadata "
                                                                    "address, which webhooks may not reach here"),
                       ("http://10.0.0.5/hook", "10.0.0.5 is a private address"),
                       ("http://127.0.0.1:9/hook", "127.0.0.1 is a loopback address")]:
        refused = add(alice, url=url)
        assert refused.status_code == 400, refused.content
        assert list(refused.json()["errors"]) == ["url"] and words in refused.json()["errors"]["url"][0]
    assert not NotificationHook.objects.exists()


def test_the_test_action_says_a_loopback_receiver_is_refused_once_its_network_is_no_longer_allowed(
        alice: APIClient, receiver: Receiver, settings: Any) -> None:
    hook = add(alice, url=receiver.url).json()["id"]
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_NETWORKS": []}

    body = alice.post(f"{URL}{hook}/test/").json()

    assert body["delivered"] is False and body["status"] is None and receiver.received == []
    assert "127.0.0.1 is a loopback address, which webhooks may not reach here" in body["detail"]
    (row,) = alice.get(f"{URL}{hook}/deliveries/").json()
    assert "QM_WEBHOOK_ALLOWED_NETWORKS" in row["last_error"]
