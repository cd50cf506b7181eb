"""`GET /api/v1/jobs/history.csv`: the jobs that ended, as CSV with a TOTAL row: the very CSV of
the `/history/` page's Download link (`services/job_history.history_csv`), for scripts and
spreadsheets, with a token or a session. `GET /api/v1/jobs/history.xlsx`: the same rows as an
Excel workbook, each cell typed (`services/job_history.history_xlsx`), the page's Download for
Excel.

Its filters are the page's (`JobHistoryFilterSet`: the jobs list's, `state` limited to the ended
states), a bad value a 400 naming it; its scope the jobs list's (`access.visible_jobs`).
"""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.views import APIView

from controlplane.api.filter_backends import filters_refused
from controlplane.api.permissions import SubmitsJobs
from controlplane.api.showback import CsvRenderer, XlsxRenderer, errors_in_json
from controlplane.api.views.api_mixin import ApiMixin
from controlplane.filtersets import JobHistoryFilterSet, repeatable_parameters, text_filter_lengths
from controlplane.services import access, excel_workbook, job_history


def _history_parameters(format_name: str, format_words: str) -> list[OpenApiParameter]:
    """The history's filters, then its `format`, as the schema says them (CSV and workbook alike):
    a text filter with the longest value the server takes (`maxLength`), as a list's filters say it."""
    lengths = text_filter_lengths(JobHistoryFilterSet)
    return [
        OpenApiParameter(name, {"type": "string", "maxLength": lengths[name]} if name in lengths else OpenApiTypes.STR,
                         many=name in repeatable_parameters(JobHistoryFilterSet), required=False,
                         description=str(getattr(flt, "extra", {}).get("help_text", "")) or None)
        for name, flt in sorted(JobHistoryFilterSet.base_filters.items())
    ] + [OpenApiParameter("format", OpenApiTypes.STR, enum=[format_name], required=False, description=format_words)]


def _ended_jobs_asked(request: Request) -> Any:
    """The ended jobs the reader sees, narrowed by the history's filters (a refused one a 400)."""
    filterset = JobHistoryFilterSet(request.query_params, queryset=access.visible_jobs(request.user), request=request)
    if not filterset.is_valid():
        raise filters_refused(filterset)
    return job_history.ended_jobs(filterset.qs)


class JobHistoryCsvView(ApiMixin, APIView):
    """The jobs that ended (succeeded, failed, cancelled, timed out), newest end first, as CSV:
    `job_id, name, team, project, user, state, exit_code, submitted_at, started_at, finished_at,
    elapsed_s, elapsed, gpus, gpu_hours, lost_gpu_hours, ran_on`, then a TOTAL row. Every job
    of the filters, not a page. The jobs list's history filters narrow it."""

    permission_classes = [SubmitsJobs]
    renderer_classes = [*ApiMixin.renderer_classes, CsvRenderer]
    query_parameters = frozenset(JobHistoryFilterSet.base_filters) | {"format"}
    query_parameters_judged_by_view = frozenset(JobHistoryFilterSet.base_filters)

    @extend_schema(
        parameters=_history_parameters("csv", "Always CSV; errors are JSON unless CSV is asked for."),
        responses={(200, "text/csv"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> Any:
        jobs = _ended_jobs_asked(request)
        now = timezone.now()
        response = StreamingHttpResponse(job_history.history_csv(jobs, now),
                                         content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="job-history-{now:%Y%m%dT%H%M%SZ}.csv"'
        return response


class JobHistoryXlsxView(ApiMixin, APIView):
    """The jobs of `jobs/history.csv`, the same rows and TOTAL, as an Excel workbook: names and
    times text cells (a job named `=…` stays text), GPU-hours and cost numbers equal to the
    CSV's. A refused filter is the API's JSON 400."""

    permission_classes = [SubmitsJobs]
    renderer_classes = [*ApiMixin.renderer_classes, XlsxRenderer]
    query_parameters = frozenset(JobHistoryFilterSet.base_filters) | {"format"}
    query_parameters_judged_by_view = frozenset(JobHistoryFilterSet.base_filters)

    @extend_schema(
        parameters=_history_parameters("xlsx", "Always a workbook; errors are JSON."),
        responses={(200, excel_workbook.CONTENT_TYPE): OpenApiTypes.BINARY},
    )
    def get(self, request: Request) -> Any:
        jobs = _ended_jobs_asked(request)
        now = timezone.now()
        try:
            workbook = job_history.history_xlsx(jobs, now)
        except excel_workbook.TooManyRows as error:
            raise ValidationError({"rows": [str(error)]}) from None
        # Streamed as it is written (a refusal above is answered before any byte of it).
        return StreamingHttpResponse(
            workbook, content_type=excel_workbook.CONTENT_TYPE,
            headers={"Content-Disposition": f'attachment; filename="job-history-{now:%Y%m%dT%H%M%SZ}.xlsx"'},
        )

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        errors_in_json(request, response)
        return super().finalize_response(request, response, *args, **kwargs)
