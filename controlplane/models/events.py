from __future__ import annotations

from django.db import models

from controlplane.choices import EventKind


class Event(models.Model):
    """The audit trail: every state change of a job, allocation, node or quota — who, when, why."""

    created_at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    actor = models.CharField(max_length=128, help_text="user:alice, scheduler@epoch:4, agent:node-03 …")
    reason = models.CharField(max_length=64, blank=True, help_text="PascalCase reason code")
    message = models.CharField(max_length=1000, blank=True)
    job = models.ForeignKey("controlplane.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    allocation = models.ForeignKey(
        "controlplane.Allocation", null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    # A deleted node or team leaves its events in the trail (their messages name it).
    node = models.ForeignKey("controlplane.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    team = models.ForeignKey("controlplane.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    epoch = models.BigIntegerField(null=True, blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["job", "created_at"]), models.Index(fields=["kind", "created_at"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.kind} by {self.actor}: {self.message}"
