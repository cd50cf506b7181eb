"""Maintenance windows (Slurm's `scontrol create reservation flags=maint`): a set of nodes
taken out of service from `start_at` to `end_at`. The scheduler starts a job on those nodes
only if its run, from its start to its runtime limit, ends before the window begins (or it
starts after the window has ended), so the nodes are empty when maintenance begins. Running
jobs are never stopped for a window: the API names those that will still hold GPUs then.

A window is never deleted: cancelling it keeps it, with who cancelled it and when, so the
fleet's maintenance history stays readable (services/maintenance.py writes every change)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import F, Q


class MaintenanceWindowState(models.TextChoices):
    """Where a window stands at a moment (computed, not stored)."""

    UPCOMING = "upcoming", "Upcoming"
    ACTIVE = "active", "Active"
    ENDED = "ended", "Ended"
    CANCELLED = "cancelled", "Cancelled"


class MaintenanceWindow(models.Model):
    nodes = models.ManyToManyField("controlplane.Node", related_name="maintenance_windows")
    start_at = models.DateTimeField()
    end_at = models.DateTimeField()
    reason = models.CharField(max_length=200, help_text="What the maintenance is, e.g. firmware upgrade.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField()
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")

    class Meta:
        ordering = ["start_at", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(end_at__gt=F("start_at")), name="maintenance_window_ends_after_start"),
        ]
        indexes = [
            # The snapshot reads the windows not ended and not cancelled, every cycle.
            models.Index(fields=["end_at"], condition=Q(cancelled_at__isnull=True),
                         name="maintenance_window_open_end"),
        ]

    def __str__(self) -> str:
        return f"maintenance window {self.pk} ({self.reason})"

    def state_at(self, now: datetime) -> MaintenanceWindowState:
        if self.cancelled_at is not None:
            return MaintenanceWindowState.CANCELLED
        if self.end_at <= now:
            return MaintenanceWindowState.ENDED
        if self.start_at <= now:
            return MaintenanceWindowState.ACTIVE
        return MaintenanceWindowState.UPCOMING
