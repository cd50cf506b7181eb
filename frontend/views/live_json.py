"""What the pages' live endpoints (`/ui/*.json`) answer when what a page shows is gone: a JSON
`detail` naming it, as the API answers, not the site's HTML "Not found" page. The polling page
(qm.js `QM.poll`) says those words and stops polling: a 404 (the job or node deleted, or the
reader no longer in its team) or a 403 does not pass, where a 5xx or an unreachable server may."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse


def answers_json(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The view's 404 and 403 as `{"detail": …}` with their status."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except Http404 as missing:
            return JsonResponse({"detail": str(missing) or "Not found."}, status=404)
        except PermissionDenied as refused:
            return JsonResponse({"detail": str(refused) or "You may not read this."}, status=403)

    return wrapped
