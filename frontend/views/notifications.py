"""`/notifications/`: the signed-in user's webhooks (NotificationHook) and their last deliveries.

Adding, pausing, resuming, deleting and testing a hook go through the REST API from the browser
(`notifications.js` → `/api/v1/notification-hooks/`, session + CSRF), the same path as `qm notify`,
so the page refuses what the API refuses, in its words, next to the field. The page reads the
hooks and their deliveries through `services/notifications.hooks_page` (two queries whatever their
number, and each hook's History, its changes, in one more); `/ui/notifications.json` re-renders
the list after each change and every few seconds, so a delivery's retries show as they happen (an
open History stays open: notifications.js). An admin may read another user's with `?user=NAME`
(and pause, resume, delete or test them: the API lets admins change every hook); a member who
names anyone else gets a 404.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from controlplane.choices import NotifyOn
from controlplane.services import notifications
from frontend.views.live_json import answers_json

#: Deliveries listed per hook (the API's `{id}/deliveries/` gives the last 50).
DELIVERIES_SHOWN = 5


def _owner(request: HttpRequest) -> Any:
    """Whose hooks: the viewer's; an admin's `?user=NAME`, another user's (the API's rule)."""
    username = request.GET.get("user", "").strip()
    owner = notifications.hooks_owner(request.user, username)
    if owner is None:
        raise Http404(f"No hooks of a user named '{username[:150]}' that you may see: you see your own.")
    return owner


def _hooks_context(request: HttpRequest, owner: Any) -> dict[str, Any]:
    return {
        "hooks": notifications.hooks_page(owner, deliveries=DELIVERIES_SHOWN),
        "deliveries_shown": DELIVERIES_SHOWN,
        "history_limit": notifications.HISTORY_LIMIT,
        "api_url": reverse("v1:notification-hook-list"),
        "owner": owner,
        "own": owner.pk == request.user.pk,
    }


@login_required
@require_GET
def notifications_page(request: HttpRequest) -> HttpResponse:
    owner = _owner(request)
    live_url = reverse("frontend:notifications-json")
    if owner.pk != request.user.pk:
        live_url += "?" + urlencode({"user": owner.get_username()})
    return render(request, "frontend/notifications.html", {
        "page": "notifications",
        "live_url": live_url,
        "live_every": 10_000,
        "events": [(c.value, c.label) for c in NotifyOn],
        "teams": notifications.teams_to_follow(request.user),
        "signature_header": notifications.SIGNATURE_HEADER,
        **_hooks_context(request, owner),
    })


@login_required
@answers_json
@require_GET
def notifications_json(request: HttpRequest) -> JsonResponse:
    context = _hooks_context(request, _owner(request))
    return JsonResponse({"html": {"hooks": render_to_string("frontend/_notification_hooks.html", context,
                                                            request=request)}})
