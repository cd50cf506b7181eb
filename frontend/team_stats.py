"""What the teams page reads: quota against use, and the distributions of waits and slowdown.

Each function is a fixed number of grouped queries, whatever the number of jobs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.db import connection
from django.db.models import Count, Q

from controlplane.choices import FINISHED_JOB_STATES, JobState
from controlplane.models import AllocationGpu, Job, Quota, Team
from controlplane.services.usage_tiers import Guarantee, Holding, PriceBook, idle_guarantees
from controlplane.shared_store import shared_store

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

    A team's use within its guarantee is used, beyond it borrowed; what a cohort's teams borrow
    is all lent by its teams with unused guarantee, as the engine admits it (quotas.lent_now),
    split as the accounting splits it
    (`usage_tiers.idle_guarantees`): in proportion to what each may lend (capped by its lending
    limit). A team holding GPUs of a type it has no quota on borrows all of them.
    `visible_team_ids` (None: all) limits the rows returned, not the arithmetic. Two queries."""
    quotas = list(Quota.objects.values_list(
        "team_id", "gpu_type_id", "nominal_gpus", "lending_limit", "borrowing_limit", "team__cohort_id",
        "team__name", "gpu_type__name",
    ))
    held: dict[tuple[int, int], int] = {}
    names: dict[int, str] = {q[0]: q[6] for q in quotas}
    types: dict[int, str] = {q[1]: q[7] for q in quotas}
    for row in (
        AllocationGpu.held()
        .values("allocation__job__team_id", "allocation__job__team__name", "node__gpu_type_id", "node__gpu_type__name")
        .annotate(n=Count("id"))
        .order_by()
    ):
        key = (row["allocation__job__team_id"], row["node__gpu_type_id"])
        held[key] = row["n"]
        names[key[0]] = row["allocation__job__team__name"]
        types[key[1]] = row["node__gpu_type__name"]
    guarantees = [Guarantee(team_id=t, gpu_type_id=g, nominal_gpus=n, lending_limit=lend, cohort_id=c)
                  for t, g, n, lend, _, c, _, _ in quotas]
    # One microsecond of the present: the cells' GPU-microseconds are then GPUs.
    cells = idle_guarantees(0, 1, guarantees, [Holding(t, g, n, 0, 1) for (t, g), n in held.items()], PriceBook())
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


def _sql_dialect() -> tuple[str, str, str, str]:
    """(seconds between two timestamps, greatest of two numbers, a clause that keeps a subquery
    from being merged into its parent, the UTC day number of a timestamp) in this database's SQL."""
    if connection.vendor == "postgresql":
        # date_part gives double precision; EXTRACT gives numeric, a third slower over a month of jobs.
        return ("date_part('epoch', {end} - {start})", "GREATEST({a}, {b})", "OFFSET 0",
                "FLOOR(date_part('epoch', {at}) / 86400)")
    if connection.vendor == "sqlite":
        return ("((julianday({end}) - julianday({start})) * 86400.0)", "MAX({a}, {b})", "LIMIT -1 OFFSET 0",
                "CAST(FLOOR(julianday({at}) - 2440587.5) AS INTEGER)")
    raise NotImplementedError(f"team statistics need PostgreSQL or SQLite, not {connection.vendor}")


# ------------------------------------------------------------------ the distributions, by day
#
# A month holds a hundred thousand jobs; grouping them all on every view would cost half a
# second. So the bins are also kept per UTC day and per measure in the shared store (Redis when
# the deployment has it): a finished day's bins are read back, and only the window's two
# partial days (its oldest and the current one) and any day not yet stored are grouped in the
# database — in one query per measure whatever the window, the stored days' rows merged in.
# Bins merge exactly (counts and sums add, extremes take the extreme), so a month costs what
# two days cost. A stored day is kept DAY_TTL_S (RECENT_DAY_TTL_S for yesterday, whose jobs may
# still be restarted after a preemption, which moves their start).

DAY_S = 86400
DAY_TTL_S = 24 * 3600
RECENT_DAY_TTL_S = 3600
DAY_KEY = "qm:team-bins:v1:{measure}:{day}"
# The whole days of a window merged, as the next view of the same window reads them back.
SPAN_KEY = "qm:team-bins:v1:{measure}:{first}-{last}"

# Per (team id, bin): count, sum, smallest, largest of the raw values.
BinRows = dict[tuple[int, int], tuple[int, float, float, float]]


@dataclass(frozen=True)
class Measure:
    name: str
    value: str  # SQL over one job row
    column: str  # the time column that places a job in the window
    where: str  # extra condition on the job row ("" for none)
    scale: float


def _measures() -> tuple[Measure, Measure]:
    """The wait (minutes) of jobs that started, and the bounded slowdown of jobs that finished:
    max(1, (finished − submitted) / max(finished − last start, MIN_RUN_S)) (Feitelson's bounded
    slowdown: a job that ran a few seconds does not dwarf the rest, and none goes below 1)."""
    seconds, greatest, _, _ = _sql_dialect()
    col = {f.name: f.column for f in Job._meta.concrete_fields}
    submitted, started, finished = col["submitted_at"], col["started_at"], col["finished_at"]
    wait = greatest.format(a=seconds.format(end=started, start=submitted), b="0")
    elapsed = greatest.format(a=seconds.format(end=finished, start=submitted), b="0")
    ran = greatest.format(a=seconds.format(end=finished, start=started), b=repr(MIN_RUN_S))
    slowdown = greatest.format(a=f"({elapsed}) / ({ran})", b="1.0")
    return (Measure("wait", wait, started, "", 1 / 60.0),
            Measure("slowdown", slowdown, finished, f"{started} IS NOT NULL", 1.0))


def _merge(into: BinRows, rows: Iterable[tuple[int, int, int, float, float, float]]) -> None:
    for team_id, bin_no, n, total, lo, hi in rows:
        key = (int(team_id), int(bin_no))
        had = into.get(key)
        if had is None:
            into[key] = (int(n), float(total), float(lo), float(hi))
        else:
            into[key] = (had[0] + int(n), had[1] + float(total), min(had[2], float(lo)), max(had[3], float(hi)))


def _day_start(day: int) -> datetime:
    return datetime.fromtimestamp(day * DAY_S, tz=dt_timezone.utc)


def _days(since: datetime, until: datetime) -> tuple[list[int], list[tuple[datetime, datetime]]]:
    """The whole UTC days inside [since, until] that are over, and the rest as ranges."""
    first = math.ceil(since.timestamp() / DAY_S)
    today = math.floor(until.timestamp() / DAY_S)
    if first >= today:
        return [], [(since, until)]
    ranges = [(since, _day_start(first))] if since < _day_start(first) else []
    ranges.append((_day_start(today), until))
    return list(range(first, today)), ranges


def binned(measure: Measure, since: datetime, until: datetime, store: Any = None) -> BinRows:
    """Bins of `measure` per team for the jobs whose time column falls in [since, until]: the
    stored days' bins (merged once per window: the next view reads them as one entry), plus one
    query for the partial days and the days not stored yet (which are stored for the next view)."""
    store = store or shared_store()
    _, greatest, fence, day_of = _sql_dialect()
    days, ranges = _days(since, until)
    keys = {day: DAY_KEY.format(measure=measure.name, day=day) for day in days}
    span_key = SPAN_KEY.format(measure=measure.name, first=days[0], last=days[-1]) if days else ""
    hit = store.get(span_key) if days else None
    whole: BinRows = {}
    missing: list[int] = []
    if hit is not None:  # the whole days already merged by an earlier view of this window
        whole = dict(hit)
    elif days:
        stored = store.get_many(list(keys.values()))
        missing = [day for day in days if keys[day] not in stored]
        for day in days:
            if keys[day] in stored:
                _merge(whole, stored[keys[day]])
    col = measure.column
    conditions = [f"({col} >= %s AND {col} < %s)" for _ in ranges]
    params: list[Any] = [t for r in ranges for t in r]
    if ranges:  # the window's end is inclusive
        conditions[-1] = f"({col} >= %s AND {col} <= %s)"
    if missing:
        conditions.append(f"({col} >= %s AND {col} < %s)")
        params += [_day_start(missing[0]), _day_start(missing[-1] + 1)]
    where = "(" + " OR ".join(conditions) + ")" + (f" AND {measure.where}" if measure.where else "")
    table = Job._meta.db_table
    # The fence keeps the planner from folding the inner select into the outer one, which would
    # put the value's expression back into every aggregate.
    sql = (
        f"SELECT day, team_id, FLOOR(LN({greatest.format(a='v', b='0.001')}) * {BINS_PER_E}) AS bin, "
        f"COUNT(*), SUM(v), MIN(v), MAX(v) "
        f"FROM (SELECT {day_of.format(at=col)} AS day, team_id, {measure.value} AS v FROM {table} WHERE {where} {fence}) AS timed "
        f"GROUP BY day, team_id, bin"
    )
    fresh: dict[int, list[tuple[int, int, int, float, float, float]]] = {day: [] for day in missing}
    partial: list[tuple[int, int, int, float, float, float]] = []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for day, team_id, bin_no, n, total, lo_v, hi_v in cursor.fetchall():
            row = (int(team_id), int(bin_no), int(n), float(total), float(lo_v), float(hi_v))
            # The partial ranges lie in the window's first and last days, never in a whole day.
            if int(day) in fresh:
                fresh[int(day)].append(row)
            else:
                partial.append(row)
    latest = math.floor(until.timestamp() / DAY_S) - 1
    for day, rows in fresh.items():
        _merge(whole, rows)
        store.set(keys[day], rows, _ttl(day, latest))
    if days and hit is None:
        store.set(span_key, whole, min(_ttl(day, latest) for day in days))
    out = dict(whole)
    _merge(out, partial)
    return out


def _ttl(day: int, latest: int) -> int:
    """How long a day's bins are kept: an hour for yesterday, a day for the others, staggered by
    the day so that the days of a month do not all expire in the same view."""
    return RECENT_DAY_TTL_S if day >= latest else DAY_TTL_S + (day % 12) * 3600


def boxes(bins: BinRows, team_names: Mapping[int, str], scale: float) -> list[dict[str, Any]]:
    """Box statistics per team (by name) from its bins."""
    by_team: dict[str, list[Bin]] = defaultdict(list)
    for (team_id, _), (n, total, lo, hi) in sorted(bins.items()):
        by_team[team_names.get(team_id, str(team_id))].append(Bin(n, total * scale, lo * scale, hi * scale))
    return [{"team": team, **box_from_bins(b)} for team, b in sorted(by_team.items())]


def waits_and_slowdowns(since: datetime, until: datetime, team_names: Mapping[int, str] | None = None,
                        store: Any = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per team, box statistics of
    - the wait (minutes) of jobs that started in the window: from submission to their last start;
    - the bounded slowdown of jobs that finished in the window after running.
    One grouped query per measure (one more without `team_names`), whatever the window; the
    jobs themselves never leave the database."""
    if team_names is None:
        team_names = dict(Team.objects.values_list("id", "name"))
    wait, slowdown = _measures()
    return (boxes(binned(wait, since, until, store), team_names, wait.scale),
            boxes(binned(slowdown, since, until, store), team_names, slowdown.scale))


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
