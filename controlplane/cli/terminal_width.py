"""How many columns a table may take, and its free-text cells cut to fit them.

A table's column of free text (a job's NAME, a node's STATE with its cordon reason, a hook's
URL) is as wide as its longest cell: one job named at length pushed every row of `qm list` past
the terminal's edge, so each row wrapped and no column lined up. On a terminal such columns are
capped at one width, the widest that lets the table fit (never below `SHORTEST` columns; the
other columns are short codes, numbers and times and are never cut), each cut cell keeping its
start and end around a `…`. Before any cut, a table on a terminal is its narrow view, as
kubectl's default and squeue's and sinfo's are: the columns a user needs most (output.table's
`wide` columns left out, some headers short), which fit 80 columns by their fixed columns alone
(`qm runs` was 155 wide with every name short). `--wide` (and `--json`) give every column and
every cell whole; so does output to a pipe or file without COLUMNS, which a script reads whole
(`qm list | grep …`), as `ps` and `systemctl` do. A column of sentences (an event's WHAT) is
not cut but wrapped within its width, between words (`wrapped`): cut, a sentence said only its
start and end, and at 80 columns the fleet's events left it 17 columns to say them in.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence

#: A column is never cut narrower than this (nor than its header): `llama-3-7…` still says which.
SHORTEST = 10
ELLIPSIS = "…"

#: An array task's index (`sweep [3]`) is what tells its rows apart: it stays when the name is cut.
_ARRAY_INDEX = re.compile(r" \[\d+\]\Z")

#: At most this much of a cut text's end is kept: enough for `run17`, `-091`, `seed3`; the rest
#: of the room goes to its start, which says what it is.
_END_KEPT = 8

_whole = False


def show_whole(whole: bool) -> None:
    """`--wide`: every cell whole, however wide the table."""
    global _whole
    _whole = whole


def columns() -> int | None:
    """The columns a table may take: COLUMNS when set (as `ls`, `ps` and Python read it), else
    the terminal's width when standard output is one; None (no bound) with `--wide`, or for a
    pipe or file."""
    if _whole:
        return None
    given = os.environ.get("COLUMNS", "").strip()
    if given.isascii() and given.isdigit() and int(given) > 0:
        return int(given)
    try:
        fd = sys.stdout.fileno()
        if not os.isatty(fd):
            return None
        return os.get_terminal_size(fd).columns or None
    except (AttributeError, ValueError, OSError):  # no stdout, not a file (a test's StringIO)
        return None


def fitted(widths: Sequence[int], cuttable: Sequence[bool], shortest: Sequence[int], gap: int,
           limit: int | None) -> list[int]:
    """Column widths whose line (with `gap` between columns) fits `limit`: the cuttable columns
    capped at one width, the widest that fits, so the widest are cut first and two long ones
    share what is left alike; none below its `shortest`. What cannot fit stays wider."""
    if limit is None or sum(widths) + gap * (len(widths) - 1) <= limit:
        return list(widths)

    def capped(cap: int) -> list[int]:
        # a column narrower than its shortest is never widened to it
        return [max(min(least, w), min(w, cap)) if cut else w
                for w, cut, least in zip(widths, cuttable, shortest, strict=True)]

    cap = max((w for w, cut in zip(widths, cuttable, strict=True) if cut), default=0)
    while cap > 0 and sum(capped(cap)) + gap * (len(widths) - 1) > limit:
        cap -= 1
    return capped(cap)


def cut(text: str, columns: int, width: Callable[[str], int]) -> str:
    """`text` in at most `columns` terminal columns (as `width` counts them), cut in the middle:
    its start and its end kept around a `…`, since names differ as often at the end as at the
    start (`notebook-91`, `notebook-92`: cut at the end both read `notebook-…`). An array task
    keeps its ` [3]` after the `…`: that is what tells its rows apart, not its array's name."""
    if width(text) <= columns:
        return text
    index = _ARRAY_INDEX.search(text)
    if index and len(index.group()) + 2 <= columns:
        return _first(text[:index.start()], columns - len(index.group()) - 1, width).rstrip() + ELLIPSIS + index.group()
    room = columns - 1
    end = _last(text, min(room // 3, _END_KEPT), width)
    return _first(text, room - width(end), width) + ELLIPSIS + end


def wrapped(text: str, columns: int, width: Callable[[str], int], break_words: bool = True) -> list[str]:
    """`text` as lines of at most `columns` terminal columns, broken between words: a sentence
    (an event's WHAT) is read whole on a narrow terminal, where cut to fit it said only its start
    and end. A word wider than the column is broken within itself (a table's cell must keep to
    its column), or with `break_words=False` given a line of its own, whole (a note's URL or a
    secret is copied from the screen: split in two, it was copied wrong)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        while break_words and width(word) > columns:
            if line:
                lines.append(line)
                line = ""
            head = _first(word, columns, width) or word[0]
            lines.append(head)
            word = word[len(head):]
        if not word:
            continue
        if line and width(line) + 1 + width(word) > columns:
            lines.append(line)
            line = ""
        line = f"{line} {word}" if line else word
    if line or not lines:
        lines.append(line)
    return lines


def _first(text: str, columns: int, width: Callable[[str], int]) -> str:
    """The longest start of `text` that fits `columns`."""
    kept = ""
    for char in text:
        if width(kept + char) > columns:
            break
        kept += char
    return kept


def _last(text: str, columns: int, width: Callable[[str], int]) -> str:
    """The longest end of `text` that fits `columns`."""
    return _first(text[::-1], columns, width)[::-1]
