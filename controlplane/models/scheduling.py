from __future__ import annotations

from django.db import models


class SchedulerLease(models.Model):
    """The leader lease: whoever holds the current epoch may commit a cycle.

    The epoch only grows (a database trigger refuses otherwise); every write a cycle makes is
    conditioned on the epoch it read still being current, so a deposed leader changes nothing.
    """

    name = models.CharField(max_length=32, unique=True, default="scheduler")
    holder = models.CharField(max_length=128, blank=True)
    epoch = models.BigIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    renewed_at = models.DateTimeField(null=True, blank=True)
    last_cycle_at = models.DateTimeField(null=True, blank=True)
    last_cycle_ms = models.FloatField(null=True, blank=True)
    cycles = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}: {self.holder or '(none)'} epoch {self.epoch}"
