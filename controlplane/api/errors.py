"""One error format for the whole API, and no database error ever reaching the caller as a 500.

Every error body is `{"detail": "...", "code": "...", "errors": {"field": ["..."]}}`: `detail`
is one sentence a CLI can print as is, naming each field at fault; `errors` (validation only)
maps fields to their problems, nested fields joined with dots (`env.PATH`).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.fields import get_error_detail
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


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


def _sentence(fields: dict[str, list[str]]) -> str:
    parts = []
    for name, messages in fields.items():
        text = " ".join(m if m.endswith(".") else m + "." for m in messages)
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
    blockers = sorted({str(o) for o in objects[:5]})
    return f"Still in use by {', '.join(blockers)}; remove or move those first."


def _translate(exc: Exception) -> Exception:
    if isinstance(exc, ProtectedError | RestrictedError):
        return Conflict(_still_in_use(exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects))
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, DjangoValidationError):
        return exceptions.ValidationError(get_error_detail(exc))
    if isinstance(exc, IntegrityError):
        cause = str(exc.__cause__ or exc).splitlines()[0]
        return Conflict(f"The database refused the change: {cause}")
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    exc = _translate(exc)
    # DRF answers Django's own Http404 and PermissionDenied as NotFound and PermissionDenied;
    # translated here first, so their answers carry those codes (not "error").
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten(response.data)
        response.data = {"detail": _sentence(fields), "code": "invalid", "errors": fields}
    else:
        detail = response.data.get("detail", "") if isinstance(response.data, dict) else response.data
        code = getattr(getattr(exc, "detail", None), "code", None) or getattr(exc, "default_code", "error")
        response.data = {"detail": str(detail), "code": str(code)}
    return response
