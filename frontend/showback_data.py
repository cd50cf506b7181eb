"""What the showback page reads: the accounting service's report for the window, and its cost
per bucket of time for the chart, both from the accounting rollups (never raw samples)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Sum

from controlplane.models import GroupRollup, UsageRollup
from controlplane.services import accounting
from controlplane.services.access import Access

GROUPINGS = (("team", "team"), ("project", "project"), ("priority_class", "priority class"))
WINDOW_CHOICES = (("today", "today"), ("yesterday", "yesterday"), ("24h", "last 24 hours"), ("7d", "last 7 days"),
                  ("30d", "last 30 days"))
# The name each grouping shows, read from the rollup row's copied dimensions.
_NAME_FIELDS = {"team": ("team__name",), "project": ("team__name", "project__name"),
                "priority_class": ("priority_class__name",)}
# Cost per hour up to two days, per day beyond: a readable number of bars.
HOURLY_UP_TO_S = 2 * 86400


def cost_bucket(window: accounting.Window, now: datetime) -> int:
    """Hours for windows of up to two days, days beyond; never a granularity retention dropped."""
    bucket = max(int(accounting.choose_bucket(window.start, window.end, now)), int(accounting.HOUR))
    if (window.end - window.start).total_seconds() > HOURLY_UP_TO_S:
        bucket = int(accounting.DAY)
    return bucket


def cost_series(window: accounting.Window, group_by: str, access: Access, now: datetime,
                rolled_until: datetime | None) -> tuple[dict[str, list[tuple[datetime, float]]], int]:
    """{group name: [(bucket start, $)]} over the window, and the bucket in seconds. One grouped
    query: days from the accounting's job-less group rows, hours from the jobs' hour rows (a
    window of two days at most); members read their own teams only."""
    bucket = cost_bucket(window, now)
    if rolled_until is None:
        return {}, bucket
    start = accounting.floor_to(window.start, bucket)
    table = GroupRollup if bucket == accounting.DAY else UsageRollup
    rows = table.objects.filter(bucket=bucket, start__gte=start, start__lt=min(window.end, rolled_until))
    if not (access.is_admin or access.is_finance):
        rows = rows.filter(team_id__in=access.team_ids)
    names = _NAME_FIELDS[group_by]
    series: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for row in rows.values("start", *names).annotate(cost=Sum("cost_usd")).order_by("start"):
        name = "/".join(str(row[n] or accounting.UNALLOCATED) for n in names)
        series[name].append((row["start"], float(row["cost"] or Decimal(0))))
    return dict(series), bucket


def report_rows(report: accounting.Showback) -> list[dict[str, Any]]:
    """The report's groups, __idle__ and TOTAL, with money in cents and tokens in whole tokens that
    add up (the accounting service's apportionment, the same the CSV uses)."""
    money = accounting.presented_money(report)
    tokens = accounting.presented_tokens(report)
    rows = []
    for entry in [*report.entries, *([report.idle] if report.idle is not None else []), report.total]:
        m = money[entry.key]
        allocated = entry.allocated_gpu_seconds
        cost = m["cost_usd"]
        rows.append({
            "key": entry.key,
            "name": entry.name,
            "is_idle": entry.key == accounting.IDLE,
            "is_total": entry.key == "TOTAL",
            "gpu_hours_allocated": float(allocated / 3600),
            "gpu_hours_active": float(entry.active_gpu_seconds / 3600),
            "gpu_hours_productive": float(entry.productive_gpu_seconds / 3600),
            "gpu_hours_idle": float(entry.idle_gpu_seconds / 3600),
            "cost_usd": cost,
            "usd_per_gpu_hour": entry.usd_per_gpu_hour,
            "usd_per_productive_gpu_hour": entry.usd_per_productive_gpu_hour,
            "useful_tokens": tokens[entry.key],
            "usd_per_million_tokens": accounting.usd_per_million_tokens(entry),
            "idle_reserved_usd": m["idle_reserved_usd"] if (report.group_by == "team" or entry.key == "TOTAL") else None,
            "preemption_waste_usd": m["preemption_waste_usd"],
            "lost_gpu_hours": float(entry.lost_gpu_seconds / 3600),
            # Cost split by tier in proportion to GPU-seconds (prices differ by GPU type within a
            # group, so this is the group's own average price applied to each tier).
            "cost_productive_usd": float(cost) * _share(entry.productive_gpu_seconds, allocated),
            "cost_active_only_usd": float(cost) * _share(entry.active_gpu_seconds - entry.productive_gpu_seconds,
                                                         allocated),
            "cost_allocated_only_usd": float(cost) * _share(allocated - entry.active_gpu_seconds, allocated),
        })
    return rows


def _share(part: Decimal, whole: Decimal) -> float:
    return float(part / whole) if whole else 0.0
