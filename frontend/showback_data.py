"""What the showback page reads: the accounting service's report for the window, and its cost
per bucket of time for the chart, both from the accounting rollups (never raw samples)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import DateTimeField, F, Sum, Value

from controlplane.models import GroupRollup, UsageRollup
from controlplane.services import accounting, showback, utilization_series
from controlplane.services.access import Access

GROUPINGS = (("team", "team"), ("project", "project"), ("priority_class", "priority class"))
WINDOW_CHOICES = (("today", "today"), ("yesterday", "yesterday"), ("24h", "last 24 hours"), ("7d", "last 7 days"),
                  ("30d", "last 30 days"))
# Cost per hour up to two days, per day beyond: a readable number of bars.
HOURLY_UP_TO_S = 2 * 86400


def cost_bucket(window: showback.Window, now: datetime) -> int:
    """Hours for windows of up to two days, days beyond; never a granularity retention dropped."""
    bucket = max(int(utilization_series.choose_bucket(window.start, window.end, now)), int(accounting.HOUR))
    if (window.end - window.start).total_seconds() > HOURLY_UP_TO_S:
        bucket = int(accounting.DAY)
    return bucket


def cost_series(report: showback.Showback, group_by: str, access: Access,
                now: datetime) -> tuple[dict[str, list[tuple[datetime, Decimal]]], int]:
    """{group name: [(bucket start, cents)]} over exactly the report's window, and the bucket in
    seconds. Whole buckets come from one grouped query (days from the accounting's job-less group
    rows, hours from the jobs' hour rows); a bucket the window cuts at either end is read from
    the finer rows inside the window (the showback's own segments), not whole. The exact sums
    are then the group's cents in the table shared out over its bars (`showback.cost_over_time`),
    so a group's bars add up to its row to the cent. Groups are summed by the report's own
    columns and named as its rows are (`showback.data_key`: a project stored as
    `__unallocated__` is `vision/__unallocated__ (project 7)`, not its team's jobs without a
    project). Members read their own teams only."""
    bucket = cost_bucket(report.window, now)
    start, end = report.start, report.end
    if report.rolled_until is None or end <= start:
        return {}, bucket
    team_ids = None if (access.is_admin or access.is_finance) else access.team_ids
    columns = showback.GROUP_COLUMNS[group_by]
    costs: dict[str, dict[datetime, Decimal]] = defaultdict(lambda: defaultdict(Decimal))

    whole_from, whole_to = accounting.ceil_to(start, bucket), accounting.floor_to(end, bucket)
    cut: list[tuple[datetime, datetime, datetime]] = []  # (bar, from, to): buckets the window cuts
    if whole_from > whole_to:
        cut.append((accounting.floor_to(start, bucket), start, end))
    else:
        if start < whole_from:
            cut.append((accounting.floor_to(start, bucket), start, whole_from))
        if whole_to < end:
            cut.append((whole_to, whole_to, end))
    # One UNION ALL query: whole buckets from their rows, each cut bucket from the finer rows
    # inside the window, every piece labelled with the bar it belongs to.
    parts = []
    if whole_from < whole_to:
        table = GroupRollup if bucket == accounting.DAY else UsageRollup
        parts.append(table.objects.filter(accounting.in_bucket(bucket, whole_from, whole_to)).annotate(bar=F("start")))
    finer = (accounting.HOUR, accounting.MINUTE) if bucket == accounting.DAY else (accounting.MINUTE,)
    for bar, a, b in cut:
        for level, s0, s1 in showback.segments(a, b, now, finer)[2]:
            parts.append(UsageRollup.objects.filter(accounting.in_bucket(level, s0, s1))
                         .annotate(bar=Value(bar, output_field=DateTimeField())))
    if not parts:
        return {}, bucket
    if team_ids is not None:
        parts = [p.filter(team_id__in=list(team_ids)) for p in parts]
    sums = [p.order_by().values("bar", *columns).annotate(cost=Sum("cost_usd")) for p in parts]
    for row in sums[0].union(*sums[1:], all=True) if len(sums) > 1 else sums[0]:
        costs[showback.entry_key(group_by, row)][row["bar"]] += row["cost"] or Decimal(0)
    entries = {e.key: e for e in report.entries}
    series = {}
    for key, points in showback.cost_over_time(report, costs).items():
        entry = entries.get(key)
        series[showback.data_key(entry, group_by) if entry is not None else key] = points
    return series, bucket


def shown_name(name: str, properties: dict[str, Any] | None = None) -> str:
    """A group's name as the page says it: the jobs of a team that named no project are "vision
    (no project)", not the API's and the CSV's `vision/__unallocated__` (OpenCost's word). Given
    the row's `properties`, a project of that name (stored before the name was refused, 7 Dec)
    keeps its name: it has a project id, the jobs without a project none."""
    team, slash, project = name.rpartition("/")
    if properties is not None and properties.get("project_id") is not None:
        return name
    return f"{team} (no project)" if slash and project == showback.UNALLOCATED else name


def report_rows(report: showback.Showback) -> list[dict[str, Any]]:
    """The report's groups, __idle__ and TOTAL, with money in cents, tokens in whole tokens and
    GPU-hours to two places that add up (the accounting service's apportionment and cumulative
    rounding, the same the CSV uses at its own places). `gpu_hours_*`, `lost_gpu_hours` and the
    per-unit prices stay exact; `hours_shown` and `prices_shown` are what the table and the
    price chart say, `showback.shown_figures`' (the API's `shown`, which `qm showback` prints);
    `cost_*_usd` split the row's cents by tier (`showback.cost_by_tier`)."""
    money = showback.presented_money(report)
    tokens = showback.presented_tokens(report)
    shown = showback.shown_figures(report)
    rows = []
    for entry in [*report.entries, *([report.idle] if report.idle is not None else []), report.total]:
        m = money[entry.key]
        allocated = entry.allocated_gpu_seconds
        cost = m["cost_usd"]
        rows.append({
            "key": entry.key,
            "name": entry.name,
            "shown": shown_name(entry.name, entry.properties),
            # By kind, never by name: a team stored as TOTAL or __idle__ is a team's row.
            "is_idle": entry.kind == "idle",
            "is_total": entry.kind == "total",
            "gpu_hours_allocated": float(allocated / 3600),
            "gpu_hours_active": float(entry.active_gpu_seconds / 3600),
            "gpu_hours_productive": float(entry.productive_gpu_seconds / 3600),
            "gpu_hours_idle": float(entry.idle_gpu_seconds / 3600),
            "hours_shown": {column: shown[entry.key][column] for column in showback.GPU_HOUR_COLUMNS},
            # The table's per-unit prices, rounded once as qm shows them (the API's `shown`).
            "prices_shown": {name: shown[entry.key][name] for name in showback.SHOWN_PRICES},
            "cost_usd": cost,
            "usd_per_gpu_hour": entry.usd_per_gpu_hour,
            "usd_per_productive_gpu_hour": entry.usd_per_productive_gpu_hour,
            "useful_tokens": tokens[entry.key],
            "usd_per_million_tokens": showback.usd_per_million_tokens(entry),
            # Beside it: the cost that reported no tokens, which $ / 1M tokens leaves out.
            "cost_without_tokens_usd": m["cost_without_tokens_usd"],
            "share_without_tokens": None if entry.share_without_tokens is None else float(entry.share_without_tokens),
            "idle_reserved_usd": m["idle_reserved_usd"] if showback.shows_idle_reserved(report) else None,
            "preemption_waste_usd": m["preemption_waste_usd"],
            "lost_gpu_hours": float(entry.lost_gpu_seconds / 3600),
            # Its cents split by tier in proportion to GPU-seconds (prices differ by GPU type within a
            # group, so this is the group's own average price applied to each tier), adding up to its cost.
            **{f"cost_{tier}_usd": cents for tier, cents in showback.cost_by_tier(entry, cost).items()},
        })
    return rows


def idle_reserved_note(report: showback.Showback) -> str:
    """Where "Idle reserved quota" and the "no job (idle capacity)" row meet (finance and admins,
    team grouping): why the two differ, and per GPU type where the guarantees read more than the
    idle capacity cost, both amounts. Empty when no guarantee sat idle."""
    if report.idle is None or not report.idle_reserved_usd_total:
        return ""
    text = ("Idle reserved quota and the no-job row are two readings of the same idle capacity, not two charges "
            "(TOTAL's cost counts it once, in the no-job row). Idle guarantees are priced at their GPU type's "
            "reserved rate, what a guarantee is worth; the no-job row is what the idle nodes cost at their own "
            "tier, so the two differ where idle nodes are on-demand or spot.")
    for t in report.idle_by_gpu_type:
        if t.reserved_usd.quantize(showback.CENT) > t.idle_usd.quantize(showback.CENT):
            rate = t.idle_usd * 3600 / t.idle_gpu_seconds if t.idle_gpu_seconds else None
            text += (f" On {t.gpu_type}, guarantees idle for {t.reserved_gpu_seconds / 3600:,.1f} GPU-h read "
                     f"{_usd(t.reserved_usd)} at the reserved rate, more than the idle {t.gpu_type} capacity "
                     f"({t.idle_gpu_seconds / 3600:,.1f} GPU-h) cost: {_usd(t.idle_usd)}"
                     + (f", {_usd(rate)} per GPU-hour." if rate is not None else "."))
    return text


def idle_reserved_by_team_note(report: showback.Showback, label: str) -> str:
    """Said in a grouping other than team, where the table has no idle reserved quota column:
    a guarantee is its team's, so the figure is left out here as in the CSV and the API, and
    where it is. Until 7 Dec the page hid it unsaid while the CSV's and qm's TOTAL carried it."""
    if showback.shows_idle_reserved(report):
        return ""
    return (f"Idle reserved quota (guaranteed GPUs neither used nor lent to the cohort) is a team's, not a {label}'s, "
            "so this grouping leaves it out, as its CSV and the API do: group by team to see it.")


def tokens_not_kept_note(rows: list[dict[str, Any]]) -> str:
    """Rows whose jobs report useful tokens but kept none in the period (a serving job still
    loading its model, or tokens lost to a preemption or failure): their $ / 1M tokens is '–' and
    that cost is not under Cost without tokens either, which counts only jobs that never reported
    tokens. Said, with the cents, so the row's cost is accounted for. Empty when there are none."""
    parts = [f"{'TOTAL' if r['is_total'] else r['shown']} (${r['cost_usd'] - r['cost_without_tokens_usd']:,.2f})"
             for r in rows if not r["is_idle"] and r["usd_per_million_tokens"] is None
             and r["cost_usd"] > r["cost_without_tokens_usd"]]
    if not parts:
        return ""
    return ("No useful tokens kept in this period by jobs that report them: " + "; ".join(parts) + ". That cost "
            "is in Cost but has no $ / 1M tokens, and is not under Cost without tokens (jobs that never report "
            "tokens): their tokens came after the period, or were lost to a preemption or failure since their "
            "last checkpoint.")


def unpriced_note(report: showback.Showback) -> str:
    """GPU time in the window that no price rate covered (finance and admins): counted at $0 in
    every figure above, so the page says where, and how to charge it. Empty when all was priced."""
    if not report.unpriced:
        return ""
    parts = []
    for u in report.unpriced:
        since = (f"before its first rate ({u.priced_from:%Y-%m-%d %H:%M} UTC)" if u.priced_from
                 else "with no rate at all")
        parts.append(f"{u.gpu_type} {u.capacity_tier.replace('_', '-')} {since}: "
                     f"{u.capacity_gpu_seconds / 3600:,.1f} GPU-h of capacity, "
                     f"{u.allocated_gpu_seconds / 3600:,.1f} GPU-h of it held by jobs")
    return ("Not priced, counted at $0.00 in every figure above: " + "; ".join(parts) + ". Add a price rate "
            "for that GPU type and capacity tier (admin); one with effect from the past reprices these hours.")


def before_accounting_note(report: showback.Showback) -> str:
    """The period starts before the accounting began: what came before was never recorded, so
    the figures count nothing there. Said, so a month the product joined halfway (or one before
    it) does not read as a fleet that cost nothing. Empty otherwise."""
    began = report.accounting_began
    if began is None:
        return ""
    if report.unrecorded:
        return (f"Not recorded: the accounting began at {began:%Y-%m-%d %H:%M} UTC, after this period; "
                "nothing here was measured, so its figures are not $0.00 of use but no record at all.")
    return (f"Not recorded before {began:%Y-%m-%d %H:%M} UTC, when the accounting began: the figures above "
            f"count nothing from {report.start:%Y-%m-%d %H:%M} UTC until then (not $0.00 of use: no record).")


def unrecorded_sentence(report: showback.Showback) -> str:
    """What the charts of a period with no record say in place of "No GPU time has been charged"
    and "Nothing was wasted", which would be claims about a time nobody measured. Empty when
    any of the period was recorded."""
    if not report.unrecorded or report.accounting_began is None:
        return ""
    return (f"Nothing was recorded in this period: the accounting began at "
            f"{report.accounting_began:%Y-%m-%d %H:%M} UTC, after it ended.")


def _usd(value: Decimal) -> str:
    return f"${value.quantize(showback.CENT):,}"
