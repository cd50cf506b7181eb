from django.contrib import admin
from django.urls import include, path

from controlplane.views import healthz
from frontend.views.accounts import admin_login, admin_password_change

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", include("controlplane.metrics")),
    # Before the admin's own: its sign-in form, throttled as the pages' (frontend/views/accounts.py).
    path("admin/login/", admin_login, name="admin-login"),
    # and its own-password form, whose changes are recorded (UserPasswordChanged).
    path("admin/password_change/", admin_password_change, name="admin-password-change"),
    path("admin/", admin.site.urls),
    path("api/v1/agent/", include("controlplane.api.agent")),
    path("api/", include("controlplane.api.urls")),
    path("", include("frontend.urls")),
]
