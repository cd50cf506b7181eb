"""The sign-in forms (the pages' /accounts/login/ and the admin's /admin/login/) are throttled
per client address as `POST /api/v1/auth/token/` is, by the same counter: guessing passwords
through a form is no cheaper than through the API. Until 6 Dec the forms had no limit at all
(40 wrong passwords in a row each answered 200 with the form again)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.controlplane.sign_in_addresses import fresh_address, sign_in_rates

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_a_minute(settings: Any) -> None:
    sign_in_rates(settings, login="3/minute")


@pytest.mark.parametrize(("form", "username"), [("/accounts/login/", "alice"), ("/admin/login/", "admin")])
def test_a_sign_in_form_refuses_guesses_beyond_the_limit(demo, three_a_minute, form, username) -> None:
    client = Client()
    address = fresh_address()

    codes = [client.post(form, {"username": username, "password": "wrong"}, REMOTE_ADDR=address,
                         HTTP_X_FORWARDED_FOR=f"10.1.1.{i}").status_code for i in range(4)]

    assert codes == [200, 200, 200, 429]
    refused = client.post(form, {"username": username, "password": username}, REMOTE_ADDR=address)
    assert refused.status_code == 429  # the right password too, until the window ends
    assert 0 < int(refused["Retry-After"]) <= 60
    assert "Too many sign-in attempts from your address" in refused.content.decode()
    assert "_auth_user_id" not in client.session  # not signed in
    assert client.get(form, REMOTE_ADDR=address).status_code == 200  # the form itself still opens
    other = Client()
    signed_in = other.post(form, {"username": username, "password": username}, REMOTE_ADDR=fresh_address())
    assert signed_in.status_code == 302  # another address signs in


def test_the_forms_and_the_api_share_one_counter(demo, three_a_minute) -> None:
    client = Client()
    address = fresh_address()
    for _ in range(3):
        client.post("/api/v1/auth/token/", {"username": "alice", "password": "wrong"},
                    content_type="application/json", REMOTE_ADDR=address)

    assert client.post("/accounts/login/", {"username": "alice", "password": "alice"},
                       REMOTE_ADDR=address).status_code == 429
