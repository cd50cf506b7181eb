"""`POST auth/token/` with a wrong password or an unknown user: a 400 on `password` in the same
words either way (docs/api.md, *Authentication*), and no token issued; the right password
gets the user's one token."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

TOKEN = "/api/v1/auth/token/"


@pytest.mark.parametrize("username,password", [("alice", "wrong"), ("nobody", "alice")])
def test_a_wrong_password_or_an_unknown_user_is_one_400_on_password(fleet: Any, username: str, password: str) -> None:
    r = APIClient().post(TOKEN, {"username": username, "password": password}, format="json")

    assert r.status_code == 400
    assert r.json()["errors"] == {"password": ["Wrong username or password."]}
    assert not Token.objects.exists()


def test_the_right_password_gets_the_users_token(fleet: Any) -> None:
    r = APIClient().post(TOKEN, {"username": "alice", "password": "alice"}, format="json")

    assert r.status_code == 200
    assert r.json() == {"token": Token.objects.get(user=fleet.users["owner"]).key, "username": "alice"}
