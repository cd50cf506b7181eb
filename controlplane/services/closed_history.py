"""The history's closed totals: what the jobs that ended before yesterday add to `/history/`'s
totals line, kept between reads, so that a read of the whole history adds up only the jobs that
ended since (a day or two of them) whatever the history's length.

`/history/` unfiltered says, of every ended job the reader may see, how many ended in each state,
their GPU-hours and lost GPU-hours (each job's as its row rounds it, added up:
`job_history.history_totals`) and their cost (each job's cents, added up:
`job_costs.jobs_total_cost`). Each job's figures are its own, so the set's are the sums of any
split of it: here the jobs that ended before the horizon (00:00 UTC yesterday when built), read
per team and state from `TOTALS`, and the others, added up as before.

`TOTALS` is built by `rebuild` (`qm.accounting.remember_job_costs` calls `rebuild_if_due` every
minute: at the first run of a UTC day, and after any change to a closed job) in the queries the
totals and the total cost would read, restricted to the closed jobs and grouped by team; only
when every closed job's cost is remembered (migration 0036) and holds, so their cents are what
`jobs_total_cost` reads for them now and until a stamp moves. They are read only while they still
hold (`closed_totals`: migration 0042 says what raises `changes`; a change of the price rates or
of a node's GPU type or tier raises the price generation): otherwise the whole set is added up, as
before, until the next rebuild. PostgreSQL only: SQLite (the demo) adds up every job.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.db.models import Q, QuerySet

from controlplane.models import Job
from controlplane.services import job_costs, job_history
from controlplane.services.job_costs import ENDED_JOB_COSTS, PRICE_GENERATION
from controlplane.services.job_history import _ROUNDED_UNITS_SQL, ENDED_STATES, JOB_DAY_SUMS, HistoryTotals

#: One row: the horizon the totals were built at, the price generation their cents were read
#: under, `changes` (raised by triggers with every change to a closed job) and `built_changes`.
CLOSED = "controlplane_history_closed"
#: Per team and end state: jobs, GPU-hours, lost GPU-hours, cents of the jobs ended before the horizon.
TOTALS = "controlplane_history_closed_totals"


def horizon_of(now: datetime) -> datetime:
    """00:00 UTC of the day before `now`'s: the jobs that ended before it are a day or more past
    their end, so the accounting's last rows for them (seconds after) are long written."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=1)


@dataclass(frozen=True)
class HistorySummary:
    """The totals line of a set of ended jobs: its totals and what it cost, to the cent."""

    totals: HistoryTotals
    cost_usd: Decimal


def history_summary(jobs: QuerySet[Job], now: datetime, teams: frozenset[int] | None, whole: bool) -> HistorySummary:
    """The totals (`job_history.history_totals`) and total cost (`job_costs.jobs_total_cost`) of
    `jobs` (an `ended_jobs` set). `whole`: `jobs` is every ended job of `teams` (None: of every
    team), no other filter, so the closed totals of those teams stand for the jobs that ended
    before their horizon and only the others are added up; else, or while the closed totals do
    not hold, every job of the set is."""
    closed = closed_totals(teams) if whole else None
    if closed is None:
        return HistorySummary(job_history.history_totals(jobs), job_costs.jobs_total_cost(jobs, now))
    horizon, totals, cents = closed
    recent = jobs.filter(Q(finished_at__gte=horizon) | Q(finished_at__isnull=True))
    totals.include(job_history.history_totals(recent, look_up_each=True))
    cost = Decimal(cents).scaleb(-2) + job_costs.jobs_total_cost(recent, now, look_up_each=True)
    return HistorySummary(totals, cost.quantize(Decimal("0.01")))


def closed_totals(teams: frozenset[int] | None) -> tuple[datetime, HistoryTotals, int] | None:
    """The closed totals of `teams` (None: every team), added up, with their horizon and cents;
    None where they do not hold (not built, a closed job changed since, the prices changed since)
    or on SQLite. One query."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT c.horizon, t.state, t.jobs, t.gpu_hours, t.lost_gpu_hours, t.cents FROM {CLOSED} c "
            f"LEFT JOIN {TOTALS} t ON %s OR t.team_id = ANY(%s::bigint[]) "
            f"WHERE c.horizon IS NOT NULL AND c.changes = c.built_changes "
            f"AND c.prices = (SELECT generation FROM {PRICE_GENERATION})",
            [teams is None, sorted(teams or ())])
        rows = cursor.fetchall()
    if not rows:
        return None
    totals, cents = HistoryTotals(), 0
    for _, state, jobs, gpu_hours, lost_gpu_hours, job_cents in rows:
        if state is None:  # no team of the reader's has a closed job
            continue
        totals.jobs += jobs
        totals.states[state] = totals.states.get(state, 0) + jobs
        totals._gpu_hours += gpu_hours
        totals._lost_gpu_hours += lost_gpu_hours
        cents += job_cents
    return rows[0][0], totals, cents


#: The closed jobs (ended before the horizon) grouped by team, state and lost work: how many, how
#: many have a remembered cost that holds (as jobs_total_cost reads it: same requeues, this price
#: generation, settled by now), their GPU-hours in 0.0001 h (each job's day-rollup sum rounded as
#: history_totals rounds it) and their remembered cents.
_CLOSED_SQL = f"""
SELECT team_id, st, lost, COUNT(*), COUNT(cents), SUM({_ROUNDED_UNITS_SQL}), COALESCE(SUM(cents), 0) FROM (
    SELECT j.team_id, j.state AS st, j.lost_gpu_seconds AS lost, c.cents,
           COALESCE(s.allocated_gpu_seconds, 0) * 1000000 AS us
    FROM {Job._meta.db_table} j
    LEFT JOIN {JOB_DAY_SUMS} s ON s.job_id = j.id
    LEFT JOIN {ENDED_JOB_COSTS} c ON c.job_id = j.id AND c.requeues = j.requeue_count AND c.prices = %s
                                 AND c.settled_at <= %s
    WHERE j.state = ANY(%s) AND j.finished_at < %s
) AS closed
GROUP BY team_id, st, lost"""


def rebuild(now: datetime) -> bool:
    """Build the closed totals at `horizon_of(now)`; False (nothing written, the old ones kept)
    if a closed job's cost is not remembered, or no longer holds: the remember task prices it
    first. `changes` and the price generation are read before the jobs: a change committed after
    that raises one of them past what the totals are stamped with, so they are not read."""
    if connection.vendor != "postgresql":
        return False
    horizon = horizon_of(now)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT changes, (SELECT generation FROM {PRICE_GENERATION}) FROM {CLOSED}")
        changes, prices = cursor.fetchone()
        cursor.execute(_CLOSED_SQL, [prices, now, [str(state) for state in ENDED_STATES], horizon])
        groups = cursor.fetchall()
    rows: dict[tuple[int, str], list[object]] = {}
    for team_id, state, lost, count, remembered, units, cents in groups:
        if remembered != count:
            return False
        row = rows.setdefault((team_id, state), [0, Decimal(0), Decimal(0), 0])
        row[0] += count  # type: ignore[operator]
        row[1] += Decimal(units).scaleb(-4)  # type: ignore[operator]
        if lost:  # as history_totals adds a group's lost work
            row[2] += count * Decimal(str(job_history._lost_hours_of(lost)))  # type: ignore[operator]
        row[3] += cents  # type: ignore[operator]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {CLOSED} FOR UPDATE")  # one rebuild writes at a time
        cursor.execute(f"DELETE FROM {TOTALS}")
        cursor.executemany(
            f"INSERT INTO {TOTALS} (team_id, state, jobs, gpu_hours, lost_gpu_hours, cents) VALUES (%s, %s, %s, %s, %s, %s)",
            [(team_id, state, *figures) for (team_id, state), figures in sorted(rows.items())])
        cursor.execute(f"UPDATE {CLOSED} SET horizon = %s, prices = %s, built_changes = %s, built_at = %s",
                       [horizon, prices, changes, now])
    return True


def rebuild_if_due(now: datetime) -> bool:
    """Rebuild the closed totals if they do not hold or their horizon is behind `horizon_of(now)`;
    whether they hold at it afterwards."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT horizon = %s AND changes = built_changes AND prices = (SELECT generation FROM "
                       f"{PRICE_GENERATION}) FROM {CLOSED}", [horizon_of(now)])
        (holds,) = cursor.fetchone()
    return True if holds else rebuild(now)
