"""`/showback/`: what the fleet cost and who used it, from the accounting service.

Finance and admins read every team and the capacity no job held (`__idle__`); members read
their own team. The CSV is the API's (`/api/v1/showback/?format=csv`): every figure of the
page's table, in the same cents and tokens (tests/frontend/test_showback_csv_matches_page.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from controlplane.services import accounting
from controlplane.services import showback as showback_service
from controlplane.services.access import access_of
from frontend import figures
from frontend.showback_data import (
    GROUPINGS,
    WINDOW_CHOICES,
    before_accounting_note,
    cost_series,
    idle_reserved_by_team_note,
    idle_reserved_note,
    report_rows,
    shown_name,
    tokens_not_kept_note,
    unpriced_note,
    unrecorded_sentence,
)

DEFAULT_WINDOW = "7d"
PARAMETERS = ("window", "month", "group_by")


@login_required
@require_GET
def showback(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    who = access_of(request.user)
    # A control character (`?window=%00`) was echoed into the page's error, the NUL itself in the
    # HTML (the API refuses it as "Null characters are not allowed."): named, and left out.
    query = request.GET.copy()
    errors: list[str] = []
    for name in PARAMETERS:
        if any(not c.isprintable() for c in "".join(query.getlist(name))):
            errors.append(f"{name}: a control character (such as NUL) is not allowed in it; ignored.")
            query.pop(name)
    group_by = query.get("group_by") or "team"
    errors += [
        f"{_printable(name[:40])}: not a parameter of this page (it takes {', '.join(PARAMETERS)}); ignored."
        for name in sorted(set(query) - set(PARAMETERS))[:10]
    ]
    # `?window=7d&window=1d` showed one day without a word (the API refuses it): say which is shown.
    errors += [
        f"{name}: given twice or more; showing the last, '{query[name][:40]}'."
        for name in PARAMETERS if len(query.getlist(name)) > 1
    ]
    if group_by not in dict(GROUPINGS):
        # Said, not silently replaced: a link asking for ?group_by=job read as a team report.
        errors.append(f"group_by: '{group_by[:40]}' is not a grouping here; showing team "
                      f"(this page groups by {', '.join(text for _, text in GROUPINGS)}; "
                      "the API also groups by job).")
        group_by = "team"
    label = dict(GROUPINGS)[group_by]
    window_text = (query.get("window") or DEFAULT_WINDOW).strip()
    month = (query.get("month") or "").strip()
    period_errors: list[str] = []
    if month and query.get("window", "").strip():
        # The API refuses both; a link carrying both showed the month and dropped the window unsaid.
        period_errors.append(f"window: '{window_text[:40]}' not shown: this link also asks for the month "
                             f"{month[:40]}, which is shown (give either a window or a month).")
    window, month = _window_or_month(window_text, month, now, period_errors)
    if period_errors and not month:
        window_text = DEFAULT_WINDOW
    elif not month:
        # As the API reads and names it: `?window=TODAY` is today, selected as such (not "custom").
        window_text = window.label
    errors += period_errors
    # The monthly report is the same report over a calendar month (the API's `month=`).
    period = {"month": month} if month else {"window": window_text}
    context: dict[str, Any] = {
        "page": "showback", "group_by": group_by, "group_label": label, "groupings": GROUPINGS,
        "window_text": window_text,
        "window_choices": WINDOW_CHOICES, "errors": errors, "sees_fleet": who.is_admin or who.is_finance,
        "custom": not month and window_text not in dict(WINDOW_CHOICES), "month": month,
        "this_month": f"{now:%Y-%m}",
    }
    if not (who.is_admin or who.is_finance or who.team_ids):
        context["errors"].append("Showback is for members of a team, finance and admins; your account has no role yet.")
        return render(request, "frontend/showback.html", context)
    report = showback_service.showback(window, group_by, who, now)
    # A period the accounting never recorded has no figures: its rows would read $0.00 of use and
    # its charts "No GPU time has been charged" beside the banner saying there is no record.
    nothing = unrecorded_sentence(report)
    rows = [] if report.unrecorded else report_rows(report)
    series, bucket = cost_series(report, group_by, who, now)
    bucket_name = "hour" if bucket == accounting.HOUR else "day"
    # The charts say each group as the table does (rows keep the CSV's names, for the download).
    shown = [{**r, "name": r["shown"]} for r in rows]
    charts = [
        figures.cost_over_time({shown_name(name): bars for name, bars in series.items()}, label, bucket_name,
                               bucket, team_ids={e.name: e.properties["team_id"] for e in report.entries}
                               if group_by == "team" else None, nothing=nothing, window=(report.start, report.end)),
        figures.cost_breakdown(shown, label, nothing=nothing),
        figures.unit_costs(shown, label, nothing=nothing),
        figures.waste(shown, label, with_idle_reserved=group_by == "team", nothing=nothing),
    ]
    # The CSV and JSON are the period the page shows, by its instants: `window=7d` (or a month
    # still running) read later covered a later period than the page. A whole month keeps its name.
    # A period with nothing rolled up yet (today, a minute past midnight) has no instants to name:
    # `window=today` fetched later would be a longer period than this empty page, so no link; nor
    # for a period with no record, whose CSV would be a table of $0.00 with nothing to say why.
    empty = report.end <= report.start
    if not empty and not (month and report.end == accounting.next_month(report.start)):
        period = {"window": f"{accounting.iso(report.start)},{accounting.iso(report.end)}"}
    context.update({
        "report": report, "rows": rows, "charts": charts, "empty_period": empty,
        "unrecorded": report.unrecorded and not empty, "nothing_recorded": nothing,
        "idle_reserved_note": idle_reserved_note(report) if group_by == "team" else "",
        "idle_reserved_by_team_note": "" if report.unrecorded else idle_reserved_by_team_note(report, label),
        "unpriced_note": unpriced_note(report),
        "tokens_not_kept_note": tokens_not_kept_note(rows),
        "before_accounting_note": before_accounting_note(report),
        "csv_url": "" if empty or report.unrecorded else (
            reverse("v1:showback") + "?" + urlencode({**period, "group_by": group_by, "format": "csv"})),
        # The same rows as a workbook, each cell typed (a slug Excel would read as a date stays text).
        "xlsx_url": "" if empty or report.unrecorded else (
            reverse("v1:showback") + "?" + urlencode({**period, "group_by": group_by, "format": "xlsx"})),
        "json_url": "" if empty else reverse("v1:showback") + "?" + urlencode({**period, "group_by": group_by}),
    })
    return render(request, "frontend/showback.html", context)


def _printable(text: str) -> str:
    """`text` with its control characters written as escapes (`\\x00`), for a sentence of the page."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _window_or_month(
    window_text: str, month: str, now: datetime, errors: list[str]
) -> tuple[showback_service.Window, str]:
    """The report's period: a calendar month when one is asked for, else the window (7d when
    either is malformed, with the problem named in `errors`)."""
    if month:
        try:
            return showback_service.month_window(month, now), month
        except showback_service.AccountingQueryError as exc:
            errors.append(f"{exc.field}: {exc.message}")
    try:
        return showback_service.parse_window(window_text, now), ""
    except showback_service.AccountingQueryError as exc:
        errors.append(f"{exc.field}: {exc.message}")
    return showback_service.parse_window(DEFAULT_WINDOW, now), ""
