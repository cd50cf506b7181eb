"""Routes: /api/v1/ resources (kebab-case plurals), the OpenAPI schema and its two viewers.

The schema and its viewers need a signed-in user like the rest of the API (anonymous callers
reach only /healthz and the login page); the viewers' JavaScript and CSS come from our own
static files (drf-spectacular-sidecar), never from a CDN.
"""

from __future__ import annotations

from typing import Any

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from controlplane.api import job_history, maintenance, notification_hooks, showback
from controlplane.api.permissions import IsPerson
from controlplane.api.views import auth, fleet, jobs, metrics, unknown_paths
from controlplane.api.views.api_mixin import ApiMixin


class ApiRouter(DefaultRouter):
    include_root_view = False


router = ApiRouter()
router.register("jobs", jobs.JobViewSet, basename="job")
router.register("job-arrays", jobs.JobArrayViewSet, basename="job-array")
router.register("teams", fleet.TeamViewSet, basename="team")
router.register("projects", fleet.ProjectViewSet, basename="project")
router.register("cohorts", fleet.CohortViewSet, basename="cohort")
router.register("quotas", fleet.QuotaViewSet, basename="quota")
router.register("priority-classes", fleet.PriorityClassViewSet, basename="priority-class")
router.register("gpu-types", fleet.GpuTypeViewSet, basename="gpu-type")
router.register("price-rates", fleet.PriceRateViewSet, basename="price-rate")
router.register("nodes", fleet.NodeViewSet, basename="node")
router.register("events", fleet.EventViewSet, basename="event")
router.register("maintenance-windows", maintenance.MaintenanceWindowViewSet, basename="maintenance-window")
router.register("notification-hooks", notification_hooks.NotificationHookViewSet, basename="notification-hook")


class _PeopleOnly:
    """The API's authentication, permission and throttling, keeping each view's own renderers
    (the schema renders OpenAPI JSON/YAML, the viewers HTML)."""

    authentication_classes = ApiMixin.authentication_classes
    permission_classes = [IsPerson]
    throttle_classes = ApiMixin.throttle_classes
    get_exception_handler = ApiMixin.get_exception_handler


class SchemaView(_PeopleOnly, SpectacularAPIView):
    pass


class SwaggerView(_PeopleOnly, SpectacularSwaggerView):
    pass


class RedocView(_PeopleOnly, SpectacularRedocView):
    """Redoc from our own static files only: the template drops drf-spectacular's Google Fonts
    links, and the policy keeps the bundle's footer logo (cdn.redoc.ly) from loading."""

    template_name = "frontend/api_redoc.html"

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Content-Security-Policy"] = "img-src 'self' data: blob:; font-src 'self' data:"
        return response


v1 = [
    path("auth/token/", auth.TokenView.as_view(), name="auth-token"),
    path("auth/logout/", auth.LogoutView.as_view(), name="auth-logout"),
    path("auth/me/", auth.MeView.as_view(), name="auth-me"),
    path("metrics/queue/", metrics.QueueMetricsView.as_view(), name="metrics-queue"),
    path("metrics/fragmentation/", metrics.FragmentationMetricsView.as_view(), name="metrics-fragmentation"),
    path("metrics/etas/", metrics.EtaMetricsView.as_view(), name="metrics-etas"),
    path("scheduler/policy/", metrics.SchedulerPolicyView.as_view(), name="scheduler-policy"),
    path("scheduler/fair-share/", metrics.FairShareView.as_view(), name="scheduler-fair-share"),
    path("metrics/utilization/", showback.UtilizationView.as_view(), name="metrics-utilization"),
    path("showback/", showback.ShowbackView.as_view(), name="showback"),
    # Before the router, whose `jobs/<pk>/` would read it as job "priority".
    path("jobs/priority/", metrics.JobPriorityView.as_view(), name="job-priority"),
    # Before the router, whose `jobs/<pk>.<format>` would read it as job "history".
    path("jobs/history.csv", job_history.JobHistoryCsvView.as_view(), name="job-history-csv"),
    path("jobs/history.xlsx", job_history.JobHistoryXlsxView.as_view(), name="job-history-xlsx"),
    path("", include(router.urls)),
]

urlpatterns = [
    path("v1/", include((v1, "api"), namespace="v1")),
    path("schema/", SchemaView.as_view(), name="api-schema"),
    path("docs/", SwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", RedocView.as_view(url_name="api-schema"), name="api-redoc"),
    # Last: any other path under /api/ answers in the API's error shape (see unknown_paths.no_such_path).
    # [\s\S], not `.`, which stops at a new line (%0A): such a path is no endpoint either.
    re_path(r"^[\s\S]*$", unknown_paths.no_such_path),
]
