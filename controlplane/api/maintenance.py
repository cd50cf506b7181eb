"""/api/v1/maintenance-windows/: nodes taken out of service for a time (services/maintenance.py).

    GET   maintenance-windows/                 every window, by start (?state=upcoming&state=active, ?node=NAME)
    POST  maintenance-windows/                 {"nodes": [...] and/or "pool", "start_at", "end_at" | "duration_s",
                                                "reason"} (admins; times with their zone: Z or an offset)
    GET   maintenance-windows/{id}/            one window
    PATCH maintenance-windows/{id}/            move its times, change its nodes or reason, all or nothing (admins)
    POST  maintenance-windows/{id}/cancel/     cancel it; it is kept, with who cancelled it and when (admins)

Everyone signed in reads them (the fleet's plans are no secret; a running job of a team the
reader cannot read is shown by its team only). Every answer carries `affected_running_jobs`:
the running jobs on the window's nodes that will still hold GPUs when it begins, by their
runtime limits (none for an ended or cancelled window). The scheduler starts no job there whose
run would overlap the window, and stops none: these are what an operator drains or cancels.
And `overlapping_windows`: the other windows, not cancelled, that overlap it on a node they
share (stored before writes refused overlaps), so an operator can merge or cancel them.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.errors import Conflict
from controlplane.api.permissions import IsAdmin, ReadOnlyUnlessAdmin
from controlplane.api.serializers.fields import (
    OnceEachListField,
    TextField,
    WholeNumberField,
    ZonedDateTimeField,
)
from controlplane.api.views.api_mixin import ApiMixin, refuse_fields
from controlplane.filtersets import MaintenanceWindowFilterSet
from controlplane.models import MaintenanceWindow
from controlplane.models.maintenance import MaintenanceWindowState
from controlplane.services import maintenance
from controlplane.services.access import access_of


class AffectedJobSerializer(serializers.Serializer):
    id = WholeNumberField(allow_null=True, help_text="The job's id; null for a job of a team you cannot read.")
    name = serializers.CharField(allow_null=True, help_text="Its name; null for a job of a team you cannot read.")
    team = serializers.CharField()
    state = serializers.CharField()
    gpus = WholeNumberField(help_text="GPUs it holds on the window's nodes.")
    nodes = serializers.ListField(child=serializers.CharField(), help_text="The window's nodes it runs on.")
    started_at = serializers.DateTimeField()
    runtime_limit_s = WholeNumberField()
    holds_until = serializers.DateTimeField(
        help_text="When its runtime limit ends (or its stop's deadline): it holds its GPUs until then at most.")


class MaintenanceWindowSerializer(serializers.Serializer):
    """A window as read. `context["affected"]` holds each window's affected jobs, as
    services/maintenance.affected_running_jobs gives them for the page of windows, and
    `context["overlapping"]` the windows overlapping each (services/maintenance.overlapping_windows)."""

    id = WholeNumberField(read_only=True)
    nodes = serializers.ListField(child=serializers.CharField(), read_only=True)
    start_at = serializers.DateTimeField(read_only=True)
    end_at = serializers.DateTimeField(read_only=True)
    duration_s = WholeNumberField(read_only=True)
    reason = serializers.CharField(read_only=True)
    state = serializers.ChoiceField(choices=MaintenanceWindowState.choices, read_only=True,
                                    help_text="upcoming, active (begun, not ended), ended or cancelled: now.")
    created_by = serializers.CharField(read_only=True, allow_null=True)
    created_at = serializers.DateTimeField(read_only=True)
    cancelled_at = serializers.DateTimeField(read_only=True, allow_null=True)
    cancelled_by = serializers.CharField(read_only=True, allow_null=True)
    affected_running_jobs = AffectedJobSerializer(
        many=True, read_only=True,
        help_text="Running jobs on its nodes that will still hold GPUs when it begins, by their runtime limits: "
                  "drain or cancel them (the scheduler stops none). Empty for an ended or cancelled window.")
    overlapping_windows = serializers.ListField(
        child=WholeNumberField(), read_only=True,
        help_text="Ids of the other windows, not cancelled, that overlap this one in time on a node they share: "
                  "stored before new windows were refused for overlapping. Merge them (change one, cancel the "
                  "other). Empty for a cancelled window.")

    def to_representation(self, window: MaintenanceWindow) -> dict[str, Any]:
        now = self.context["now"]
        who = self.context["access"]
        affected = self.context["affected"].get(window.pk, [])
        return {
            "id": window.pk,
            "nodes": sorted(n.name for n in window.nodes.all()),
            "start_at": serializers.DateTimeField().to_representation(window.start_at),
            "end_at": serializers.DateTimeField().to_representation(window.end_at),
            "duration_s": int((window.end_at - window.start_at).total_seconds()),
            "reason": window.reason,
            "state": window.state_at(now).value,
            "created_by": window.created_by.get_username() if window.created_by_id else None,
            "created_at": serializers.DateTimeField().to_representation(window.created_at),
            "cancelled_at": (serializers.DateTimeField().to_representation(window.cancelled_at)
                             if window.cancelled_at else None),
            "cancelled_by": window.cancelled_by.get_username() if window.cancelled_by_id else None,
            "affected_running_jobs": AffectedJobSerializer([j.as_seen_by(who) for j in affected], many=True).data,
            "overlapping_windows": self.context["overlapping"].get(window.pk, []),
        }


class MaintenanceWindowWriteSerializer(serializers.Serializer):
    """What a POST or PATCH gives; the rules are services/maintenance.py's."""

    nodes = OnceEachListField(each="node", child=TextField(max_length=128), required=False,
                              max_length=maintenance.MAX_NODES,
                              help_text="Node names, each once. On a PATCH they replace the window's nodes.")
    pool = TextField(required=False, max_length=64,
                                 help_text="A pool: its nodes (retired ones left out), as they are now, join `nodes`.")
    start_at = ZonedDateTimeField(required=False, help_text="When it begins: an RFC 3339 instant with its time zone "
                                                            "(2026-12-02T22:00:00Z, …-05:00); a time without one is "
                                                            "refused. A PATCH giving only this moves the window "
                                                            "whole, its length kept.")
    end_at = ZonedDateTimeField(required=False, help_text="When it ends, with its time zone as start_at; or give "
                                                          "duration_s.")
    # (no bound here: the window's own rule says a length too long, "at most 14 d"
    # (services/maintenance.py), where a bound of 2147483647 s refused `-d 100000d` in words
    # nobody typed)
    duration_s = WholeNumberField(required=False,
                                          help_text="How long it lasts, in seconds (instead of end_at).")
    reason = TextField(required=False, allow_blank=True, max_length=1000,
                                   help_text="What the maintenance is, e.g. firmware upgrade (one line, ≤ 200 "
                                             "characters).")


class MaintenanceWindowViewSet(ApiMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = MaintenanceWindow.objects.none()  # the schema's model; requests read get_queryset
    serializer_class = MaintenanceWindowSerializer
    filterset_class = MaintenanceWindowFilterSet
    permission_classes = [ReadOnlyUnlessAdmin]

    def get_queryset(self) -> QuerySet[MaintenanceWindow]:
        return MaintenanceWindow.objects.select_related("created_by", "cancelled_by").prefetch_related("nodes")

    def _answer(self, windows: list[MaintenanceWindow], many: bool) -> Any:
        now = timezone.now()
        context = {"now": now, "access": access_of(self.request.user),
                   "affected": maintenance.affected_running_jobs(windows, now),
                   "overlapping": maintenance.overlapping_windows(windows)}
        data = MaintenanceWindowSerializer(windows, many=True, context=context).data
        return data if many else data[0]

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        if page is not None:
            return self.get_paginated_response(self._answer(list(page), many=True))
        return Response(self._answer(list(queryset), many=True))

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(self._answer([self.get_object()], many=False))

    def _fresh(self, pk: int, code: int = status.HTTP_200_OK) -> Response:
        return Response(self._answer([self.get_queryset().get(pk=pk)], many=False), status=code)

    def _given(self, request: Request, action: str, window: int | None = None) -> dict[str, Any]:
        """The request's fields, checked for their shape; a refusal here is logged as the
        service logs its own (maintenance.log_refused), with what was sent."""
        try:
            if not isinstance(request.data, dict):
                raise ValidationError({"non_field_errors": ["Send a JSON object with the window's fields."]})
            unknown = sorted(set(request.data) - set(MaintenanceWindowWriteSerializer().fields))
            if unknown:
                raise ValidationError({name[:40]: ["not a field of a maintenance window: give nodes, pool, start_at, "
                                                   "end_at or duration_s, and reason."] for name in unknown[:10]})
            given = MaintenanceWindowWriteSerializer(data=request.data, partial=True)
            given.is_valid(raise_exception=True)
            if action == "change" and not given.validated_data:
                raise ValidationError({"non_field_errors": ["Nothing to change: give nodes, pool, start_at, end_at or "
                                                            "duration_s, or reason."]})
        except ValidationError as refused:
            said = refused.detail if isinstance(refused.detail, dict) else {"non_field_errors": refused.detail}
            maintenance.log_refused(action, request.user, {str(k): " ".join(map(str, v)) if isinstance(v, list)
                                                           else str(v) for k, v in said.items()},
                                    window=window, given=request.data)
            raise
        return dict(given.validated_data)

    @extend_schema(request=MaintenanceWindowWriteSerializer, responses={201: MaintenanceWindowSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Schedule a window (admins): 201 with it and the running jobs it affects."""
        given = self._given(request, "create")
        try:
            window = maintenance.create(request.user, nodes=given.get("nodes"), pool=given.get("pool"),
                                        start_at=given.get("start_at"), end_at=given.get("end_at"),
                                        duration_s=given.get("duration_s"), reason=given.get("reason"))
        except maintenance.Refused as refused:
            raise ValidationError({k: [v] for k, v in refused.errors.items()}) from None
        return self._fresh(window.pk, status.HTTP_201_CREATED)

    @extend_schema(request=MaintenanceWindowWriteSerializer, responses={200: MaintenanceWindowSerializer})
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Change a window (admins), all or nothing. 409 for one that ended or was cancelled."""
        window = self.get_object()
        given = self._given(request, "change", window.pk)
        try:
            maintenance.change(window.pk, request.user, given)
        except maintenance.Refused as refused:
            raise ValidationError({k: [v] for k, v in refused.errors.items()}) from None
        except maintenance.Conflicted as conflict:
            raise Conflict(str(conflict)) from None
        return self._fresh(window.pk)

    @extend_schema(request=None, responses={200: MaintenanceWindowSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the window (admins): its nodes take any work again from the next cycle. It is
        kept, with who cancelled it and when. Cancelling it again changes nothing; 409 for one
        that has ended."""
        refuse_fields(request, "cancel takes no fields (its config.changed event records who cancelled it and when)")
        window = self.get_object()
        try:
            maintenance.cancel(window.pk, request.user)
        except maintenance.Conflicted as conflict:
            raise Conflict(str(conflict)) from None
        return self._fresh(window.pk)
