"""`/teams/`: quota against use per GPU type, dominant share, the spread of waits and slowdown,
and each team's jobs by state."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from controlplane.models import GpuType, Team
from controlplane.services import fair_share, quota_text
from controlplane.services.access import access_of
from frontend import figures, team_stats
from frontend.fleet_series import fleet_series
from frontend.windows import BY_KEY, WINDOWS, window_choice

# The distributions read finished days' bins from the store and group only the window's two
# partial days in the database (team_stats.binned), so every window costs about the same.
TEAM_WINDOWS = WINDOWS


@login_required
@require_GET
def teams(request: HttpRequest) -> HttpResponse:
    window, window_error = window_choice(request.GET.get("window"), BY_KEY["7d"])
    now = timezone.now()
    since, until = window.bounds(now)
    who = access_of(request.user)
    sees_all = who.reads_all_costs
    quota_rows = team_stats.quota_rows(None if sees_all else who.team_ids)
    gpu_types = list(GpuType.objects.order_by("name").values_list("name", flat=True))
    quota_charts = []
    for gpu_type, rows in groupby(sorted(quota_rows, key=lambda r: r.gpu_type), key=lambda r: r.gpu_type):
        quota_charts.append(figures.quota_usage(gpu_type, [r.as_dict() for r in rows]))
    if not quota_charts:
        quota_charts.append(figures.quota_usage(gpu_types[0] if gpu_types else "any", []))
    team_rows = list(Team.objects.select_related("cohort", "default_priority_class").order_by("name"))
    samples = fleet_series(since, until)
    # The table's shares are `qm sshare`'s, read now (what the next cycle orders the queue by):
    # the last cycle's sample said another share whenever allocations changed since (7 Dec).
    shares = fair_share.fair_shares(now)
    share_of = {row["team"]: row for row in shares.teams}
    waits, slowdowns = team_stats.waits_and_slowdowns(since, until, {t.pk: t.name for t in team_rows})
    states = [{"team": r["team__name"], "state": r["state"], "n": r["n"]} for r in team_stats.jobs_by_state(since)]
    team_ids = {t.name: t.pk for t in team_rows}
    charts = quota_charts + [
        figures.dominant_share(samples, team_ids),
        figures.distribution_box(
            "waits", "Waits before starting", (
                f"Per team, minutes from submission to start of the jobs that started in the {window.label}: box = "
                "middle half, line = median, dashed = mean, whiskers = 1.5 × the box's height, circle = the longest "
                "wait when it lies beyond the whisker."
            ), "wait (minutes)", waits,
            f"No job started in the {window.label}. Each team's spread of waits appears here.", team_ids=team_ids,
        ),
        figures.distribution_box(
            "slowdown", "Bounded slowdown", (
                f"Per team, (time from submission to end) ÷ (run time, at least 60 s) of the jobs that finished in "
                f"the {window.label}, at least 1; 1 means no wait at all; circle = the largest when it lies beyond the "
                "whisker. Log scale."
            ), "bounded slowdown (×, log scale)", slowdowns,
            f"No job finished in the {window.label}. Each team's spread of slowdowns appears here.", log_y=True,
            floor=1.0, team_ids=team_ids,
        ),
        figures.jobs_by_state(states),
    ]
    team_table = [
        {
            "team": t,
            "dominant_share": share_of[t.name]["dominant_share"],
            # sshare's SHARE to three places is this to one tenth of a per cent
            "dominant_share_said": f"{100 * share_of[t.name]['dominant_share']:.1f}%",
            "dominant_resource": share_of[t.name]["dominant_resource"],
            # decayed to now, as sshare's GPU-H DECAYED (the stored figure is as of the last cycle)
            "decayed_gpu_hours": share_of[t.name]["decayed_usage"]["gpu_hours"],
            "quotas": [
                {**r.as_dict(), "lent": r.lent, "lent_said": quota_text.lent_said(r.lent),
                 "lent_beyond_said": quota_text.lent_said(
                     quota_text.lent_beyond(r.lent, r.lending_limit, t.cohort_id is not None)),
                 "borrowing_said": quota_text.limit_said(r.borrowing_limit, t.cohort_id is not None),
                 "lends_at_most": r.lending_limit if t.cohort_id is not None else None, "over_limit": (
                    r.borrowed - r.borrowing_limit if r.borrowing_limit is not None and r.borrowed > r.borrowing_limit
                    else 0)}
                for r in quota_rows if r.team == t.name
            ],
        }
        for t in team_rows
        if sees_all or t.pk in who.team_ids
    ]
    lent_shares = any(quota_text.is_share(q["lent"]) for row in team_table for q in row["quotas"])
    context: dict[str, Any] = {
        "page": "teams", "window": window, "windows": TEAM_WINDOWS, "sees_all": sees_all, "window_error": window_error,
        # the instants the window's figures cover, said on the page as showback says its period
        "since": since, "until": until, "shares_at": shares.at,
        # the fair-share column is no window's usage: past GPU-hours fading with this half-life
        "half_life_s": float(settings.QM["FAIR_SHARE_HALF_LIFE_S"]),
        "quota_charts": quota_charts, "charts": {c.key: c for c in charts}, "team_table": team_table,
        "lent_share_note": quota_text.LENT_SHARE_NOTE if lent_shares else "",
    }
    return render(request, "frontend/teams.html", context)
