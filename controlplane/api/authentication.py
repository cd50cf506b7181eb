"""Token authentication in one query: the token, its user and the user's memberships.

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
from rest_framework.authtoken.models import Token

from controlplane.models import Membership
from controlplane.services import access


@functools.cache
def _statement() -> tuple[str, tuple[str, ...]]:
    """The SQL, built once per process from the models' metadata, and the user's field names
    in the order the statement returns them."""
    user_model = get_user_model()
    quote = connection.ops.quote_name
    fields = tuple(f.attname for f in user_model._meta.concrete_fields)
    user_columns = ", ".join(f"u.{quote(f.column)}" for f in user_model._meta.concrete_fields)
    membership = Membership._meta
    sql = (
        f"SELECT t.{quote('created')}, {user_columns}, "
        f"(SELECT json_agg(json_build_array(m.{quote(membership.get_field('team').column)}, m.{quote('role')})) "
        f"FROM {quote(membership.db_table)} m WHERE m.{quote(membership.get_field('user').column)} = u.{quote(user_model._meta.pk.column)}) "
        f"FROM {quote(Token._meta.db_table)} t JOIN {quote(user_model._meta.db_table)} u "
        f"ON u.{quote(user_model._meta.pk.column)} = t.{quote(Token._meta.get_field('user').column)} "
        f"WHERE t.{quote(Token._meta.pk.column)} = %s"
    )
    return sql, fields


class TokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>`, as DRF's, with the same answers: 401 for an unknown token
    or an inactive user."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        if connection.vendor != "postgresql":  # the embedded demo's SQLite: DRF's own way
            user, token = super().authenticate_credentials(key)
            access.access_of(user)
            return user, token
        sql, fields = _statement()
        with connection.cursor() as cursor:
            cursor.execute(sql, [key])
            row = cursor.fetchone()
        if row is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        user = get_user_model().from_db(connection.alias, fields, row[1:-1])
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        access.remember_memberships(user, row[-1] or ())
        token = Token.from_db(connection.alias, ("key", "user_id", "created"), (key, user.pk, row[0]))
        token.user = user
        return user, token
