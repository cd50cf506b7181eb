"""A path under /api/ that is no endpoint, answered in the API's error shape (urls.py routes every
other path under /api/ here, last)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt  # it changes nothing; a token client has no CSRF cookie and must get this answer
def no_such_path(request: HttpRequest) -> HttpResponse:
    """A path under /api/ that is no endpoint: a 404 in the API's error shape (not the pages'
    HTML). A path that lacks only its trailing slash is redirected for GET and HEAD, as Django
    does; any other method is refused and told the right path, since HTTP clients follow a
    redirect of a POST as a GET: the submit would be lost behind a 200 and a page of jobs."""
    path = request.path_info
    if not path.endswith("/"):
        slashed = path + "/"
        try:
            resolve(slashed)
        except Resolver404:
            pass
        else:
            if request.method in ("GET", "HEAD"):
                query = request.META.get("QUERY_STRING", "")
                return HttpResponsePermanentRedirect(slashed + (f"?{query}" if query else ""))
            return JsonResponse({
                "detail": f"No endpoint at {path}. The API's paths end with a trailing slash: "
                          f"{request.method} {slashed}", "code": "not_found"}, status=404)
    return JsonResponse({"detail": f"No endpoint at {path}; see /api/schema/ for the API's paths.",
                         "code": "not_found"}, status=404)
