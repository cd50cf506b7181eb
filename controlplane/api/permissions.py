"""Who may call what. The role rules themselves live in services/access.py; these classes only
apply them to requests.

Object-level visibility is done by scoping querysets (a job of another team is simply not
found: 404, so its existence does not leak); these classes decide the rest.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from controlplane.services import access


class IsPerson(BasePermission):
    """A signed-in, active user account. Node agents (authenticated as their node) and
    anonymous callers fail here: 401 when no credentials came, 403 otherwise."""

    message = "This endpoint is for people: sign in with a user token or session."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return access.is_person(request.user)


class ReadOnlyUnlessAdmin(IsPerson):
    """Anyone signed in reads (within their scope); only admins create, change or delete."""

    message = "Only admins may change this resource."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not super().has_permission(request, view):
            return False
        return request.method in SAFE_METHODS or access.access_of(request.user).is_admin


class IsAdmin(IsPerson):
    message = "Only admins may do this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return super().has_permission(request, view) and access.access_of(request.user).is_admin


class SubmitsJobs(IsPerson):
    """Reading jobs needs a team (or admin); submitting and cancelling too: finance reads
    costs, never acts."""

    message = "Finance accounts read showback and costs; they cannot submit, change, hold, release, cancel or requeue jobs."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not super().has_permission(request, view):
            return False
        if request.method in SAFE_METHODS:
            return True
        return access.may_submit(request.user)

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        return True
