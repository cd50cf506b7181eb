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
    # Allocation generations are drawn from this counter while the row is locked by the leader,
    # so they are strictly increasing across all allocations and fences.
    generation_counter = models.BigIntegerField(default=0)

    class Meta:
        # The admin's "Scheduler policy" page (admin.SchedulerLeaseAdmin.policy_view) reads the
        # settings the cycle runs with, not this row: a permission of its own, which a group of
        # operators is given, where seeing who leads and its epoch is another.
        permissions = [("view_scheduler_policy", "Can view the scheduler policy")]

    def __str__(self) -> str:
        return f"{self.name}: {self.holder or '(none)'} epoch {self.epoch}"


class FleetSample(models.Model):
    """The fleet as one scheduling cycle saw it: what the dashboards plot over time.

    Written once per committed cycle (at most one per `SAMPLE_EVERY_S`), so charts read a small
    time series instead of scanning jobs and allocations per request.
    """

    at = models.DateTimeField(db_index=True)
    epoch = models.BigIntegerField()
    total_gpus = models.PositiveIntegerField()
    allocated_gpus = models.PositiveIntegerField()
    unavailable_gpus = models.PositiveIntegerField(default=0)
    borrowed_gpus = models.PositiveIntegerField(default=0)
    stranded_gpus = models.PositiveIntegerField()
    # Idle GPUs held for a waiting job's reservation or nomination (EASY backfill's drain): part
    # of the idle GPUs, and of `stranded_gpus` when on a partly used node.
    reserved_gpus = models.PositiveIntegerField(default=0)
    pending_jobs = models.PositiveIntegerField()
    running_jobs = models.PositiveIntegerField()
    pending_by_priority = models.JSONField(default=dict)
    pending_by_team = models.JSONField(default=dict)
    # {team: {priority_class: count}}: the overview's team filter stacks by class from this.
    pending_by_team_priority = models.JSONField(default=dict)
    pending_by_reason = models.JSONField(default=dict)
    largest_free_block_by_pool = models.JSONField(default=dict)
    dominant_share_by_team = models.JSONField(default=dict)
    mean_slowdown = models.FloatField(default=0.0)
    oldest_feasible_pending_s = models.FloatField(null=True, blank=True)
    cycle_ms = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"fleet at {self.at:%H:%M:%S}: {self.allocated_gpus}/{self.total_gpus} allocated"
