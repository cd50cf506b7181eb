"""`POST auth/token/` with a wrong password or an unknown user: a 400 on `password` in the same
words either way (docs/api.md, *Authentication*), and no token issued; the right password
gets a new token of the user's, whose key the database does not hold."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.models import ApiToken
from controlplane.services import token_digests

pytestmark = pytest.mark.django_db

TOKEN = "/api/v1/auth/token/"


@pytest.mark.parametrize("username,password", [("alice", "wrong"), ("nobody", "alice")])
def test_a_wrong_password_or_an_unknown_user_is_one_400_on_password(fleet: Any, username: str, password: str) -> None:
    r = APIClient().post(TOKEN, {"username": username, "password": password}, format="json")

    assert r.status_code == 400
    assert r.json()["errors"] == {"password": ["Wrong username or password."]}
    assert not ApiToken.objects.exists()


def test_the_right_password_gets_a_new_token_stored_as_its_digest(fleet: Any) -> None:
    r = APIClient().post(TOKEN, {"username": "alice", "password": "alice"}, format="json")

    assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
    key = r.json()["token"]
    assert r.json() == {"token": key, "username": "alice"} and key.startswith("qmu_") and len(key) > 40
    stored = ApiToken.objects.get(user=fleet.users["owner"])
    assert stored.digest == token_digests.digest(key) and stored.digest != key

    again = APIClient().post(TOKEN, {"username": "alice", "password": "alice"}, format="json").json()["token"]
    assert again != key and ApiToken.objects.filter(user=fleet.users["owner"]).count() == 2  # one per sign-in
