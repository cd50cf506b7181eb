from __future__ import annotations

import re
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from controlplane.choices import (
    LIVE_ALLOCATION_STATES,
    AllocationState,
    DependencyCondition,
    DependencyMode,
    JobHold,
    JobState,
    Topology,
    WorkloadClass,
)

#: The longest reason a hold carries (`Job.hold_reason`): one line, as Slurm's job comments.
HOLD_REASON_MAX_LENGTH = 200


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
    gpus = models.PositiveIntegerField("GPUs")
    gpus_per_node = models.PositiveIntegerField("GPUs per node", null=True, blank=True)
    gpu_types = models.JSONField("GPU types", default=list, blank=True, help_text="Acceptable GPU type names; empty = any.")
    min_gpu_memory_gb = models.PositiveIntegerField("min GPU memory (GB)", default=0)
    cpus_per_gpu = models.PositiveIntegerField("CPUs per GPU", default=0)
    memory_gb_per_gpu = models.PositiveIntegerField("memory per GPU (GB)", default=0)
    topology = models.CharField(max_length=16, choices=Topology.choices, default=Topology.ANY)
    members_on_distinct_nodes = models.BooleanField(
        default=False, db_default=False,
        help_text="No two members of the gang on one node (Slurm's --ntasks-per-node=1); "
                  "otherwise members are packed, two on a node with room for both.",
    )
    min_gpus = models.PositiveIntegerField("min GPUs", null=True, blank=True)
    max_gpus = models.PositiveIntegerField("max GPUs", null=True, blank=True)
    roles = models.JSONField(default=list, blank=True, help_text="Heterogeneous gang roles, admitted together.")
    runtime_limit_s = models.PositiveIntegerField("runtime limit (s)")
    checkpoint_interval_s = models.PositiveIntegerField("checkpoint interval (s)", null=True, blank=True)
    command = models.TextField(blank=True)
    env = models.JSONField(default=dict, blank=True)

    # --- arrays and idempotent submits -----------------------------------------------------------
    array_id = models.UUIDField("array ID", null=True, blank=True, db_index=True)
    array_index = models.PositiveIntegerField(null=True, blank=True)
    # Slurm's --array=0-99%10: at most this many tasks of the array hold GPUs at once (the engine's
    # JobSpec.array_task_limit); the same on every task of the array, null for no limit.
    array_task_limit = models.PositiveIntegerField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=128, null=True, blank=True)

    # --- state ---------------------------------------------------------------------------------
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING, db_index=True)
    submitted_at = models.DateTimeField(db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    state_changed_at = models.DateTimeField()
    exit_code = models.IntegerField(null=True, blank=True)
    borrowed = models.BooleanField(
        default=False, help_text="Runs on borrowed capacity, above its team's nominal quota: so when bound, or counted "
        "so since its team's quota or cohort changed under it (the scheduler's job.borrowing events).")
    # The engine's last word on a waiting job: the reason's stable part. Its sentences are
    # stored with each number replaced by NUMBER_MARK; the numbers, the queue position and the
    # ETA move every cycle and live in the job's PendingPlace (`place`), so a cycle rewrites this
    # row only when the reason's words change. Read the sentences as `pending_message` and
    # `pending_would_start_if` (numbers filled in), the position and ETA as `queue_position`, `eta`.
    pending_code = models.CharField(max_length=48, blank=True)
    # 1,000 characters, as an Event's message: the engine's longest sentence (over quota, holding a
    # reservation, and protected candidates to preempt, three at most, then when that lifts: the
    # ETA's own clause) runs to some 750 with its numbers; 500 cut that last clause off.
    pending_words = models.CharField(max_length=1000, blank=True)
    pending_resolvable = models.BooleanField(default=True)
    would_start_if_words = models.CharField(max_length=300, blank=True)
    # A running elastic job below its maximum that the last cycle did not grow: why not, as the
    # engine says it (scheduler_core GrowthNote: its code and sentence); blank otherwise. Written
    # by the cycle only when it changes (services/cycle._store_growth_notes).
    growth_code = models.CharField(max_length=32, blank=True, default="", db_default="")
    growth_note = models.CharField(max_length=300, blank=True, default="", db_default="")

    # --- progress and preemption history -------------------------------------------------------------
    steps = models.BigIntegerField(default=0)
    useful_tokens = models.BigIntegerField(default=0)
    last_checkpoint_at = models.DateTimeField(null=True, blank=True)
    last_progress_at = models.DateTimeField(null=True, blank=True)
    # Preemptions by the scheduler (for a higher priority or a reclaiming owner) are what a
    # priority class's preemption budget counts. A job can also be stopped and requeued whole
    # without being preempted: to resize it, or fenced off a node that failed. Those count in
    # `requeue_count` (every requeue, preemptions included) and not against the budget: a node
    # that fails three times must not make its jobs unpreemptible for a day. A preemption
    # counts once however its stop ends, fenced before its victim confirmed too
    # (transitions.fence_allocation).
    preemption_count = models.PositiveIntegerField(default=0)
    # The first ETA the scheduler told this job in the wait that ended in its latest start, and
    # when it told it (from its PendingPlace at the bind; null when that wait had no ETA): how
    # far the ETAs hold (services/eta_record.py).
    eta_told = models.DateTimeField(null=True, blank=True)
    eta_told_at = models.DateTimeField(null=True, blank=True)
    last_preempted_at = models.DateTimeField(null=True, blank=True)
    requeue_count = models.PositiveIntegerField(default=0)
    lost_gpu_seconds = models.FloatField("lost GPU-seconds", default=0.0)

    # --- holds: a held pending job is kept out of the queue until released ------------------------
    hold = models.CharField(max_length=8, choices=JobHold.choices, blank=True, default=JobHold.NONE)
    held_at = models.DateTimeField(null=True, blank=True)
    held_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Why, in the holder's words (`scontrol hold` comments, an admin's "waiting for maintenance"):
    # one line, said in the Held explanation; cleared on release.
    hold_reason = models.CharField(max_length=HOLD_REASON_MAX_LENGTH, blank=True, default="")
    # Slurm's --dependency=singleton: it starts only when no other job of its submitter and name
    # runs, or waits ahead of it (submitted earlier): services/dependencies/singletons.py.
    singleton = models.BooleanField(default=False)
    # How its dependencies combine: all of them met (Slurm's `,`), or any one (`?`): services/dependencies/.
    dependency_mode = models.CharField(max_length=3, choices=DependencyMode.choices, default=DependencyMode.ALL)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["team", "state"]),
            models.Index(fields=["state", "submitted_at"]),
            # Dashboards and accounting window on these.
            models.Index(fields=["started_at"]),
            models.Index(fields=["finished_at"]),
            # A singleton's peers (services/dependencies/singletons.py): the waiting singletons, and the live
            # jobs of one submitter and name. Partial: only jobs not ended.
            models.Index(fields=["submitter", "name"], condition=Q(singleton=True, state="pending"),
                         name="job_singleton_waiting"),
            models.Index(fields=["submitter", "name"], condition=Q(state__in=["pending", "running", "preempting"]),
                         name="job_live_by_submitter_name"),
            # The waiting jobs whose dependencies are any-of (Slurm's `?`): the snapshot's read asks
            # which have an alternative met already (services/dependencies/waiting.waiting_rows).
            models.Index(fields=["id"], condition=Q(dependency_mode="any", state="pending"),
                         name="job_any_of_waiting"),
            # The jobs with a growth note: each cycle clears those the plan no longer notes.
            models.Index(fields=["id"], condition=~Q(growth_code=""), name="job_growth_noted"),
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
    def requeues_not_preempted(self) -> int:
        """Times the job was stopped and requeued whole without being preempted: to resize it,
        or fenced off a node that failed (they do not count against the preemption budget)."""
        return max(0, self.requeue_count - self.preemption_count)

    @property
    def is_elastic(self) -> bool:
        return self.min_gpus is not None or self.max_gpus is not None

    # --- the engine's explanation, as users read it ------------------------------------------

    def _place(self) -> PendingPlace | None:
        """The job's place in the last cycle's queue, if it has one. Only a job that waited has
        one (a bind deletes it), so a running or finished job costs no query."""
        if self.state not in _PLACED_STATES:
            return None
        try:
            return self.place  # type: ignore[no-any-return]
        except PendingPlace.DoesNotExist:
            return None

    def unranked(self) -> None:
        """Record that the job has no place in the queue (a job just submitted), so reading
        its position costs no query."""
        Job._meta.get_field("place").set_cached_value(self, None)

    def _numbers(self) -> list[str]:
        place = self._place()
        return place.numbers.split() if place is not None and place.numbers else []

    @property
    def pending_message(self) -> str:
        """The engine's sentence on why the job waits, with its numbers."""
        if NUMBER_MARK not in self.pending_words:
            return self.pending_words
        return fill_numbers(self.pending_words, self._numbers())

    @pending_message.setter
    def pending_message(self, text: str) -> None:
        self.pending_words = text.replace(NUMBER_MARK, "")

    @property
    def pending_would_start_if(self) -> str:
        """What would let the job start, with its numbers (those after the message's)."""
        if NUMBER_MARK not in self.would_start_if_words:
            return self.would_start_if_words
        return fill_numbers(self.would_start_if_words, self._numbers()[self.pending_words.count(NUMBER_MARK):])

    @pending_would_start_if.setter
    def pending_would_start_if(self, text: str) -> None:
        self.would_start_if_words = text.replace(NUMBER_MARK, "")

    @property
    def borrowed_said(self) -> str:
        """How a running job's borrowing is said where it runs (`qm status`/`explain`, the job
        page). The engine records only whether its team is over its nominal quota with it
        (admitted so, or its quota lowered since), not how many of its GPUs that takes, and a lender's reclaim treats the whole gang as
        borrowed: so no "partly" (a 1-GPU job read "partly on capacity borrowed")."""
        if not self.borrowed:
            return ""
        return ("over its team's nominal quota, on borrowed capacity: "
                "a lender reclaiming it preempts borrowed work first")

    @property
    def queue_position(self) -> int | None:
        """1-based rank in the last cycle's queue order; None until a cycle ranked it, and for
        a job waiting for a dependency, which has no place in the queue."""
        place = self._place()
        return place.queue_position if place is not None else None

    @property
    def eta(self) -> datetime | None:
        """The last cycle's estimated start, if the engine could give one."""
        place = self._place()
        return place.eta if place is not None else None

    @property
    def first_eta(self) -> datetime | None:
        """The first ETA the scheduler told this job in its present stay in the queue."""
        place = self._place()
        return place.first_eta if place is not None else None

    @property
    def first_eta_at(self) -> datetime | None:
        """When the scheduler told it `first_eta`."""
        place = self._place()
        return place.first_eta_at if place is not None else None


NUMBER_MARK = "\ue000"
"""Where a number goes in a stored sentence (a private-use character no sentence contains)."""

_NUMBER = re.compile(r"([0-9]+(?:\.[0-9]+)?)")
# A job waiting, or one that stopped while waiting, may have a place; a bind deletes it.
_PLACED_STATES = frozenset({JobState.PENDING, JobState.CANCELLED, JobState.UNSCHEDULABLE})


def split_numbers(text: str) -> tuple[str, list[str]]:
    """A sentence → (its words with each number replaced by NUMBER_MARK, the numbers as written).
    `fill_numbers(*split_numbers(text)) == text` for any text."""
    if NUMBER_MARK in text:
        text = text.replace(NUMBER_MARK, "")
    parts = _NUMBER.split(text)  # words, number, words, number, …, words
    return NUMBER_MARK.join(parts[0::2]), parts[1::2]


def fill_numbers(words: str, numbers: list[str]) -> str:
    """The inverse of split_numbers: each NUMBER_MARK replaced by the next number."""
    parts = words.split(NUMBER_MARK)
    out = [parts[0]]
    for index, part in enumerate(parts[1:]):
        out.append(numbers[index] if index < len(numbers) else "")
        out.append(part)
    return "".join(out)


class PendingPlace(models.Model):
    """A waiting job's place in the last cycle's queue: its position, its ETA and the numbers of
    its reason's sentences (space-separated, message first, then would-start-if).

    These move every cycle (a job ahead starts and everyone behind moves up; time passes and the
    ETAs move; free GPUs and quota use change), so they live in this narrow table, rewritten in
    one statement per cycle, while the wide jobs row changes only when the reason's words do.
    A bind deletes the row; a job cancelled while waiting keeps its last one."""

    job = models.OneToOneField(Job, primary_key=True, on_delete=models.CASCADE, related_name="place")
    # None: the engine gave it none, as it gives no job waiting for a dependency (it cannot
    # start until another job starts or ends); the row still holds its reason's numbers.
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    eta = models.DateTimeField(null=True, blank=True)
    numbers = models.TextField(blank=True)
    # The first ETA of this stay in the queue and the cycle that gave it; kept as the ETA moves.
    # A bind copies them to the job (eta_told); a hold or a requeue deletes the row, so the next
    # stay starts afresh; a change of what the scheduler reads clears them and the ETA
    # (services/holds.update).
    first_eta = models.DateTimeField(null=True, blank=True)
    first_eta_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"job {self.job_id} at {self.queue_position}"


class JobDependency(models.Model):
    """`job` may start only once `upstream` meets `condition` (Slurm's --dependency).

    `satisfied_at` is set when the condition is met; a condition that can no longer be met
    (afterok on a job that failed) ends the dependent job instead. An upstream job is never
    deleted while a job depends on it (PROTECT): the dependency would silently vanish."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dependencies")
    upstream = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="dependents")
    condition = models.CharField(max_length=16, choices=DependencyCondition.choices,
                                 default=DependencyCondition.AFTER_OK)
    satisfied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job_id", "upstream_id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "upstream"], name="job_dependency_once_per_upstream"),
            models.CheckConstraint(condition=~Q(job=F("upstream")), name="job_dependency_not_on_itself"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.condition}:{self.upstream_id}"


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
    # The heterogeneous-gang role this GPU serves (its member's); empty for a plain gang. The
    # agent tells the process on it (QM_ROLE), so every member knows what to run as.
    role = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["node__name", "gpu_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "gpu_index"], condition=Q(live=True), name="gpu_held_by_one_live_allocation"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node_id}:{self.gpu_index} g{self.allocation_id}"

    @classmethod
    def held(cls) -> models.QuerySet[AllocationGpu]:
        """The GPU rows held now. Their allocations are live too (a release or a fence changes both
        in one transaction, services/transitions.py); saying so lets PostgreSQL reach them by the
        allocation state's index when a query joins their allocation or job, instead of hashing
        every allocation ever made (bench/scale_audit.py: 60 → 19 ms with 104,000 of them)."""
        return cls.objects.filter(live=True, allocation__state__in=LIVE_ALLOCATION_STATES)
