"""The data model, one module per topic."""

from controlplane.models.accounting import UsageSample
from controlplane.models.api_tokens import ApiToken
from controlplane.models.events import Event
from controlplane.models.fleet import GpuType, Node, PriceRate
from controlplane.models.jobs import Allocation, AllocationGpu, Job, JobDependency, PendingPlace
from controlplane.models.logs import JobLogChunk
from controlplane.models.maintenance import MaintenanceWindow
from controlplane.models.notifications import NotificationDelivery, NotificationHook
from controlplane.models.quotas import Cohort, PriorityClass, Quota
from controlplane.models.scheduling import FleetSample, SchedulerLease
from controlplane.models.teams import Membership, Project, Team
from controlplane.models.usage import (  # noqa: F401
    AccountingCursor,
    FleetRollup,
    GroupRollup,
    JobProgressRate,
    NodeActivityRollup,
    QuotaRollup,
    UsageRollup,
)

__all__ = [
    "Allocation",
    "AllocationGpu",
    "ApiToken",
    "Cohort",
    "Event",
    "FleetSample",
    "GpuType",
    "Job",
    "JobDependency",
    "JobLogChunk",
    "MaintenanceWindow",
    "Membership",
    "Node",
    "NotificationDelivery",
    "NotificationHook",
    "PendingPlace",
    "PriceRate",
    "PriorityClass",
    "Project",
    "Quota",
    "SchedulerLease",
    "Team",
    "UsageSample",
]
