"""Showback and utilization over the API.

    GET /api/v1/showback/?window=7d&group_by=team|project|job|priority_class[&format=csv|xlsx]
    GET /api/v1/showback/?month=2026-11[&group_by=team][&format=csv|xlsx]     the monthly report
    GET /api/v1/metrics/utilization/?window=24h[&team=ml][&bucket=minute|hour|day]

Roles (services/access.py): finance and admins read every team and the fleet's `__idle__`;
members read their own teams; node agents and anonymous callers are refused. The figures come
from services/showback.py and services/utilization_series.py (which read the rollups
services/accounting.py writes); this module only parses, checks and renders.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.fields import DateTimeField
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api.filter_backends import refuse_unknown_parameters
from controlplane.api.serializers.fields import NamedChoiceField, WholeNumberField
from controlplane.api.views.api_mixin import ApiMixin
from controlplane.models import Team
from controlplane.services import accounting, excel_workbook, showback, utilization_series
from controlplane.services.access import access_of, visible_teams

#: Times as the rest of the API writes them (DRF's ISO 8601, UTC as "Z").
_when = DateTimeField().to_representation


class CsvRenderer(BaseRenderer):
    """`?format=csv`: the view hands over finished CSV text; errors become one CSV cell."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, str):
            return data.encode("utf-8")
        detail = data.get("detail", "") if isinstance(data, dict) else str(data)
        return f"error\n\"{str(detail).replace(chr(34), chr(39))}\"\n".encode()


class XlsxRenderer(BaseRenderer):
    """`?format=xlsx`: the view hands over the finished workbook (services/excel_workbook.py).
    An error is answered in JSON (`errors_in_json`): a workbook is no place for one sentence."""

    media_type = excel_workbook.CONTENT_TYPE
    format = "xlsx"
    charset = None
    render_style = "binary"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if not isinstance(data, bytes):
            raise TypeError("a workbook is rendered from its finished bytes; errors are JSON")
        return data


def errors_in_json(request: Request, response: Any) -> None:
    """An error asked for as a workbook (`?format=xlsx&month=2026-13`) is the API's JSON, with
    its Content-Type: a 400 saved as `.xlsx` would be a file Excel cannot open."""
    if getattr(response, "exception", False) and isinstance(getattr(request, "accepted_renderer", None), XlsxRenderer):
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = "application/json"


class FormatNegotiation(DefaultContentNegotiation):
    """An unknown `?format=` is bad input (400 naming the field), not a missing page (404)."""

    def select_renderer(self, request: Request, renderers: Any, format_suffix: str | None = None) -> Any:
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except Http404:
            wanted = request.query_params.get("format", "")
            raise exceptions.ValidationError({"format": [f"'{wanted}' is not a format here: use json, csv or xlsx."]}) from None


def _query_error(error: showback.AccountingQueryError) -> exceptions.ValidationError:
    return exceptions.ValidationError({error.field: [error.message]})


def _refuse_unknown(request: Request, query: type[serializers.Serializer], *extra: str) -> None:
    """A parameter the endpoint does not take is a 400 naming it: `?windw=30d` answered the
    default week and `?tema=ml` the whole fleet, figures a reader took for what was asked."""
    # and one given twice: `?window=7d&window=1d` answered the last one silently
    refuse_unknown_parameters(request, {*query().fields, *extra})
    # `?month=` (a script's unset variable) answered the default 7 days, `?team=` the whole
    # fleet's utilization: an empty value is a question left out, not the default asked for.
    empty = sorted(name for name in request.query_params if not request.query_params[name].strip())
    if empty:
        raise exceptions.ValidationError({name: ["Empty: give a value, or leave the parameter out for the default."]
                                          for name in empty})


class ShowbackQuery(serializers.Serializer):
    window = serializers.CharField(required=False, help_text="7d, 24h, 30m, 2w, today, yesterday (names and units in any case), "
                                   "or start,end (RFC 3339).")
    # Its shape is judged by services.showback.month_window (a 400 naming the month and what one
    # looks like), as the page and `qm` judge it: a pattern here said "This value does not match
    # the required pattern." and let "２０２６-１１" through.
    month = serializers.CharField(required=False, help_text="A calendar month in UTC: 2026-11.")
    group_by = NamedChoiceField(choices=showback.GROUP_BY, default="team")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("window") and attrs.get("month"):
            raise serializers.ValidationError({"month": ["Give either window or month, not both."]})
        return attrs


_ALLOCATION = inline_serializer(
    "ShowbackAllocation",
    fields={
        "name": serializers.CharField(),
        "kind": serializers.ChoiceField(
            choices=showback.KINDS, help_text="What the entry is: a group (team, project, job or priority class), "
            "the idle capacity (`__idle__`) or the total (`totals`). Tell the report's own entries by it, not by "
            "name: a team stored as TOTAL or __idle__ before such names were refused is a group."),
        "properties": serializers.DictField(),
        "window": serializers.DictField(child=serializers.CharField()),
        "gpuHours": serializers.FloatField(help_text="Allocated GPU-hours (for __idle__: unallocated)."),
        "gpuHoursActive": serializers.FloatField(required=False),
        "gpuHoursProductive": serializers.FloatField(required=False),
        "gpuEfficiency": serializers.FloatField(required=False, allow_null=True, help_text="active ÷ allocated."),
        "gpuProductiveEfficiency": serializers.FloatField(required=False, allow_null=True,
                                                          help_text="productive ÷ allocated."),
        "gpuCost": serializers.FloatField(),
        "totalCost": serializers.FloatField(),
        "usdPerGpuHour": serializers.FloatField(required=False, allow_null=True),
        "usdPerProductiveGpuHour": serializers.FloatField(required=False, allow_null=True),
        "usefulTokens": WholeNumberField(required=False),
        "usdPerUsefulToken": serializers.FloatField(required=False, allow_null=True),
        "usdPerMillionTokens": serializers.FloatField(required=False, allow_null=True),
        "costWithoutTokens": serializers.FloatField(
            required=False, help_text="Cost of jobs that reported no useful tokens (and, for __idle__ and TOTAL, "
            "the idle capacity): not in usdPerUsefulToken, which counts the token-reporting jobs only."),
        "shareOfCostWithoutTokens": serializers.FloatField(required=False, allow_null=True,
                                                           help_text="costWithoutTokens ÷ totalCost."),
        "idleReservedCost": serializers.FloatField(
            required=False, allow_null=True, help_text="Guaranteed quota neither used nor lent, at the reserved "
            "rate: per team and in TOTAL by team; null in every other grouping (a guarantee is its team's)."),
        "preemptionLostGpuHours": serializers.FloatField(required=False),
        "preemptionWasteCost": serializers.FloatField(required=False),
        "borrowedGpuHours": serializers.FloatField(
            required=False, allow_null=True, help_text="GPU-hours the team used beyond its guarantee (on its cohort's "
            "unused quota, lent to it): per team and in totals by team; null in every other "
            "grouping (a guarantee is its team's)."),
        "shown": serializers.DictField(
            child=serializers.FloatField(allow_null=True), required=False,
            help_text="The figures the showback page and `qm showback` show rounded, by their keys here: "
            "gpuHours, gpuHoursActive, gpuHoursProductive and preemptionLostGpuHours to two places, rounded "
            "cumulatively so the rows add up to totals' (a non-zero one whose share rounds to none: exact), "
            "usdPerGpuHour and usdPerProductiveGpuHour rounded once to the cent (below one: six places); "
            "borrowedGpuHours by team, to two places, rounded cumulatively (null in other groupings); "
            "__idle__'s gpuHours and totals' idleGpuHours the idle capacity's."),
    },
)

SHOWBACK_RESPONSE = inline_serializer(
    "Showback",
    fields={
        "code": WholeNumberField(),
        "window": serializers.DictField(child=serializers.CharField(), help_text="The window actually covered."),
        "requestedWindow": serializers.CharField(),
        "aggregate": serializers.CharField(),
        "currency": serializers.CharField(),
        "rolledUntil": serializers.DateTimeField(allow_null=True),
        "accountingBegan": serializers.DateTimeField(
            allow_null=True, help_text="When the accounting began, if the window starts before it: nothing "
            "before this instant was recorded, so the figures count nothing there (null otherwise)."),
        "data": serializers.ListField(child=serializers.DictField(child=_ALLOCATION)),
        "totals": serializers.DictField(),
    },
)


class ShowbackView(ApiMixin, APIView):
    """Cost and the three utilization tiers per team, project, job or priority class, shaped like
    OpenCost's allocation API (`__idle__` is capacity no job held). `format=csv` gives finance
    the CSV with a final TOTAL row, `format=xlsx` the same rows as an Excel workbook;
    `month=YYYY-MM` is the monthly report."""

    query_parameters = None  # checked by _refuse_unknown against its query serializer

    renderer_classes = [*ApiMixin.renderer_classes, CsvRenderer, XlsxRenderer]
    content_negotiation_class = FormatNegotiation

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        errors_in_json(request, response)
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(
        parameters=[
            ShowbackQuery,
            OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv", "xlsx"], required=False,
                             description="csv: finance's CSV with a TOTAL row; xlsx: the same rows as an Excel "
                             "workbook, each cell typed (names text, money numbers in dollars and cents)."),
        ],
        responses={(200, "application/json"): SHOWBACK_RESPONSE, (200, "text/csv"): OpenApiTypes.STR,
                   (200, excel_workbook.CONTENT_TYPE): OpenApiTypes.BINARY},
    )
    def get(self, request: Request) -> Any:
        _refuse_unknown(request, ShowbackQuery, "format")
        query = ShowbackQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        access = access_of(request.user)
        if not (access.is_admin or access.is_finance or access.team_ids):
            raise exceptions.PermissionDenied("Showback is for members of a team, finance and admins.")
        now = timezone.now()
        try:
            if query.validated_data.get("month"):
                window = showback.month_window(query.validated_data["month"], now)
            else:
                window = showback.parse_window(query.validated_data.get("window") or "7d", now)
            report = showback.showback(window, query.validated_data["group_by"], access, now)
        except showback.AccountingQueryError as error:
            raise _query_error(error) from None
        if request.accepted_renderer.format == "csv":
            return HttpResponse(
                showback.showback_csv(report), content_type="text/csv; charset=utf-8",
                headers={"Content-Disposition": f'attachment; filename="{showback.download_filename(report)}"'},
            )
        if request.accepted_renderer.format == "xlsx":
            try:
                workbook = showback.showback_xlsx(report, now)
            except excel_workbook.TooManyRows as error:
                raise exceptions.ValidationError({"format": [str(error)]}) from None
            return HttpResponse(
                workbook, content_type=excel_workbook.CONTENT_TYPE,
                headers={"Content-Disposition": f'attachment; filename="{showback.download_filename(report, "xlsx")}"'},
            )
        return Response(showback.showback_json(report))


class UtilizationQuery(serializers.Serializer):
    window = serializers.CharField(required=False, default="24h", help_text="As for showback: 24h, 7d, start,end …")
    team = serializers.CharField(required=False, help_text="A team's name: that team's tiers instead of the fleet's.")
    bucket = NamedChoiceField(choices=["minute", "hour", "day"], required=False,
                              help_text="Default: minutes up to 6 h, hours up to 14 days, else days.")


UTILIZATION_RESPONSE = inline_serializer(
    "Utilization",
    fields={
        "window": serializers.DictField(child=serializers.CharField()),
        "team": serializers.CharField(allow_null=True),
        "bucket": serializers.CharField(),
        "bucketSeconds": WholeNumberField(),
        "points": serializers.ListField(child=inline_serializer("UtilizationPoint", fields={
            "t": serializers.DateTimeField(),
            "seconds": serializers.FloatField(),
            "capacityGpus": serializers.FloatField(allow_null=True),
            "allocatedGpus": serializers.FloatField(),
            "activeGpus": serializers.FloatField(),
            "productiveGpus": serializers.FloatField(),
        })),
        "definitions": serializers.DictField(child=serializers.CharField()),
    },
)

DEFINITIONS = {
    "allocated": "GPUs held by live allocations (a gang counts once bound whole).",
    "active": "Allocated GPUs × the device activity the node agents report.",
    "productive": "Retained progress at the job's fault-free rate (its best steady interval); "
    "work lost to evictions, failures, replays and stalls is not productive. Never above active.",
    "docs": "docs/accounting.md",
}


class UtilizationView(ApiMixin, APIView):
    """Allocated, active and productive GPUs over time (time-averaged per bucket), for the fleet
    or one team. Every signed-in person may read the fleet's; a team's needs access to it."""

    query_parameters = None  # checked by _refuse_unknown against its query serializer

    @extend_schema(parameters=[UtilizationQuery], responses={200: UTILIZATION_RESPONSE})
    def get(self, request: Request) -> Response:
        _refuse_unknown(request, UtilizationQuery, "format")
        query = UtilizationQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        now = timezone.now()
        team: Team | None = None
        if query.validated_data.get("team"):
            team = visible_teams(request.user).filter(name=query.validated_data["team"]).first()
            if team is None:
                raise exceptions.NotFound(f"No team named '{query.validated_data['team']}' that you may read.")
        try:
            # A relative window covers exactly its length, ending on the last whole minute
            # rolled, as showback reads it (its points cover that, and nothing else).
            window = showback.rolled_window(showback.parse_window(query.validated_data["window"], now))
        except showback.AccountingQueryError as error:
            raise _query_error(error) from None
        names = {"minute": accounting.MINUTE, "hour": accounting.HOUR, "day": accounting.DAY}
        bucket = names[query.validated_data["bucket"]] if query.validated_data.get("bucket") else (
            utilization_series.choose_bucket(window.start, window.end, now)
        )
        if (window.end - window.start).total_seconds() / bucket > 20_000:
            raise exceptions.ValidationError({"bucket": ["That many points is too many: choose a coarser bucket."]})
        points = utilization_series.utilization_series(window, now, team_id=team.pk if team else None, bucket=bucket)
        return Response({
            "window": {"start": _when(window.start), "end": _when(window.end)},
            "team": team.name if team else None,
            "bucket": {60: "minute", 3600: "hour", 86400: "day"}[bucket],
            "bucketSeconds": bucket,
            "points": [
                {"t": _when(p.start), "seconds": p.seconds, "capacityGpus": p.capacity_gpus,
                 "allocatedGpus": p.allocated_gpus, "activeGpus": p.active_gpus, "productiveGpus": p.productive_gpus}
                for p in points
            ],
            "definitions": DEFINITIONS,
        })
