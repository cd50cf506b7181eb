"""Quartermaster's scheduling engine: a frozen snapshot in, a plan out.

Pure Python: no Django, no I/O, no wall clock. ``schedule(snapshot, config)`` is the entry
point (see :mod:`scheduler_core.cycle`); ``never_runs(spec, nodes, gpu_types)`` is its
capability check for submit time (:mod:`scheduler_core.capability`); ``queue_factors(snapshot,
config)`` what places each waiting job in the queue, as Slurm's sprio shows it
(:mod:`scheduler_core.queue`; ``queue_factors_of(queue_snapshot, config)`` the same from only
what the order reads); ``snapshot_fair_shares(snapshot, config)`` each team's dominant
share and its parts, as Slurm's sshare shows them (:mod:`scheduler_core.fairshare`); the types
below are the whole public vocabulary.
"""

from __future__ import annotations

from scheduler_core.capability import Infeasible, NodeShape, never_runs
from scheduler_core.cycle import schedule
from scheduler_core.errors import ConfigError, SnapshotError
from scheduler_core.fairshare import FairShare, snapshot_fair_shares
from scheduler_core.queue import QueueFactors, queue_factors, queue_factors_of
from scheduler_core.types import (
    Bind,
    BorrowingChange,
    DependencyCondition,
    DependencyWait,
    FleetFigures,
    GangRole,
    GpuPlacement,
    GpuTypeInfo,
    GrowthCode,
    GrowthNote,
    JobSpec,
    Kill,
    MaintenanceWindow,
    NodeInfo,
    NodeState,
    PendingExplanation,
    Plan,
    Preemption,
    PreemptionReason,
    PriorityClassInfo,
    QueuedJob,
    QueueSnapshot,
    QuotaInfo,
    ReasonCode,
    Reservation,
    Resize,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TeamUsage,
    TopologyConstraint,
    WorkloadClass,
)

__all__ = [
    "Bind",
    "BorrowingChange",
    "ConfigError",
    "DependencyCondition",
    "DependencyWait",
    "FairShare",
    "FleetFigures",
    "GangRole",
    "GpuPlacement",
    "GpuTypeInfo",
    "GrowthCode",
    "GrowthNote",
    "Infeasible",
    "JobSpec",
    "Kill",
    "MaintenanceWindow",
    "NodeInfo",
    "NodeShape",
    "NodeState",
    "PendingExplanation",
    "Plan",
    "QueueFactors",
    "QueueSnapshot",
    "QueuedJob",
    "Preemption",
    "PreemptionReason",
    "PriorityClassInfo",
    "QuotaInfo",
    "ReasonCode",
    "Reservation",
    "Resize",
    "RunningJob",
    "SchedulerConfig",
    "Snapshot",
    "SnapshotError",
    "TeamUsage",
    "TopologyConstraint",
    "WorkloadClass",
    "never_runs",
    "queue_factors",
    "queue_factors_of",
    "schedule",
    "snapshot_fair_shares",
]
