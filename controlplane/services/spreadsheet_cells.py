"""How the CSVs finance opens in a spreadsheet write a name someone typed (a job's, a team's, a
project's): as text the spreadsheet shows, never a formula it runs (OWASP's CSV injection). The
history CSV (job_history.history_csv) and the showback CSV (showback.showback_csv) both write
their names through `text_cell`."""

from __future__ import annotations

#: A cell a spreadsheet would read as a formula starts with one of these.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def text_cell(text: str) -> str:
    """`=HYPERLINK(…)` is written `'=HYPERLINK(…)`; any other text as it is."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text
