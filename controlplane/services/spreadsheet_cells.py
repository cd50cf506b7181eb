"""The cells of the exports finance opens in a spreadsheet: the showback report
(showback.showback_table) and the ended jobs (job_history.history_table) are each built once as
rows of these cells, and written from those same rows as CSV (`csv_text`) and as an Excel
workbook (services/excel_workbook.py), so the two files cannot disagree.

- A name someone typed (a job's, a team's, a project's) is a `str`: the CSV writes it as text
  the spreadsheet shows, never a formula it runs (OWASP's CSV injection: `text_cell`), and the
  workbook stores it as a text cell, which Excel neither runs nor reads as a date or a number
  (`2026-11`, `1e5` and `3-4` stay what they are).
- A figure is a `Figure`: the CSV writes its fixed-place text, the workbook the same number,
  shown with its number format (currency, GPU-hours, whole tokens).
- None is an empty cell: "does not apply"."""

from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

#: A cell a spreadsheet would read as a formula starts with one of these.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

#: Excel number formats of the figures. Money shows its cents, a price per GPU-hour its four
#: places, a price per token its twelve: the places the CSV writes.
USD = '"$"#,##0.00'
USD_4 = '"$"#,##0.0000'
USD_6 = '"$"#,##0.000000'
USD_12 = '"$"0.000000000000'
HOURS_4 = "#,##0.0000"
WHOLE = "#,##0"
#: An id, an exit code, a GPU count: a number without a thousands separator.
PLAIN = "0"
SHARE_4 = "0.00%"


def text_cell(text: str) -> str:
    """`=HYPERLINK(…)` is written `'=HYPERLINK(…)`; any other text as it is."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class Figure(NamedTuple):
    """A figure as the CSV writes it (`text`: fixed places, `-` for a negative) and how the
    workbook shows the same number (`number_format`). A plain tuple, cheap to make: the history
    CSV makes up to eight a row."""

    text: str
    number_format: str

    @property
    def number(self) -> int | Decimal:
        """The CSV's text as a number: the workbook's value, equal to the CSV's to the last place."""
        return Decimal(self.text) if "." in self.text else int(self.text)


Cell = str | Figure | None


def figure(text: str, number_format: str) -> Figure | None:
    """The fixed-place text a CSV column writes as a figure; "" (does not apply) as no figure."""
    return Figure(text, number_format) if text else None


def csv_text(cell: Cell) -> str:
    """A cell as the CSV writes it: a name after a `'` if a spreadsheet would run it, a figure's
    fixed places, "" for none."""
    if cell is None:
        return ""
    if isinstance(cell, Figure):
        return cell.text
    return text_cell(cell)
