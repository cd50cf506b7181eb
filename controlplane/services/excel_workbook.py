"""Finance's exports as an Excel workbook (.xlsx, written by openpyxl but the table's rows, which
are written here as openpyxl writes them, `workbook`): the rows of a CSV export
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
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from itertools import chain, islice
from typing import IO, Any

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.compat import safe_string
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
    pairs on the sheet "About".

    openpyxl writes the file but the table's rows: those are written here, the very XML openpyxl
    writes for them (`_SheetRows`), to a temporary file, and put in the sheet's part as the file
    is zipped. openpyxl's pure-Python writer (no lxml here) made a cell object and an element
    for each cell, about 0.2 ms a history row of 18 cells on an idle machine: a history of
    100,000 jobs spent over 15 s there alone. Memory holds the rows measured for the widths, a
    thousand rows' XML, and the finished (compressed) file."""
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
    with tempfile.TemporaryFile() as table:
        written = _SheetRows(sheet, table)
        for row in chain(measured, rows):
            check_rows(written.count + 1)
            written.append(row)
        written.flush()
        sheet.auto_filter.ref = f"A1:{get_column_letter(len(header))}{written.count + 1}"

        notes = book.create_sheet("About")
        notes.column_dimensions["A"].width = max(len(what) for what, _ in about) + 2
        notes.column_dimensions["B"].width = _WIDEST + 20
        for what, said in about:
            label = _cell(notes, what)
            label.font = _BOLD
            notes.append([label, _cell(notes, said)])
        with tempfile.TemporaryFile() as saved:
            book.save(saved)
            return _with_rows(saved, sheet.path.lstrip("/"), table)


#: Excel's longest text in a cell: openpyxl cuts a longer one there.
_CELL_CHARS = 32767
_XML_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_ROWS_A_WRITE = 1000
_CELLS_REMEMBERED = 4096


class _SheetRows:
    """The table's rows after its header, as openpyxl's write-only sheet writes them (without
    lxml): `<row r="2">`, then each cell but an empty one, a figure `<c r="A2" s="2" t="n"><v>…`
    (its number format's style, registered in the book as openpyxl registers it, on first use),
    a text `<c r="B2" t="inlineStr"><is><t>…` (escaped as ElementTree escapes text, cut at
    Excel's 32,767 characters, `xml:space="preserve"` if it starts or ends with blanks).
    tests/controlplane/accounting/test_excel_workbook_is_openpyxls.py holds the file to openpyxl's, byte for byte."""

    def __init__(self, sheet: Any, out: IO[bytes]) -> None:
        self._sheet = sheet
        self._out = out
        self._styles: dict[str, str] = {}
        self._columns: list[str] = []
        self._pending: list[str] = []
        #: A cell's XML after its coordinate, by its value: states, teams, users and most figures
        #: repeat row after row.
        self._said: dict[str | Figure, str] = {}
        self.count = 0

    def _style(self, number_format: str) -> str:
        attribute = self._styles.get(number_format)
        if attribute is None:
            probe = WriteOnlyCell(self._sheet)
            probe.number_format = number_format
            # Reading style_id adds the style to the book's, as writing a cell of it would.
            attribute = f' s="{probe.style_id}"' if probe.has_style else ""
            self._styles[number_format] = attribute
        return attribute

    def _after_coordinate(self, value: str | Figure) -> str:
        if isinstance(value, Figure):
            return f'{self._style(value.number_format)} t="n"><v>{safe_string(value.number)}</v></c>'
        text = _writable(value)[:_CELL_CHARS]
        stripped = text.strip()
        space = ' xml:space="preserve"' if stripped and stripped != text else ""
        return f' t="inlineStr"><is><t{space}>{text.translate(_XML_TEXT)}</t></is></c>'

    def append(self, row: Sequence[Cell]) -> None:
        self.count += 1
        r = self.count + 1  # under the header
        while len(self._columns) < len(row):
            self._columns.append(get_column_letter(len(self._columns) + 1))
        said = self._said
        if len(said) > _CELLS_REMEMBERED:
            said.clear()
        parts = [f'<row r="{r}">']
        for column, value in zip(self._columns, row, strict=False):  # the columns so far may be more
            if not value:
                continue
            tail = said.get(value)
            if tail is None:
                tail = said[value] = self._after_coordinate(value)
            parts.append(f'<c r="{column}{r}"{tail}')
        parts.append("</row>")
        self._pending.append("".join(parts))
        if len(self._pending) >= _ROWS_A_WRITE:
            self.flush()

    def flush(self) -> None:
        self._out.write("".join(self._pending).encode())
        self._pending.clear()


def _with_rows(saved: IO[bytes], part: str, rows: IO[bytes]) -> bytes:
    """openpyxl's file `saved`, its sheet `part` (the header only) given the `rows` after its header."""
    out = io.BytesIO()
    saved.seek(0)
    with zipfile.ZipFile(saved) as made, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        for info in made.infolist():
            if info.filename != part:
                book.writestr(info, made.read(info))
                continue
            head, end, tail = made.read(info).rpartition(b"</sheetData>")
            if not end:
                raise ValueError(f"{part} has no sheetData to add the rows to")
            whole = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            whole.compress_type = info.compress_type
            whole.file_size = len(head) + rows.tell() + len(end) + len(tail)  # zip64 if it must
            rows.seek(0)
            with book.open(whole, "w") as sheet_part:
                sheet_part.write(head)
                shutil.copyfileobj(rows, sheet_part, 1 << 20)
                sheet_part.write(end + tail)
    return out.getvalue()
