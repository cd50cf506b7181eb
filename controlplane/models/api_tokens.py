from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.db import models

from controlplane.services.token_digests import DIGEST_LENGTH


def issued_said(created: datetime) -> str:
    """When a token was issued, as the trail and the admin's pages say it: "2026-12-01 09:00 UTC"."""
    return f"{created.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


class ApiToken(models.Model):
    """A user's API token (`Authorization: Token <key>`), stored as the SHA-256 of its key: the
    key itself is shown once, in the answer that issued it (services/api_tokens.issue), and kept
    nowhere here, so a copy of the database opens nothing. One per sign-in (`POST auth/token/`,
    `qm login`): each client holds its own, and logging one out leaves the others alone."""

    digest = models.CharField(max_length=DIGEST_LENGTH, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    created = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["user", "created"], name="api_token_user_created")]
        verbose_name = "API token"  # Django's "Api token"
        verbose_name_plural = "API tokens"

    def __str__(self) -> str:
        """"token 12 of dora, issued 2026-12-01 09:00 UTC", as the events name it (a user's
        delete confirmation lists it so: until 7 Dec "API token 12 of 7", the owner's id). Never
        the digest: it is no key, but it names one."""
        return f"token {self.pk} of {self.user.get_username()}, issued {issued_said(self.created)}"
