"""Finance opens the showback in Excel, which reads a CSV's `2026-11` as a date, `1e5` and `3-4`
as numbers or dates, and may garble a non-ASCII name: `?format=xlsx` gives the CSV's very rows
as a workbook whose every cell is typed. Each test reads the workbook back with openpyxl and
holds it to the CSV of the same report: the same rows, names as text cells (a name starting with
`=` stored as text, never a formula), money and GPU-hours numbers equal to the CSV's figures to
the last place, with their number formats."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import openpyxl
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import Team
from controlplane.services import accounting
from controlplane.services.excel_workbook import CONTENT_TYPE
from tests.controlplane.accounting.builders import h100, hold, running_job
from tests.controlplane.fleet_fixture import Fleet

SHOWBACK = "/api/v1/showback/"
FORMULA = '=HYPERLINK("http://x.invalid","payroll")'
ACCENTED = "Équipe-β résumé 東京"
#: Text Excel would read as something else from a CSV.
LOOKS_LIKE_A_DATE = "2026-11"
LOOKS_LIKE_A_NUMBER = "1e5"
MONEY = {"cost_usd", "idle_reserved_usd", "preemption_waste_usd", "cost_without_tokens_usd"}


@pytest.fixture
def rolled(fleet: Fleet) -> datetime:
    now = timezone.now()
    # A price with odd cents, so the money columns are not all zero.
    h100(price="3.1337")
    Team.objects.filter(pk=fleet.ml.pk).update(name=LOOKS_LIKE_A_DATE)
    Team.objects.filter(pk=fleet.vision.pk).update(name=LOOKS_LIKE_A_NUMBER)
    fleet.ml.refresh_from_db()
    fleet.vision.refresh_from_db()
    first = running_job(fleet.ml, gpus=8, started_at=now - timedelta(hours=3), name=FORMULA)
    hold(first, [(fleet.nodes[1], 8)], now - timedelta(hours=3))
    second = running_job(fleet.vision, gpus=3, started_at=now - timedelta(minutes=97), name=ACCENTED)
    hold(second, [(fleet.nodes[2], 3)], now - timedelta(minutes=97))
    accounting.catch_up(now)
    return now


def csv_rows(client: APIClient, query: dict[str, str]) -> list[list[str]]:
    response = client.get(SHOWBACK, {**query, "format": "csv"})
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(response.content.decode("utf-8"))))


def workbook(client: APIClient, query: dict[str, str]) -> tuple[Any, Any]:
    response = client.get(SHOWBACK, {**query, "format": "xlsx"})
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == CONTENT_TYPE
    book = openpyxl.load_workbook(io.BytesIO(response.content))
    return response, book


def as_csv_writes(cell: Any) -> str:
    """A workbook cell as the CSV writes the same figure or name (for names, before the `'` the
    CSV puts before a formula)."""
    if cell.value is None:
        return ""
    if cell.data_type == "n":
        places = len(cell.number_format.rsplit(".", 1)[1].rstrip("%")) if "." in cell.number_format else 0
        places += 2 if cell.number_format.endswith("%") else 0  # 12.34% is 0.1234
        return format(Decimal(repr(cell.value)).quantize(Decimal(1).scaleb(-places)), "f")
    return str(cell.value)


@pytest.mark.parametrize("group_by", ["team", "project", "job", "priority_class"])
def test_the_workbook_has_the_csvs_rows_with_typed_cells(clients: dict[str, APIClient], rolled: datetime,
                                                         group_by: str) -> None:
    query = {"window": "24h", "group_by": group_by}
    expected = csv_rows(clients["finance"], query)
    _, book = workbook(clients["finance"], query)
    sheet = book["Showback"]
    got = list(sheet.iter_rows())

    assert [c.value for c in got[0]] == expected[0]
    assert len(got) == len(expected) and len(expected) >= 3
    header = expected[0]
    assert Decimal(expected[-1][header.index("cost_usd")]) > 0  # priced: the cents are worth comparing
    for written, row in zip(got[1:], expected[1:], strict=True):
        for cell, text, column in zip(written, row, header, strict=True):
            if text == "":
                assert cell.value is None, (column, cell.value)
            elif column in MONEY:
                assert cell.data_type == "n" and cell.number_format == '"$"#,##0.00', (column, cell.number_format)
                # Cents exactly the CSV's.
                assert Decimal(repr(cell.value)).quantize(Decimal("0.01")) == Decimal(text)
                assert cell.value == float(text)
            elif column.startswith("gpu_hours") or column.endswith("gpu_hours"):
                assert cell.data_type == "n" and cell.number_format == "#,##0.0000", column
                assert cell.value == float(text), column
            elif column in ("useful_tokens",):
                assert cell.data_type == "n" and isinstance(cell.value, int) and cell.value == int(text)
            elif column.startswith("usd_per") or column == "share_of_cost_without_tokens":
                assert cell.data_type == "n" and cell.value == float(text), column
                assert as_csv_writes(cell) == text, column
            else:
                # A name, a period, a row kind: text, exactly as stored (the CSV puts a `'`
                # before a formula; the workbook needs none).
                assert cell.data_type == "s", (column, cell.value)
                assert cell.value == (text[1:] if text.startswith("'=") else text), column


def test_a_slug_excel_would_take_for_a_date_or_a_number_stays_text(clients: dict[str, APIClient],
                                                                   rolled: datetime) -> None:
    _, book = workbook(clients["finance"], {"window": "24h"})
    first_column = {c.value: c.data_type for c in book["Showback"]["A"][1:]}

    assert first_column[LOOKS_LIKE_A_DATE] == "s" and first_column[LOOKS_LIKE_A_NUMBER] == "s"
    assert first_column["TOTAL"] == "s"


def test_a_name_starting_with_equals_is_stored_as_text_never_a_formula(clients: dict[str, APIClient],
                                                                       rolled: datetime) -> None:
    response, book = workbook(clients["finance"], {"window": "24h", "group_by": "job"})
    sheet = book["Showback"]
    column = [c.column_letter for c in sheet[1] if c.value == "job_name"][0]
    names = {c.value: c for c in sheet[column][1:]}

    assert FORMULA in names and names[FORMULA].data_type == "s"
    assert names[ACCENTED].data_type == "s"  # Unicode kept whole
    # In the file itself: an inline string, no <f> element anywhere.
    sheet_xml = zipfile.ZipFile(io.BytesIO(response.content)).read("xl/worksheets/sheet1.xml").decode()
    assert "<f>" not in sheet_xml and "<f " not in sheet_xml
    assert '<is><t>=HYPERLINK(' in sheet_xml


def test_the_header_is_bold_and_frozen_and_the_about_sheet_says_the_period(clients: dict[str, APIClient],
                                                                           rolled: datetime) -> None:
    body = clients["finance"].get(SHOWBACK, {"window": "24h"}).json()
    _, book = workbook(clients["finance"], {"window": "24h"})
    sheet = book["Showback"]

    assert all(c.font.bold for c in sheet[1]) and not any(c.font.bold for c in sheet[2])
    assert sheet.freeze_panes == "A2"
    assert sheet.column_dimensions["A"].width >= len("team") + 2
    about = {row[0].value: row[1].value for row in book["About"].iter_rows()}
    assert about["Period start (UTC)"] == body["window"]["start"]
    assert about["Period end (UTC)"] == body["window"]["end"]
    assert about["Currency"] == "USD" and about["Window asked"] == "24h"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", about["Generated (UTC)"])


def test_the_workbook_is_named_as_the_csv_is(clients: dict[str, APIClient], rolled: datetime) -> None:
    month = f"{(rolled.replace(day=1) - timedelta(days=1)):%Y-%m}"
    for query, name in (({"month": month}, f"showback-team-{month}"),):
        csv_response = clients["finance"].get(SHOWBACK, {**query, "format": "csv"})
        response, _ = workbook(clients["finance"], query)
        assert f'filename="{name}.csv"' in csv_response["Content-Disposition"]
        assert response["Content-Disposition"] == f'attachment; filename="{name}.xlsx"'
    seven = clients["finance"].get(SHOWBACK, {"window": "7d", "format": "csv"})["Content-Disposition"]
    assert workbook(clients["finance"], {"window": "7d"})[0]["Content-Disposition"] == seven.replace(".csv", ".xlsx")


def test_a_member_reads_only_their_teams_rows_as_in_the_csv(clients: dict[str, APIClient], rolled: datetime) -> None:
    expected = csv_rows(clients["owner"], {"window": "24h"})
    _, book = workbook(clients["owner"], {"window": "24h"})

    assert [c.value for c in book["Showback"]["A"]] == [row[0] for row in expected]


def test_a_bad_query_asked_as_a_workbook_is_a_json_400_naming_the_field(clients: dict[str, APIClient],
                                                                        rolled: datetime) -> None:
    response = clients["finance"].get(SHOWBACK, {"month": "2026-13", "format": "xlsx"})

    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert "month" in response.json()["errors"]


def test_the_accept_header_asks_for_the_workbook_as_format_does(clients: dict[str, APIClient],
                                                                rolled: datetime) -> None:
    by_header = clients["finance"].get(SHOWBACK, {"window": "24h"}, HTTP_ACCEPT=CONTENT_TYPE)
    _, by_format = workbook(clients["finance"], {"window": "24h"})

    assert by_header.status_code == 200 and by_header["Content-Type"] == CONTENT_TYPE
    read = openpyxl.load_workbook(io.BytesIO(by_header.content))["Showback"]
    assert [[c.value for c in row] for row in read.iter_rows()] == \
        [[c.value for c in row] for row in by_format["Showback"].iter_rows()]
