"""A user's API token is stored as the SHA-256 of its key (services/api_tokens.py): the key is
in the answer that issued it and nowhere in the database, so a copy of the database (a dump, a
backup) holds nothing that opens the API. Until 6 Dec the keys sat in clear in DRF's authtoken
table, where node agents' tokens were already stored as digests."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from controlplane.models import ApiToken
from controlplane.services import api_tokens, token_digests
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
ME = "/api/v1/auth/me/"


def _me(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get(ME).status_code


def _dump() -> str:
    """Every column of the tokens' table, as a dump would write them."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {connection.ops.quote_name(ApiToken._meta.db_table)}")
        return repr(cursor.fetchall())


def test_the_key_is_nowhere_in_the_database(fleet: Any) -> None:
    key = APIClient().post("/api/v1/auth/token/", {"username": "alice", "password": "alice"},
                           format="json").json()["token"]

    assert _me(key) == 200
    assert key not in _dump() and key[4:] not in _dump()
    assert ApiToken.objects.get(user=fleet.users["owner"]).digest == token_digests.digest(key)


def test_what_a_dump_holds_opens_nothing(fleet: Any) -> None:
    key = f.token_for(fleet.users["admin"])
    stored = ApiToken.objects.get(user=fleet.users["admin"])

    assert _me(stored.digest) == 401
    assert _me(key) == 200


@pytest.mark.parametrize("presented", ["qmu_not-a-token", "0" * 40, "x"])
def test_a_wrong_token_is_401(fleet: Any, presented: str) -> None:
    f.token_for(fleet.users["owner"])
    assert _me(presented) == 401


def test_a_user_holds_at_most_max_per_user_tokens_and_the_oldest_ends(fleet: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(api_tokens, "MAX_PER_USER", 3)
    alice = fleet.users["owner"]
    keys = [api_tokens.issue(alice) for _ in range(4)]

    assert ApiToken.objects.filter(user=alice).count() == 3
    assert [_me(k) for k in keys] == [401, 200, 200, 200]
