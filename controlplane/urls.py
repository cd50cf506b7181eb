from django.contrib import admin
from django.urls import include, path

from controlplane.views import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", include("controlplane.metrics")),
    path("admin/", admin.site.urls),
    path("api/v1/agent/", include("controlplane.api.agent")),
    path("api/", include("controlplane.api.urls")),
    path("", include("frontend.urls")),
]
