"""A user's API token ends with their password: a changed password (the user's own, or an admin
resetting it on the admin's password form, or `manage.py changepassword`) revokes it, as Django
already signs the user's other browser sessions out. Until 6 Dec a token stolen with the old
password kept working after the reset meant to lock its thief out.

A save that does not change the password (a rename, the sign-in's last_login, a stored hash
upgraded to the current hasher at sign-in) leaves the token alone: `qm` stays logged in."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.hashers import make_password
from django.test import Client
from rest_framework.test import APIClient

from controlplane.models import ApiToken
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
ME = "/api/v1/auth/me/"


def _with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_changed_password_revokes_the_users_tokens(fleet) -> None:
    alice = fleet.users["owner"]
    key, laptop = f.token_for(alice), f.token_for(alice)
    assert _with_token(key).get(ME).status_code == 200

    alice.set_password("a new one")
    alice.save()

    assert _with_token(key).get(ME).status_code == 401
    assert _with_token(laptop).get(ME).status_code == 401
    assert not ApiToken.objects.filter(user=alice).exists()
    assert _with_token(f.token_for(fleet.users["other_team"])).get(ME).status_code == 200  # others keep theirs


def test_an_admin_resetting_a_password_on_the_admin_form_revokes_the_token(fleet) -> None:
    alice = fleet.users["owner"]
    key = f.token_for(alice)
    admin = Client()
    admin.force_login(f.make_user("boss", superuser=True))

    answer = admin.post(f"/admin/auth/user/{alice.pk}/password/",
                        {"password1": "Reset-by-the-admin-1", "password2": "Reset-by-the-admin-1"})

    assert answer.status_code == 302, answer.content[:2000]
    assert _with_token(key).get(ME).status_code == 401
    signed_in = APIClient().post("/api/v1/auth/token/", {"username": "alice", "password": "Reset-by-the-admin-1"},
                                 format="json")
    assert signed_in.status_code == 200 and signed_in.json()["token"] != key  # a new token


def test_a_save_that_keeps_the_password_keeps_the_token(fleet) -> None:
    alice = fleet.users["owner"]
    key = f.token_for(alice)

    alice.first_name = "Alice"
    alice.save()

    assert _with_token(key).get(ME).status_code == 200


def test_a_sign_in_that_upgrades_the_stored_hash_keeps_the_token(fleet, settings: Any) -> None:
    """Django rewrites a hash made by an older hasher at sign-in; that is no password change."""
    alice = fleet.users["owner"]
    key = f.token_for(alice)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.ScryptPasswordHasher",
                                 "django.contrib.auth.hashers.MD5PasswordHasher"]
    alice.password = make_password("alice", hasher="md5")
    alice.save(update_fields=["password"])

    signed_in = APIClient().post("/api/v1/auth/token/", {"username": "alice", "password": "alice"}, format="json")

    alice.refresh_from_db()
    assert alice.password.startswith("scrypt$")  # upgraded
    assert signed_in.status_code == 200 and signed_in.json()["token"] != key  # a sign-in's own token
    assert _with_token(key).get(ME).status_code == 200  # and the one held before still works


def test_a_password_made_unusable_revokes_the_token(fleet) -> None:
    """The admin's "password-based authentication: disabled" for a user: their token ends too."""
    alice = fleet.users["owner"]
    key = f.token_for(alice)

    alice.set_unusable_password()
    alice.save()

    assert _with_token(key).get(ME).status_code == 401
