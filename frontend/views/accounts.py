"""Signing in through a form: the pages' /accounts/login/ and the admin's /admin/login/.

Both are Django's own sign-in views, with one rule added: a POST counts against its client
address's login counter, the one `POST /api/v1/auth/token/` counts against
(controlplane/api/throttling.py, `login`, default 30 a minute). Beyond it the form answers 429
with Retry-After and says when to try again, whatever the password: guessing through a form is
no cheaper than through the API.
"""

from __future__ import annotations

import math
from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect

from controlplane.api.throttling import sign_in_refused


def _refused(request: HttpRequest, wait: float) -> HttpResponse:
    seconds = math.ceil(wait)
    response = render(request, "registration/login.html", {
        "throttled": f"Too many sign-in attempts from your address; try again in {seconds} s.",
        "next": request.POST.get("next", ""),
    }, status=429)
    response["Retry-After"] = str(seconds)
    return response


class LoginView(auth_views.LoginView):
    """The pages' sign-in form, throttled per client address."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = sign_in_refused(request)  # after Django's CSRF check (LoginView.dispatch)
        if wait is not None:
            return _refused(request, wait)
        return super().post(request, *args, **kwargs)


@never_cache
@csrf_protect
def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's sign-in form (AdminSite.login), throttled as the pages' one."""
    if request.method == "POST":
        wait = sign_in_refused(request)
        if wait is not None:
            return _refused(request, wait)
    return admin.site.login(request, extra_context)
