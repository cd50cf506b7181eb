"""`qm showback --xlsx FILE` and `qm history --xlsx FILE` save the server's Excel workbook (the
CSV's rows, each cell typed: GET showback/?format=xlsx, GET jobs/history.xlsx): to FILE, or
inside a folder under the server's file name, which names the period. Read back with openpyxl
and held to the CSV `qm` prints for the same question."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from tests.controlplane.cli.test_cli_history import yesterday  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


def values(path: Path, sheet: str) -> list[list[Any]]:
    return [[c.value for c in row] for row in openpyxl.load_workbook(path)[sheet].iter_rows()]


def test_showback_xlsx_into_a_folder_is_named_by_the_server_and_holds_the_csvs_rows(qm, fleet, tmp_path) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    folder = tmp_path / "exports"
    folder.mkdir()

    run = qm("showback", "--month", "2026-11", "--by", "project", "--xlsx", str(folder))

    assert run.code == 0, run.err
    [saved] = folder.iterdir()
    # The server's name for the period (here the empty stretch of November the fleet existed in).
    assert saved.name.startswith("showback-project-2026-11") and saved.suffix == ".xlsx"
    assert run.out.startswith(f"Saved {saved} (")
    expected = list(csv.reader(io.StringIO(qm("showback", "--month", "2026-11", "--by", "project", "--csv").out)))
    assert [row[0] for row in values(saved, "Showback")] == [row[0] for row in expected]


def test_showback_xlsx_to_a_file_and_a_refusal_naming_the_flag(qm, fleet, tmp_path) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    target = tmp_path / "november.xlsx"

    assert qm("showback", "--month", "2026-11", "--xlsx", str(target)).code == 0
    assert values(target, "About")[1] == ["Period start (UTC)", "2026-11-01T00:00:00Z"]
    refused = qm("showback", "--month", "2026-13", "--xlsx", str(tmp_path / "x.xlsx"))
    assert refused.code == 1 and "--month" in refused.err and "'2026-13' is not a month" in refused.err
    assert not (tmp_path / "x.xlsx").exists()  # nothing half-written
    both = qm("showback", "--csv", "--xlsx", str(target))
    assert both.code == 2 and both.err == "error: give --xlsx FILE or --csv, not both\n"


def test_history_xlsx_holds_the_csvs_rows_typed(qm, fleet, yesterday, tmp_path) -> None:  # noqa: F811
    assert qm("login", "--username", "alice", "--password-stdin", stdin="alice\n").code == 0
    day = yesterday["day"]
    window = ["--since", f"{day:%Y-%m-%d}", "--until", f"{day + timedelta(days=1):%Y-%m-%d}"]
    target = tmp_path / "history.xlsx"

    run = qm("history", *window, "--xlsx", str(target))

    assert run.code == 0, run.err
    expected = list(csv.reader(io.StringIO(qm("history", *window, "--format", "csv").out)))
    got = values(target, "Job history")
    assert got[0] == expected[0] and len(got) == len(expected) >= 3
    assert [row[0] for row in got[1:-1]] == [int(row[0]) for row in expected[1:-1]]  # ids as numbers
    assert [row[1] for row in got] == [row[1] for row in expected]  # names as the CSV (no formula among them)
    assert qm("history", "--format", "csv", "--xlsx", str(target)).err == \
        "error: give --xlsx FILE or --format csv, not both\n"
