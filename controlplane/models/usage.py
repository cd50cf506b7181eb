"""Accounting rollups: what the fleet held, did and cost, pre-aggregated per minute, hour and day.

Raw `UsageSample` rows from the agents are folded into these tables by the accounting task
(services/accounting.py); showback, dashboards and /metrics read only these, never raw samples.

- `UsageRollup`: one row per (bucket, start, job, GPU type, capacity tier, borrowed). Team,
  project and priority class are copied onto the row so a showback query is a single GROUP BY
  over one table. Hour rows are the sum of their minute rows and day rows the sum of their hour
  rows, column by column, so every granularity tells the same story.
- `GroupRollup`: the same measures without the job: per (day or calendar month, team, project,
  priority class, GPU type, capacity tier, borrowed), the sums of the jobs' day rows, so a
  showback over months reads a few thousand rows instead of every job's every day.
- `FleetRollup`: the fleet's capacity per (bucket, start, GPU type, capacity tier), with the
  same usage columns summed over jobs: `__idle__` = capacity − allocated.
- `QuotaRollup`: each team's guarantee per GPU type and how much of it sat idle (neither used
  nor lent): the quota-hoarding figure.
- `JobProgressRate`: each job's fault-free progress rate, the yardstick of the productive tier.
- `AccountingCursor`: how far the rollups reach, and what the task has already folded in.

GPU-seconds are exact decimals (microsecond resolution) and money is a decimal with fifteen places;
both are summed by PostgreSQL's exact `numeric`, and rounded only when shown.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.expressions import CombinedExpression

from controlplane.choices import CapacityTier

GPU_SECONDS = {"max_digits": 20, "decimal_places": 6, "default": 0}
USD = {"max_digits": 30, "decimal_places": 15, "default": 0}


class RollupBucket(models.IntegerChoices):
    """A rollup granularity; the value is its length in seconds (a calendar month's rows start
    on the 1st, UTC; its value is the mean Gregorian month and serves only as a label)."""

    MINUTE = 60, "Minute"
    HOUR = 3600, "Hour"
    DAY = 86400, "Day"
    MONTH = 2_629_746, "Calendar month"


class ProgressUnit(models.TextChoices):
    """What a job's progress is counted in: training steps, or useful tokens when it reports
    no steps (serving)."""

    STEPS = "steps", "Steps"
    USEFUL_TOKENS = "useful_tokens", "Useful tokens"


class UsageColumns(models.Model):
    """The measures every usage rollup carries (see docs/accounting.md for the definitions)."""

    allocated_gpu_seconds = models.DecimalField(**GPU_SECONDS, help_text="Held by a live allocation.")
    active_gpu_seconds = models.DecimalField(**GPU_SECONDS, help_text="Allocated × reported device activity.")
    productive_gpu_seconds = models.DecimalField(
        **GPU_SECONDS, help_text="Retained progress at the job's fault-free rate, at most active."
    )
    reported_gpu_seconds = models.DecimalField(**GPU_SECONDS, help_text="Allocated time covered by agent samples.")
    lost_gpu_seconds = models.DecimalField(
        **GPU_SECONDS, help_text="Allocated time whose work an eviction threw away (preemption waste)."
    )
    steps = models.FloatField(default=0.0, help_text="Steps computed, replays included.")
    useful_tokens = models.FloatField(default=0.0, help_text="Tokens computed, replays included.")
    retained_steps = models.FloatField(default=0.0, help_text="Steps that survived (not lost to an eviction or failure).")
    retained_tokens = models.FloatField(default=0.0, help_text="Useful tokens that survived.")
    cost_usd = models.DecimalField(**USD, help_text="Allocated GPU-seconds at the price in force.")
    lost_cost_usd = models.DecimalField(**USD, help_text="Lost GPU-seconds at the price in force.")

    class Meta:
        abstract = True


class TokenCostColumns(models.Model):
    """What the jobs that reported useful tokens held and cost: the numerator of $ per useful
    token (docs/accounting.md, "$ per useful token"). A job that has reported any useful tokens
    counts whole, from its first minute (start-up, stalls and lost work are what its tokens
    cost); a job that reported none (evaluation counted in steps, a serving job that reported
    nothing) is in cost_usd only. Jobs' and groups' rows carry them; the fleet's do not."""

    token_gpu_seconds = models.DecimalField(
        **GPU_SECONDS, help_text="Allocated GPU-seconds of jobs that reported useful tokens.")
    token_cost_usd = models.DecimalField(**USD, help_text="What those GPU-seconds cost at the price in force.")

    class Meta:
        abstract = True


#: Summed like the usage columns, for jobs' and groups' rows only.
TOKEN_SUM_FIELDS = ("token_gpu_seconds", "token_cost_usd")


USAGE_SUM_FIELDS = (
    "allocated_gpu_seconds",
    "active_gpu_seconds",
    "productive_gpu_seconds",
    "reported_gpu_seconds",
    "lost_gpu_seconds",
    "steps",
    "useful_tokens",
    "retained_steps",
    "retained_tokens",
    "cost_usd",
    "lost_cost_usd",
)


def _tiers_ordered(prefix: str) -> list[models.CheckConstraint]:
    """allocated ≥ active ≥ productive ≥ 0, and lost within allocated, enforced by the database."""
    return [
        models.CheckConstraint(
            condition=Q(allocated_gpu_seconds__gte=F("active_gpu_seconds"))
            & Q(active_gpu_seconds__gte=F("productive_gpu_seconds"))
            & Q(productive_gpu_seconds__gte=0),
            name=f"{prefix}_tiers_ordered",
        ),
        models.CheckConstraint(
            condition=Q(lost_gpu_seconds__gte=0) & Q(lost_gpu_seconds__lte=F("allocated_gpu_seconds")),
            name=f"{prefix}_lost_within_allocated",
        ),
    ]


class UsageRollup(UsageColumns, TokenCostColumns):
    """What one job did on one kind of capacity over one minute, hour or day."""

    bucket = models.IntegerField(choices=RollupBucket.choices)
    start = models.DateTimeField()
    job = models.ForeignKey("controlplane.Job", on_delete=models.CASCADE, related_name="usage_rollups")
    team = models.ForeignKey("controlplane.Team", on_delete=models.PROTECT, related_name="usage_rollups")
    project = models.ForeignKey(
        "controlplane.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_rollups"
    )
    priority_class = models.ForeignKey(
        "controlplane.PriorityClass", on_delete=models.PROTECT, related_name="usage_rollups"
    )
    gpu_type = models.ForeignKey("controlplane.GpuType", on_delete=models.PROTECT, related_name="usage_rollups")
    capacity_tier = models.CharField(max_length=16, choices=CapacityTier.choices)
    borrowed = models.BooleanField(default=False)

    class Meta:
        ordering = ["bucket", "start", "job_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["bucket", "start", "job", "gpu_type", "capacity_tier", "borrowed"],
                name="usage_rollup_unique_cell",
            ),
            *_tiers_ordered("usage_rollup"),
        ]
        indexes = [
            # A member's showback reads one team's rows over a window.
            models.Index(fields=["team", "bucket", "start"], name="usage_rollup_team_window"),
            # A job's cost so far, and the task's per-job recomputations.
            models.Index(fields=["job", "bucket", "start"], name="usage_rollup_job_window"),
        ]

    # Each job's day rows' allocated GPU-seconds are also kept summed, one row a job, in
    # controlplane_job_day_gpu_seconds by triggers on this table (PostgreSQL; migration 0024):
    # what the history's totals read (services/job_history.history_totals).

    def __str__(self) -> str:
        return f"job {self.job_id} {self.get_bucket_display()} {self.start:%Y-%m-%d %H:%M}: ${self.cost_usd}"


class GroupRollup(UsageColumns, TokenCostColumns):
    """All jobs of one team, project and priority class on one kind of capacity, per day or
    calendar month: what long showback windows read."""

    bucket = models.IntegerField(choices=RollupBucket.choices)
    start = models.DateTimeField()
    team = models.ForeignKey("controlplane.Team", on_delete=models.PROTECT, related_name="group_rollups")
    project = models.ForeignKey(
        "controlplane.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="group_rollups"
    )
    priority_class = models.ForeignKey(
        "controlplane.PriorityClass", on_delete=models.PROTECT, related_name="group_rollups"
    )
    gpu_type = models.ForeignKey("controlplane.GpuType", on_delete=models.PROTECT, related_name="group_rollups")
    capacity_tier = models.CharField(max_length=16, choices=CapacityTier.choices)
    borrowed = models.BooleanField(default=False)

    class Meta:
        ordering = ["bucket", "start", "team_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["bucket", "start", "team", "project", "priority_class", "gpu_type", "capacity_tier",
                        "borrowed"],
                name="group_rollup_unique_cell", nulls_distinct=False,
            ),
            models.CheckConstraint(condition=Q(bucket__in=[86400, 2_629_746]), name="group_rollup_days_or_months"),
            *_tiers_ordered("group_rollup"),
        ]
        indexes = [models.Index(fields=["team", "bucket", "start"], name="group_rollup_team_window")]

    def __str__(self) -> str:
        return f"team {self.team_id} {self.get_bucket_display()} {self.start:%Y-%m-%d}: ${self.cost_usd}"


class FleetRollup(UsageColumns):
    """The fleet's capacity of one GPU type in one capacity tier, and what jobs did with it."""

    bucket = models.IntegerField(choices=RollupBucket.choices)
    start = models.DateTimeField()
    gpu_type = models.ForeignKey("controlplane.GpuType", on_delete=models.PROTECT, related_name="fleet_rollups")
    capacity_tier = models.CharField(max_length=16, choices=CapacityTier.choices)
    capacity_gpu_seconds = models.DecimalField(**GPU_SECONDS, help_text="GPUs of the fleet's nodes × time.")
    capacity_cost_usd = models.DecimalField(**USD, help_text="What the capacity cost at the price in force.")

    class Meta:
        ordering = ["bucket", "start", "gpu_type_id", "capacity_tier"]
        constraints = [
            models.UniqueConstraint(
                fields=["bucket", "start", "gpu_type", "capacity_tier"], name="fleet_rollup_unique_cell"
            ),
            *_tiers_ordered("fleet_rollup"),
        ]

    def __str__(self) -> str:
        return f"fleet {self.gpu_type_id}/{self.capacity_tier} {self.get_bucket_display()} {self.start:%Y-%m-%d %H:%M}"


class NodeActivityRollup(models.Model):
    """What one allocation's agent reported on one node over one UTC hour: GPU-seconds ×
    device activity, summed over its samples cut at the hour's bounds (float, as the samples'
    activity is). The node page's active tier (services/node_tiers.py) reads whole hours here
    and only the window's partial first and last hours from the raw samples: a busy node's week
    is a thousand rows instead of half a million samples.

    Folded in by the accounting task from the samples it has not folded yet (ids above
    `AccountingCursor.last_node_sample_id`, in the same transaction that moves it): samples are
    never updated, so adding each new one's share to its hours once keeps every row equal to the
    sum over its samples, and a reader adds the samples above that id itself. Kept as long as the
    hour rollups."""

    node = models.ForeignKey("controlplane.Node", on_delete=models.CASCADE, related_name="activity_rollups",
                             db_index=False)  # the unique index below starts with it
    allocation = models.ForeignKey("controlplane.Allocation", on_delete=models.CASCADE,
                                   related_name="node_activity_rollups")
    start = models.DateTimeField(help_text="The UTC hour's start.")
    active_gpu_seconds = models.FloatField(default=0.0, help_text="Σ GPUs × seconds × activity of its samples.")

    class Meta:
        ordering = ["node_id", "start", "allocation_id"]
        constraints = [
            models.UniqueConstraint(fields=["node", "start", "allocation"], name="node_activity_rollup_unique_cell"),
        ]

    def __str__(self) -> str:
        return f"node {self.node_id} allocation {self.allocation_id} {self.start:%Y-%m-%d %H:00}: {self.active_gpu_seconds}"


# The parts are exact decimals on PostgreSQL; SQLite (the demo's database) stores decimals as
# binary floats, so the sum may miss the nominal by rounding. A thousandth of a GPU-second is far
# below anything reported and far above float error at a year of a 10,000-GPU fleet.
PARTS_TOLERANCE = Value(Decimal("0.001"), output_field=models.DecimalField(**GPU_SECONDS))


def _parts_of_nominal() -> CombinedExpression:
    return F("used_gpu_seconds") + F("lent_gpu_seconds") + F("idle_gpu_seconds")


class QuotaRollup(models.Model):
    """A team's guarantee on one GPU type over one bucket: used, lent, and idle.

    idle = nominal − used within nominal − lent to borrowers of the cohort. Priced at the GPU
    type's reserved-capacity rate (see docs/accounting.md, "Idle reserved capacity").
    """

    bucket = models.IntegerField(choices=RollupBucket.choices)
    start = models.DateTimeField()
    team = models.ForeignKey("controlplane.Team", on_delete=models.PROTECT, related_name="quota_rollups")
    gpu_type = models.ForeignKey("controlplane.GpuType", on_delete=models.PROTECT, related_name="quota_rollups")
    nominal_gpu_seconds = models.DecimalField(**GPU_SECONDS)
    used_gpu_seconds = models.DecimalField(**GPU_SECONDS, help_text="Used by the team within its guarantee.")
    borrowed_gpu_seconds = models.DecimalField(**GPU_SECONDS, help_text="Used by the team beyond its guarantee.")
    lent_gpu_seconds = models.DecimalField(**GPU_SECONDS, help_text="Unused guarantee that borrowers ran on.")
    idle_gpu_seconds = models.DecimalField(**GPU_SECONDS, help_text="Guarantee neither used nor lent.")
    idle_cost_usd = models.DecimalField(**USD)

    class Meta:
        ordering = ["bucket", "start", "team_id", "gpu_type_id"]
        constraints = [
            models.UniqueConstraint(fields=["bucket", "start", "team", "gpu_type"], name="quota_rollup_unique_cell"),
            models.CheckConstraint(
                condition=Q(idle_gpu_seconds__gte=0)
                & Q(lent_gpu_seconds__gte=0)
                & Q(nominal_gpu_seconds__lte=_parts_of_nominal() + PARTS_TOLERANCE)
                & Q(nominal_gpu_seconds__gte=_parts_of_nominal() - PARTS_TOLERANCE),
                name="quota_rollup_parts_make_nominal",
            ),
        ]
        indexes = [models.Index(fields=["team", "bucket", "start"], name="quota_rollup_team_window")]

    def __str__(self) -> str:
        return f"quota {self.team_id}/{self.gpu_type_id} {self.get_bucket_display()} {self.start:%Y-%m-%d %H:%M}"

    @staticmethod
    def empty() -> Q:
        """A row that says nothing: no guarantee counted (its type had no GPUs in the fleet), none
        used, borrowed, lent or idle. Accounting writes none since 6 Dec; older versions wrote
        one per minute for every quota on a type with no nodes, and those rows alone kept the
        type (and the team) from ever being deleted."""
        return Q(nominal_gpu_seconds=0, used_gpu_seconds=0, borrowed_gpu_seconds=0, lent_gpu_seconds=0,
                 idle_gpu_seconds=0, idle_cost_usd=0)


def forget_empty_quota_rollups(**owner: models.Model) -> int:
    """Delete the empty rows (`QuotaRollup.empty`) of a team or GPU type about to be deleted, so
    that only rows with something in them protect it. Call it in the deletion's transaction:
    when real history refuses the deletion, the empty rows come back with the rollback."""
    deleted, _ = QuotaRollup.objects.filter(QuotaRollup.empty(), **owner).delete()
    return deleted


class JobProgressRate(models.Model):
    """A job's fault-free rate: progress per active GPU-second over its best steady interval.

    `steady` is False while the job has not yet run STEADY_MINUTES whole, fully reported minutes
    in a row; the rate is then its average so far and is replaced once a steady window exists.
    """

    job = models.OneToOneField("controlplane.Job", on_delete=models.CASCADE, primary_key=True,
                               related_name="progress_rate")
    unit = models.CharField(max_length=16, choices=ProgressUnit.choices)
    per_active_gpu_second = models.FloatField()
    steady = models.BooleanField(default=False)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(per_active_gpu_second__gt=0), name="job_progress_rate_positive"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.per_active_gpu_second:.6g} {self.unit} per active GPU-second"


class AccountingCursor(models.Model):
    """How far the rollups reach and which rows the accounting task has already seen.

    One row (name "usage"), locked by the task for the length of a run, so overlapping runs
    (a late beat tick, two workers) serialise instead of double counting.
    """

    name = models.CharField(max_length=32, unique=True, default="usage")
    rolled_until = models.DateTimeField(null=True, blank=True, help_text="Rollups are complete up to here.")
    last_sample_id = models.BigIntegerField(default=0)
    last_event_id = models.BigIntegerField(default=0)
    last_fleet_sample_id = models.BigIntegerField(default=0)
    # The samples folded into NodeActivityRollup: every sample up to this id, none above.
    last_node_sample_id = models.BigIntegerField(default=0)
    # The longest of those samples (s): a sample crossing an instant ends at most this long after it.
    longest_node_sample_s = models.FloatField(default=0.0)
    # Job events folded in for /metrics counters: {"kind|team|priority_class|reason": count}.
    event_counts = models.JSONField(default=dict, blank=True)
    last_counted_event_id = models.BigIntegerField(default=0)
    # Scheduling-cycle durations folded in from FleetSample, as a cumulative histogram.
    cycle_bucket_counts = models.JSONField(default=list, blank=True)
    cycle_count = models.BigIntegerField(default=0)
    cycle_sum_s = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"accounting cursor {self.name}: rolled until {self.rolled_until}"
