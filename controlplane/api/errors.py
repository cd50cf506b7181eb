"""One error format for the whole API, and no database error ever reaching the caller as a 500.

Every error body is `{"detail": "...", "code": "...", "errors": {"field": ["..."]}}`: `detail`
is one sentence a CLI can print as is, naming each field at fault; `errors` (validation only)
maps fields to their problems, nested fields joined with dots (`env.PATH`). A database that
cannot be reached (stopped, restarting, the network) is a 503 `database_unavailable` with
`retry_after` and a Retry-After header, always JSON, logged as one `api.database_unavailable` line.
"""

from __future__ import annotations

import math
import re
from typing import Any

import structlog
from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, InterfaceError, OperationalError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.fields import get_error_detail
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from controlplane.models import PriorityClass
from controlplane.services.whole_numbers import is_whole_number

log = structlog.get_logger(__name__)

#: What a client is told to wait before trying again while the database cannot be reached.
DATABASE_RETRY_AFTER_S = 5


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the resource's current state."
    default_code = "conflict"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


def flatten(errors: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error structure as {"field.sub": ["message", ...]}."""
    out: dict[str, list[str]] = {}
    if isinstance(errors, dict):
        for key, value in errors.items():
            name = str(key) if not prefix else (prefix if key == "non_field_errors" else f"{prefix}.{key}")
            for k, v in flatten(value, name).items():
                out.setdefault(k, []).extend(v)
    elif isinstance(errors, list):
        for i, value in enumerate(errors):
            if isinstance(value, dict | list):
                for k, v in flatten(value, f"{prefix}.{i}" if prefix else str(i)).items():
                    out.setdefault(k, []).extend(v)
            else:
                out.setdefault(prefix or "non_field_errors", []).append(str(value))
    else:
        out.setdefault(prefix or "non_field_errors", []).append(str(errors))
    return out


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """`text` with each lone surrogate written as its escape (`\\ud800`): JSON may carry one, and
    an error that repeats the value given (a choice, a dependency's condition) could not be
    encoded as UTF-8, so the answer was a 500 instead of the 400 it built."""
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _sentence(fields: dict[str, list[str]]) -> str:
    parts = []
    for name, messages in fields.items():
        text = " ".join(m if m.endswith((".", "?")) else m + "." for m in messages)
        parts.append(text if name == "non_field_errors" else f"{name}: {text}")
    return "Invalid request. " + " ".join(parts) if parts else "Invalid request."


# Rows that are history, not configuration: what they protect cannot be deleted at all.
_HISTORY = {"usagerollup", "grouprollup", "quotarollup"}


def _still_in_use(objects: Any) -> str:
    objects = list(objects)
    if any(o._meta.model_name in _HISTORY for o in objects):
        rows = sum(o._meta.model_name in _HISTORY for o in objects)
        return (f"It has accounting history ({rows} showback and quota rollup row(s)), which is kept for finance's "
                "reports; it cannot be deleted. Remove its members and quotas to retire it instead.")
    # Sorted before cut: the protected objects come in no set order, and the five named must
    # not change from one attempt to the next (a test saw a node named, then not).
    blockers = sorted({str(o) for o in objects})
    more = f" and {len(blockers) - 5} more" if len(blockers) > 5 else ""
    return f"Still in use by {', '.join(blockers[:5])}{more}; remove or move those first."


# What to do instead of deleting a record that history protects (as the admin's pages say).
_RETIRE = {
    "team": "To retire it, take it out of its cohort and delete its quotas and memberships.",
    "gputype": ("It stays for the reports: with no nodes and no quotas of this type, no job can run on it (a job "
                "asking for it alone is told it can never run)."),
    "node": ("To retire it, drain it (POST nodes/{pk}/drain/), then retire it once it is cordoned (POST "
             "nodes/{pk}/retire/): it leaves the fleet's capacity and idle cost and its agent is refused, while its "
             "history stays; docs/operations.md, Taking a node out for good."),
}
# Rows that refer to a record and can themselves be deleted or changed first; every other
# protecting row (jobs, the GPUs of their allocations, rollups) is history, kept for good.
_SETTINGS = {"quota", "node"}
_HISTORY_WORDS = {
    "job": ("job", "jobs"),
    "allocationgpu": ("allocated GPU of jobs", "allocated GPUs of jobs"),
}


def refused_deletion(instance: Any, objects: Any) -> str:
    """Why ``instance`` cannot be deleted, in words for the record deleted: what history protects
    it, counted per kind, and how to retire it instead; or the settings that still use it."""
    objects = list(objects)
    models = [o._meta.model_name for o in objects]
    if all(name in _SETTINGS for name in models):
        return _still_in_use(objects)
    counts: dict[str, int] = {}
    for name in models:
        if name in _HISTORY:
            name = "rollup"
        if name not in _SETTINGS:
            counts[name] = counts.get(name, 0) + 1
    parts = []
    for name, n in counts.items():
        if name == "rollup":
            parts.append(f"{n:,} showback and quota rollup row{'s' if n != 1 else ''}")
        else:
            one, many = _HISTORY_WORDS.get(name, (name, name + "s"))
            parts.append(f"{n:,} {one if n == 1 else many}")
    label = str(instance._meta.verbose_name)
    advice = (instance.retirement_advice("(its default_priority_class: PATCH teams/ID/)",
                                         "(their default_priority_class: PATCH teams/ID/)")
              if isinstance(instance, PriorityClass) else _RETIRE.get(instance._meta.model_name, "").format(pk=instance.pk))
    return (f"{label[:1].upper()}{label[1:]} {getattr(instance, 'name', instance)} has accounting history that "
            f"finance's reports and the audit trail keep ({', '.join(parts)}); it cannot be deleted."
            + (f" {advice}" if advice else ""))


def _translate(exc: Exception) -> Exception:
    if isinstance(exc, ProtectedError | RestrictedError):
        return Conflict(_still_in_use(exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects))
    if isinstance(exc, RequestDataTooBig):
        # (DRF reads every JSON body through Django's bound before a parser sees it)
        return PayloadTooLarge(f"The request body exceeds {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes, "
                               "the most this server reads.")
    if isinstance(exc, DjangoValidationError):
        return exceptions.ValidationError(get_error_detail(exc))
    if isinstance(exc, IntegrityError):
        cause = str(exc.__cause__ or exc).splitlines()[0]
        return Conflict(f"The database refused the change: {cause}")
    return exc


def database_unavailable(exc: Exception, request: HttpRequest | None) -> JsonResponse:
    """The answer to a request the database could not serve: a 503 in JSON whatever the request
    asked for (the HTML and CSV renderers read the database themselves), with when to retry."""
    cause = exc.__cause__ or exc
    log.error("api.database_unavailable", path=getattr(request, "path", None),
              method=getattr(request, "method", None), retry_after_s=DATABASE_RETRY_AFTER_S,
              error=f"{type(cause).__module__}.{type(cause).__name__}: "
                    f"{str(cause).splitlines()[0] if str(cause) else ''}")
    response = JsonResponse(
        {"detail": "Database unavailable: the server cannot reach its database right now; "
                   f"try again in {DATABASE_RETRY_AFTER_S} s.",
         "code": "database_unavailable", "retry_after": DATABASE_RETRY_AFTER_S},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
    )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
    return response


_DEFAULT_NOT_FOUND = re.compile(r"^No \w+ matches the given query\.$")


def not_found_words(exc: Http404, context: dict[str, Any]) -> str | None:
    """A detail endpoint's 404 in words, as a job's says it ("No node 99999, or not yours to
    see."): Django's "No PriorityClass matches the given query." named a Python class, and an id
    that is no number ("nodes/abc/") answered "Not found.". A 404 raised with words of its own
    keeps them."""
    message = str(exc.args[0]) if exc.args else ""
    if message and not _DEFAULT_NOT_FOUND.match(message):
        return message
    view = context.get("view")
    lookup = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", None) or "pk"
    value = (context.get("kwargs") or {}).get(lookup)
    model = getattr(getattr(view, "queryset", None), "model", None)
    if model is None and value is not None and hasattr(view, "get_queryset"):
        try:
            model = view.get_queryset().model  # lazy: no query
        except Exception:  # noqa: BLE001 - the words are a courtesy; the 404 stands whatever
            model = None
    if value is None or model is None:
        return message or None
    noun = str(model._meta.verbose_name)
    return _named_not_id(view, context, noun, str(value)) or f"No {noun} {str(value)[:40]}, or not yours to see."


def _named_not_id(view: Any, context: dict[str, Any], noun: str, key: str) -> str | None:
    """A record's name where its path takes the id (`nodes/h100-05/`, as `kubectl get node` takes
    a name): "No node h100-05, or not yours to see." of a node the reader can see misled. Said
    only of a record the reader's own queryset holds, one of that name; else None."""
    request = context.get("request")
    if is_whole_number(key, signed=False) or request is None or not hasattr(view, "get_queryset"):
        return None
    try:
        rows = view.get_queryset().filter(name=key).values_list("pk", flat=True)[:2]
        found = list(rows)
    except Exception:  # noqa: BLE001 - no name to look up (a model without one): the plain words
        return None
    if len(found) != 1:
        return None
    path = request.path.replace(f"/{key}/", f"/{found[0]}/", 1)
    return f"No {noun} with id {key[:40]}: the path takes the {noun}'s id, not its name; {noun} {key} is {found[0]}: {path}."


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | JsonResponse | None:
    if isinstance(exc, OperationalError | InterfaceError):
        return database_unavailable(exc, context.get("request"))
    exc = _translate(exc)
    # DRF answers Django's own Http404 and PermissionDenied as NotFound and PermissionDenied;
    # translated here first, so their answers carry those codes (not "error").
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(not_found_words(exc, context))
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = {encodable(name): [encodable(m) for m in messages] for name, messages in flatten(response.data).items()}
        response.data = {"detail": _sentence(fields), "code": "invalid", "errors": fields}
    else:
        detail = response.data.get("detail", "") if isinstance(response.data, dict) else response.data
        code = getattr(getattr(exc, "detail", None), "code", None) or getattr(exc, "default_code", "error")
        response.data = {"detail": encodable(str(detail)), "code": str(code)}
        if getattr(exc, "wait", None):  # DRF's Retry-After (throttled, a retired node's agent): in the body too
            response.data["retry_after"] = math.ceil(float(exc.wait))  # type: ignore[attr-defined]
    return response
