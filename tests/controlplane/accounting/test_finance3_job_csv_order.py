"""Finance QA, round 3 (2 Dec): the job-grouped showback CSV listed its rows by job id as text
(1, 10, 11, …, 14, 2, 3 on the demo), so job 10 came between jobs 1 and 2 and a sheet sorted
by a column finance did not choose. Job rows now come in id order, as `qm showback --by job`
lists them; other groupings keep their name order, and `__idle__` and TOTAL stay last.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

from controlplane.services import showback
from controlplane.services.showback import Showback, ShowbackEntry, Window

START = datetime(2026, 12, 1, tzinfo=UTC)
END = datetime(2026, 12, 2, tzinfo=UTC)


def job(job_id: int, cost: str) -> ShowbackEntry:
    return ShowbackEntry(key=str(job_id), name=str(job_id),
                         properties={"job_id": job_id, "job": f"job-{job_id}", "team": "ml", "project": "p"},
                         allocated_gpu_seconds=Decimal(3600), cost_usd=Decimal(cost))


def report(entries: list[ShowbackEntry], group_by: str) -> Showback:
    return Showback(window=Window(START, END, "24h"), start=START, end=END, group_by=group_by, entries=entries,
                    idle=None, capacity_gpu_seconds=None, capacity_cost_usd=None, rolled_until=END)


def first_cells(text: str) -> list[str]:
    return [row[0] for row in csv.reader(io.StringIO(text))][1:]


def test_job_rows_come_in_id_order_not_text_order() -> None:
    # The service hands entries over by cost; the CSV orders them by id.
    entries = [job(10, "5"), job(2, "4"), job(100, "3"), job(1, "2"), job(11, "1")]
    assert first_cells(showback.showback_csv(report(entries, "job"))) == ["1", "2", "10", "11", "100", "TOTAL"]


def test_other_groupings_keep_name_order() -> None:
    entries = [ShowbackEntry(key=k, name=k, properties={"team_id": i}, cost_usd=Decimal(1))
               for i, k in enumerate(["vision", "10x", "language", "2x"])]
    assert first_cells(showback.showback_csv(report(entries, "team"))) == ["10x", "2x", "language", "vision",
                                                                          "TOTAL"]
