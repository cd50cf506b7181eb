from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from controlplane.choices import (
    LIVE_ALLOCATION_STATES,
    AllocationState,
    JobState,
    Topology,
    WorkloadClass,
)


class Job(models.Model):
    """What a team asked to run, and where it stands.

    The shape fields mirror `scheduler_core.JobSpec`; the pending_* fields hold the engine's last
    explanation of why the job waits, so pages and the API read it without re-running a cycle.
    """

    team = models.ForeignKey("controlplane.Team", on_delete=models.PROTECT, related_name="jobs")
    project = models.ForeignKey(
        "controlplane.Project", null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    name = models.CharField(max_length=128)
    priority_class = models.ForeignKey("controlplane.PriorityClass", on_delete=models.PROTECT, related_name="jobs")
    workload = models.CharField(max_length=16, choices=WorkloadClass.choices, default=WorkloadClass.TRAINING)

    # --- shape -------------------------------------------------------------------------------
    gpus = models.PositiveIntegerField()
    gpus_per_node = models.PositiveIntegerField(null=True, blank=True)
    gpu_types = models.JSONField(default=list, blank=True, help_text="Acceptable GPU type names; empty = any.")
    min_gpu_memory_gb = models.PositiveIntegerField(default=0)
    cpus_per_gpu = models.PositiveIntegerField(default=0)
    memory_gb_per_gpu = models.PositiveIntegerField(default=0)
    topology = models.CharField(max_length=16, choices=Topology.choices, default=Topology.ANY)
    min_gpus = models.PositiveIntegerField(null=True, blank=True)
    max_gpus = models.PositiveIntegerField(null=True, blank=True)
    roles = models.JSONField(default=list, blank=True, help_text="Heterogeneous gang roles, admitted together.")
    runtime_limit_s = models.PositiveIntegerField()
    checkpoint_interval_s = models.PositiveIntegerField(null=True, blank=True)
    command = models.TextField(blank=True)
    env = models.JSONField(default=dict, blank=True)

    # --- arrays and idempotent submits -----------------------------------------------------------
    array_id = models.UUIDField(null=True, blank=True, db_index=True)
    array_index = models.PositiveIntegerField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=128, null=True, blank=True)

    # --- state ---------------------------------------------------------------------------------
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING, db_index=True)
    submitted_at = models.DateTimeField(db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    state_changed_at = models.DateTimeField()
    exit_code = models.IntegerField(null=True, blank=True)
    borrowed = models.BooleanField(default=False, help_text="Runs on capacity borrowed from the cohort.")
    # The engine's last word on a waiting job.
    pending_code = models.CharField(max_length=48, blank=True)
    pending_message = models.CharField(max_length=500, blank=True)
    pending_resolvable = models.BooleanField(default=True)
    pending_would_start_if = models.CharField(max_length=300, blank=True)
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    eta = models.DateTimeField(null=True, blank=True)

    # --- progress and preemption history -------------------------------------------------------------
    steps = models.BigIntegerField(default=0)
    useful_tokens = models.BigIntegerField(default=0)
    last_checkpoint_at = models.DateTimeField(null=True, blank=True)
    last_progress_at = models.DateTimeField(null=True, blank=True)
    preemption_count = models.PositiveIntegerField(default=0)
    last_preempted_at = models.DateTimeField(null=True, blank=True)
    lost_gpu_seconds = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["team", "state"]),
            models.Index(fields=["state", "submitted_at"]),
            # Dashboards and accounting window on these.
            models.Index(fields=["started_at"]),
            models.Index(fields=["finished_at"]),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gt=0), name="job_gpus_positive"),
            models.CheckConstraint(condition=Q(runtime_limit_s__gt=0), name="job_runtime_limit_positive"),
            models.CheckConstraint(
                condition=Q(min_gpus__isnull=True) | Q(min_gpus__lte=F("gpus")), name="job_min_gpus_within_gpus"
            ),
            models.CheckConstraint(
                condition=Q(max_gpus__isnull=True) | Q(max_gpus__gte=F("gpus")), name="job_max_gpus_at_least_gpus"
            ),
            models.UniqueConstraint(
                fields=["submitter", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="job_unique_idempotency_key_per_submitter",
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} {self.name}"

    @property
    def is_elastic(self) -> bool:
        return self.min_gpus is not None or self.max_gpus is not None


class Allocation(models.Model):
    """The GPUs one job holds, under a lease that can be fenced.

    `generation` is drawn from one strictly increasing sequence across all allocations, so a GPU's
    successive owners carry increasing generations and an agent can refuse anything older than
    what it has seen. `epoch` is the scheduler leader's fencing token at the time of the bind.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="allocations")
    generation = models.BigIntegerField(unique=True)
    epoch = models.BigIntegerField(help_text="Scheduler epoch (fencing token) that created it.")
    state = models.CharField(
        max_length=16, choices=AllocationState.choices, default=AllocationState.ACTIVE, db_index=True
    )
    borrowed = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True, help_text="When the agents reported the gang running.")
    released_at = models.DateTimeField(null=True, blank=True)
    # Set when a preemption is signalled: the agents must stop the job by then.
    release_deadline = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=48, blank=True)

    class Meta:
        ordering = ["-generation"]
        # Accounting folds the allocations released since its cursor.
        indexes = [models.Index(fields=["released_at"])]
        constraints = [
            models.CheckConstraint(condition=Q(generation__gt=0), name="allocation_generation_positive"),
        ]

    def __str__(self) -> str:
        return f"allocation g{self.generation} of job {self.job_id} ({self.state})"

    @property
    def is_live(self) -> bool:
        return self.state in LIVE_ALLOCATION_STATES


class AllocationGpu(models.Model):
    """One GPU held by an allocation.

    `live` mirrors whether the allocation still owns the GPU; the partial unique constraint makes
    the database itself refuse a GPU in two live allocations.
    """

    allocation = models.ForeignKey(Allocation, on_delete=models.CASCADE, related_name="gpus")
    node = models.ForeignKey("controlplane.Node", on_delete=models.PROTECT, related_name="allocation_gpus")
    gpu_index = models.PositiveSmallIntegerField()
    live = models.BooleanField(default=True)

    class Meta:
        ordering = ["node__name", "gpu_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "gpu_index"], condition=Q(live=True), name="gpu_held_by_one_live_allocation"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node_id}:{self.gpu_index} g{self.allocation_id}"
