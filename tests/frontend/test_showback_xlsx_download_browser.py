"""In Chromium: /showback/ offers "Download for Excel (.xlsx)" beside its CSV, and the file a
click saves is the workbook of the page's own period: named as the CSV is with `.xlsx`, its
rows the CSV's rows, its money numbers with the CSV's cents and its names text cells
(docs/accounting.md, *The API*: `format=xlsx`)."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from tests.frontend.page_data import both_teams_ran_for
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_excel_link_saves_the_csvs_rows_as_a_typed_workbook(session: Any, submit_as: Any,  # noqa: F811
                                                                 tmp_path: Path) -> None:
    both_teams_ran_for(submit_as, 2)
    finn = session("finn")
    page = finn.page
    finn.open("/showback/?window=24h")
    finn.screenshot("showback-xlsx-link")

    link = page.locator("#xlsx-download")
    assert link.inner_text().strip() == "Download for Excel (.xlsx)"
    assert link.is_visible() and page.locator("#csv-download").is_visible()
    with page.expect_download() as saved:
        link.click()
    download = saved.value
    csv_name = page.request.get(finn.base + (page.locator("#csv-download").get_attribute("href") or ""))
    csv_text = csv_name.text()
    assert download.suggested_filename == csv_name.headers["content-disposition"].split('filename="')[1] \
        .rstrip('"').replace(".csv", ".xlsx")
    target = tmp_path / download.suggested_filename
    download.save_as(target)

    expected = list(csv.reader(io.StringIO(csv_text)))
    sheet = openpyxl.load_workbook(target)["Showback"]
    got = list(sheet.iter_rows())
    assert [c.value for c in got[0]] == expected[0]
    assert [c.value for c in sheet["A"]] == [row[0] for row in expected]  # vision, language, __idle__, TOTAL
    cost = expected[0].index("cost_usd")
    for cells, row in zip(got[1:], expected[1:], strict=True):
        assert cells[0].data_type == "s"
        assert cells[cost].data_type == "n" and Decimal(repr(cells[cost].value)).quantize(Decimal("0.01")) == \
            Decimal(row[cost])
    assert Decimal(expected[-1][cost]) > 0
