"""`GET /api/v1/jobs/history.xlsx` over a history of thousands of jobs (three chunks of the
CSV's 1,000): the workbook, read back by openpyxl in read-only mode as a large file is read,
holds the CSV's rows, each cell the CSV's text once typed; and its queries are the CSV's (a few
a chunk of jobs, not one a job) and one more, the count that refuses a set longer than a sheet."""

from __future__ import annotations

import csv
import io
import math
import zipfile
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import openpyxl
import pytest
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from openpyxl.worksheet._writer import ALL_TEMP_FILES

from controlplane.choices import AllocationState, CapacityTier, JobState
from controlplane.models import Allocation, AllocationGpu, Job
from controlplane.services import accounting, job_history
from controlplane.services.spreadsheet_cells import text_cell
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
CSV, XLSX = "/api/v1/jobs/history.csv", "/api/v1/jobs/history.xlsx"
JOBS = 2_500
NAMES = ("2026-11", "3-4", "=SUM(A1:A9)", "Équipe-β 東京", "1e5", " padded ", "a & <b>")


@pytest.fixture
def many_ended(fleet: Any) -> int:
    """JOBS ended jobs of alice's team in one insert, every tenth with a run on one or two GPUs
    (so GPU-hours, `ran_on` and a cost), their states, exit codes and names varied."""
    for tier in CapacityTier.values:
        f.make_price_rate(fleet.h100, "3.1337", tier=tier, effective_from=datetime(2026, 1, 1, tzinfo=UTC))
    now = timezone.now().replace(second=0, microsecond=0)
    t0 = now - timedelta(hours=3)
    states = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT)
    pc = fleet.ml.default_priority_class
    jobs = Job.objects.bulk_create(
        Job(team=fleet.ml, priority_class=pc, submitter=fleet.users["owner"], name=f"{NAMES[i % len(NAMES)]}{i}",
            gpus=1 + i % 2, runtime_limit_s=3600, state=states[i % 4], exit_code=(None, 0, -9)[i % 3],
            submitted_at=t0, started_at=t0 + timedelta(seconds=i), finished_at=t0 + timedelta(seconds=60 + 3 * i),
            state_changed_at=t0 + timedelta(seconds=60 + 3 * i))
        for i in range(JOBS))
    ran = jobs[::10]
    allocations = Allocation.objects.bulk_create(
        Allocation(job=job, generation=n + 1, epoch=1, created_at=job.started_at, started_at=job.started_at,
                   released_at=job.finished_at, state=AllocationState.RELEASED) for n, job in enumerate(ran))
    AllocationGpu.objects.bulk_create(
        AllocationGpu(allocation=allocation, node=fleet.nodes[1 + i % 3], gpu_index=k, live=False)
        for i, allocation in enumerate(allocations) for k in range(allocation.job.gpus))
    accounting.catch_up(now)
    return JOBS


def csv_rows(client: Any) -> list[list[str]]:
    response = client.get(CSV)
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def as_csv_text(cell: Any) -> str:
    """A read-back cell as the CSV writes the same cell (spreadsheet_cells.csv_text)."""
    if cell.value is None:
        return ""
    if cell.data_type == "s":
        return text_cell(cell.value)
    assert cell.data_type == "n", cell
    return {"0": str, "#,##0.0000": lambda v: f"{v:.4f}",
            '"$"#,##0.00': lambda v: f"{Decimal(repr(v)):.2f}"}[cell.number_format](cell.value)


def test_thousands_of_jobs_read_back_as_the_csvs_rows(alice: Any, many_ended: int) -> None:
    expected = csv_rows(alice)
    response = alice.get(XLSX)
    assert response.status_code == 200

    book = openpyxl.load_workbook(io.BytesIO(b"".join(response.streaming_content)), read_only=True)
    got = [[as_csv_text(cell) for cell in row] for row in book["Job history"].iter_rows()]
    book.close()

    assert len(got) == len(expected) == many_ended + 2
    assert got[0] == expected[0] == job_history.CSV_COLUMNS
    assert got == expected
    assert sum(1 for row in expected[1:-1] if row[job_history.CSV_COLUMNS.index("ran_on")]) == many_ended // 10
    assert expected[-1][:2] == ["TOTAL", f"{many_ended} jobs"] and Decimal(expected[-1][-1]) > 0


def test_the_workbooks_queries_are_the_csvs_a_few_a_chunk_not_one_a_job(alice: Any, many_ended: int) -> None:
    csv_rows(alice)  # the session's and the user's first reads
    with CaptureQueriesContext(connection) as for_csv:
        csv_rows(alice)
    with CaptureQueriesContext(connection) as for_xlsx:
        response = alice.get(XLSX)
        assert response.status_code == 200
        b"".join(response.streaming_content)

    chunks = math.ceil(many_ended / job_history.CSV_CHUNK)
    # the user, their teams and the ids; then per chunk the jobs, their figures and their costs
    assert len(for_csv) <= 4 + 3 * chunks, [q["sql"][:120] for q in for_csv]
    # and the count that refuses a history longer than a sheet, before any row is read
    assert len(for_xlsx) == len(for_csv) + 1, [q["sql"][:120] for q in for_xlsx]


def test_the_workbook_is_streamed_its_first_bytes_sent_before_the_later_rows_are_read(alice: Any,
                                                                                      many_ended: int) -> None:
    csv_rows(alice)  # the session's and the user's first reads
    with CaptureQueriesContext(connection) as queries:
        response = alice.get(XLSX)
        assert response.status_code == 200 and response.streaming
        asked = len(queries)  # the user, their teams and the count: no row read yet
        pieces = iter(response.streaming_content)
        first = next(pieces)
        at_first = len(queries)
        rest = b"".join(pieces)

    assert first.startswith(b"PK\x03\x04")  # a zip's first part, sent
    chunks = math.ceil(many_ended / job_history.CSV_CHUNK)
    # the first bytes after the ids and the first chunk (read to size the columns), the others' not yet
    assert at_first == asked + 1 + 3, [q["sql"][:120] for q in queries][asked:at_first]
    assert len(queries) == at_first + 3 * (chunks - 1), [q["sql"][:120] for q in queries][at_first:]
    book = openpyxl.load_workbook(io.BytesIO(first + rest), read_only=True)
    assert sum(1 for _ in book["Job history"].iter_rows()) == many_ended + 2
    book.close()


@pytest.mark.django_db(transaction=True)
def test_a_database_lost_mid_stream_cuts_the_download_short_as_no_workbook_at_all(alice: Any,
                                                                                  many_ended: int) -> None:
    """The database's connection ends (a failover, a restart) once the first bytes are sent: the
    stream ends with the database's error (the server logs it and drops the connection), and what
    was sent is no zip file, never a workbook of fewer rows; no temporary file is left behind."""
    temporary_files = list(ALL_TEMP_FILES)
    response = alice.get(XLSX)
    assert response.status_code == 200
    pieces = iter(response.streaming_content)
    sent = [next(pieces)]
    other = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
            assert cursor.fetchone() == (True,)
    finally:
        other.close()
    with pytest.raises((OperationalError, InterfaceError)):
        for piece in pieces:
            sent.append(piece)
    connection.close()  # the next test's flush opens another

    cut = b"".join(sent)
    assert cut.startswith(b"PK\x03\x04") and len(sent) >= 2  # the first rows were sent
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(cut))
    with pytest.raises(zipfile.BadZipFile):
        openpyxl.load_workbook(io.BytesIO(cut))
    assert ALL_TEMP_FILES == temporary_files


def test_a_download_given_up_midway_leaves_no_temporary_file(alice: Any, many_ended: int) -> None:
    """The client goes away after the first bytes (the server closes the response): the rest is
    neither read nor written, and the table's temporary file is removed then, not when the
    worker's process exits."""
    temporary_files = list(ALL_TEMP_FILES)
    with CaptureQueriesContext(connection) as queries:
        response = alice.get(XLSX)
        next(iter(response.streaming_content))
        assert ALL_TEMP_FILES != temporary_files  # the table's sheet, being written
        read = len(queries)
        response.close()
        assert len(queries) == read
    assert ALL_TEMP_FILES == temporary_files
