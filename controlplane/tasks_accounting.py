"""Celery entry points of accounting. Beat only triggers; the work is in services/accounting.py.

- `qm.accounting.roll_up` (every ROLLUP_EVERY_S): fold agents' samples and the control plane's
  allocations into minute, hour and day rollups (services/accounting.roll_up).
- `qm.accounting.retention` (hourly): drop raw samples and minute rows past the retention
  window, only once their rollups exist (services/accounting.apply_retention).
- `qm.accounting.remember_job_costs` (every minute, PostgreSQL): remember the cost of each job
  that ended and released its last run since, in cents, so the history's total reads it rather
  than pricing the job's GPU rows again (services/job_costs.remember_ended_job_costs); then
  build the history's closed totals once a day and after any change to a closed job
  (services/closed_history.rebuild_if_due).

All are idempotent and safe to run twice or late: a run locks the cursor row and a second run
that finds it locked does nothing; a late tick expires. Both take `now` from the clock here, at
the edge, and pass it down.
"""

from __future__ import annotations

import time
from typing import Any

import structlog
from celery import shared_task
from django.conf import settings
from django.utils import timezone

from controlplane.services import accounting, closed_history, job_costs

log = structlog.get_logger(__name__)


def rollup_every_s() -> float:
    return float(settings.QM.get("ACCOUNTING_ROLLUP_S", 15))


@shared_task(name="qm.accounting.roll_up", ignore_result=True)
def roll_up_usage() -> str:
    result = accounting.roll_up(timezone.now())
    if not result.ran:
        return "another run holds the cursor"
    if result.duration_ms > rollup_every_s() * 1000 / 2:
        log.warning("accounting rollup slow", duration_ms=round(result.duration_ms), late_jobs=result.late_jobs)
    return f"rolled until {result.rolled_until:%H:%M:%S}: {result.rows_written} rows, {result.late_jobs} late jobs"


@shared_task(name="qm.accounting.retention", ignore_result=True)
def apply_usage_retention() -> str:
    result = accounting.apply_retention(timezone.now())
    if not result.ran:
        return "nothing rolled yet, or a rollup is running"
    return f"dropped {result.samples_deleted} samples, {result.minute_rows_deleted} minute and {result.hour_rows_deleted} hour rows"


@shared_task(name="qm.accounting.reprice", ignore_result=True)
def reprice_rollups(since: str, keys: list[list[Any]] | None = None) -> str:
    """A price rate changed with effect from `since` (ISO 8601): reprice the rollups from there
    (services/accounting.reprice): the minutes kept, and before them the hour and day rows one
    rate prices throughout (a bucket a rate starts inside keeps its price and is logged).
    Queued on commit of the rate's save, so the save itself is quick; a week of a large fleet
    takes minutes (docs/accounting.md)."""
    from datetime import datetime

    rows = accounting.reprice(datetime.fromisoformat(since), timezone.now(),
                              [(g, t) for g, t in keys] if keys is not None else None)
    return f"repriced {rows} rollup rows from {since}"


#: Jobs priced per statement, and how long one run may go on writing (the first run after an
#: upgrade has every ended job to price: about 0.1 s per 1,000 jobs).
REMEMBER_BATCH = 5000
REMEMBER_BUDGET_S = 30.0


@shared_task(name="qm.accounting.remember_job_costs", ignore_result=True)
def remember_job_costs() -> str:
    started, written = time.monotonic(), 0
    while time.monotonic() - started < REMEMBER_BUDGET_S:
        batch = job_costs.remember_ended_job_costs(timezone.now(), REMEMBER_BATCH)
        written += batch
        if batch < REMEMBER_BATCH:
            # every ended job's cost remembered: the history's closed totals can be built at
            # today's horizon, or again after a change (services/closed_history.py)
            closed_history.rebuild_if_due(timezone.now())
            break
    return f"remembered the cost of {written} ended jobs"


def accounting_loop() -> Any:
    """The same rollup hosted on a thread of the web process, for the embedded demo (no Celery):
    `loops.append(accounting_loop())` beside controlplane.embedded.scheduling_loop()."""
    from controlplane.embedded import EmbeddedLoop

    return EmbeddedLoop("accounting", rollup_every_s(), [lambda: accounting.roll_up(timezone.now())])

