from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class NotificationHook(models.Model):
    """A user's webhook: job events POSTed as JSON (with a Slack-compatible `text`) to `url`.

    Without a team, the user's own jobs (those they submitted); with one, every job of that team
    (the user must belong to it, or be an admin). `events` lists NotifyOn values. Deliveries go
    through the outbox (NotificationDelivery), written in the transaction that records the
    job's event, so a receiver that is down loses nothing (services/notifications.py).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_hooks")
    team = models.ForeignKey(
        "controlplane.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="notification_hooks"
    )
    url = models.URLField(max_length=500)
    events = models.JSONField(default=list, help_text="NotifyOn values: started, succeeded, failed, ...")
    secret = models.CharField(max_length=128, help_text="Key of the X-Quartermaster-Signature HMAC-SHA256.")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField()
    last_delivery_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=300, blank=True, help_text="The receiver's last answer, in words.")
    # Failed attempts in a row (any of the hook's deliveries); a success resets it. At
    # HOOK_FAILING_AFTER the hook reads as failing (its deliveries keep being retried).
    consecutive_failures = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"hook {self.pk} of {self.user} → {self.url}"


class NotificationDelivery(models.Model):
    """The outbox: one POST owed to one hook. Due while `next_attempt_at` is set; delivered
    when `delivered_at` is; given up (after the last attempt) when neither is."""

    hook = models.ForeignKey(NotificationHook, on_delete=models.CASCADE, related_name="deliveries",
                             db_index=False)  # led by the (hook, -id) index below
    job = models.ForeignKey("controlplane.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    event = models.CharField(max_length=16, help_text="NotifyOn value, or 'test'.")
    payload = models.JSONField()
    created_at = models.DateTimeField()
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveIntegerField(null=True, blank=True, help_text="The receiver's last HTTP status.")
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The sender's scan: due rows only, oldest first (delivered rows leave the index).
            models.Index(fields=["next_attempt_at"], condition=Q(next_attempt_at__isnull=False),
                         name="notification_delivery_due"),
            models.Index(fields=["hook", "-id"], name="notification_delivery_hook"),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} ({self.event}) to hook {self.hook_id}"
