"""A user's API tokens: issued at sign-in, and when they end.

Whoever holds a token acts as its user through the API. A token is issued by `POST auth/token/`
(`qm login`), one per sign-in, so each client holds its own; its key is in that answer and
nowhere else: the database keeps its SHA-256 (models/api_tokens.ApiToken, services/
token_digests.py, as node agents' tokens), and the admin has no Tokens page (admin.py). A user
holds at most MAX_PER_USER at once: a sign-in beyond that ends their oldest (a script that signs
in at every run would otherwise pile them up).

It ends:

- when its client logs out (`POST auth/logout/`, `qm logout`: that token; with a browser
  session: all of the user's, `revoke_all`);
- when the password changes (`password_changed`: the user's own change, an admin's reset on the
  admin's password form, `manage.py changepassword`), as Django already signs the user's other
  browser sessions out; a stored hash upgraded at sign-in is no change (Django says so);
- when an admin revokes the tokens of users they pick (`revoke`: the users list's action),
  recorded as a config.changed event naming the user, never a key;
- when the user is deleted (ApiToken.user is CASCADE: the admin's *Delete*, "Delete selected
  users", a shell), each token recorded as a config.changed event `ApiTokenOwnerDeleted` by the
  deletion's actor, in its transaction (`owner_deleted`, called by services/config_audit.py),
  naming the token by its id and when it was issued, never its key nor its digest.

A deactivated user's tokens are refused at once (api/authentication.py), without being deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import structlog
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import ApiToken, Event
from controlplane.models.api_tokens import issued_said
from controlplane.models.events import actor_name
from controlplane.services import token_digests
from controlplane.services.transitions import event_fields

log = structlog.get_logger(__name__)

#: What a user's token starts with (a node agent's: `qma_`), so a leaked one is recognisable.
#: Tokens issued before 6 Dec 2026 are 40 hex digits with no prefix, and work as well.
TOKEN_PREFIX = "qmu_"
#: The most tokens a user holds at once; a sign-in beyond it ends their oldest.
MAX_PER_USER = 50


def issue(user: Any) -> str:
    """A new token for `user`: its key, which is stored nowhere (only its digest is). The user's
    oldest tokens beyond MAX_PER_USER end in the same transaction."""
    key = token_digests.new_token(TOKEN_PREFIX)
    with transaction.atomic():
        ApiToken.objects.create(digest=token_digests.digest(key), user=user, created=timezone.now())
        stale = list(ApiToken.objects.filter(user=user).order_by("-created", "-id")
                     .values_list("id", flat=True)[MAX_PER_USER:])
        if stale:
            ApiToken.objects.filter(id__in=stale).delete()
            log.info("api tokens ended: too many", user=user.get_username(), ended=len(stale), kept=MAX_PER_USER)
    return key


def revoke_token(token: ApiToken) -> None:
    """End the one token a request was sent with (a client's logout)."""
    ApiToken.objects.filter(pk=token.pk).delete()


def revoke_all(user: Any) -> int:
    """End every token of `user`: how many there were."""
    revoked, _ = ApiToken.objects.filter(user=user).delete()
    return revoked


def password_changed(user: Any) -> int:
    """The user's password was just set: none of their API tokens opens anything any more."""
    revoked = revoke_all(user)
    if revoked:
        log.info("api tokens revoked: password changed", user=user.get_username(), tokens=revoked)
    return revoked


def revoke(users: Sequence[Any], actor: str) -> tuple[list[str], list[str]]:
    """Delete these users' API tokens: (the names whose tokens went, the names that had none).
    One config.changed event per user whose tokens were revoked, in the same transaction."""
    with transaction.atomic():
        held = ApiToken.objects.filter(user__in=[u.pk for u in users])
        holders = set(held.values_list("user_id", flat=True))
        held.delete()
        revoked = sorted(u.get_username() for u in users if u.pk in holders)
        Event.objects.bulk_create(Event(**event_fields(
            EventKind.CONFIG_CHANGED, actor, reason="ApiTokenRevoked", message=f"User {name}'s API tokens revoked",
            data={"model": "user", "user": name},
        )) for name in revoked)
    return revoked, sorted(u.get_username() for u in users if u.pk not in holders)


def held_by(users: Sequence[Any]) -> dict[Any, list[tuple[int, datetime]]]:
    """Each of ``users``' tokens, oldest first, by user pk: (id, issued). One query."""
    held: dict[Any, list[tuple[int, datetime]]] = {user.pk: [] for user in users}
    for pk, user_id, created in (ApiToken.objects.filter(user_id__in=list(held)).order_by("user_id", "created", "id")
                                 .values_list("id", "user_id", "created")):
        held[user_id].append((pk, created))
    return held


def owner_deleted(users: Sequence[Any], actor: str, why: str, data: dict[str, Any] | None) -> dict[Any, list[Event]]:
    """Before ``users`` are deleted, with their tokens: one `ApiTokenOwnerDeleted` event (the kind
    an admin's `revoke` records) per token, by the deletion's ``actor``: "API token 12 of dora
    (issued 2026-12-01 09:00 UTC) revoked: its owner dora was deleted by boss", data the token
    as it was (id, user, issued), never its key nor its digest. The events, not yet written, by
    user pk; one query, whatever the number of users and tokens."""
    names = {user.pk: user.get_username() for user in users}
    who, at = actor_name(actor), timezone.now()
    return {pk: [Event(**event_fields(
        EventKind.CONFIG_CHANGED, actor, reason="ApiTokenOwnerDeleted", at=at,
        message=f"API token {token} of {names[pk]} (issued {issued_said(created)}) revoked: its owner {names[pk]} "
                f"was deleted by {who}{why}",
        data={"model": "apitoken", "user": names[pk], "after": None,
              "before": {"id": token, "user": names[pk], "created": created.astimezone(UTC).isoformat()
                         .replace("+00:00", "Z")}, **(data or {})})) for token, created in tokens]
        for pk, tokens in held_by(users).items()}
