"""`/notifications/`: the signed-in user's webhooks (NotificationHook) and their last deliveries.

Adding, pausing, resuming, deleting and testing a hook go through the REST API from the browser
(`notifications.js` → `/api/v1/notification-hooks/`, session + CSRF), the same path as `qm notify`,
so the page refuses what the API refuses, in its words, next to the field. The page reads the
hooks and their deliveries through `services/notifications.hooks_page` (two queries whatever their
number); `/ui/notifications.json` re-renders the list after each change and every few seconds, so
a delivery's retries show as they happen.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET

from controlplane.choices import NotifyOn
from controlplane.services import notifications

#: Deliveries listed per hook (the API's `{id}/deliveries/` gives the last 50).
DELIVERIES_SHOWN = 5


def _hooks_context(request: HttpRequest) -> dict[str, Any]:
    return {
        "hooks": notifications.hooks_page(request.user, deliveries=DELIVERIES_SHOWN),
        "deliveries_shown": DELIVERIES_SHOWN,
        "api_url": reverse("v1:notification-hook-list"),
    }


@login_required
@require_GET
def notifications_page(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/notifications.html", {
        "page": "notifications",
        "live_url": reverse("frontend:notifications-json"),
        "live_every": 10_000,
        "events": [(c.value, c.label) for c in NotifyOn],
        "teams": notifications.teams_to_follow(request.user),
        "signature_header": notifications.SIGNATURE_HEADER,
        **_hooks_context(request),
    })


@login_required
@require_GET
def notifications_json(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"html": {"hooks": render_to_string("frontend/_notification_hooks.html",
                                                            _hooks_context(request), request=request)}})
