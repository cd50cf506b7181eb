"""What the teams page reads: quota against use, and the distributions of waits and slowdown.

Each function is a fixed number of grouped queries, whatever the number of jobs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q

from controlplane.choices import FINISHED_JOB_STATES, JobState
from controlplane.models import AllocationGpu, Job, Quota, Team

# A job that ran less than this counts as having run this long, as the engine's own slowdown
# figure does: a job that ran one second would otherwise dwarf every other slowdown.
MIN_RUN_S = 60.0
ACTIVE_STATES = (JobState.PENDING, JobState.RUNNING, JobState.PREEMPTING)


@dataclass(frozen=True)
class QuotaRow:
    team: str
    gpu_type: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    used: int
    borrowed: int
    lent: float

    def as_dict(self) -> dict[str, Any]:
        return {"team": self.team, "gpu_type": self.gpu_type, "nominal": self.nominal, "used": self.used,
                "borrowed": self.borrowed, "lent": round(self.lent, 1),
                "borrowing_limit": self.borrowing_limit, "lending_limit": self.lending_limit}


def quota_rows(visible_team_ids: Iterable[int] | None) -> list[QuotaRow]:
    """Per team and GPU type: nominal quota, GPUs held now, borrowed, lent.

    - used: live GPUs the team's jobs hold on nodes of that type;
    - borrowed: what it holds beyond its nominal quota, max(0, used − nominal);
    - lent: its idle quota that borrowers of its cohort are using. Idle quota is
      min(nominal − used, lending limit) when positive; the cohort's borrowed GPUs of a type are
      attributed to its idle lenders in proportion to their idle quota, and never exceed it.
    `visible_team_ids` (None: all) limits the rows returned, not the cohort arithmetic.
    Three queries."""
    teams = {t["id"]: t for t in Team.objects.values("id", "name", "cohort_id")}
    nominal: dict[tuple[int, str], Quota] = {
        (q.team_id, q.gpu_type.name): q for q in Quota.objects.select_related("gpu_type")
    }
    used: dict[tuple[int, str], int] = defaultdict(int)
    for row in (
        AllocationGpu.objects.filter(live=True)
        .values("allocation__job__team_id", "node__gpu_type__name")
        .annotate(n=Count("id"))
        .order_by()
    ):
        used[(row["allocation__job__team_id"], row["node__gpu_type__name"])] = row["n"]
    keys = set(nominal) | set(used)
    borrowed = {k: max(0, used.get(k, 0) - (nominal[k].nominal_gpus if k in nominal else 0)) for k in keys}
    idle: dict[tuple[int, str], int] = {}
    for k, q in nominal.items():
        spare = max(0, q.nominal_gpus - used.get(k, 0))
        idle[k] = spare if q.lending_limit is None else min(spare, q.lending_limit)
    # Per (cohort, GPU type): borrowed GPUs in total, and idle quota in total.
    pool_borrowed: dict[tuple[int | None, str], int] = defaultdict(int)
    pool_idle: dict[tuple[int | None, str], int] = defaultdict(int)
    for (team_id, gpu_type), n in borrowed.items():
        pool_borrowed[(teams[team_id]["cohort_id"], gpu_type)] += n
    for (team_id, gpu_type), n in idle.items():
        pool_idle[(teams[team_id]["cohort_id"], gpu_type)] += n
    wanted = None if visible_team_ids is None else set(visible_team_ids)
    rows = []
    for team_id, gpu_type in keys:
        if wanted is not None and team_id not in wanted:
            continue
        cohort = teams[team_id]["cohort_id"]
        pool = (cohort, gpu_type)
        lent = 0.0
        if cohort is not None and pool_idle[pool] > 0:
            lent = idle.get((team_id, gpu_type), 0) * min(1.0, pool_borrowed[pool] / pool_idle[pool])
        q = nominal.get((team_id, gpu_type))
        rows.append(QuotaRow(
            team=teams[team_id]["name"], gpu_type=gpu_type, nominal=q.nominal_gpus if q else 0,
            borrowing_limit=q.borrowing_limit if q else None, lending_limit=q.lending_limit if q else None,
            used=used.get((team_id, gpu_type), 0), borrowed=borrowed[(team_id, gpu_type)], lent=lent,
        ))
    return sorted(rows, key=lambda r: (r.gpu_type, r.team))


def box_stats(values: Sequence[float]) -> dict[str, float | int]:
    """Quartiles (linear interpolation), mean, and Tukey's whiskers: the most extreme values
    within 1.5 interquartile ranges of the box."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return {"n": 0}

    def quantile(p: float) -> float:
        pos = (n - 1) * p
        lo = math.floor(pos)
        hi = min(n - 1, lo + 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    q1, median, q3 = quantile(0.25), quantile(0.5), quantile(0.75)
    reach = 1.5 * (q3 - q1)
    low = next(x for x in xs if x >= q1 - reach)
    high = next(x for x in reversed(xs) if x <= q3 + reach)
    return {"n": n, "q1": round(q1, 3), "median": round(median, 3), "q3": round(q3, 3), "low": round(low, 3),
            "high": round(high, 3), "mean": round(sum(xs) / n, 3), "max": round(xs[-1], 3)}


def waits_and_slowdowns(since: datetime, until: datetime) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per team, box statistics of
    - the wait (minutes) of jobs that started in the window: from submission to their last start;
    - the slowdown of jobs that finished in the window after running: (finished − submitted) /
      (finished − last start), the run floored at MIN_RUN_S.
    One query over the window's jobs; only four columns per job cross the wire."""
    waits: dict[str, list[float]] = defaultdict(list)
    slowdowns: dict[str, list[float]] = defaultdict(list)
    rows = (
        Job.objects.filter(started_at__isnull=False)
        .filter(Q(started_at__gte=since, started_at__lte=until) | Q(finished_at__gte=since, finished_at__lte=until))
        .values_list("team__name", "submitted_at", "started_at", "finished_at")
    )
    for team, submitted, started, finished in rows:
        if since <= started <= until:
            waits[team].append(max(0.0, (started - submitted).total_seconds()) / 60.0)
        if finished is not None and since <= finished <= until:
            run = max(MIN_RUN_S, (finished - started).total_seconds())
            slowdowns[team].append(max(0.0, (finished - submitted).total_seconds()) / run)
    wait_stats = [{"team": t, **box_stats(v)} for t, v in sorted(waits.items())]
    slowdown_stats = [{"team": t, **box_stats(v)} for t, v in sorted(slowdowns.items())]
    return wait_stats, slowdown_stats


def jobs_by_state(since: datetime) -> list[dict[str, Any]]:
    """Per team and state: jobs waiting or running now, and jobs submitted since `since` that
    have finished. One grouped query."""
    return list(
        Job.objects.filter(
            Q(state__in=ACTIVE_STATES) | Q(state__in=FINISHED_JOB_STATES, submitted_at__gte=since)
        )
        .values("team__name", "state")
        .annotate(n=Count("id"))
        .order_by()
        .values("team__name", "state", "n")
    )
