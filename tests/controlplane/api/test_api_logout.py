"""`POST auth/logout/` revokes the token it was called with on the server: the next request
with it is 401. Each sign-in has its own token, so the user's other clients stay logged in.

Found by QA: `qm logout` only forgot the token locally; a copy of it (a shell history, a CI
secret, another laptop) kept working until an admin deleted it by hand."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.models import ApiToken
from controlplane.services import token_digests
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import AGENT_TOKEN

pytestmark = pytest.mark.django_db

LOGOUT = "/api/v1/auth/logout/"
ME = "/api/v1/auth/me/"


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_logout_revokes_the_token_it_was_called_with(fleet: Any) -> None:
    alice = fleet.users["owner"]
    token = f.token_for(alice)
    client = _client(token)
    assert client.get(ME).status_code == 200

    r = client.post(LOGOUT)

    assert r.status_code == 204, getattr(r, "data", r.content)
    assert not ApiToken.objects.filter(digest=token_digests.digest(token)).exists()
    after = client.get(ME)
    assert after.status_code == 401 and after.data["code"] == "authentication_failed"
    again = client.post(LOGOUT)
    assert again.status_code == 401


def test_logout_leaves_other_users_tokens_alone(fleet: Any) -> None:
    alice_token = f.token_for(fleet.users["owner"])
    bob_token = f.token_for(fleet.users["other_team"])

    assert _client(alice_token).post(LOGOUT).status_code == 204

    assert _client(bob_token).get(ME).status_code == 200
    assert ApiToken.objects.filter(digest=token_digests.digest(bob_token)).exists()


def test_logging_out_one_client_leaves_the_users_other_clients_logged_in(fleet: Any) -> None:
    anonymous = APIClient()
    first = anonymous.post("/api/v1/auth/token/", {"username": "alice", "password": "alice"}, format="json").data["token"]
    second = anonymous.post("/api/v1/auth/token/", {"username": "alice", "password": "alice"}, format="json").data["token"]
    assert first != second  # one token per sign-in: two laptops each hold their own

    assert _client(first).post(LOGOUT).status_code == 204

    assert _client(first).get(ME).status_code == 401
    assert _client(second).get(ME).status_code == 200


def test_logout_without_credentials_or_with_an_agent_token_is_401(fleet: Any) -> None:
    assert APIClient().post(LOGOUT).status_code == 401
    assert _client(AGENT_TOKEN).post(LOGOUT).status_code == 401
    assert _client("0" * 40).post(LOGOUT).status_code == 401


def test_logout_is_post_only(fleet: Any) -> None:
    client = _client(f.token_for(fleet.users["owner"]))
    assert client.get(LOGOUT).status_code == 405
    assert client.get(ME).status_code == 200


def test_logout_with_a_session_revokes_the_users_api_tokens_and_keeps_the_session(fleet: Any) -> None:
    alice = fleet.users["owner"]
    token, laptop = f.token_for(alice), f.token_for(alice)
    browser = APIClient()
    browser.force_login(alice)

    assert browser.post(LOGOUT).status_code == 204

    assert _client(token).get(ME).status_code == 401
    assert _client(laptop).get(ME).status_code == 401
    assert browser.get(ME).status_code == 200
