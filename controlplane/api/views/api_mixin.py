"""What every user-facing endpoint shares: ApiMixin (its authentication, permission, parser,
renderers and content negotiation, throttling, pagination and schema; unknown query parameters
refused; Server-Timing), and an action's refusal of fields it does not take (refuse_fields)."""

from __future__ import annotations

import time
from typing import Any

from django.http import Http404
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request

from controlplane.api.authentication import TokenAuthentication
from controlplane.api.errors import exception_handler
from controlplane.api.filter_backends import refuse_unknown_parameters
from controlplane.api.pagination import Pagination
from controlplane.api.parsers import BoundedJSONParser
from controlplane.api.permissions import IsPerson
from controlplane.api.schema import QuartermasterAutoSchema
from controlplane.api.throttling import PerUserThrottle
from controlplane.services.whole_numbers import is_whole_number


class ContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, with the answer for the commonest request given at once: a client
    that accepts exactly `application/json` (the CLI, scripts, the load benchmark), asking for
    no format override, gets the JSON renderer, as the full negotiation would decide."""

    def select_renderer(self, request: Request, renderers: Any, format_suffix: str | None = None) -> Any:
        if (
            format_suffix is None
            and request.META.get("HTTP_ACCEPT") == "application/json"
            and self.settings.URL_FORMAT_OVERRIDE not in request.query_params
            and renderers and type(renderers[0]) is JSONRenderer
        ):
            return renderers[0], "application/json"
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except Http404:
            # DRF answers an unknown `?format=` with a bare 404 "Not found.", which reads as a
            # missing endpoint: it is a bad query parameter, a 400 naming it.
            wanted = str(request.query_params.get(self.settings.URL_FORMAT_OVERRIDE, ""))[:40]
            takes = ", ".join(sorted({r.format for r in renderers}))
            raise ValidationError({"format": [f"'{wanted}' is not a format here: use {takes}."]}) from None


class ApiMixin:
    """What every user-facing endpoint shares. Authentication is spelled out rather than taken
    from settings: only user tokens and sessions authenticate here, so a node agent's
    credentials, whatever classes the agent endpoints add, never reach these views."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [IsPerson]
    parser_classes = [BoundedJSONParser]
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer]
    content_negotiation_class = ContentNegotiation
    throttle_classes = [PerUserThrottle]
    pagination_class = Pagination
    schema = QuartermasterAutoSchema()

    def get_exception_handler(self) -> Any:
        return exception_handler

    #: The query parameters a GET of this view takes when it is not a filtered list (whose
    #: filter backend names unknown ones); None: the view checks its own.
    query_parameters: frozenset[str] | None = frozenset({"format"})
    #: Those of `query_parameters` whose repeats the view's own reading judges (a filterset's:
    #: jobs/history.csv's `state` takes several, its `team` one); every other one is a 400 given twice.
    query_parameters_judged_by_view: frozenset[str] = frozenset()

    def get_object(self) -> Any:
        """The record its path names by id, read by the one rule for whole numbers
        (services/whole_numbers.py): Django's lookup reads the id with int(), so `jobs/٣/`,
        `jobs/+3/`, `jobs/%203/` and `jobs/0_3/` were job 3, to show, change, delete or cancel.
        Any other id names no record: the 404 every missing one gets."""
        lookup = getattr(self, "lookup_field", "pk")
        key = self.kwargs.get(getattr(self, "lookup_url_kwarg", None) or lookup)  # type: ignore[attr-defined]
        if lookup in ("pk", "id") and key is not None and not is_whole_number(str(key), signed=False):
            raise Http404
        return super().get_object()  # type: ignore[misc]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        self._started = time.perf_counter()
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        self._refuse_unknown_query_parameters(request)

    def _refuse_unknown_query_parameters(self, request: Request) -> None:
        """`GET jobs/5/explain/?verbose=1` answered as if the parameter meant something, as a
        list's unknown filter once did: a parameter the endpoint does not take is a 400 naming
        it (after authentication, so a stranger still gets the 401)."""
        takes = self.query_parameters
        if takes is not None and not (request.method == "GET" and getattr(self, "action", None) == "list"):
            # every method: a detail action looks its object up through the list's filters, so
            # `POST jobs/5/cancel/?team=vision` answered 404 "not yours to see" for a job that
            # is, and `?force=1` a 400 listing the list's filters as what cancel takes
            refuse_unknown_parameters(request, takes, judged_elsewhere=self.query_parameters_judged_by_view)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        """Adds `Server-Timing: app;dur=<ms>`: time inside the view, authentication included
        (what bench/api_load.py reports as server time)."""
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        started = getattr(self, "_started", None)
        if started is not None:
            response["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
        return response


def action_body(request: Request, refusal: str) -> dict[str, Any]:
    """An action's body as an object: none at all (DRF's {}) or `{}` is empty. Any other JSON
    value is refused with `refusal` ("send no body, {}, or …"): `[]`, `null`, `false`, `0` and
    `""` read as no body while the check was `not request.data`, so `POST jobs/5/cancel/ false`
    cancelled the job."""
    data = request.data
    if not isinstance(data, dict):
        raise ValidationError({"non_field_errors": [refusal]})
    return data


def refuse_fields(request: Request, refusal: str) -> None:
    """An action takes no fields: any sent is refused naming it, as an unknown field of any other
    body is (`{"reason": "bad DIMM"}` on a cordon answered 200 and the reason was nowhere). No
    body, or `{}` (what the pages send), acts."""
    data = action_body(request, f"{refusal}: send no body, or {{}}")
    if data:
        raise ValidationError({str(k)[:64]: [refusal] for k in data})
