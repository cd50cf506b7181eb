"""Password guessing against `POST auth/token/` is throttled per client address, and the client
cannot choose its address: an `X-Forwarded-For` header is believed only as far as
QM_TRUSTED_PROXIES says proxies in front of the web add it.

Until 6 Dec the counter was keyed by DRF's default client address, which is the whole
`X-Forwarded-For` header whenever one is sent: a guesser sending a different one with every
request met no limit at all (35 wrong passwords in a row answered 400, never 429).
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.controlplane.sign_in_addresses import fresh_address, sign_in_rates

pytestmark = pytest.mark.django_db
TOKEN = "/api/v1/auth/token/"


@pytest.fixture
def three_a_minute(settings: Any) -> None:
    sign_in_rates(settings, login="3/minute")


def _guess(client: APIClient, address: str, **headers: str) -> int:
    return client.post(TOKEN, {"username": "alice", "password": "wrong"}, format="json",
                       REMOTE_ADDR=address, **headers).status_code


def test_a_forwarded_for_header_does_not_give_a_guesser_a_new_counter(fleet, three_a_minute) -> None:
    client = APIClient()
    address = fresh_address()

    codes = [_guess(client, address, HTTP_X_FORWARDED_FOR=f"10.9.8.{i}") for i in range(1, 6)]

    assert codes == [400, 400, 400, 429, 429]


def test_the_limit_is_per_address(fleet, three_a_minute) -> None:
    client = APIClient()
    first, second = fresh_address(), fresh_address()

    assert [_guess(client, first) for _ in range(4)] == [400, 400, 400, 429]
    assert _guess(client, second) == 400  # another client is not locked out


def test_behind_a_trusted_proxy_the_address_it_saw_is_the_client(fleet, three_a_minute, settings) -> None:
    """QM_TRUSTED_PROXIES=1: the proxy appends the address it saw; what the client wrote before
    it is not believed, so rotating it does not help, and two clients behind the proxy are two."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    client = APIClient()
    proxy, one, other = fresh_address(), fresh_address(), fresh_address()

    codes = [_guess(client, proxy, HTTP_X_FORWARDED_FOR=f"10.0.0.{i}, {one}") for i in range(1, 5)]

    assert codes == [400, 400, 400, 429]
    assert _guess(client, proxy, HTTP_X_FORWARDED_FOR=other) == 400


def test_an_answer_that_carries_a_token_or_a_secret_is_never_cached(fleet, alice) -> None:
    """The token's answer, and a webhook's answers that show its secret, say `Cache-Control:
    no-store` (as RFC 6749 asks of a token's), so no browser or proxy keeps a copy (until 6 Dec
    they said nothing)."""
    token = APIClient().post(TOKEN, {"username": "alice", "password": "alice"}, format="json",
                             REMOTE_ADDR=fresh_address())
    hook = alice.post("/api/v1/notification-hooks/", {"url": "https://hooks.slack.com/services/T0/B0/x",
                                                      "events": ["failed"]}, format="json")
    rotated = alice.post(f"/api/v1/notification-hooks/{hook.json()['id']}/rotate-secret/")

    for answer in (token, hook, rotated):
        assert answer.status_code in (200, 201), answer.content[:300]
        assert answer["Cache-Control"] == "no-store"
    listed = alice.get("/api/v1/notification-hooks/")
    assert "secret" not in listed.json()["results"][0]
