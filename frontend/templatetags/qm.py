"""Template helpers: the role-aware navigation, state badges and human units."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.urls import reverse
from django.utils import timezone
from django.utils.html import conditional_escape, format_html, format_html_join, json_script
from django.utils.safestring import SafeString, mark_safe

from controlplane.choices import STATE_COLOURS, JobState, NodeState
from controlplane.services import eta_text as eta_words
from controlplane.services import exit_codes, percent_text
from controlplane.services.access import access_of, may_submit
from controlplane.services.distance_text import distance_words
from controlplane.services.span_text import span_words
from controlplane.services.stopping import state_label
from controlplane.services.whole_words import held_together
from scheduler_core.sentences import gpu_hours as say_gpu_hours  # the filter below is `gpu_hours`

register = template.Library()

_LABELS = {**{s.value: s.label for s in NodeState}, **{s.value: s.label for s in JobState}}


@register.inclusion_tag("frontend/_nav.html", takes_context=True)
def qm_nav(context: dict[str, Any]) -> dict[str, Any]:
    """The links a signed-in user may follow, and the role shown next to their name."""
    request = context["request"]
    user = request.user
    access = access_of(user)
    links = [("overview", "Overview", reverse("frontend:overview"))]
    if may_submit(user):
        links.append(("jobs", "Jobs", reverse("frontend:jobs")))
        links.append(("history", "History", reverse("frontend:history")))
    links += [
        ("teams", "Teams", reverse("frontend:teams")),
        ("showback", "Showback", reverse("frontend:showback")),
        ("nodes", "Nodes", reverse("frontend:nodes")),
        ("what-if", "What-if", reverse("frontend:what-if")),
    ]
    if may_submit(user):  # those with jobs to be told about (finance accounts have none)
        links.append(("notifications", "Notifications", reverse("frontend:notifications")))
    if access.is_admin:
        links.append(("admin", "Admin", reverse("admin:index")))
    role = "admin" if access.is_admin else "finance" if access.is_finance else "member" if access.team_ids else "no role"
    return {"links": links, "active": context.get("page", ""), "user": user, "role": role, "request": request}


def _luminance(colour: str) -> float:
    """WCAG's relative luminance of a "#rrggbb" colour."""
    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def badge_class(colour: str) -> str:
    """A badge's classes: dark words (`ink-dark`, the top bar's #1b1f24) on a light colour where
    white would read under 4.5:1 (white on the pending yellow was 2.3:1), white on the others."""
    white = 1.05 / (_luminance(colour) + 0.05)
    return "badge" if white >= 4.5 else "badge ink-dark"


@register.simple_tag
def state_badge(state: str, label: str = "") -> str:
    """A state's badge in its colour; `label` (a job's `state_label`) words it when given."""
    colour = STATE_COLOURS.get(state, "#868e96")
    return format_html('<span class="{}" data-state="{}" style="background:{}">{}</span>', badge_class(colour), state,
                       colour, state_text(label) if label else _LABELS.get(state, state))


def state_text(label: str) -> str:
    """A state label as the badges say it: "stopping: cancelled" → "Stopping: cancelled"."""
    return _LABELS.get(label) or label[:1].upper() + label[1:]


@register.simple_tag
def job_state_badge(job: Any) -> str:
    """A job's badge: its state's colour, and its API `state_label` as words, so a job stopping
    because it was cancelled or reached its runtime limit does not read "Preempting"."""
    state = str(job.state)
    colour = STATE_COLOURS.get(state, "#868e96")
    return format_html('<span class="{}" data-state="{}" style="background:{}">{}</span>', badge_class(colour), state,
                       colour, state_text(state_label(job)))


@register.filter
def exit_code(code: int | None) -> str:
    """An exit code as the sentences say it: "137 (SIGKILL)" for a signal death."""
    return "–" if code is None else exit_codes.said(code)


@register.filter
def age(at: datetime | None) -> str:
    """How long ago, in the largest sensible unit ("42 s ago", "3.5 h ago")."""
    if at is None:
        return "never"
    return f"{duration(timezone.now() - at)} ago"


@register.filter
def until(at: datetime | None) -> str:
    if at is None:
        return "unknown"
    delta = at - timezone.now()
    if delta.total_seconds() <= 0:
        return "now"
    return f"in {duration(delta)}"


@register.filter
def eta_until(at: datetime | None) -> str:
    """An ETA's distance for a list's cell: "in 5 min", or "passed 3 min ago" once it is in
    the past (an estimate no cycle has renewed is not "now": nothing starts until one runs)."""
    if at is None:
        return "unknown"
    delta = (at - timezone.now()).total_seconds()
    return f"in {duration(delta)}" if delta > 0 else f"passed {duration(-delta)} ago"


@register.filter
def no_eta(job: Any) -> str:
    """A waiting job's ETA line when it has none: why, in the words `qm explain` and `qm status`
    say (services/eta_text.no_eta): held, can never run as asked, until what puts it in line
    (the engine's words, said as the page says them), or not estimated this cycle."""
    return eta_words.no_eta(held=bool(job.hold), resolvable=job.pending_resolvable, code=job.pending_code,
                            would_start_if=said(job.pending_would_start_if))


@register.simple_tag
def eta_text(at: datetime | None) -> str:
    """A waiting job's ETA for its page: "<time> (in 5 min)"; once passed, that it passed and
    why nothing has started. Each cycle writes every waiting job's ETA anew, never before the
    cycle, so an ETA in the past means no cycle has run since it: the loop's last cycle (one
    query, only then) says whether the loop has stalled or the next cycle is just due."""
    from controlplane.services.fleet_figures import loop_figures

    if at is None:
        return "–"
    now = timezone.now()
    delta = (at - now).total_seconds()
    if delta > 0:
        return f"{utc(at)} (in {duration(delta)})"
    loop = loop_figures(now)
    if loop.last_cycle_at is not None and loop.last_cycle_at >= at:
        # A cycle ran after it and left it as it was (the loop is never so, but say only the true).
        return f"was {utc(at)}, passed {duration(-delta)} ago; the next scheduling cycle estimates it again"
    text = f"was {utc(at)}, passed {duration(-delta)} ago: no scheduling cycle has run since"
    if loop.last_cycle_at is None:
        return text + "; the scheduling loop has not run yet, and nothing starts until it does"
    if loop.stalled:
        return (text + f"; the scheduling loop has not run since {utc(loop.last_cycle_at)} "
                f"({age(loop.last_cycle_at)}), and nothing starts until it is back")
    return text + "; the next one estimates it again"


@register.filter
def span(seconds: float | None) -> str:
    """A span a person set (a runtime limit, a checkpoint interval) exactly, as qm and the change
    sentences say it: `2 h`, `1 h 30 min` (span_text); "–" for none."""
    return "–" if seconds is None else span_words(seconds)


@register.filter
def duration(value: timedelta | float | int | None) -> str:
    """How long ago or how far off, as qm says it too ("18 min", "3.0 h": services/distance_text)."""
    if value is None:
        return "–"
    return distance_words(value.total_seconds() if isinstance(value, timedelta) else float(value))


@register.filter
def utc(at: datetime | None) -> str:
    """A time to the nearest second, as the engine's `t=` counts are rounded: an ETA and the
    reason sentence beside it name the same second."""
    if at is None:
        return "–"
    at = at + timedelta(microseconds=500_000)  # cut to the second below: rounds to the nearest
    return timezone.localtime(at, timezone.get_fixed_timezone(0)).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def utc_cell(at: datetime | None, bare: str = "") -> str:
    """`utc` for a table's cell: its date and its clock each unbreakable, so a narrow column
    breaks the time between them, never at the date's hyphens ("2026-12-" / "05"). ``bare``
    ("bare"): without " UTC", for a column whose heading says it."""
    if at is None:
        return "–"
    date, clock = utc(at).split(" ", 1)
    if bare:
        clock = clock.removesuffix(" UTC")
    return format_html('<span class="nobr">{}</span> <span class="nobr">{}</span>', date, clock)


@register.filter
def nodes_cell(where: str | None) -> str:
    """A run's Where ("h100-01 ×8, h100-02 ×8") for a table's cell: each node's part
    unbreakable, so the list breaks between nodes, never inside a name ("h100-" / "01")."""
    if not where:
        return ""
    return format_html_join(", ", '<span class="nobr">{}</span>', ((part,) for part in where.split(", ")))


#: A date or a clock in a chart's figures ("12.5% at 2026-12-06 02:16:42").
_DATE_OR_CLOCK = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?")


@register.filter
def figure_cell(text: Any) -> SafeString:
    """A cell of a chart's figures table: each date and clock unbreakable, so a narrow chart's
    table breaks between them, never at a date's hyphens ("2026-12-" / "06"). A cell given as
    parts (chart_figures.link) writes its links as links. qm.js's writeFigures writes a live
    update's cells the same way."""
    if isinstance(text, list):
        return mark_safe("".join(  # noqa: S308 (each part escaped)
            format_html('<a href="{}">{}</a>', part["href"], part["text"]) if isinstance(part, dict) else figure_cell(part)
            for part in text))
    escaped = str(conditional_escape(str(text)))
    return mark_safe(_DATE_OR_CLOCK.sub(lambda m: f'<span class="nobr">{m.group(0)}</span>', escaped))  # noqa: S308 (escaped above)


@register.filter
def whole_words(text: str | None) -> SafeString:
    """A sentence for a table's cell that breaks at its spaces only: each word with a hyphen in it
    held together (services/whole_words.py, the rule the admin's lists share)."""
    return mark_safe(held_together(str(conditional_escape(text or ""))))  # noqa: S308 (escaped here)


#: Where a PascalCase reason code's words meet ("Runtime|Limit|Exceeded").
_CODE_WORD = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@register.filter
def code_words(code: str | None) -> SafeString:
    """A reason code for a narrow cell: it may break between its words, nowhere else, and reads
    and copies whole ("RuntimeLimitExceeded" kept a job's Runs table 947 px wide in its 942 px box
    at 1,000 px until 6 Dec; now "RuntimeLimit" / "Exceeded" when it must)."""
    return mark_safe(_CODE_WORD.sub("<wbr>", str(conditional_escape(code or ""))))  # noqa: S308 (escaped here)


@register.filter
def kind_words(kind: str | None) -> SafeString:
    """An event's kind for a narrow cell: it may break after its dot, nowhere else, and reads and
    copies whole ("allocation." / "released" in a node page's events on a phone)."""
    return mark_safe(str(conditional_escape(kind or "")).replace(".", ".<wbr>"))  # noqa: S308 (escaped here)


@register.filter
def engine_times(text: str | None) -> str:
    """The engine's sentence with each `t=<Unix seconds>` said as a UTC time: the API's rule
    (`controlplane.api.serializers.sentences.engine_times`), so pages and API say the same words."""
    from controlplane.api.serializers.sentences import engine_times as say_engine_times

    return say_engine_times(text or "")


@register.filter
def said(text: str | None) -> str:
    """A stored sentence as the page's reader is told it: engine times in UTC, and other teams'
    jobs by their team only (`controlplane.api.serializers.sentences.said`, the API's rule)."""
    from controlplane.api.serializers.sentences import said as say

    return say(text or "")


@register.filter
def usd(value: Any) -> str:
    if value is None:
        return "–"
    amount = float(value)
    if 0 < abs(amount) < 0.01:
        return f"${amount:.6f}"
    return f"${amount:,.2f}"


@register.filter
def usd_unit_price(value: Any) -> str:
    """A unit price (showback's $ per million tokens) to four significant digits, in fixed-point:
    `usd` gave the cents only from a cent up and six places below, so one column read $0.05 for
    $0.0542 beside $0.003634, and TOTAL's $0.03 (for $0.0255) hid what its rows showed."""
    if value is None:
        return "–"
    amount = float(value)
    if amount == 0 or abs(amount) >= 100:
        return f"${amount:,.2f}"
    places = min(12, max(2, 3 - math.floor(math.log10(abs(amount)))))
    return f"${amount:,.{places}f}"


def _hours_text(hours: float, where: str) -> str:
    """GPU-hours to one decimal in a cell, but below 1 as the sentences say them (two decimals,
    "< 0.01" for a small non-zero amount: `sentences.gpu_hours`), so a loss never reads as nothing.
    ``where`` "sentence": a page's sentence says them as the events and `qm` do ("less than 0.01
    GPU-hours of work lost", where a cell's "< 0.01 GPU-hours of work lost" read as a formula).
    ``where`` "exact": a cell of a table whose rows the events and `qm` also give, two decimals
    throughout as they say them (a run's "1.02 GPU-h" lost, as its event says "lost 1.02")."""
    if where == "sentence":
        return say_gpu_hours(hours)
    if where == "exact":
        return say_gpu_hours(hours, cell=True)
    return f"{hours:,.1f}" if abs(hours) >= 1 else say_gpu_hours(hours, cell=True)


@register.filter
def as_gpu_hours(hours: Any, where: str = "cell") -> str:
    """A figure already in GPU-hours (showback's); ``where``: "cell", "exact" or "sentence"."""
    return "–" if hours is None else _hours_text(float(hours), where)


@register.filter
def percent(fraction: Any) -> str:
    """A fraction as a percentage as every channel says it (services/percent_text.percent: two
    decimals at most, trailing zeros dropped: "100%", "17.14%", "0.47%"; "100.0%" until 5 Dec)."""
    if fraction is None:
        return "–"
    return percent_text.percent(fraction)


@register.filter
def within(value: Any, longest: Any) -> str:
    """A filter box's value as the box holds it: its first `longest` characters (the box's
    maxlength). A value the server refused as too long comes back to its box so cut, as typing
    would have left it; the error line says how long it was."""
    text = "" if value is None else str(value)
    try:
        return text[: int(longest)]
    except (TypeError, ValueError):  # no maxlength for this box: all of it
        return text


@register.filter
def thousands(value: Any) -> str:
    if value is None:
        return "–"
    return f"{int(value):,}"


@register.filter
def tojson(value: Any) -> str:
    return json.dumps(value)


@register.simple_tag
def chart_data(chart: Any) -> str:
    """The chart's figure as a JSON script element `fig-<key>`, escaped for HTML."""
    return json_script(chart.figure, f"fig-{chart.key}")


@register.simple_tag
def plotly_js_url() -> str:
    from frontend.views.vendor import plotly_js_version

    return reverse("frontend:plotly-js-versioned", args=[plotly_js_version()])


@register.filter
def gpu_hours(seconds: Any, where: str = "cell") -> str:
    """GPU-seconds as GPU-hours; ``where``: "cell" or "sentence"."""
    return "–" if seconds is None else _hours_text(float(seconds) / 3600, where)


def _names(names: list[str]) -> SafeString:
    """`a`, `b` and `c`, each as code."""
    coded = [format_html("<code>{}</code>", name) for name in names]
    return mark_safe(coded[0] if len(coded) == 1 else ", ".join(coded[:-1]) + " and " + coded[-1])  # noqa: S308 (escaped above)


@register.simple_tag
def refused_heading(listing: str, errors: Any) -> SafeString:
    """The error line's heading of a refused listing query (page_filters.Refusals): what is wrong
    in the query, as its lines below say it — a parameter the page does not take, one given more
    than once, or a filter's value. "fix this filter" was said of them all."""
    names = list(errors)
    wrong = getattr(errors, "wrong", "value")
    if wrong == "unknown":
        said = format_html("unknown parameter{} {}: remove {}", "" if len(names) == 1 else "s", _names(names),
                           "it" if len(names) == 1 else "them")
    elif wrong == "repeated":
        times = getattr(errors, "times", {})
        if len(names) == 1:
            n = times.get(names[0], 2)
            said = format_html("{} is given {}: give it once", _names(names), "twice" if n == 2 else f"{n} times")
        else:
            said = format_html("{} are each given more than once: give each once", _names(names))
    else:
        said = format_html("fix {}", "this filter" if len(names) == 1 else "these filters")
    return format_html("{} cannot be listed: {}.", listing, said)
