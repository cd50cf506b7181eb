"""The workbook writer (services/excel_workbook.py) on cells the API rarely sends: a name stored
with a control character before such names were refused (XML cannot hold it: openpyxl raised,
and the download would have been a 500), a name holding Excel's own escape, a negative figure."""

from __future__ import annotations

import io

import openpyxl

from controlplane.services.excel_workbook import workbook
from controlplane.services.spreadsheet_cells import USD, Figure, csv_text


def read_back(rows: list[list[object]]) -> list[tuple[object, str]]:
    data = workbook("T", ["name", "usd"], rows, [("Report", "test")])  # type: ignore[arg-type]
    sheet = openpyxl.load_workbook(io.BytesIO(data))["T"]
    return [(c.value, c.data_type) for row in sheet.iter_rows(min_row=2) for c in row]


def test_a_control_character_is_written_as_excels_escape_not_a_failed_download() -> None:
    cells = read_back([["a\x01b", None], ["raw _x0041_ text", None]])

    # Excel reads `_x0001_` back as the character, and `_x005F_` as the `_` it stands for.
    assert cells[0] == ("a_x0001_b", "s")
    assert cells[2] == ("raw _x005F_x0041_ text", "s")


def test_a_negative_figure_is_the_number_the_csv_writes() -> None:
    refund = Figure("-12.30", USD)
    cells = read_back([["credit", refund]])

    assert cells[1] == (-12.3, "n") and csv_text(refund) == "-12.30"
    assert csv_text("-ops") == "'-ops"  # a name is the one that gets a `'` in the CSV
