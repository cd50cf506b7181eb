"""A job's history figures, as `sacct` says them: how long it ran, the GPU-hours it held over all
its runs, and where it ran. The API's job fields (`elapsed_s`, `gpu_hours`, `ran_on`), its
`ran_longer_than_s` filter and `elapsed` ordering, and `qm history` all read them from here.

- elapsed: the latest run, from its start (`started_at`, set at each bind and cleared by a
  requeue, as Slurm's Start) to the job's end (`finished_at`), or to now while it runs or stops;
  None for a job that is not running and never started since it was last queued.
- GPU-hours: the accounting's allocated GPU-seconds of the job (every allocation it ever held,
  from its bind to its release; a gang member that exited early stops counting then), read from
  the day rollups exactly as the job page's cost (`job_costs.job_cost`) reads them, ÷ 3,600. It
  is as fresh as the rollup (`rolled_until`, every ~15 s): a job finished a few seconds ago may
  not yet have its last seconds counted.
- ran on: every node the job held a GPU on in any of its runs, released ones included.
- last run's GPUs: the GPUs its latest run held (its latest allocation's GPU rows, a gang member
  that exited early included), the run `elapsed` measures; None for a job that never held any.
  An elastic job asking 4 that ran on 8 says 8 here (`gpus` stays what it asked), so GPUs ×
  elapsed is that run's GPU-hours (until 5 Dec the history said the 4 it asked beside the
  GPU-hours of the 8 it held).

The `/history/` page (and its CSV) lists the jobs that ended with these figures: `history_rows`
for a page (with their costs), `history_totals` over the whole filtered set (the page adds up
through services/closed_history.py, which keeps the closed days' totals), `history_csv` for the
download.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    CharField,
    Count,
    DateTimeField,
    DecimalField,
    DurationField,
    ExpressionWrapper,
    F,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from controlplane.choices import LIVE_JOB_STATES, JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node, UsageRollup
from controlplane.models.usage import RollupBucket
from controlplane.services import job_costs
from controlplane.services.history_text import gpus_held_text
from controlplane.services.spreadsheet_cells import HOURS_4, PLAIN, USD, Cell, Figure, csv_text
from scheduler_core.sentences import counted

_HOUR_S = Decimal(3600)
_HOURS_Q = Decimal("0.0001")  # as job_costs.job_cost rounds its GPU-hours
_SECONDS = DecimalField(max_digits=20, decimal_places=6)


def elapsed_seconds(job: Job, now: datetime) -> int | None:
    """Whole seconds of the job's latest run: to its end, or to `now` while it holds GPUs."""
    return _elapsed_seconds(job.started_at, job.finished_at, job.state, now)


def _elapsed_seconds(started_at: datetime | None, finished_at: datetime | None, state: str,
                     now: datetime) -> int | None:
    """elapsed_seconds of a job's own fields (the CSV reads them as values, not jobs)."""
    if started_at is None:
        return None
    if finished_at is not None:
        end = finished_at
    elif state in LIVE_JOB_STATES:
        end = now
    else:
        return None
    return max(0, int((end - started_at).total_seconds()))


def elapsed_expression(now: datetime) -> ExpressionWrapper:
    """elapsed_seconds as SQL (a duration; NULL where it is None), for ordering."""
    end = Case(
        When(finished_at__isnull=False, then=F("finished_at")),
        When(state__in=LIVE_JOB_STATES, then=Value(now, output_field=DateTimeField())),
        default=Value(None, output_field=DateTimeField()),
        output_field=DateTimeField(),
    )
    return ExpressionWrapper(end - F("started_at"), output_field=DurationField())


def ran_longer_than(seconds: int, now: datetime) -> Q:
    """Jobs whose latest run has lasted more than `seconds`: ended runs by their length, runs
    still going by their start (the same rule as elapsed_seconds, index-friendly)."""
    span = timedelta(seconds=seconds)
    return (
        Q(finished_at__isnull=False, started_at__isnull=False, finished_at__gt=F("started_at") + span)
        | Q(finished_at__isnull=True, state__in=LIVE_JOB_STATES, started_at__lt=now - span)
    )


def may_have_run(job: Job) -> bool:
    """False only for a job that can hold no GPU-hours and no nodes: never started, never
    requeued, not running. A page of such jobs (a queue) costs no query for them."""
    return _may_have_run(job.started_at, job.requeue_count, job.state)


def _may_have_run(started_at: object, requeue_count: int, state: str) -> bool:
    """may_have_run of a job's own fields: `started_at` its start, as a time or as text (None: none)."""
    return started_at is not None or requeue_count > 0 or state in LIVE_JOB_STATES


def attach_history(jobs: Sequence[Job]) -> None:
    """Set `allocated_gpu_seconds` (a Decimal), `ran_on` (sorted node names) and
    `last_run_gpus` (None for none) on each job, in one query for the page (none when no job on
    it ever ran; SQLite, the demo's, reads the last runs' GPUs in a second)."""
    figures = history_figures([job.pk for job in jobs if may_have_run(job)])
    for job in jobs:
        job.allocated_gpu_seconds = figures.gpu_seconds.get(job.pk, Decimal(0))  # type: ignore[attr-defined]
        job.ran_on = sorted(figures.nodes.get(job.pk, ()))  # type: ignore[attr-defined]
        job.last_run_gpus = figures.last_run_gpus.get(job.pk)  # type: ignore[attr-defined]


@dataclass
class HistoryFigures:
    """Of some jobs (by id): allocated GPU-seconds (absent without rollups), the nodes held a GPU
    on (absent for none), the GPUs of the latest run (absent for a job that never held any)."""

    gpu_seconds: dict[int, Decimal] = field(default_factory=dict)
    nodes: dict[int, set[str]] = field(default_factory=dict)
    last_run_gpus: dict[int, int] = field(default_factory=dict)


def history_figures(ran: Sequence[int]) -> HistoryFigures:
    """Of the jobs `ran` (ids), each one's allocated GPU-seconds (its day rollups' sum; absent
    for a job without rollups), the names of the nodes it held a GPU on (absent for none) and
    the GPUs its latest allocation held, in one query on PostgreSQL (none for no job)."""
    figures = HistoryFigures()
    gpu_seconds, nodes = figures.gpu_seconds, figures.nodes
    if not ran:
        return figures
    # One statement for both: the nodes of every GPU row it ever had, and its day rollups'
    # allocated GPU-seconds (job_costs.job_cost's very sum), as (job, node, NULL) and
    # (job, NULL, GPU-seconds) rows.
    if connection.vendor == "postgresql":
        rows = []
        for job_id, node, gpu_s, last_gpus in _history_figures_rows(ran):
            if last_gpus is not None:
                figures.last_run_gpus[job_id] = int(last_gpus)
            else:
                rows.append((job_id, node, gpu_s))
    else:
        latest = Allocation.objects.filter(job_id=OuterRef("allocation__job_id")).order_by("-generation")
        figures.last_run_gpus.update(
            AllocationGpu.objects.filter(allocation__job_id__in=ran,
                                         allocation__generation=Subquery(latest.values("generation")[:1]))
            .order_by().values("allocation__job_id").annotate(n=Count("id"))
            .values_list("allocation__job_id", "n"))
        where = (
            AllocationGpu.objects.filter(allocation__job_id__in=ran).order_by()
            .annotate(j=F("allocation__job_id"), n=F("node__name"), g=Cast(Value(None), _SECONDS))
            .values_list("j", "n", "g").distinct()
        )
        held = (
            UsageRollup.objects.filter(bucket=RollupBucket.DAY, job_id__in=ran).order_by()
            .values(j=F("job_id")).annotate(n=Cast(Value(None), CharField()), g=Sum("allocated_gpu_seconds"))
            .values_list("j", "n", "g")
        )
        rows = list(where.union(held, all=True))
    for job_id, node, gpu_s in rows:
        if node is not None:
            nodes.setdefault(job_id, set()).add(node)
        if gpu_s is not None:
            gpu_seconds[job_id] = gpu_seconds.get(job_id, Decimal(0)) + Decimal(str(gpu_s))
    return figures


def _history_figures_rows(ran: Sequence[int]) -> list[tuple[int, str | None, Decimal | None, int | None]]:
    """history_figures' statement on PostgreSQL, the ids one array parameter. Each job's runs are
    read through the allocations' job index, one lookup a job (`OFFSET 0` keeps the planner from
    flattening the lateral read into a join): as a plain join the planner scanned the whole
    allocation table for each chunk of the CSV, in parallel workers, 21 ms a chunk of 1,000 at
    100,000 jobs against 7. A third part counts the GPU rows of each job's latest allocation
    (its highest generation, read backwards through the same index): (job, NULL, NULL, GPUs)."""
    allocation, gpu = Allocation._meta.db_table, AllocationGpu._meta.db_table
    node, rollup = Node._meta.db_table, UsageRollup._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT a.job_id, n.name, NULL::numeric, NULL::bigint FROM unnest(%s::bigint[]) AS ran(job_id) "
            f"CROSS JOIN LATERAL (SELECT id, job_id FROM {allocation} WHERE job_id = ran.job_id OFFSET 0) AS a "
            f"JOIN {gpu} g ON g.allocation_id = a.id JOIN {node} n ON n.id = g.node_id GROUP BY a.job_id, n.name "
            f"UNION ALL SELECT job_id, NULL, SUM(allocated_gpu_seconds), NULL FROM {rollup} "
            f"WHERE bucket = %s AND job_id = ANY(%s) GROUP BY job_id "
            f"UNION ALL SELECT ran.job_id, NULL, NULL, (SELECT COUNT(*) FROM {gpu} g WHERE g.allocation_id = last.id) "
            f"FROM unnest(%s::bigint[]) AS ran(job_id) CROSS JOIN LATERAL (SELECT id FROM {allocation} "
            f"WHERE job_id = ran.job_id ORDER BY generation DESC LIMIT 1) AS last",
            [list(ran), int(RollupBucket.DAY), list(ran), list(ran)])
        return cursor.fetchall()


def _among(model: type[Model], column: str, ids: Sequence[int]) -> Q | RawSQL:
    """A filter: `column` of `model`'s table (joined as itself) among `ids`. On PostgreSQL one array
    parameter (`= ANY(%s)`): an IN list of 1,000 markers, twice a chunk of the CSV, cost more to
    build (Django's lookups, psycopg's parsing of the statement) than to run."""
    if connection.vendor == "postgresql":
        return RawSQL(f'"{model._meta.db_table}"."{column}" = ANY(%s)', (list(ids),), output_field=BooleanField())
    return Q(**{f"{column}__in": ids})


def _attached(job: Job) -> Job:
    if getattr(job, "ran_on", None) is None:
        attach_history([job])
    return job


def _exact_gpu_hours_of(seconds: Decimal) -> Decimal:
    return (seconds / _HOUR_S).quantize(_HOURS_Q)


def _gpu_hours_of(seconds: Decimal) -> float:
    return float(_exact_gpu_hours_of(seconds))


def gpu_hours(job: Job) -> float:
    """The job's allocated GPU-hours so far (4 decimals), read with its page or on its own."""
    return _gpu_hours_of(_attached(job).allocated_gpu_seconds)  # type: ignore[attr-defined]


def ran_on(job: Job) -> list[str]:
    return list(_attached(job).ran_on)  # type: ignore[attr-defined]


def last_run_gpus(job: Job) -> int | None:
    """The GPUs its latest run held (None: it never held any), read with its page or on its own."""
    return _attached(job).last_run_gpus  # type: ignore[attr-defined, no-any-return]


def _lost_hours_of(seconds: float) -> float:
    return round(float(seconds) / 3600, 4)


def lost_gpu_hours(job: Job) -> float:
    """The work its preemptions and other requeues threw away (`lost_gpu_seconds`), in hours."""
    return _lost_hours_of(job.lost_gpu_seconds)



# ------------------------------------------------------------------- the history of ended jobs

#: The states a job ends in: what the history lists (`qm history`'s states; pending, running and
#: unschedulable jobs are the jobs list's).
ENDED_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT)
#: Jobs read per query when every row of a filtered set is written (the CSV).
CSV_CHUNK = 1000


def ended_jobs(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """The jobs of `jobs` (already scoped to the reader and filtered) that ended, newest end
    first (the newest id breaks ties, so pages never overlap), with what a row names. Every
    ended job has its `finished_at` (each end sets it), so a plain descending order reads the
    `finished_at` index backwards rather than sorting the whole set."""
    return (jobs.filter(state__in=ENDED_STATES).select_related("team", "project", "submitter")
            .order_by("-finished_at", "-id"))


_HALF_SECOND = timedelta(microseconds=500_000)


def _second(at: datetime | None) -> str:
    """A stored time as ISO 8601 UTC to the nearest second, as the pages round it."""
    if at is None:
        return ""
    at = (at + _HALF_SECOND).astimezone(UTC)
    # isoformat's first 19 characters are strftime("%Y-%m-%dT%H:%M:%S") from the year 1000 on (it
    # pads the year to four digits, strftime does not), in a seventh of the time (300,000 a CSV
    # of 100,000 jobs)
    return at.isoformat()[:19] + "Z" if at.year >= 1000 else at.strftime("%Y-%m-%dT%H:%M:%SZ")


def clock(seconds: int | None) -> str:
    """Elapsed time as sacct says it: `HH:MM:SS`, `D-HH:MM:SS` from a day on; "" for none."""
    if seconds is None:
        return ""
    days, rest = divmod(int(seconds), 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


@dataclass(frozen=True)
class HistoryRow:
    """One ended job with its history figures, as the page's table and the CSV both say them."""

    job: Job
    elapsed_s: int | None
    gpu_hours: float
    lost_gpu_hours: float
    ran_on: list[str]
    #: The GPUs its latest run held (the run `elapsed` measures); None: it never held any.
    last_run_gpus: int | None = None
    #: What it cost, to the cent (job_costs.run_costs' rule); None where not asked for.
    cost_usd: Decimal | None = None

    @property
    def elapsed(self) -> str:
        return clock(self.elapsed_s)

    @property
    def gpus_held_text(self) -> str:
        """The page's GPUs held: its last run's, with what it asked where that differs
        ("8 (asked 4)"); "–" for a job that never held any."""
        return gpus_held_text(self.last_run_gpus, self.job.gpus)

    @property
    def submitted(self) -> str:
        return _second(self.job.submitted_at)

    @property
    def started(self) -> str:
        return _second(self.job.started_at)

    @property
    def ended(self) -> str:
        return _second(self.job.finished_at)


def history_rows(jobs: Sequence[Job], now: datetime, priced: bool = False) -> list[HistoryRow]:
    """A page of ended jobs with their figures: one query for all of them (`attach_history`).
    `priced`: each row's cost too, the page's jobs priced in one call (`job_costs.jobs_costs`:
    one query, remembered or priced), never one call a row."""
    attach_history(jobs)
    costs = job_costs.jobs_costs([job.pk for job in jobs], now) if priced else {}
    return [HistoryRow(job, elapsed_seconds(job, now), gpu_hours(job), lost_gpu_hours(job), ran_on(job),
                       last_run_gpus(job), costs.get(job.pk)) for job in jobs]


@dataclass
class HistoryTotals:
    """The whole filtered set: how many jobs, by how they ended, and the sums of the rows'
    own figures (each job's `gpu_hours` and `lost_gpu_hours` as its row says them, added up:
    `qm history`'s totals line adds them the same way)."""

    jobs: int = 0
    states: dict[str, int] = field(default_factory=dict)
    _gpu_hours: Decimal = Decimal(0)  # summed exactly: each figure has 4 decimals
    _lost_gpu_hours: Decimal = Decimal(0)

    def add(self, state: str, gpu_hours: float, lost_gpu_hours: float) -> None:
        self.jobs += 1
        self.states[state] = self.states.get(state, 0) + 1
        self._gpu_hours += Decimal(str(gpu_hours))
        self._lost_gpu_hours += Decimal(str(lost_gpu_hours))

    def include(self, other: HistoryTotals) -> None:
        """Add another set's totals (of other jobs): each job's figures are its own, so a set's
        totals are the sums of its parts'."""
        self.jobs += other.jobs
        for state, count in other.states.items():
            self.states[state] = self.states.get(state, 0) + count
        self._gpu_hours += other._gpu_hours
        self._lost_gpu_hours += other._lost_gpu_hours

    @property
    def gpu_hours(self) -> float:
        return float(self._gpu_hours)

    @property
    def lost_gpu_hours(self) -> float:
        return float(self._lost_gpu_hours)

    @property
    def by_state(self) -> list[tuple[str, int]]:
        """(state, jobs), the commonest first."""
        return sorted(self.states.items(), key=lambda kv: (-kv[1], kv[0]))


#: A job's day-rollup GPU-seconds as GPU-hours to 4 decimals, in units of 0.0001 h, exactly as
#: `_exact_gpu_hours_of` rounds them (half to even), in integer arithmetic on PostgreSQL's
#: numeric: the seconds have 6 decimals, so `us` (micro-GPU-seconds) is a whole number, and
#: 0.0001 h is 360,000 of them. A quotient and a remainder, no division that could round: the
#: remainder says whether the quotient rounds up, a tie (exactly half) up only to an even unit.
#: The rollups' constraints keep allocated GPU-seconds ≥ 0 (allocated ≥ active ≥ productive ≥ 0).
_ROUNDED_UNITS_SQL = """
    div(us, 360000) + CASE WHEN 2 * mod(us, 360000) > 360000 THEN 1
                           WHEN 2 * mod(us, 360000) = 360000 THEN mod(div(us, 360000), 2)
                           ELSE 0 END"""


#: Each job's day rollups' allocated GPU-seconds, summed (PostgreSQL; migration 0024): kept by
#: triggers on the rollup table in the transaction of every write to it, so it says what summing
#: the rows says, at any moment. A job without a row has 0.
JOB_DAY_SUMS = "controlplane_job_day_gpu_seconds"


def history_totals(jobs: QuerySet[Job], look_up_each: bool = False) -> HistoryTotals:
    """Totals over every job of `jobs` (an `ended_jobs` set), not one page, in one query
    whatever its size: each job's day rollups' GPU-seconds (job_costs.job_cost's sum, read from
    JOB_DAY_SUMS, one row a job) rounded as `gpu_hours` rounds it, summed in PostgreSQL per
    (state, lost GPU-seconds) group with the jobs counted; each group's lost work rounded as
    `lost_gpu_hours` rounds it, times its jobs, here. A job without rollups adds 0, as its row
    says. Figure for figure what adding up every row's own figures gives
    (`history_totals_row_by_row`, the reference, which the tests hold it to; SQLite, whose
    decimals are floats and which has no JOB_DAY_SUMS, takes that path). `look_up_each`: the set
    is a few thousand jobs at most (the days since the closed totals: services/closed_history.py),
    so each job's sum is looked up by its key rather than the sums of every job hashed (the
    planner's choice for a join, which reads the whole table: 100,000 rows at 100,000 jobs)."""
    jobs = jobs.order_by()
    if connection.vendor != "postgresql":
        return history_totals_row_by_row(jobs)
    try:
        inner, params = jobs.values(j=F("pk"), st=F("state"), lost=F("lost_gpu_seconds")).query.sql_with_params()
    except EmptyResultSet:  # a filter nothing can match (finance's scope: no team): no job, no query
        return HistoryTotals()
    if look_up_each:
        # OFFSET 0: the lookup once a job (the rounding names `us` four times, and a flattened
        # subquery would look it up for each)
        seconds = f"(SELECT sums.allocated_gpu_seconds FROM {JOB_DAY_SUMS} AS sums WHERE sums.job_id = per_job.j)"
        joined = f"({inner}) AS per_job OFFSET 0"
    else:
        seconds = "sums.allocated_gpu_seconds"
        joined = f"({inner}) AS per_job LEFT JOIN {JOB_DAY_SUMS} AS sums ON sums.job_id = per_job.j"
    sql = (f"SELECT st, lost, COUNT(*), SUM({_ROUNDED_UNITS_SQL}) FROM "
           f"(SELECT per_job.st, per_job.lost, COALESCE({seconds}, 0) * 1000000 AS us FROM {joined}) AS micro "
           "GROUP BY st, lost")
    totals = HistoryTotals()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        groups = cursor.fetchall()
    # (state, lost GPU-seconds, jobs, their GPU-hours in 0.0001 h): few rows, since most jobs lost nothing.
    for state, lost, count, units in groups:
        totals.jobs += count
        totals.states[state] = totals.states.get(state, 0) + count
        if lost:
            totals._lost_gpu_hours += count * Decimal(str(_lost_hours_of(lost)))
        totals._gpu_hours += Decimal(units).scaleb(-4)
    return totals


def history_totals_row_by_row(jobs: QuerySet[Job]) -> HistoryTotals:
    """The totals as their definition says them: every job's own figures, each rounded as its
    row rounds it, added up (the jobs by state and lost work, and each job's day-rollup sum, read
    to Python and rounded there). `history_totals` answers the same in one query; this is its
    reference, and what SQLite (the demo) runs."""
    jobs = jobs.order_by()
    totals = HistoryTotals()
    for state, lost, count in (jobs.values("state", "lost_gpu_seconds").annotate(n=Count("pk"))
                               .values_list("state", "lost_gpu_seconds", "n")):
        totals.jobs += count
        totals.states[state] = totals.states.get(state, 0) + count
        if lost:
            totals._lost_gpu_hours += count * Decimal(str(_lost_hours_of(lost)))
    if not totals.jobs:
        return totals
    per_job = (UsageRollup.objects.filter(bucket=RollupBucket.DAY, job_id__in=jobs.values("pk")).order_by()
               .values("job_id").annotate(g=Sum("allocated_gpu_seconds")).values_list("g", flat=True))
    totals._gpu_hours += sum((_exact_gpu_hours_of(seconds or Decimal(0)) for seconds in per_job), Decimal(0))
    return totals


#: The CSV's columns: the table's, each figure in full (GPU-hours to 4 decimals, every node; `gpus`
#: what it asked, `last_run_gpus` what its latest run held, empty if none), then
#: what each job cost in $ to the cent (job_costs.run_costs: what its runs panel and showback by
#: job charge it).
CSV_COLUMNS = ["job_id", "name", "team", "project", "user", "state", "exit_code", "submitted_at", "started_at",
               "finished_at", "elapsed_s", "elapsed", "gpus", "last_run_gpus", "gpu_hours", "lost_gpu_hours", "ran_on", "cost_usd"]


def csv_cells(row: HistoryRow) -> list[str]:
    return [csv_text(cell) for cell in history_cells(row)]


def history_cells(row: HistoryRow) -> list[Cell]:
    job = row.job
    return _cells(job.pk, job.name, job.team.name, job.project.name if job.project else "",
                  job.submitter.get_username() if job.submitter else "", str(job.state), job.exit_code,
                  _second(job.submitted_at) or None, _second(job.started_at) or None, _second(job.finished_at) or None,
                  row.elapsed_s, job.gpus, row.last_run_gpus,
                  row.gpu_hours, row.lost_gpu_hours, row.ran_on, row.cost_usd)


def _cells(pk: int, name: str, team: str, project: str, user: str, state: str, exit_code: int | None,
           submitted: str | None, started: str | None, finished: str | None, elapsed_s: int | None, gpus: int, last_run: int | None, gpu_hours: float, lost_gpu_hours: float,
           ran_on: Sequence[str], cost_usd: Decimal | None) -> list[Cell]:
    """A row's cells, each figure as the table's row says it (`HistoryRow`), in full: the CSV
    writes them (`csv_text`), and so does the workbook, typed. Times stay ISO 8601 text in UTC
    in both (`_second`'s, None for none): Excel has no time zone, and the text sorts as the
    times do."""
    return [
        Figure(str(pk), PLAIN), name, team, project, user, state,
        None if exit_code is None else Figure(str(exit_code), PLAIN),
        submitted, started, finished,
        None if elapsed_s is None else Figure(str(elapsed_s), PLAIN), clock(elapsed_s) or None,
        Figure(str(gpus), PLAIN), None if last_run is None else Figure(str(last_run), PLAIN),
        Figure(f"{gpu_hours:.4f}", HOURS_4), Figure(f"{lost_gpu_hours:.4f}", HOURS_4), " ".join(ran_on),
        None if cost_usd is None else Figure(f"{cost_usd:.2f}", USD),
    ]


#: `_second` in PostgreSQL, of the job table's column {column}: to_char truncates to the second
#: as `isoformat()[:19]` does, `FMYYYY` leaves a year before 1000 unpadded as strftime does.
_SECOND_SQL = """to_char(("{table}"."{column}" + interval '0.5 second') AT TIME ZONE 'UTC',
                          'FMYYYY-MM-DD"T"HH24:MI:SS"Z"')"""
#: `_elapsed_seconds`' span in PostgreSQL, in whole microseconds (exact: a difference of two
#: timestamps has no months, and its epoch is numeric), to the end, or to now (the first
#: parameter, the live states the second) while it holds GPUs; NULL where `_elapsed_seconds` is None.
_ELAPSED_US_SQL = """CASE WHEN "{table}"."started_at" IS NULL THEN NULL
    WHEN "{table}"."finished_at" IS NOT NULL
        THEN (extract(epoch FROM "{table}"."finished_at" - "{table}"."started_at") * 1000000)::bigint
    WHEN "{table}"."state" = ANY(%s) THEN (extract(epoch FROM %s::timestamptz - "{table}"."started_at") * 1000000)::bigint
END"""
_US = 1_000_000


def _csv_values(jobs: QuerySet[Job], chunk: Sequence[int], now: datetime,
                times_in_sql: bool | None = None) -> list[tuple[Any, ...]]:
    """The chunk's jobs of `jobs`, in the chunk's order (a job no longer in the set left out), as
    the values a CSV row names: (id, name, team, project, user (None for none), state, exit code,
    submitted, started, finished (each as `_second` writes it, None for none), elapsed seconds
    (`_elapsed_seconds`'), GPUs, lost GPU-seconds, requeue count). Values rather than model
    instances (three a job with its team, project and user): at 100,000 jobs instantiating them
    was most of the CSV's Python time. On PostgreSQL (`times_in_sql`, None: there) the times come
    as their text and the elapsed time as whole microseconds, made by PostgreSQL: read as times,
    three a row, through Django's time-zone-aware loader (Python, not psycopg's C), and written
    back as text, they took a quarter of the CSV's time. `_second` and `_elapsed_seconds` are the
    rule (SQLite's path), which tests/controlplane/services/test_history_table_times_in_sql.py
    holds PostgreSQL's to, byte for byte."""
    user = f"submitter__{get_user_model().USERNAME_FIELD}"
    named = ("pk", "name", "team__name", "project__name", user, "state", "exit_code")
    counts = ("gpus", "lost_gpu_seconds", "requeue_count")
    listed = jobs.filter(_among(Job, "id", chunk)).order_by()
    if times_in_sql is None:
        times_in_sql = connection.vendor == "postgresql"
    if times_in_sql:
        table = Job._meta.db_table
        texts = {f"{column}_text": RawSQL(_SECOND_SQL.format(table=table, column=column), (), output_field=CharField())
                 for column in ("submitted_at", "started_at", "finished_at")}
        elapsed = RawSQL(_ELAPSED_US_SQL.format(table=table), ([str(state) for state in LIVE_JOB_STATES], now),
                         output_field=BigIntegerField())
        rows = [(*row[:10], None if row[10] is None else max(0, int(row[10] / _US)), *row[11:])
                for row in listed.annotate(**texts, elapsed_us=elapsed).values_list(
                    *named, *texts, "elapsed_us", *counts)]
    else:
        rows = [(*row[:7], _second(row[7]) or None, _second(row[8]) or None, _second(row[9]) or None,
                 _elapsed_seconds(row[8], row[9], row[5], now), *row[10:])
                for row in listed.values_list(*named, "submitted_at", "started_at", "finished_at", *counts)]
    by_id = {row[0]: row for row in rows}
    return [by_id[pk] for pk in chunk if pk in by_id]


def history_table(jobs: QuerySet[Job], now: datetime) -> Iterator[list[list[Cell]]]:
    """Every job of `jobs` (an `ended_jobs` set), the page's columns (CSV_COLUMNS) and order,
    then a TOTAL row (the sums of the rows above, as `history_totals` says them; its cost the
    sum of the jobs' cents), a list of rows per chunk of jobs. The ids are read first, so a job
    ending meanwhile cannot shift a chunk; then CSV_CHUNK jobs per query, read as values
    (`_csv_values`), with their figures (`history_figures`: one more query) and their costs
    (job_costs.jobs_costs: one more, remembered or priced). Each row says what `history_cells`
    says of the job's `HistoryRow` (the page's row). The CSV (`history_csv`) and the workbook
    (`history_xlsx`) are both written from these rows."""
    ids = list(jobs.values_list("pk", flat=True))
    totals = HistoryTotals()
    cost = Decimal("0.00")
    no_seconds: Decimal = Decimal(0)
    for start in range(0, len(ids), CSV_CHUNK):
        listed = _csv_values(jobs, ids[start:start + CSV_CHUNK], now)
        if not listed:
            continue
        figures = history_figures([row[0] for row in listed if _may_have_run(row[8], row[13], row[5])])
        gpu_seconds, nodes = figures.gpu_seconds, figures.nodes
        costs = job_costs.jobs_costs([row[0] for row in listed], now)
        rows = []
        for pk, name, team, project, user, state, exit_code, submitted, started, finished, elapsed_s, gpus, lost, _ in listed:
            gpu_hours = _gpu_hours_of(gpu_seconds.get(pk, no_seconds))
            lost_gpu_hours = _lost_hours_of(lost)
            totals.add(state, gpu_hours, lost_gpu_hours)
            cost += costs[pk]
            rows.append(_cells(pk, name, team, project or "", user or "", state, exit_code, submitted, started,
                               finished, elapsed_s, gpus,
                               figures.last_run_gpus.get(pk), gpu_hours,
                               lost_gpu_hours, sorted(nodes.get(pk, ())), costs[pk]))
        yield rows
    total: list[Cell] = ["TOTAL", counted(totals.jobs, "job"), *[None] * (len(CSV_COLUMNS) - 6)]
    yield [[*total, Figure(f"{totals.gpu_hours:.4f}", HOURS_4), Figure(f"{totals.lost_gpu_hours:.4f}", HOURS_4),
            None, Figure(f"{cost:.2f}", USD)]]


def history_csv(jobs: QuerySet[Job], now: datetime) -> Iterator[str]:
    """`history_table` as CSV: the header, then one string per chunk of jobs, each cell as
    `csv_text` writes it."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")

    def lines(rows: Iterable[list[str]]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerows(rows)
        return buffer.getvalue()

    yield lines([CSV_COLUMNS])
    for rows in history_table(jobs, now):
        yield lines([csv_text(cell) for cell in row] for row in rows)


def history_xlsx(jobs: QuerySet[Job], now: datetime) -> Iterator[bytes]:
    """`history_table` as an Excel workbook (services/excel_workbook.py), streamed as it is
    written: the CSV's rows, each cell typed, and an "About" sheet. More jobs than a sheet holds:
    `TooManyRows`, raised here, before the stream (a view answers it as a 400 with no byte of a
    file sent); the rows are read only as the stream is."""
    from controlplane.services.excel_workbook import check_rows, workbook_stream

    check_rows(jobs.count() + 1)  # and TOTAL: refused before the rows are read
    about = [
        ("Report", "Finished-job history: the jobs that ended, newest end first, then TOTAL"),
        ("Times", "UTC, ISO 8601 text to the second (as the CSV)"),
        ("GPU-hours", "The accounting's allocated GPU-seconds of each job over all its runs, ÷ 3,600"),
        ("Cost", "USD, what each job's runs cost at the prices in force (its runs panel and showback by job)"),
        ("Generated (UTC)", _second(now)),
    ]
    return workbook_stream("Job history", CSV_COLUMNS, (row for rows in history_table(jobs, now) for row in rows),
                           about)
