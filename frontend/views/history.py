"""`/history/`: the jobs that ended, as `qm history` / `sacct` list them, `/history.csv`, and
`/history.xlsx` (the CSV's rows as an Excel workbook, each cell typed).

The filters are the jobs API's (`JobHistoryFilterSet`, a `JobFilterSet`), the scope the API's
(`access.visible_jobs`), the figures `services/job_history.py`'s and the totals
`services/closed_history.py`'s: this view only reads the query, hands it over and renders what
comes back.
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from controlplane.filtersets import JobHistoryFilterSet, text_filter_lengths
from controlplane.models import Job
from controlplane.services import access, closed_history, excel_workbook, history_text, job_history
from frontend.page_filters import PAGE_PARAMETERS, Refusals, filtered
from frontend.page_numbers import page_choice

PAGE_SIZE = 50


def _filtered(request: HttpRequest) -> tuple[JobHistoryFilterSet, QuerySet[Job] | None, Refusals]:
    """The reader's ended jobs under the query's filters, or the errors naming each bad parameter."""
    filterset, jobs, errors = filtered(request, JobHistoryFilterSet, access.visible_jobs(request.user))
    return cast(JobHistoryFilterSet, filterset), None if jobs is None else job_history.ended_jobs(jobs), errors


@login_required
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    filterset, jobs, errors = _filtered(request)
    query = request.GET.copy()
    query.pop("page", None)
    context: dict[str, Any] = {
        "page": "history",
        "errors": errors,
        "query": query.urlencode(),
        "states": [(state.value, state.label) for state in job_history.ENDED_STATES],
        "chosen_states": request.GET.getlist("state"),
        "filter_lengths": text_filter_lengths(JobHistoryFilterSet),  # each text filter's maxlength: the server's
        "visible_teams": list(access.member_teams(request.user).order_by("name").values_list("name", flat=True)),
        "may_submit": access.may_submit(request.user),
    }
    if jobs is None:
        return render(request, "frontend/history.html", context, status=400)
    now = timezone.now()
    # No filter asked: the reader's whole history, whose jobs ended before yesterday the closed
    # totals stand for (services/closed_history.py).
    whole = set(request.GET) <= PAGE_PARAMETERS
    summary = closed_history.history_summary(jobs, now, access.visible_job_teams(request.user), whole)
    paginator = Paginator(jobs, PAGE_SIZE)
    paginator.count = summary.totals.jobs  # type: ignore[misc]  # counted with the totals: no COUNT(*) more
    listed, page_error = page_choice(paginator, request.GET.get("page"))
    rows = job_history.history_rows(listed.object_list, now, priced=True)
    context.update({
        "jobs": listed,
        "page_error": page_error,
        "rows": rows,
        # The rows whose start and elapsed read "–" beside GPUs, GPU-h and nodes, said as qm says them.
        "ended_waiting_again": history_text.ended_waiting_after_requeue(
            [row.job.pk for row in rows if history_text.ended_waiting_again(row.job.started_at, row.last_run_gpus)]),
        "totals": summary.totals,
        "total_cost_usd": summary.cost_usd,
    })
    return render(request, "frontend/history.html", context)


@login_required
@require_GET
def history_csv(request: HttpRequest) -> HttpResponse:
    """The page's filtered set, every row (not one page), with a TOTAL row."""
    _, jobs, errors = _filtered(request)
    if jobs is None:
        text = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in errors.items())
        return HttpResponse(text + "\n", status=400, content_type="text/plain; charset=utf-8")
    now = timezone.now()
    response = StreamingHttpResponse(job_history.history_csv(jobs, now), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="job-history-{now:%Y%m%dT%H%M%SZ}.csv"'
    return response


@login_required
@require_GET
def history_xlsx(request: HttpRequest) -> HttpResponse:
    """The CSV's rows as an Excel workbook: what Excel would misread in the CSV (a job named
    `2026-11` or `=…`) stays text."""
    _, jobs, errors = _filtered(request)
    if jobs is None:
        text = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in errors.items())
        return HttpResponse(text + "\n", status=400, content_type="text/plain; charset=utf-8")
    now = timezone.now()
    try:
        workbook = job_history.history_xlsx(jobs, now)
    except excel_workbook.TooManyRows as error:
        return HttpResponse(f"{error}\n", status=400, content_type="text/plain; charset=utf-8")
    # Streamed as it is written (a refusal above is answered before any byte of it).
    return StreamingHttpResponse(
        workbook, content_type=excel_workbook.CONTENT_TYPE,
        headers={"Content-Disposition": f'attachment; filename="job-history-{now:%Y%m%dT%H%M%SZ}.xlsx"'})
