"""How many rows a request reads from each table, as PostgreSQL counts them for the current
transaction (pg_stat_xact_user_tables: rows read by sequential scans plus rows fetched by index
scans), with sequential scans priced out as on a big installation's tables (a test's few rows
are otherwise read whole, whatever the query). A list whose reads grow with the fleet's history
shows here with a few dozen ended runs, where its time would show only with a hundred thousand
(bench/scale_audit.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from controlplane.choices import JobState


def _counts(tables: tuple[str, ...]) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) "
            "FROM pg_stat_xact_user_tables WHERE relname = ANY(%s)", [list(tables)])
        found = dict(cursor.fetchall())
    return {table: int(found.get(table, 0)) for table in tables}


@contextmanager
def rows_read(*tables: str) -> Iterator[dict[str, int]]:
    """Within a test's transaction: the rows read from each of `tables` inside the block, with
    `SET LOCAL enable_seqscan = off` (until the test's transaction ends)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    read: dict[str, int] = {}
    before = _counts(tables)
    yield read
    after = _counts(tables)
    read.update({table: after[table] - before[table] for table in tables})


def reads_of(request: Callable[[], Any], *tables: str) -> dict[str, int]:
    with rows_read(*tables) as read:
        request()
    return read


def ended_runs(fleet: Any, runs: int, first: int = 0) -> None:
    """The history a read must not grow with: `runs` ended jobs of ml, each with a released
    allocation of 8 GPUs on one H100 node, the tables then analysed."""
    from tests.controlplane import factories as f
    from tests.controlplane.accounting.builders import hold

    now = timezone.now()
    for i in range(first, first + runs):
        started = now - timedelta(days=2, hours=i)
        job = f.make_job(fleet.ml, gpus=8, state=JobState.SUCCEEDED, started_at=started, submitted_at=started,
                         finished_at=started + timedelta(minutes=30))
        hold(job, [(fleet.nodes[i % 4], 8)], started, started + timedelta(minutes=30))
    analysed()


def analysed() -> None:
    """The planner's row counts of the runs' tables as the test holds them. Ask it right before
    the read measured too: ANALYZE writes a table's row count in place, outside the test's
    transaction, and so does an autovacuum of the table's committed (empty) state, which the
    suite's churn can start at any moment (7 Dec: a snapshot read 159 job rows under make test,
    under 10 alone)."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE controlplane_allocationgpu, controlplane_allocation, controlplane_job")
