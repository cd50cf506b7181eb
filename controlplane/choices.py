"""Every status has one home: its value, its label and its colour for badges and charts."""

from __future__ import annotations

from django.db import models

from scheduler_core.types import ReasonCode


class Role(models.TextChoices):
    MEMBER = "member", "Member"
    FINANCE = "finance", "Finance"
    ADMIN = "admin", "Admin"


class CapacityTier(models.TextChoices):
    RESERVED = "reserved", "Reserved"
    ON_DEMAND = "on_demand", "On-demand"
    SPOT = "spot", "Spot"


class NodeState(models.TextChoices):
    READY = "ready", "Ready"
    SUSPECT = "suspect", "Suspect"
    CORDONED = "cordoned", "Cordoned"
    DRAINING = "draining", "Draining"
    DOWN = "down", "Down"
    QUARANTINED = "quarantined", "Quarantined"
    # Taken out of the fleet for good: no agent, no work, no capacity, no idle cost. Kept (not
    # deleted) because its history, allocations and usage name it.
    RETIRED = "retired", "Retired"


class WorkloadClass(models.TextChoices):
    TRAINING = "training", "Training"
    SERVING = "serving", "Serving"
    INTERACTIVE = "interactive", "Interactive"
    BATCH = "batch", "Batch"


class Topology(models.TextChoices):
    ANY = "any", "Anywhere"
    SAME_NODE = "same_node", "Same node"
    SAME_LEAF = "same_leaf", "Same leaf switch"
    SAME_SPINE = "same_spine", "Same spine"


class JobState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    PREEMPTING = "preempting", "Preempting"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    TIMED_OUT = "timed_out", "Timed out"
    UNSCHEDULABLE = "unschedulable", "Can never run"


class JobHold(models.TextChoices):
    """Why a pending job is kept out of the queue (Slurm's user and admin holds). A user's
    hold is released by its submitter, its team or an admin; an admin's hold only by an admin."""

    NONE = "", "Not held"
    USER = "user", "Held by a user"
    ADMIN = "admin", "Held by an admin"


class DependencyCondition(models.TextChoices):
    """When a job may start relative to another (Slurm's --dependency types)."""

    AFTER = "after", "after it starts"
    AFTER_OK = "afterok", "after it succeeds"
    AFTER_NOT_OK = "afternotok", "after it fails"
    AFTER_ANY = "afterany", "after it ends"


class DependencyMode(models.TextChoices):
    """How a job's dependencies combine: every one met (Slurm's `,`), or any one of them (`?`)."""

    ALL = "all", "every one met"
    ANY = "any", "any one of them met"


LIVE_JOB_STATES = (JobState.RUNNING, JobState.PREEMPTING)
FINISHED_JOB_STATES = (
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.CANCELLED,
    JobState.TIMED_OUT,
    JobState.UNSCHEDULABLE,
)


#: Every code a waiting job's `pending_code` holds (the `?pending_code=` filter and `qm list
#: --reason` take these and refuse the rest): the engine's reasons, then the control plane's own,
#: which say what happened to the job until the next cycle explains it (submitted, requeued,
#: released from a hold, changed).
WAITING_CODES = (*(code.value for code in ReasonCode), "Submitted", "Requeued", "Released", "Changed")


class AllocationState(models.TextChoices):
    ACTIVE = "active", "Active"
    RELEASING = "releasing", "Releasing"
    RELEASED = "released", "Released"
    FENCED = "fenced", "Fenced"


# An allocation in these states still owns its GPUs: nobody else may be bound to them.
LIVE_ALLOCATION_STATES = (AllocationState.ACTIVE, AllocationState.RELEASING)


class EventKind(models.TextChoices):
    JOB_SUBMITTED = "job.submitted", "Job submitted"
    JOB_PENDING = "job.pending", "Job waiting"
    JOB_BOUND = "job.bound", "Job bound"
    JOB_STARTED = "job.started", "Job started"
    JOB_PREEMPTING = "job.preempting", "Job preemption signalled"
    # Any other stop's notice: a resize, a requeue someone asked for, a gang member's exit or
    # failure (recorded as job.preempting before migration 0032: services/transitions.py).
    JOB_STOPPING = "job.stopping", "Job stop signalled"
    JOB_PREEMPTED = "job.preempted", "Job preempted and requeued"
    JOB_RESIZED = "job.resized", "Job resized"
    JOB_FINISHED = "job.finished", "Job finished"
    JOB_CANCELLED = "job.cancelled", "Job cancelled"
    JOB_TIMED_OUT = "job.timed_out", "Job hit its runtime limit"
    JOB_REQUEUED = "job.requeued", "Job requeued"
    JOB_UNSCHEDULABLE = "job.unschedulable", "Job can never run"
    JOB_HELD = "job.held", "Job held"
    JOB_RELEASED = "job.released", "Job released"
    JOB_UPDATED = "job.updated", "Job changed while waiting"
    # A running job the scheduler now counts as borrowed, or as within its team's nominal
    # quota again: its team's quota or cohort changed under it (services/cycle._store_borrowing).
    JOB_BORROWING = "job.borrowing", "Job's borrowing changed"
    ALLOCATION_RELEASED = "allocation.released", "Allocation released"
    ALLOCATION_FENCED = "allocation.fenced", "Allocation fenced"
    NODE_REGISTERED = "node.registered", "Node registered"
    NODE_STATE = "node.state", "Node state changed"
    # The control plane refused (400) a heartbeat or report of the node's agent: recorded at
    # most every CONTACT_REFUSED_EVERY a node (services/agent_protocol.contact_refused).
    NODE_AGENT_REFUSED = "node.agent_refused", "Agent contact refused"
    QUOTA_CHANGED = "quota.changed", "Quota changed"
    COHORT_CHANGED = "cohort.changed", "Cohort changed"
    CONFIG_CHANGED = "config.changed", "Configuration changed"
    LEADER_ELECTED = "leader.elected", "Scheduler leader elected"


#: A state's colour on its badge and on the charts. A badge writes its word in white, or in dark
#: ink where white would read under 4.5:1 (frontend/templatetags/qm.badge_class); running/ready and
#: succeeded/draining are a shade darker than before 6 Dec (#2b8a3e, #1c7ed6), where neither ink
#: reached 4.5:1 (tests/frontend/test_pages_accessible_browser.py).
STATE_COLOURS = {
    JobState.PENDING: "#d9a400",
    JobState.RUNNING: "#27803a",
    JobState.PREEMPTING: "#e8590c",
    JobState.SUCCEEDED: "#1971c2",
    JobState.FAILED: "#c92a2a",
    JobState.CANCELLED: "#868e96",
    JobState.TIMED_OUT: "#a61e4d",
    JobState.UNSCHEDULABLE: "#495057",
    NodeState.READY: "#27803a",
    NodeState.SUSPECT: "#f08c00",
    NodeState.CORDONED: "#868e96",
    NodeState.DRAINING: "#1971c2",
    NodeState.DOWN: "#c92a2a",
    NodeState.QUARANTINED: "#862e9c",
    NodeState.RETIRED: "#343a40",
}


class NotifyOn(models.TextChoices):
    """What a notification hook may subscribe to (services/notifications.py maps job events to
    these): Slurm's --mail-type BEGIN, END, FAIL, REQUEUE, split the way researchers ask, and
    what Slurm does not say: a running job that became first in line to be reclaimed."""

    STARTED = "started", "Job started"
    SUCCEEDED = "succeeded", "Job succeeded"
    FAILED = "failed", "Job failed"
    TIMED_OUT = "timed_out", "Job timed out"
    CANCELLED = "cancelled", "Job cancelled"
    PREEMPTED = "preempted", "Job preempted"
    REQUEUED = "requeued", "Job requeued"
    UNSCHEDULABLE = "unschedulable", "Job can never run"
    # A running job now counted above its team's nominal quota (the quota lowered, the team
    # moved out of its cohort): a lender reclaiming its GPUs preempts it first.
    BORROWED = "borrowed", "Job now counts as borrowed"
