"""What a job and its runs have cost: the job page's figures so far (`job_cost`, from the day
rollups), each run to the cent (`run_costs`, by the rollup's own rule: the allocations' held
spans at the price rates in force), many jobs at once (`jobs_costs`: the history CSV's
`cost_usd`) and any set of jobs added up (`jobs_total_cost`: the history's TOTAL, one statement
on PostgreSQL). It only reads: services/accounting.py writes the rollups and holds the spans
(`held_spans`) and the price book (`price_book`) the runs are priced with."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Q, QuerySet, Sum
from django.db.models.sql.datastructures import Join

from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node, PriceRate, UsageRollup
from controlplane.services.accounting import DAY, held_spans, price_book
from controlplane.services.run_text import HUNDREDTH, rounded_cumulatively, share_said
from controlplane.services.showback import CENT, hours, rolled_until
from controlplane.services.usage_tiers import US_PER_HOUR, PriceBook, Span, to_us

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def job_cost(job_id: int) -> dict[str, Any]:
    """A job's figures so far (the job page): the tiers in GPU-hours, cost, lost work."""
    where = Q(bucket=DAY)
    sums = UsageRollup.objects.filter(where, job_id=job_id).aggregate(
        allocated=Sum("allocated_gpu_seconds"), active=Sum("active_gpu_seconds"),
        productive=Sum("productive_gpu_seconds"), lost=Sum("lost_gpu_seconds"), cost=Sum("cost_usd"),
        lost_cost=Sum("lost_cost_usd"), tokens=Sum("retained_tokens"),
    )
    return {
        "gpu_hours_allocated": hours(sums["allocated"] or Decimal(0)),
        "gpu_hours_active": hours(sums["active"] or Decimal(0)),
        "gpu_hours_productive": hours(sums["productive"] or Decimal(0)),
        "preemption_lost_gpu_hours": hours(sums["lost"] or Decimal(0)),
        "cost_usd": (sums["cost"] or Decimal(0)).quantize(CENT),
        "preemption_waste_usd": (sums["lost_cost"] or Decimal(0)).quantize(CENT),
        "useful_tokens": round(sums["tokens"] or 0.0),
        "rolled_until": rolled_until(),
    }


@dataclass(frozen=True)
class RunCosts:
    """What each run (allocation) of a job has cost, to the cent, and the job's total; and the
    GPU-hours each held, to the hundredth, and the job's total, rounded by the same rule."""

    #: allocation id → $, rounded cumulatively in bind order (`run_text.rounded_cumulatively`) so
    #: the runs add up to `total_usd`.
    usd: dict[int, Decimal]
    total_usd: Decimal
    #: allocation id → GPU-hours held, rounded cumulatively in bind order (as `usd`) so the runs
    #: the page lists add up to `total_gpu_hours`, their exact sum rounded once.
    gpu_hours: dict[int, Decimal] = field(default_factory=dict)
    total_gpu_hours: Decimal = Decimal("0.00")
    #: their exact sum, unrounded: a few GPU-seconds whose total rounds to nothing
    exact_gpu_hours: float = 0.0

    def of(self, allocation_id: int) -> Decimal:
        """A run's cost; $0.00 for one that held no GPU."""
        return self.usd.get(allocation_id, Decimal("0.00"))

    def hours_of(self, allocation_id: int) -> Decimal:
        """A run's GPU-hours as its row says them; 0.00 for one that held no GPU."""
        return self.gpu_hours.get(allocation_id, Decimal("0.00"))

    @property
    def total_gpu_hours_said(self) -> float | Decimal:
        """What the job page says the runs held: their rounded total, but a few GPU-seconds
        read "< 0.01" (never "0", as the sentences say them), as a run's row does."""
        return share_said(self.total_gpu_hours, self.exact_gpu_hours)


def run_costs(job_id: int, now: datetime) -> RunCosts:
    """What each run of the job has cost up to `now`, as the rollup charges the job: the same
    spans (`held_spans`: each node's GPUs from the bind to the release, a gang member that exited
    early to its exit, `now` while held) priced by the same rule (`Span.held_cost`: the node's
    GPU type and capacity tier at the rate in force at each instant, cut where a rate changes,
    unpriced time free) with the price rates as they stand, a repricing's included. The rollup
    sums the same pieces minute by minute, so once it has caught up the runs' total is what
    showback and the job page (`job_cost`) charge the job, to the cent.

    Cents: each run's is the running total to the cent through it, less the one through the run
    before (in bind order), so the runs add up to the rounded total exactly, each is within a
    cent of its own rounding, and an ended run's cents never move while a later run grows (a
    largest-remainder share would pass a cent between them as the running one's seconds tick).
    Every run of the job is priced, whatever page of them is shown. Three queries (spans, gang
    members' early exits, rates); none for a job that never held a GPU."""
    return _priced_runs(held_spans(_EPOCH, now, job_id)[0], now).get(job_id, RunCosts(usd={}, total_usd=Decimal("0.00")))


def jobs_costs(job_ids: Sequence[int], now: datetime) -> dict[int, Decimal]:
    """What each of these jobs has cost up to `now`, to the cent: `run_costs(job).total_usd` for
    each (the history CSV's `cost_usd`, a chunk of jobs at a time; the history page's rows). On
    PostgreSQL one statement: a job's remembered cents where its row holds
    (`remember_ended_job_costs`, `jobs_total_cost`'s rule), the others priced there by
    `jobs_total_cost`'s and `remember_ended_job_costs`' rule (`_PRICED_SQL`: `run_costs`' spans and
    rates in PostgreSQL's exact numeric, the job's sum rounded once, half to even). Before 5 Dec
    2026 the others were read as spans and priced in Python (`_priced_runs`, three queries more),
    which took most of the 20.7 s of the CSV of 100,000 ended jobs with nothing remembered
    (docs/dashboards.md, *The CSV's rows*). SQLite (the demo) prices them in Python, as `run_costs`.
    A job that never held a GPU cost $0.00."""
    if not job_ids:
        return {}
    if connection.vendor == "postgresql":
        sql = _JOBS_COSTS_SQL.format(job=Job._meta.db_table, costs=ENDED_JOB_COSTS, prices=PRICE_GENERATION,
                                     priced=_PRICED_SQL.format(**_TABLES, jobs="SELECT pk FROM listed WHERE cents IS NULL"))
        with connection.cursor() as cursor:
            cursor.execute(sql, [now, list(job_ids), *_priced_params(now)])
            cents = dict(cursor.fetchall())
        return {job_id: Decimal(cents.get(job_id, 0)).scaleb(-2).quantize(CENT) for job_id in job_ids}
    priced = _priced_runs(held_spans(_EPOCH, now, None, job_ids)[0], now)
    return {job_id: priced[job_id].total_usd if job_id in priced else Decimal("0.00") for job_id in job_ids}


def jobs_total_cost(jobs: QuerySet[Job], now: datetime, look_up_each: bool = False) -> Decimal:
    """What the jobs of `jobs` (any filtered set, of any size) have cost up to `now`, added up:
    Σ `jobs_costs` (each job to the cent, as the history CSV's `cost_usd` cells and its TOTAL
    row say it), to the cent, in one query on PostgreSQL. The same spans as `held_spans` reads (each
    allocation's GPUs per node from the bind to the release, a gang member that exited early to
    its exit, `now` while held), priced by the same rule (`PriceBook`: the rate of the node's GPU
    type and capacity tier in force at each instant, cut where a rate changes, time before a
    first rate free), in PostgreSQL's exact numeric: every piece's GPU-µs × $/GPU-hour summed per
    job, the job's sum rounded to the cent half to even (as `_priced_runs` rounds its exact sum),
    the cents summed. A job whose cost is remembered (`remember_ended_job_costs`: ended, every
    run released by `now`, priced under the price rates and nodes as they stand, not requeued
    since) is read from there, one row, instead of priced again from its GPU rows: at 50,000
    ended jobs pricing them all takes ~0.8 s (bench/history_cost.py). SQLite (the demo) prices
    the jobs `jobs_costs` 1,000 at a time and adds them up. `look_up_each`: the set is a few
    thousand jobs at most (services/closed_history.py), so each job's remembered cost is looked up
    by its key rather than every remembered cost hashed (the planner's choice for a join)."""
    jobs = jobs.order_by()
    if connection.vendor != "postgresql":
        ids = list(jobs.values_list("pk", flat=True))
        return sum((cost for start in range(0, len(ids), 1000)
                    for cost in jobs_costs(ids[start:start + 1000], now).values()), Decimal("0.00"))
    try:
        inner, params = jobs.values_list("pk", "requeue_count").query.sql_with_params()
    except EmptyResultSet:  # a filter nothing can match: no job, no query
        return Decimal("0.00")
    # Each job once: a filter that joined a to-many relation (a job's allocations, its events)
    # repeats it, and only then is the set made distinct; a hash of every job of the set otherwise
    # (the whole history's 99,566 on bench/scale_audit.py's installation: a quarter of the time).
    rows = (f"(SELECT DISTINCT pk, requeues FROM ({inner}) AS named(pk, requeues)) AS w"
            if _joins_many(jobs.query) else f"({inner}) AS w(pk, requeues)")
    sql = (_JOBS_TOTAL_COST_EACH_SQL if look_up_each else _JOBS_TOTAL_COST_SQL).format(
        rows=rows, costs=ENDED_JOB_COSTS, prices=PRICE_GENERATION,
        priced=_PRICED_SQL.format(**_TABLES, jobs="SELECT pk FROM listed WHERE cents IS NULL"))
    with connection.cursor() as cursor:
        # the settled-by time is written before the set's own parameters in the looked-up form
        first = [now, *params] if look_up_each else [*params, now]
        cursor.execute(sql, [*first, *_priced_params(now)])
        (cents,) = cursor.fetchone()
    return Decimal(cents or 0).scaleb(-2).quantize(CENT)


def _joins_many(query: Any) -> bool:
    """Whether `query` (of jobs) joins a relation a job has many of, so that its rows may
    repeat a job (a join along a foreign key, to its team or project, repeats none)."""
    return any(isinstance(alias, Join) and not (alias.join_field.many_to_one or alias.join_field.one_to_one)
               for alias in query.alias_map.values())


#: Each settled ended job's cost in cents, stamped with its requeue count, the price generation and
#: its last release (PostgreSQL only; migration 0036 says when a row holds).
ENDED_JOB_COSTS = "controlplane_ended_job_cost"
#: One number, raised by triggers with every change of the price rates or of a node's GPU type or tier.
PRICE_GENERATION = "controlplane_price_generation"
#: The job states a job ends in (job_history.ENDED_STATES): only a requeue takes a job out of them.
_ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT)
_TABLES = {"allocation": Allocation._meta.db_table, "gpu": AllocationGpu._meta.db_table,
           "node": Node._meta.db_table, "event": Event._meta.db_table, "rate": PriceRate._meta.db_table}


def _priced_params(now: datetime) -> list[Any]:
    return [now, _EPOCH, EventKind.ALLOCATION_RELEASED, now]


#: The jobs of `{jobs}` (a statement giving job ids) priced, as CTEs ending in `cents` (job_id,
#: cents). held: each allocation's GPUs per node (`held_spans`' rows); exits: a gang member's early
#: exit per allocation and node; spans: from the bind to the release, the exit or `now`, whichever
#: is first; rates: each rate's interval, to the next rate of its GPU type and tier
#: (`PriceBook.rate_at`: the latest in force, the higher of two from one instant); per_job: Σ GPUs
#: × µs × $/GPU-hour over each span's overlap with each interval, exact (µs are whole, EXTRACT
#: gives numeric); cents: ÷ 3.6e7 (3.6e9 µs an hour, 100 cents a dollar) rounded half to even by
#: quotient and remainder (no inexact division). Parameters: `_priced_params`.
_PRICED_SQL = """
held AS (
    SELECT a.job_id, a.id AS allocation_id, g.node_id, COUNT(*) AS gpus, n.gpu_type_id, n.capacity_tier,
           a.created_at AS bound, a.released_at AS released
    FROM {allocation} a JOIN {gpu} g ON g.allocation_id = a.id JOIN {node} n ON n.id = g.node_id
    WHERE a.job_id IN ({jobs}) AND a.created_at < %s AND (a.released_at IS NULL OR a.released_at > %s)
    GROUP BY a.job_id, a.id, g.node_id, n.gpu_type_id, n.capacity_tier, a.created_at, a.released_at
), exits AS (
    SELECT e.allocation_id, e.node_id, MIN(e.created_at) AS exited FROM {event} e
    WHERE e.kind = %s AND e.reason = 'MemberExited' AND e.node_id IS NOT NULL
      AND e.allocation_id IN (SELECT allocation_id FROM held)
    GROUP BY e.allocation_id, e.node_id
), spans AS (
    SELECT h.job_id, h.gpus, h.gpu_type_id, h.capacity_tier, h.bound,
           LEAST(CASE WHEN x.exited IS NOT NULL AND (h.released IS NULL OR x.exited < h.released)
                      THEN x.exited ELSE h.released END, %s) AS ended
    FROM held h LEFT JOIN exits x ON x.allocation_id = h.allocation_id AND x.node_id = h.node_id
), rates AS (
    SELECT gpu_type_id, capacity_tier, usd_per_gpu_hour AS rate, effective_from AS since,
           LEAD(effective_from) OVER (PARTITION BY gpu_type_id, capacity_tier
                                      ORDER BY effective_from, usd_per_gpu_hour) AS until
    FROM {rate}
), per_job AS (
    SELECT s.job_id, SUM(s.gpus * (EXTRACT(EPOCH FROM LEAST(s.ended, r.until)) - EXTRACT(EPOCH FROM GREATEST(s.bound, r.since)))
               * 1000000 * r.rate) AS exact
    FROM spans s JOIN rates r ON r.gpu_type_id = s.gpu_type_id AND r.capacity_tier = s.capacity_tier
         AND r.since < s.ended AND (r.until IS NULL OR r.until > s.bound)
    WHERE s.ended > s.bound
    GROUP BY s.job_id
), cents AS (
    SELECT job_id, div(exact, 36000000) + CASE WHEN 2 * mod(exact, 36000000) > 36000000 THEN 1
                                               WHEN 2 * mod(exact, 36000000) = 36000000 THEN mod(div(exact, 36000000), 2)
                                               ELSE 0 END AS cents
    FROM per_job
)"""

#: jobs_total_cost's statement: the set's jobs (`rows`: id, requeue count, as `w`; once each) with
#: their remembered cents where the row holds (same requeues, this price generation, settled by
#: `now`), the others priced; both summed.
_JOBS_TOTAL_COST_SQL = """
WITH listed AS (
    SELECT w.pk, c.cents FROM {rows}
    LEFT JOIN {costs} c ON c.job_id = w.pk AND c.requeues = w.requeues
                       AND c.prices = (SELECT generation FROM {prices}) AND c.settled_at <= %s
), {priced}
SELECT (SELECT COALESCE(SUM(cents), 0) FROM listed) + (SELECT COALESCE(SUM(cents), 0) FROM cents)"""

#: The same, each job's row looked up by its key (at most one: job_id is the key), not joined.
_JOBS_TOTAL_COST_EACH_SQL = """
WITH listed AS (
    SELECT w.pk, (SELECT c.cents FROM {costs} c WHERE c.job_id = w.pk AND c.requeues = w.requeues
                  AND c.prices = (SELECT generation FROM {prices}) AND c.settled_at <= %s) AS cents FROM {rows}
), {priced}
SELECT (SELECT COALESCE(SUM(cents), 0) FROM listed) + (SELECT COALESCE(SUM(cents), 0) FROM cents)"""

#: jobs_costs' statement: the jobs named (an array of ids) with their remembered cents where the
#: row holds, the others priced; each job's cents (a job priced to nothing, or that held no GPU, has
#: no row).
_JOBS_COSTS_SQL = """
WITH listed AS MATERIALIZED (
    SELECT j.id AS pk, c.cents FROM {job} j
    LEFT JOIN {costs} c ON c.job_id = j.id AND c.requeues = j.requeue_count
                       AND c.prices = (SELECT generation FROM {prices}) AND c.settled_at <= %s
    WHERE j.id = ANY(%s)
), {priced}
SELECT pk, cents FROM listed WHERE cents IS NOT NULL
UNION ALL SELECT job_id, cents FROM cents"""

#: remember_ended_job_costs' statement: up to `limit` ended jobs, every run released by `now`,
#: with no row that holds, priced and written with their stamps (read in this statement's snapshot,
#: as the prices and runs it priced).
_REMEMBER_SQL = """
WITH wanted AS (
    SELECT j.id AS pk, j.requeue_count AS requeues,
           COALESCE((SELECT MAX(a.released_at) FROM {allocation} a WHERE a.job_id = j.id), %s) AS settled
    FROM {job} j
    WHERE j.state = ANY(%s)
      AND NOT EXISTS (SELECT 1 FROM {allocation} a WHERE a.job_id = j.id AND (a.released_at IS NULL OR a.released_at > %s))
      AND NOT EXISTS (SELECT 1 FROM {costs} c WHERE c.job_id = j.id AND c.requeues = j.requeue_count
                      AND c.prices = (SELECT generation FROM {prices}))
    ORDER BY j.id LIMIT %s
), {priced}
INSERT INTO {costs} (job_id, cents, requeues, prices, settled_at)
SELECT w.pk, COALESCE(c.cents, 0), w.requeues, (SELECT generation FROM {prices}), w.settled
FROM wanted w LEFT JOIN cents c ON c.job_id = w.pk
ON CONFLICT (job_id) DO UPDATE SET cents = EXCLUDED.cents, requeues = EXCLUDED.requeues, prices = EXCLUDED.prices,
                                   settled_at = EXCLUDED.settled_at"""


def remember_ended_job_costs(now: datetime, limit: int = 5000) -> int:
    """Price up to `limit` ended jobs whose every run was released by `now` and whose cost is not
    remembered under the price rates and nodes as they stand (or was, before a requeue), as
    `jobs_total_cost` prices them, and remember each in cents (`ENDED_JOB_COSTS`). Returns how
    many it wrote; 0 on SQLite, which remembers nothing. One statement, so the stamps are read in
    the snapshot the jobs were priced in: a price or a requeue committing meanwhile leaves rows
    that no longer match, never a stale cost read as current."""
    if connection.vendor != "postgresql":
        return 0
    sql = _REMEMBER_SQL.format(**_TABLES, job=Job._meta.db_table, costs=ENDED_JOB_COSTS, prices=PRICE_GENERATION,
                               priced=_PRICED_SQL.format(**_TABLES, jobs="SELECT pk FROM wanted"))
    with connection.cursor() as cursor:
        cursor.execute(sql, [_EPOCH, [str(state) for state in _ENDED], now, limit, *_priced_params(now)])
        return cursor.rowcount


def _priced_runs(spans: list[Span], now: datetime) -> dict[int, RunCosts]:
    """Per job of `spans`, its runs priced as `run_costs` says (one query for the rates)."""
    prices = price_book({span.gpu_type_id for span in spans}) if spans else PriceBook()
    now_us = to_us(now)
    # GPU-µs × $/GPU-hour, exact: a running sum divided once rounds to the cent as the exact
    # figure does (half to even), as jobs_total_cost rounds it in PostgreSQL.
    exact: dict[int, dict[int, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    held_us: dict[int, int] = defaultdict(int)  # allocation id → GPU-µs held
    bound: dict[int, int] = {}
    for span in spans:
        end_us = now_us if span.end_us is None else min(span.end_us, now_us)
        exact[span.job_id][span.allocation_id] += span.held_gpu_us_cost(prices, span.start_us, end_us) \
            if end_us > span.start_us else Decimal(0)
        held_us[span.allocation_id] += span.gpus * max(0, end_us - span.start_us)
        bound[span.allocation_id] = span.start_us
    out = {}
    for job_id, runs in exact.items():
        in_order = sorted(runs, key=lambda a: (bound[a], a))
        usd = rounded_cumulatively([runs[a] for a in in_order], CENT, per=US_PER_HOUR)
        hours = rounded_cumulatively([held_us[a] for a in in_order], HUNDREDTH, per=US_PER_HOUR)
        out[job_id] = RunCosts(usd=dict(zip(in_order, usd, strict=True)), total_usd=sum(usd, Decimal("0.00")),
                               gpu_hours=dict(zip(in_order, hours, strict=True)),
                               total_gpu_hours=sum(hours, Decimal("0.00")),
                               exact_gpu_hours=sum(held_us[a] for a in in_order) / float(US_PER_HOUR))
    return out
