"""Signing in through a form: the pages' /accounts/login/ and the admin's /admin/login/; and the
admin's own-password form, /admin/password_change/, whose changes are recorded.

Both are Django's own sign-in views, with one rule added: a POST counts against its client
address's login counter, the one `POST /api/v1/auth/token/` counts against
(controlplane/api/throttling.py, `login`, default 30 a minute), and a username with too many
failed sign-ins lately from any address (`login_user`, default 20 an hour, a sliding window) is
refused as the API refuses it. Beyond it the form answers 429
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

from controlplane.api.throttling import sign_in_refused, username_refusal, username_refused
from controlplane.services import config_audit


def _throttled(request: HttpRequest) -> HttpResponse | None:
    """The 429 a sign-in POST gets beyond its address's limit, or its username's failures
    (one counter each for the API and both forms); None when it may go on."""
    wait = sign_in_refused(request)
    if wait is not None:
        return _refused(request, wait)
    wait = username_refused(str(request.POST.get("username", "")))
    if wait is not None:
        return _refused(request, wait, username_refusal(wait))
    return None


def _refused(request: HttpRequest, wait: float, words: str | None = None) -> HttpResponse:
    seconds = math.ceil(wait)
    response = render(request, "registration/login.html", {
        "throttled": words or f"Too many sign-in attempts from your address; try again in {seconds} s.",
        "next": request.POST.get("next", ""),
    }, status=429)
    response["Retry-After"] = str(seconds)
    return response


class LoginView(auth_views.LoginView):
    """The pages' sign-in form, throttled per client address."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = _throttled(request)  # after Django's CSRF check (LoginView.dispatch)
        if refused is not None:
            return refused
        return super().post(request, *args, **kwargs)


@never_cache
@csrf_protect
def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's sign-in form (AdminSite.login), throttled as the pages' one."""
    if request.method == "POST":
        refused = _throttled(request)
        if refused is not None:
            return refused
    return admin.site.login(request, extra_context)


def admin_password_change(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's own-password form (AdminSite.password_change, for the signed-in staff user):
    a password changed there is a `UserPasswordChanged` event, as one set on a user's page is
    (services/config_audit.password_change_recorded)."""
    view = admin.site.admin_view(admin.site.password_change)
    if not request.user.is_authenticated:
        return view(request, extra_context)  # to the sign-in form
    return config_audit.password_change_recorded(
        f"user:{request.user.get_username()}", lambda: view(request, extra_context))
