"""services/excel_workbook.py writes the table's rows itself (openpyxl's own writer took about
0.2 ms a row, a history of 100,000 jobs over 15 s), so its file is held here to the file
openpyxl's write-only workbook makes of the same rows, part by part and byte for byte: the
same cells, types, styles and number formats, the same escapes, the same filter, widths and
"About" sheet. Only the file's creation time (docProps/core.xml) may differ."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable, Sequence
from itertools import chain, islice

from hypothesis import given, settings
from hypothesis import strategies as st
from openpyxl import Workbook
from openpyxl.utils import get_column_letter

from controlplane.services import excel_workbook
from controlplane.services.excel_workbook import workbook
from controlplane.services.spreadsheet_cells import (
    HOURS_4,
    PLAIN,
    SHARE_4,
    USD,
    USD_4,
    USD_6,
    USD_12,
    WHOLE,
    Cell,
    Figure,
)

ABOUT = [("Report", "Test rows"), ("Generated (UTC)", "2026-12-07T19:00:00Z")]


def openpyxls(title: str, header: Sequence[str], rows: Iterable[Sequence[Cell]],
              about: Sequence[tuple[str, str]]) -> bytes:
    """The workbook as openpyxl wrote it until 7 Dec 2026: every cell a WriteOnlyCell appended
    to its write-only sheet (excel_workbook's `_cell`, widths and layout as they were)."""
    book = Workbook(write_only=True)
    sheet = book.create_sheet(title)
    rows = iter(rows)
    measured = list(islice(rows, excel_workbook._MEASURED_ROWS))
    for column, name in enumerate(header, start=1):
        widest = max([len(name), *(excel_workbook._shown_width(row[column - 1]) for row in measured)])
        sheet.column_dimensions[get_column_letter(column)].width = min(max(widest + 2, excel_workbook._NARROWEST),
                                                                       excel_workbook._WIDEST)
    sheet.freeze_panes = "A2"
    heading = []
    for name in header:
        cell = excel_workbook._cell(sheet, name)
        cell.font = excel_workbook._BOLD
        heading.append(cell)
    sheet.append(heading)
    count = 0
    for row in chain(measured, rows):
        count += 1
        sheet.append([excel_workbook._cell(sheet, value) for value in row])
    sheet.auto_filter.ref = f"A1:{get_column_letter(len(header))}{count + 1}"
    notes = book.create_sheet("About")
    notes.column_dimensions["A"].width = max(len(what) for what, _ in about) + 2
    notes.column_dimensions["B"].width = excel_workbook._WIDEST + 20
    for what, said in about:
        label = excel_workbook._cell(notes, what)
        label.font = excel_workbook._BOLD
        notes.append([label, excel_workbook._cell(notes, said)])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def parts(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as book:
        named = {info.filename: book.read(info) for info in book.infolist()}
    named["docProps/core.xml"] = re.sub(rb"<dcterms:(created|modified)[^>]*>[^<]*<", rb"<dcterms:\1><",
                                        named["docProps/core.xml"])
    return named


def assert_same_file(header: Sequence[str], rows: list[list[Cell]]) -> None:
    ours, theirs = parts(workbook("Rows", header, rows, ABOUT)), parts(openpyxls("Rows", header, rows, ABOUT))
    assert list(ours) == list(theirs)  # the same parts, in the same order
    for name, data in theirs.items():
        assert ours[name] == data, name


def test_every_kind_of_cell_is_written_as_openpyxl_writes_it() -> None:
    header = ["id", "name", "note", "hours", "usd", "price", "share", "tokens"]
    rows: list[list[Cell]] = [
        [Figure("1", PLAIN), "2026-11", "=SUM(A1:A9)", Figure("16.0000", HOURS_4), Figure("48.00", USD),
         Figure("3.1337", USD_4), Figure("0.1250", SHARE_4), Figure("1234567", WHOLE)],
        [Figure("-2", PLAIN), "1e5", "3-4", Figure("-12.3400", HOURS_4), Figure("-0.50", USD),
         Figure("0.000001", USD_6), None, Figure("0", WHOLE)],
        [Figure("12345678901234567", PLAIN), " lead & <x> \"q\" 'a' ", "\t", None, Figure("12345678901234.56", USD),
         Figure("0.000000000123", USD_12), "", None],
        [None, None, None, None, None, None, None, None],  # an empty row is still a row
        [Figure("4", PLAIN), "Équipe-β 東京 🚀", "a\x01b\x1f _x0041_ _xZZZZ_ _X00a1_", None, None, None, None, None],
        [Figure("5", PLAIN), "x" * 40_000, "line\nbreak\r\n", " ", "  trailing  ", None, None, None],
        ["TOTAL", "5 jobs", None, Figure("3.6600", HOURS_4), Figure("47.50", USD), None, None, None],
    ]
    assert_same_file(header, rows)


def test_a_figure_first_met_past_the_measured_rows_gets_openpyxls_style() -> None:
    # Styles are numbered as first used: a format first met on row 1,500 is numbered then.
    rows: list[list[Cell]] = [[Figure(str(i), PLAIN), f"job-{i}", None] for i in range(1, 1500)]
    rows.append([Figure("1500", PLAIN), "late", Figure("9.99", USD)])
    rows.append([Figure("1501", PLAIN), None, Figure("0.1250", SHARE_4)])
    assert_same_file(["id", "name", "usd"], rows)


_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), _TEXT,
                                   st.decimals(allow_nan=False, allow_infinity=False, places=4,
                                               min_value=-10**12, max_value=10**12).map(
                                       lambda d: Figure(f"{d:.4f}", HOURS_4)),
                                   st.integers(-10**18, 10**18).map(lambda n: Figure(str(n), PLAIN))),
                         min_size=3, max_size=3), min_size=1, max_size=8))
def test_any_rows_are_written_as_openpyxl_writes_them(rows: list[list[Cell]]) -> None:
    assert_same_file(["a", "b", "c"], rows)
