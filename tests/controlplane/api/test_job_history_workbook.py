"""`GET /api/v1/jobs/history.xlsx` and the `/history/` page's Download for Excel: the history
CSV's very rows (one place builds them: services/job_history.history_table) as a workbook whose
cells are typed. Read back with openpyxl and held to the CSV of the same filters: ids, exit
codes and GPU counts whole numbers, GPU-hours and cost numbers equal to the CSV's to the last
place, names and times text cells (a job named `2026-11`, `3-4` or `=…` stays exactly that)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import openpyxl
import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import AllocationState, CapacityTier, JobState
from controlplane.models import Allocation, AllocationGpu
from controlplane.services import accounting, excel_workbook
from controlplane.services.excel_workbook import CONTENT_TYPE
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
CSV, XLSX = "/api/v1/jobs/history.csv", "/api/v1/jobs/history.xlsx"
NAMES = ("2026-11", "3-4", "=SUM(A1:A9)", "Équipe-β 東京", "1e5")
NUMBERS = {"job_id", "exit_code", "elapsed_s", "gpus", "last_run_gpus"}


@pytest.fixture
def ended(fleet: Any) -> list[Any]:
    for tier in CapacityTier.values:
        f.make_price_rate(fleet.h100, "3.1337", tier=tier, effective_from=datetime(2026, 1, 1, tzinfo=UTC))
    now = timezone.now().replace(second=0, microsecond=0)
    t0 = now - timedelta(hours=3)
    jobs = []
    for i, name in enumerate(NAMES):
        job = f.make_job(fleet.ml, name=name, gpus=1 + i % 2, state=JobState.FAILED if i == 1 else JobState.SUCCEEDED,
                         exit_code=-9 if i == 1 else 0, submitted_at=t0, started_at=t0 + timedelta(minutes=i),
                         finished_at=t0 + timedelta(minutes=37 + 11 * i))
        allocation = Allocation.objects.create(job=job, generation=i + 1, epoch=1, created_at=job.started_at,
                                               started_at=job.started_at, released_at=job.finished_at,
                                               state=AllocationState.RELEASED)
        AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=fleet.nodes[1 + i % 3],
                                                        gpu_index=k, live=False) for k in range(job.gpus))
        jobs.append(job)
    accounting.catch_up(now)
    return jobs


def csv_rows(response: Any) -> list[list[str]]:
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def sheet_of(response: Any) -> Any:
    assert response.status_code == 200, getattr(response, "content", b"")[:300]
    assert response["Content-Type"] == CONTENT_TYPE
    return openpyxl.load_workbook(io.BytesIO(b"".join(response.streaming_content)))["Job history"]


def test_the_workbook_has_the_csvs_rows_with_typed_cells(alice: Any, ended: list[Any]) -> None:
    expected = csv_rows(alice.get(CSV))
    response = alice.get(XLSX)
    got = list(sheet_of(response).iter_rows())

    assert response["Content-Disposition"].startswith('attachment; filename="job-history-')
    assert response["Content-Disposition"].endswith('.xlsx"')
    header = expected[0]
    assert [c.value for c in got[0]] == header and len(got) == len(expected) == len(NAMES) + 2
    assert Decimal(expected[-1][header.index("cost_usd")]) > 0
    for cells, row in zip(got[1:], expected[1:], strict=True):
        for cell, text, column in zip(cells, row, header, strict=True):
            if text == "":
                assert cell.value is None, column
            elif column in NUMBERS and row[0] != "TOTAL":
                assert cell.data_type == "n" and cell.value == int(text), column
            elif column in ("gpu_hours", "lost_gpu_hours"):
                assert cell.data_type == "n" and cell.number_format == "#,##0.0000" and cell.value == float(text)
            elif column == "cost_usd":
                assert cell.data_type == "n" and cell.number_format == '"$"#,##0.00'
                assert Decimal(repr(cell.value)).quantize(Decimal("0.01")) == Decimal(text)
            else:
                assert cell.data_type == "s", (column, cell.value)
                assert cell.value == (text[1:] if text.startswith("'=") else text), column
    names = {row[1].value: row[1].data_type for row in got[1:-1]}
    assert names == dict.fromkeys(NAMES, "s")  # 2026-11 no date, =SUM(…) no formula, 1e5 no number
    assert [c.value for c in got[-1][:2]] == ["TOTAL", f"{len(NAMES)} jobs"]


def test_the_filters_narrow_the_workbook_as_they_narrow_the_csv(alice: Any, ended: list[Any]) -> None:
    for params in ({"state": "failed"}, {"exit_code": "0"}):
        expected = csv_rows(alice.get(CSV, params))
        assert [c.value for c in sheet_of(alice.get(XLSX, params))["A"]][1:-1] == [int(r[0]) for r in expected[1:-1]]


def test_the_pages_workbook_is_the_apis(fleet: Any, alice: Any, ended: list[Any]) -> None:
    page = Client()
    page.force_login(fleet.users["owner"])
    html = page.get("/history/").content.decode()
    assert 'id="history-xlsx"' in html and "Download for Excel (.xlsx)" in html

    values = [[c.value for c in row] for row in sheet_of(page.get("/history.xlsx", {"state": "succeeded"})).iter_rows()]

    assert values == [[c.value for c in row] for row in sheet_of(alice.get(XLSX, {"state": "succeeded"})).iter_rows()]


def test_a_refused_filter_is_a_json_400_naming_it_not_a_broken_workbook(fleet: Any, alice: Any, ended: list[Any]) -> None:
    response = alice.get(XLSX, {"state": "running"})
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert "state" in response.json()["errors"]
    page = Client()
    page.force_login(fleet.users["owner"])
    refused = page.get("/history.xlsx", {"state": "running"})
    assert refused.status_code == 400 and "state" in refused.content.decode()


def test_more_jobs_than_a_sheet_holds_is_a_400_saying_so_not_a_cut_workbook(fleet: Any, alice: Any, ended: list[Any],
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Excel's sheet holds 1,048,576 rows; a history that long cannot be built here, so the limit
    # is lowered to what this one overflows (five jobs and TOTAL under the header: seven rows).
    monkeypatch.setattr(excel_workbook, "EXCEL_ROWS", 6)

    response = alice.get(XLSX)

    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert "more than an Excel sheet holds" in response.json()["errors"]["rows"][0]
    page = Client()
    page.force_login(fleet.users["owner"])
    refused = page.get("/history.xlsx")
    assert refused.status_code == 400 and "download the CSV" in refused.content.decode()
    monkeypatch.setattr(excel_workbook, "EXCEL_ROWS", 7)  # exactly full: written whole
    assert len(list(sheet_of(alice.get(XLSX)).iter_rows())) == 7
