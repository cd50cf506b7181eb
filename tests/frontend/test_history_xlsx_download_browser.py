"""In Chromium: the history page offers "Download for Excel (.xlsx)" beside its CSV, and the file
a click saves holds the CSV's rows for the page's own filters, typed: a job named `2026-11`
stays text, ids and cost are numbers with the CSV's cents."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.services import accounting
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)
from tests.frontend.test_history_page import _ended, _held, _node

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_excel_link_saves_the_filtered_csvs_rows_as_a_typed_workbook(session: Any, tmp_path: Path) -> None:  # noqa: F811
    now = timezone.now().replace(second=0, microsecond=0)
    t0 = now - timedelta(hours=2)
    dated = _ended("vision", "2026-11", t0, 30, user="alice", gpus=4)
    oom = _ended("vision", "=1+2 оом", t0 + timedelta(minutes=40), 15, JobState.FAILED, user="alice", gpus=2,
                 exit_code=137)
    _held(dated, _node("h100-01"), t0, t0 + timedelta(minutes=30), gpus=4)
    _held(oom, _node("h100-02"), t0 + timedelta(minutes=40), t0 + timedelta(minutes=55), gpus=2)
    accounting.catch_up(now)

    alice = session("alice")
    page = alice.page
    alice.open("/history/?team=vision")
    link = page.locator("#history-xlsx")
    assert link.inner_text().strip() == "Download for Excel (.xlsx)" and link.is_visible()
    with page.expect_download() as saved:
        link.click()
    target = tmp_path / saved.value.suggested_filename
    assert target.name.startswith("job-history-") and target.suffix == ".xlsx"
    saved.value.save_as(target)
    csv_text = page.request.get(alice.base + (page.locator("#history-csv").get_attribute("href") or "")).text()

    expected = list(csv.reader(io.StringIO(csv_text)))
    got = list(openpyxl.load_workbook(target)["Job history"].iter_rows())
    assert [c.value for c in got[0]] == expected[0] and len(got) == len(expected) == 4
    cost = expected[0].index("cost_usd")
    for cells, row in zip(got[1:-1], expected[1:-1], strict=True):
        assert (cells[0].data_type, cells[0].value) == ("n", int(row[0]))
        assert cells[1].data_type == "s" and cells[1].value in ("2026-11", "=1+2 оом")
        assert Decimal(repr(cells[cost].value)).quantize(Decimal("0.01")) == Decimal(row[cost])
    assert Decimal(expected[-1][cost]) > 0
