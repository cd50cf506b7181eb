"""Token authentication in one query: the token, its user and the user's memberships.

`Authorization: Token <key>`, as DRF's TokenAuthentication reads it. The key is never stored:
the token is found by the SHA-256 of the key presented (models/api_tokens.ApiToken,
services/token_digests.py), so neither a digest read from the database nor anything else but
the key opens the API.

DRF's TokenAuthentication reads the token with its user (one ORM query, compiled on every
request), and the role checks then read the memberships (a second one). Every API request pays
for both, so here one plain SQL statement reads all three and the memberships ride along on the
user object (`access.remember_memberships`): the permission classes and the views' scoping then
ask no more. Nothing is cached between requests: a deleted token, a deactivated user or a
changed membership takes effect on the very next request.
"""

from __future__ import annotations

import functools
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework import authentication, exceptions

from controlplane.models import ApiToken, Membership
from controlplane.services import access, token_digests


@functools.cache
def _statement() -> tuple[str, tuple[str, ...]]:
    """The SQL, built once per process from the models' metadata, and the user's field names
    in the order the statement returns them."""
    user_model = get_user_model()
    quote = connection.ops.quote_name
    fields = tuple(f.attname for f in user_model._meta.concrete_fields)
    user_columns = ", ".join(f"u.{quote(f.column)}" for f in user_model._meta.concrete_fields)
    membership = Membership._meta
    token = ApiToken._meta
    sql = (
        f"SELECT t.{quote(token.pk.column)}, t.{quote('created')}, {user_columns}, "
        f"(SELECT json_agg(json_build_array(m.{quote(membership.get_field('team').column)}, m.{quote('role')})) "
        f"FROM {quote(membership.db_table)} m WHERE m.{quote(membership.get_field('user').column)} = u.{quote(user_model._meta.pk.column)}) "
        f"FROM {quote(token.db_table)} t JOIN {quote(user_model._meta.db_table)} u "
        f"ON u.{quote(user_model._meta.pk.column)} = t.{quote(token.get_field('user').column)} "
        f"WHERE t.{quote(token.get_field('digest').column)} = %s"
    )
    return sql, fields


class TokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>`, as DRF's, with the same answers: 401 for an unknown token
    or an inactive user. `request.auth` is the ApiToken (its digest, never its key)."""

    model = ApiToken

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        digest = token_digests.digest(key)
        if connection.vendor != "postgresql":  # the embedded demo's SQLite: the ORM's way
            token = ApiToken.objects.select_related("user").filter(digest=digest).first()
            if token is None:
                raise exceptions.AuthenticationFailed("Invalid token.")
            if not token.user.is_active:
                raise exceptions.AuthenticationFailed("User inactive or deleted.")
            access.access_of(token.user)
            return token.user, token
        sql, fields = _statement()
        with connection.cursor() as cursor:
            cursor.execute(sql, [digest])
            row = cursor.fetchone()
        if row is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        user = get_user_model().from_db(connection.alias, fields, row[2:-1])
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        access.remember_memberships(user, row[-1] or ())
        token = ApiToken.from_db(connection.alias, ("id", "digest", "user_id", "created"), (row[0], digest, user.pk, row[1]))
        token.user = user
        return user, token
