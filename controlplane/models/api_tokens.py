from __future__ import annotations

from django.conf import settings
from django.db import models

from controlplane.services.token_digests import DIGEST_LENGTH


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

    def __str__(self) -> str:
        # never the digest: it is no key, but it names one
        return f"API token {self.pk} of {self.user_id}"
