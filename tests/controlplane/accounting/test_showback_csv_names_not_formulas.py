"""The showback CSV writes a name someone typed as text a spreadsheet shows, not a formula it
runs, as the history CSV does (OWASP's CSV injection): a member's job named
`=HYPERLINK("http://x.invalid","payroll")` came out as that cell, bare, in the job-grouped CSV
finance downloads (`/api/v1/showback/?group_by=job&format=csv`, `qm showback --by job --csv`),
and a team or project slug may start with `-`. Such a cell is written after a `'`."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

from controlplane.services import showback
from controlplane.services.showback import Showback, ShowbackEntry, Window

START = datetime(2026, 12, 1, tzinfo=UTC)
END = datetime(2026, 12, 2, tzinfo=UTC)
LINK = '=HYPERLINK("http://x.invalid","payroll")'


def report(entries: list[ShowbackEntry], group_by: str) -> Showback:
    return Showback(window=Window(START, END, "24h"), start=START, end=END, group_by=group_by, entries=entries,
                    idle=None, capacity_gpu_seconds=None, capacity_cost_usd=None, rolled_until=END)


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_a_job_name_team_and_project_are_written_as_text() -> None:
    entries = [
        ShowbackEntry(key="7", name="7", properties={"job_id": 7, "job": LINK, "team": "-ops", "project": "@p"},
                      allocated_gpu_seconds=Decimal(3600), cost_usd=Decimal("2.50")),
        ShowbackEntry(key="8", name="8", properties={"job_id": 8, "job": "train-8", "team": "ml", "project": "p"},
                      allocated_gpu_seconds=Decimal(3600), cost_usd=Decimal("1.00")),
    ]
    seven, eight, total = rows(showback.showback_csv(report(entries, "job")))
    assert (seven["job"], seven["job_name"], seven["team"], seven["project"]) == ("7", "'" + LINK, "'-ops", "'@p")
    assert (eight["job_name"], eight["team"], eight["project"]) == ("train-8", "ml", "p")  # plain names untouched
    assert total["job"] == "TOTAL" and total["cost_usd"] == "3.50"


def test_a_group_named_like_a_formula_is_written_as_text() -> None:
    entries = [ShowbackEntry(key="-ops/+x", name="-ops/+x",
                             properties={"team_id": 1, "team": "-ops", "project_id": 3, "project": "+x"},
                             cost_usd=Decimal(1)),
               ShowbackEntry(key="ml/p", name="ml/p", properties={"team_id": 2, "team": "ml", "project_id": 4,
                                                                  "project": "p"}, cost_usd=Decimal(1))]
    listed = rows(showback.showback_csv(report(entries, "project")))
    assert [(r["project"], r["team"], r["project_name"]) for r in listed] == [
        ("'-ops/+x", "'-ops", "'+x"), ("ml/p", "ml", "p"), ("TOTAL", "", "")]
    # A cost (a number) is never so written: only the names are text.
    assert [r["cost_usd"] for r in listed] == ["1.00", "1.00", "2.00"]
