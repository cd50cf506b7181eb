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

from controlplane.api import job_history, maintenance, notification_hooks, showback, views
from controlplane.api.permissions import IsPerson
from controlplane.api.views import ApiMixin


class ApiRouter(DefaultRouter):
    include_root_view = False


router = ApiRouter()
router.register("jobs", views.JobViewSet, basename="job")
router.register("job-arrays", views.JobArrayViewSet, basename="job-array")
router.register("teams", views.TeamViewSet, basename="team")
router.register("projects", views.ProjectViewSet, basename="project")
router.register("cohorts", views.CohortViewSet, basename="cohort")
router.register("quotas", views.QuotaViewSet, basename="quota")
router.register("priority-classes", views.PriorityClassViewSet, basename="priority-class")
router.register("gpu-types", views.GpuTypeViewSet, basename="gpu-type")
router.register("price-rates", views.PriceRateViewSet, basename="price-rate")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("events", views.EventViewSet, basename="event")
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
    path("auth/token/", views.TokenView.as_view(), name="auth-token"),
    path("auth/logout/", views.LogoutView.as_view(), name="auth-logout"),
    path("auth/me/", views.MeView.as_view(), name="auth-me"),
    path("metrics/queue/", views.QueueMetricsView.as_view(), name="metrics-queue"),
    path("metrics/fragmentation/", views.FragmentationMetricsView.as_view(), name="metrics-fragmentation"),
    path("metrics/etas/", views.EtaMetricsView.as_view(), name="metrics-etas"),
    path("scheduler/policy/", views.SchedulerPolicyView.as_view(), name="scheduler-policy"),
    path("scheduler/fair-share/", views.FairShareView.as_view(), name="scheduler-fair-share"),
    path("metrics/utilization/", showback.UtilizationView.as_view(), name="metrics-utilization"),
    path("showback/", showback.ShowbackView.as_view(), name="showback"),
    # Before the router, whose `jobs/<pk>/` would read it as job "priority".
    path("jobs/priority/", views.JobPriorityView.as_view(), name="job-priority"),
    # Before the router, whose `jobs/<pk>.<format>` would read it as job "history".
    path("jobs/history.csv", job_history.JobHistoryCsvView.as_view(), name="job-history-csv"),
    path("", include(router.urls)),
]

urlpatterns = [
    path("v1/", include((v1, "api"), namespace="v1")),
    path("schema/", SchemaView.as_view(), name="api-schema"),
    path("docs/", SwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", RedocView.as_view(url_name="api-schema"), name="api-redoc"),
    # Last: any other path under /api/ answers in the API's error shape (see views.no_such_path).
    re_path(r"^.*$", views.no_such_path),
]
