"""Finance's exports as an Excel workbook (.xlsx, written by openpyxl): the rows of a CSV export
(showback.showback_table, job_history.history_table) with each cell typed, which a CSV cannot
say. Excel opening a CSV reads `2026-11` as a date, `1e5` and `3-4` as a number and a date, and
without a byte-order mark may garble a non-ASCII team name; prefixing such cells would change
the data. Here a name is a text cell (`t="inlineStr"`) and stays exactly what it is, a name
starting with `=` included (stored as text, never as a formula), money is a number with a
currency format and its cents, GPU-hours a number with the CSV's four places.

The first sheet is the table: its header row bold and frozen, with a filter, columns as wide as
their contents (read from the first rows). The second, "About", says what the file is: the
report, its period, how it is priced and when it was made."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from itertools import chain, islice
from typing import Any

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter

from controlplane.services.spreadsheet_cells import Cell, Figure

CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
#: A sheet's rows in Excel, the header's included: a longer sheet opens cut short, with a
#: warning, or not at all.
EXCEL_ROWS = 1_048_576


class TooManyRows(ValueError):
    """More rows than a sheet holds: the CSV holds them, a workbook cannot."""

    def __init__(self, rows: int) -> None:
        super().__init__(f"{rows:,} rows are more than an Excel sheet holds ({EXCEL_ROWS - 1:,} under its header): "
                         "narrow the filters or the period, or download the CSV")


def check_rows(rows: int) -> None:
    """Refuse, before any work, a table longer than a sheet."""
    if rows > EXCEL_ROWS - 1:
        raise TooManyRows(rows)

#: Rows read to size the columns: the widest of these decides (a history of 100,000 jobs is
#: written row by row, not held whole to measure).
_MEASURED_ROWS = 1000
_NARROWEST, _WIDEST = 8, 60
_BOLD = Font(bold=True)
#: Characters XML 1.0 cannot hold (openpyxl refuses them). Names are refused with them today
#: (models/names.py), but one stored before, or written around the validation, must not make the
#: download fail: they are written as Excel writes them, `_x0001_`, and an `_xHHHH_` already in
#: the text as `_x005F_xHHHH_` (Excel's escape of its own escape), so Excel shows the name as stored.
_UNWRITABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]|_(?=x[0-9A-Fa-f]{4}_)")


def _writable(text: str) -> str:
    return _UNWRITABLE.sub(lambda m: f"_x{ord(m.group()):04X}_", text)


def _cell(sheet: Any, value: Cell) -> WriteOnlyCell:  # openpyxl's write-only sheet
    if isinstance(value, Figure):
        cell = WriteOnlyCell(sheet, value=value.number)
        cell.number_format = value.number_format
        return cell
    cell = WriteOnlyCell(sheet, value=_writable(value) if value else None)
    if value:
        # openpyxl would store text starting with "=" as a formula, which Excel runs.
        cell.data_type = "s"
    return cell


def _shown_width(value: Cell) -> int:
    if value is None:
        return 0
    if isinstance(value, Figure):
        whole = value.text.lstrip("-").split(".")[0]
        # The thousands separators and a currency sign or a % the format adds.
        return len(value.text) + len(whole) // 3 + 1
    return len(value)


def workbook(table_title: str, header: Sequence[str], rows: Iterable[Sequence[Cell]],
             about: Sequence[tuple[str, str]]) -> bytes:
    """The .xlsx file: `header` and `rows` on the sheet `table_title`, `about`'s (what, said)
    pairs on the sheet "About"."""
    book = Workbook(write_only=True)
    sheet = book.create_sheet(table_title)
    rows = iter(rows)
    measured = list(islice(rows, _MEASURED_ROWS))
    for column, name in enumerate(header, start=1):
        widest = max([len(name), *(_shown_width(row[column - 1]) for row in measured)])
        sheet.column_dimensions[get_column_letter(column)].width = min(max(widest + 2, _NARROWEST), _WIDEST)
    sheet.freeze_panes = "A2"
    heading = []
    for name in header:
        cell = _cell(sheet, name)
        cell.font = _BOLD
        heading.append(cell)
    sheet.append(heading)
    count = 0
    for row in chain(measured, rows):
        count += 1
        check_rows(count)
        sheet.append([_cell(sheet, value) for value in row])
    sheet.auto_filter.ref = f"A1:{get_column_letter(len(header))}{count + 1}"

    notes = book.create_sheet("About")
    notes.column_dimensions["A"].width = max(len(what) for what, _ in about) + 2
    notes.column_dimensions["B"].width = _WIDEST + 20
    for what, said in about:
        label = _cell(notes, what)
        label.font = _BOLD
        notes.append([label, _cell(notes, said)])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()

