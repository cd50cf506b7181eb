"""API views: a few lines each. Scoping comes from services/access.py, rules from services/.

One module per resource, as the serializers: api_mixin.py (what every endpoint shares: ApiMixin,
refuse_fields), jobs.py (jobs and job arrays, and the words for a job's stop the pages share:
cancel_refusal, stop_notice), fleet.py (teams, projects, cohorts, quotas, priority classes, GPU
types, price rates, nodes, events), metrics.py (the fleet's figures, sprio, sshare, the policy),
auth.py (token, logout, me), unknown_paths.py (no_such_path); those of a resource import
api_mixin and no other. Every public name is re-exported here; urls.py and the other modules
import from the module."""

from controlplane.api.views.api_mixin import ApiMixin, ContentNegotiation, refuse_fields
from controlplane.api.views.auth import LogoutView, MeView, TokenView
from controlplane.api.views.fleet import (
    AdminWritableViewSet,
    CohortViewSet,
    EventViewSet,
    GpuTypeViewSet,
    NodeViewSet,
    PriceRateViewSet,
    PriorityClassViewSet,
    ProjectViewSet,
    QuotaViewSet,
    TeamViewSet,
)
from controlplane.api.views.jobs import (
    IDEMPOTENCY_KEY,
    JobArrayViewSet,
    JobViewSet,
    array_requeue_body,
    cancel_refusal,
    ended_by_dependency,
    explanation,
    hold_reason_of,
    refusal_answer,
    requeue_body,
    stop_notice,
    stop_of,
)
from controlplane.api.views.metrics import (
    EtaMetricsView,
    FairShareView,
    FragmentationMetricsView,
    JobPriorityView,
    QueueMetricsView,
    SchedulerPolicyView,
)
from controlplane.api.views.unknown_paths import no_such_path

__all__ = [
    "AdminWritableViewSet",
    "ApiMixin",
    "CohortViewSet",
    "ContentNegotiation",
    "EtaMetricsView",
    "EventViewSet",
    "FairShareView",
    "FragmentationMetricsView",
    "GpuTypeViewSet",
    "IDEMPOTENCY_KEY",
    "JobArrayViewSet",
    "JobPriorityView",
    "JobViewSet",
    "LogoutView",
    "MeView",
    "NodeViewSet",
    "PriceRateViewSet",
    "PriorityClassViewSet",
    "ProjectViewSet",
    "QueueMetricsView",
    "QuotaViewSet",
    "SchedulerPolicyView",
    "TeamViewSet",
    "TokenView",
    "array_requeue_body",
    "cancel_refusal",
    "ended_by_dependency",
    "explanation",
    "hold_reason_of",
    "no_such_path",
    "refusal_answer",
    "refuse_fields",
    "requeue_body",
    "stop_notice",
    "stop_of",
]
