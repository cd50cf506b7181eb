"""When a user's API token ends, besides `POST auth/logout/` (`qm logout`).

A user has one token (DRF authtoken), and whoever holds it acts as the user through the API.
It is never shown after the sign-in that issued it (the admin has no Tokens page: admin.py), so
what a holder can lose is ended here:

- a changed password revokes it (`password_changed`: the user's own change, an admin's reset on
  the admin's password form, `manage.py changepassword`), as Django already signs the user's
  other browser sessions out; a stored hash upgraded at sign-in is no change (Django says so);
- an admin revokes the tokens of users they pick (`revoke`: the users list's action), recorded
  as a config.changed event naming the user, never the key.

A deactivated user's token is refused at once (api/authentication.py), without being deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog
from django.db import transaction
from rest_framework.authtoken.models import Token

from controlplane.choices import EventKind
from controlplane.models import Event
from controlplane.services.transitions import event_fields

log = structlog.get_logger(__name__)


def password_changed(user: Any) -> int:
    """The user's password was just set: their API token no longer opens anything."""
    revoked, _ = Token.objects.filter(user=user).delete()
    if revoked:
        log.info("api token revoked: password changed", user=user.get_username())
    return revoked


def revoke(users: Sequence[Any], actor: str) -> tuple[list[str], list[str]]:
    """Delete these users' API tokens: (the names whose token went, the names that had none).
    One config.changed event per token revoked, in the same transaction."""
    with transaction.atomic():
        holders = set(Token.objects.filter(user__in=[u.pk for u in users]).values_list("user_id", flat=True))
        Token.objects.filter(user_id__in=holders).delete()
        revoked = sorted(u.get_username() for u in users if u.pk in holders)
        Event.objects.bulk_create(Event(**event_fields(
            EventKind.CONFIG_CHANGED, actor, reason="ApiTokenRevoked", message=f"User {name}'s API token revoked",
            data={"model": "user", "user": name},
        )) for name in revoked)
    return revoked, sorted(u.get_username() for u in users if u.pk not in holders)
