"""Finance's exports as an Excel workbook (.xlsx, written by openpyxl but the table's rows, which
are written here as openpyxl writes them, and zipped as it goes, `workbook_stream`): the rows of a CSV export
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

import os
import re
import time
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import chain, islice
from typing import IO, Any

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.compat import safe_string
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter
from openpyxl.writer.excel import ExcelWriter

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
    """The .xlsx file of `workbook_stream`, whole (showback's: a few thousand rows at most)."""
    return b"".join(workbook_stream(table_title, header, rows, about))


def _table_book(table_title: str, header: Sequence[str], measured: Sequence[Sequence[Cell]]) -> tuple[Workbook, Any]:
    """A write-only book whose first sheet, `table_title`, has its header row (bold, frozen) and
    columns as wide as the `measured` rows' contents."""
    book = Workbook(write_only=True)
    sheet = book.create_sheet(table_title)
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
    return book, sheet


class _Parts:
    """What openpyxl's writer (`ExcelWriter`) writes into its zip archive, kept by name in its
    order: openpyxl makes the parts, `workbook_stream` zips them."""

    def __init__(self) -> None:
        self.parts: dict[str, bytes] = {}

    def writestr(self, name: str, data: str | bytes) -> None:
        self.parts[name] = data.encode() if isinstance(data, str) else data

    def write(self, filename: str, arcname: str) -> None:  # a write-only sheet's temporary file
        with open(filename, "rb") as part:
            self.parts[arcname] = part.read()

    def namelist(self) -> list[str]:
        return list(self.parts)


def _parts_of(book: Workbook) -> dict[str, bytes]:
    """Every part of `book` as openpyxl's save writes it, in its order (its save but the zip)."""
    parts = _Parts()
    ExcelWriter(book, parts).write_data()
    return parts.parts


class _Sent:
    """Where the zip is written as it goes: an unseekable stream (so zipfile writes each part's
    sizes and checksum after it, in a data descriptor, rather than going back to its header),
    whose bytes so far `take` hands on."""

    def __init__(self) -> None:
        self._pieces: list[bytes] = []
        self.waiting = 0

    def write(self, data: bytes) -> int:
        self._pieces.append(bytes(data))
        self.waiting += len(data)
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self._pieces)
        self._pieces.clear()
        self.waiting = 0
        return data


def _discard(book: Workbook) -> None:
    """Close the sheets of a book never written and remove their temporary files, which openpyxl
    removes only when the process exits: a download given up (its client gone, its rows' reading
    failed) leaves none behind in a worker that serves for days."""
    for sheet in book.worksheets:
        if not sheet.closed:
            sheet.close()
        if sheet._writer is not None and os.path.exists(sheet._writer.out):
            sheet._writer.cleanup()


def _zipped(name: str, made: tuple[int, ...]) -> zipfile.ZipInfo:
    """A part's entry, compressed as openpyxl's save compresses it."""
    info = zipfile.ZipInfo(name, date_time=made)  # type: ignore[arg-type]  # six fields, as zipfile takes them
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def workbook_stream(table_title: str, header: Sequence[str], rows: Iterable[Sequence[Cell]],
                    about: Sequence[tuple[str, str]]) -> Iterator[bytes]:
    """The .xlsx file, as it is written: `header` and `rows` on the sheet `table_title`,
    `about`'s (what, said) pairs on the sheet "About". Nothing is read before the first bytes
    are asked for; then the first rows (`_MEASURED_ROWS`, for the widths), after which the file's
    first parts go out, then its table row by row (a piece every `_ROWS_A_WRITE` rows,
    compressed as it goes), then the parts that depend on the whole table (its filter's range,
    the styles its figures used) and the zip's directory, last. So a stream cut short (the rows'
    reading failed: the database) is no zip file at all, never a shorter table: nothing opens it.

    openpyxl makes every part but the table's rows: the parts before the table, and the table's
    XML up to its rows, from a copy of the book with the header only, made before the rows; at
    the end the book itself is made, and must have said the same (else this fails, the stream
    cut). The rows are the very XML openpyxl writes for them (`_SheetRows`): its pure-Python
    writer (no lxml here) made a cell object and an element for each cell, about 0.2 ms a
    history row of 18 cells, a history of 100,000 jobs over 15 s. Memory holds the rows measured
    for the widths, a thousand rows' XML and the compressor's window: not the file.

    Every part is written as zipfile writes to a stream it cannot seek: its sizes after it, and
    no ZIP64 (Excel refuses a small file with ZIP64 headers, and a part's size is not known
    before it is written). A table whose XML passes 2 GiB (the rows would average over 2 KB at
    a full sheet) fails there, the stream cut, rather than being written in a form Excel may
    not open."""
    rows = iter(rows)
    measured = list(islice(rows, _MEASURED_ROWS))
    book, sheet = _table_book(table_title, header, measured)
    whole: dict[str, bytes] | None = None
    try:
        # save_workbook's "modified", set here: the first parts go out before the book is whole
        book.properties.modified = datetime.now(tz=UTC).replace(tzinfo=None)
        header_only, its_sheet = _table_book(table_title, header, measured)
        header_only.properties = book.properties
        before = _parts_of(header_only)
        part = its_sheet.path.lstrip("/")  # named as it is written
        head, end, _ = before[part].rpartition(b"</sheetData>")
        if not end:
            raise ValueError(f"{part} has no sheetData to add the rows to")
        made = time.localtime(time.time())[:6]
        sent = _Sent()
        with zipfile.ZipFile(sent, "w", zipfile.ZIP_DEFLATED) as archive:
            first = list(before)[:list(before).index(part)]
            for name in first:
                archive.writestr(_zipped(name, made), before[name])
            yield sent.take()
            with archive.open(_zipped(part, made), "w") as sheet_part:
                sheet_part.write(head)
                written = _SheetRows(sheet, sheet_part)
                for row in chain(measured, rows):
                    check_rows(written.count + 1)
                    written.append(row)
                    if sent.waiting:
                        yield sent.take()
                written.flush()
                sheet.auto_filter.ref = f"A1:{get_column_letter(len(header))}{written.count + 1}"
                notes = book.create_sheet("About")
                notes.column_dimensions["A"].width = max(len(what) for what, _ in about) + 2
                notes.column_dimensions["B"].width = _WIDEST + 20
                for what, said in about:
                    label = _cell(notes, what)
                    label.font = _BOLD
                    notes.append([label, _cell(notes, said)])
                whole = _parts_of(book)
                whole_head, end, tail = whole[part].rpartition(b"</sheetData>")
                if list(whole)[:len(first) + 1] != [*first, part] or whole_head != head or any(
                        whole[name] != before[name] for name in first):
                    raise RuntimeError(f"openpyxl wrote the parts before {part}'s rows otherwise once the book was whole")
                sheet_part.write(end + tail)
            for name in list(whole)[len(first) + 1:]:
                archive.writestr(_zipped(name, made), whole[name])
        yield sent.take()  # the parts after the table, then the zip's directory
    finally:
        if whole is None:
            _discard(book)


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
        self._bytes = 0

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
        data = "".join(self._pending).encode()
        self._pending.clear()
        self._bytes += len(data)
        if self._bytes > zipfile.ZIP64_LIMIT:
            raise ValueError(f"the table's XML passed {zipfile.ZIP64_LIMIT:,} bytes, a zip part's most without ZIP64")
        self._out.write(data)
