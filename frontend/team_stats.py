"""What the teams page reads: quota against use, and the distributions of waits and slowdown.

Each function is a fixed number of grouped queries, whatever the number of jobs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count, Q

from controlplane.choices import FINISHED_JOB_STATES, JobState
from controlplane.models import AllocationGpu, Job, Node, Quota, Team
from controlplane.services.usage_tiers import Guarantee, Holding, PriceBook, idle_guarantees

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
    """Per team and GPU type, now: nominal quota, GPUs held, of which borrowed, and lent.

    The split is the accounting's own (`usage_tiers.idle_guarantees`, docs/accounting.md),
    applied to this instant's holdings: a team's use within its guarantee is used, beyond it
    borrowed; borrowers run first on capacity nobody is guaranteed, and only the rest is lent by
    the cohort's teams with unused guarantee, in proportion to what each may lend (capped by its
    lending limit). A team holding GPUs of a type it has no quota on borrows all of them.
    `visible_team_ids` (None: all) limits the rows returned, not the arithmetic. Three queries."""
    quotas = list(Quota.objects.values_list(
        "team_id", "gpu_type_id", "nominal_gpus", "lending_limit", "borrowing_limit", "team__cohort_id",
        "team__name", "gpu_type__name",
    ))
    held: dict[tuple[int, int], int] = {}
    names: dict[int, str] = {q[0]: q[6] for q in quotas}
    types: dict[int, str] = {q[1]: q[7] for q in quotas}
    for row in (
        AllocationGpu.objects.filter(live=True)
        .values("allocation__job__team_id", "allocation__job__team__name", "node__gpu_type_id", "node__gpu_type__name")
        .annotate(n=Count("id"))
        .order_by()
    ):
        key = (row["allocation__job__team_id"], row["node__gpu_type_id"])
        held[key] = row["n"]
        names[key[0]] = row["allocation__job__team__name"]
        types[key[1]] = row["node__gpu_type__name"]
    capacity: dict[int, int] = defaultdict(int)
    for gpu_type_id, gpus in Node.objects.values_list("gpu_type_id", "gpu_count"):
        capacity[gpu_type_id] += gpus
    guarantees = [Guarantee(team_id=t, gpu_type_id=g, nominal_gpus=n, lending_limit=lend, cohort_id=c)
                  for t, g, n, lend, _, c, _, _ in quotas]
    # One microsecond of the present: the cells' GPU-microseconds are then GPUs.
    cells = idle_guarantees(0, 1, guarantees,
                            [Holding(t, g, n, 0, 1) for (t, g), n in held.items()], capacity, PriceBook())
    limits = {(q[0], q[1]): (q[4], q[3]) for q in quotas}
    wanted = None if visible_team_ids is None else set(visible_team_ids)
    rows = []
    for key in set(cells) | set(held):
        team_id, gpu_type_id = key
        if wanted is not None and team_id not in wanted:
            continue
        cell = cells.get(key)
        borrowing_limit, lending_limit = limits.get(key, (None, None))
        rows.append(QuotaRow(
            team=names[team_id], gpu_type=types[gpu_type_id],
            nominal=cell.nominal_gpu_us if cell else 0,
            borrowing_limit=borrowing_limit, lending_limit=lending_limit,
            used=held.get(key, 0),
            borrowed=cell.borrowed_gpu_us if cell else held.get(key, 0),
            lent=float(cell.lent_gpu_us) if cell else 0.0,
        ))
    return sorted(rows, key=lambda r: (r.gpu_type, r.team))


# Values are counted in logarithmic bins BINS_PER_E to a factor e (about 5 % wide each), with
# each bin's count, sum, smallest and largest value: enough for quartiles within a bin's width
# (interpolated between the bin's own smallest and largest value), exact means and extremes,
# whatever the number of jobs. The database groups; a few hundred rows come back.
BINS_PER_E = 20


@dataclass(frozen=True)
class Bin:
    n: int
    total: float
    lo: float
    hi: float


def box_from_bins(bins: Sequence[Bin]) -> dict[str, float | int]:
    """Quartiles, mean, extremes and Tukey's whiskers (the most extreme values within 1.5 box
    heights of the box) from ordered bins."""
    n = sum(b.n for b in bins)
    if n == 0:
        return {"n": 0}

    def kth(k: int) -> float:
        """The k-th smallest value (0-based): exact at a bin's ends, interpolated inside it."""
        seen = 0
        for b in bins:
            if k < seen + b.n:
                return b.lo if b.n == 1 else b.lo + (b.hi - b.lo) * (k - seen) / (b.n - 1)
            seen += b.n
        return bins[-1].hi

    def quantile(p: float) -> float:
        rank = (n - 1) * p  # linear interpolation between order statistics
        below = int(rank)
        return kth(below) + (kth(min(n - 1, below + 1)) - kth(below)) * (rank - below)

    q1, median, q3 = quantile(0.25), quantile(0.5), quantile(0.75)
    reach = 1.5 * (q3 - q1)
    values = [v for b in bins for v in (b.lo, b.hi)]
    low = min(v for v in values if v >= q1 - reach)
    high = max(v for v in values if v <= q3 + reach)
    return {"n": n, "q1": round(q1, 3), "median": round(median, 3), "q3": round(q3, 3), "low": round(low, 3),
            "high": round(high, 3), "mean": round(sum(b.total for b in bins) / n, 3),
            "max": round(max(b.hi for b in bins), 3)}


def _sql_dialect() -> tuple[str, str, str]:
    """(seconds between two timestamps, greatest of two numbers, a clause that keeps a subquery
    from being merged into its parent) in this database's SQL."""
    if connection.vendor == "postgresql":
        return "EXTRACT(EPOCH FROM ({end} - {start}))::double precision", "GREATEST({a}, {b})", "OFFSET 0"
    if connection.vendor == "sqlite":
        return "((julianday({end}) - julianday({start})) * 86400.0)", "MAX({a}, {b})", "LIMIT -1 OFFSET 0"
    raise NotImplementedError(f"team statistics need PostgreSQL or SQLite, not {connection.vendor}")


def binned_by_team(value: str, where: str, params: Sequence[Any], team_names: Mapping[int, str],
                   scale: float = 1.0) -> list[dict[str, Any]]:
    """Box statistics per team of `value` (SQL over one job row) for the jobs matching `where`.

    One query, written in SQL because the ORM repeats an annotation in every aggregate that
    uses it: the inner select computes each job's value once, the outer one counts it into its
    bin. LN and FLOOR exist on PostgreSQL and, through Django, on SQLite."""
    _, greatest, fence = _sql_dialect()
    table = Job._meta.db_table
    # The fence keeps the planner from folding the inner select into the outer one, which would
    # put the value's expression back into every aggregate.
    sql = (
        f"SELECT team_id, FLOOR(LN({greatest.format(a='v', b='0.001')}) * {BINS_PER_E}) AS bin, "
        f"COUNT(*), SUM(v), MIN(v), MAX(v) "
        f"FROM (SELECT team_id, {value} AS v FROM {table} WHERE {where} {fence}) AS timed "
        f"GROUP BY team_id, bin ORDER BY team_id, bin"
    )
    by_team: dict[str, list[Bin]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        for team_id, _, n, total, lo, hi in cursor.fetchall():
            name = team_names.get(team_id, str(team_id))
            by_team[name].append(Bin(int(n), float(total) * scale, float(lo) * scale, float(hi) * scale))
    return [{"team": team, **box_from_bins(bins)} for team, bins in sorted(by_team.items())]


def waits_and_slowdowns(since: datetime, until: datetime, team_names: Mapping[int, str] | None = None,
                        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per team, box statistics of
    - the wait (minutes) of jobs that started in the window: from submission to their last start;
    - the bounded slowdown of jobs that finished in the window after running:
      max(1, (finished − submitted) / max(finished − last start, MIN_RUN_S)) (Feitelson's bounded
      slowdown: a job that ran a few seconds does not dwarf the rest, and none goes below 1).
    Two grouped queries (three without `team_names`); the jobs themselves never leave the
    database."""
    if team_names is None:
        team_names = dict(Team.objects.values_list("id", "name"))
    seconds, greatest, _ = _sql_dialect()
    col = {f.name: f.column for f in Job._meta.concrete_fields}
    submitted, started, finished = col["submitted_at"], col["started_at"], col["finished_at"]
    wait = greatest.format(a=seconds.format(end=started, start=submitted), b="0")
    waits = binned_by_team(wait, f"{started} >= %s AND {started} <= %s", [since, until], team_names, 1 / 60.0)
    elapsed = greatest.format(a=seconds.format(end=finished, start=submitted), b="0")
    ran = greatest.format(a=seconds.format(end=finished, start=started), b=repr(MIN_RUN_S))
    slowdown = greatest.format(a=f"({elapsed}) / ({ran})", b="1.0")
    slowdowns = binned_by_team(
        slowdown, f"{started} IS NOT NULL AND {finished} >= %s AND {finished} <= %s", [since, until], team_names,
    )
    return waits, slowdowns


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
