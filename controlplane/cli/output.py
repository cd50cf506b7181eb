"""How the CLI shows things: aligned tables for people, JSON for scripts, durations both ways."""

from __future__ import annotations

import json
import re
import select
import sys
import time
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TextIO

from controlplane.cli import terminal_width
from controlplane.services.distance_text import distance_words

_UNITS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_AMOUNT = r"(\d+(?:\.\d+)?)"
_DURATION = re.compile(rf"^(?:{_AMOUNT}w)?(?:{_AMOUNT}d)?(?:{_AMOUNT}h)?(?:{_AMOUNT}m)?(?:{_AMOUNT}s)?$")
_DECIMAL = re.compile(r"^\d*\.\d+$")
_CLOCK = re.compile(r"^(?:(\d+):)?(\d+):(\d+)$")  # Slurm's HH:MM:SS, MM:SS
_DAYS = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$")  # Slurm's D-HH, D-HH:MM, D-HH:MM:SS


def parse_duration(text: str, bare: int = 1) -> int:
    """Seconds from `4h`, `90m`, `1d12h`, a decimal amount of a unit (`1.5h`, as the submit
    form's *Runtime limit (hours)* takes 1.5, rounded to whole seconds as the form sends it; it
    was refused), a bare whole number (× `bare` seconds: 60 for sbatch's `--time`, whose `-t 30`
    is 30 minutes), or Slurm's `HH:MM:SS`, `MM:SS` and, with days, `D-HH`, `D-HH:MM`,
    `D-HH:MM:SS` (sbatch --time). After a day the next number is hours: `1-12:30` is a day, 12
    hours and 30 minutes (it was read as a day and 12:30 minutes), and `2-12` two and a half days
    (it was refused). A bare decimal is refused: `--time 1.5` meant as the form's hours would be
    90 seconds."""
    value = text.strip().lower()
    if value.isdigit():
        return int(value) * bare
    if _DECIMAL.match(value):
        raise ValueError(f"'{text}' is not a duration: a number alone is whole "
                         f"{'minutes' if bare == 60 else 'seconds'}; "
                         "give a decimal its unit, e.g. 1.5h")
    m = _DURATION.match(value)
    if m and any(m.groups()):
        exact = sum(Decimal(n) * unit for n, unit in zip(m.groups(), _UNITS.values(), strict=True) if n)
        return int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP))
    m = _DAYS.match(value)
    if m:
        days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
        return days * 86400 + hours * 3600 + minutes * 60 + seconds
    m = _CLOCK.match(value)
    if m:
        hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
        return hours * 3600 + minutes * 60 + seconds
    raise ValueError(f"'{text}' is not a duration: use e.g. 4h, 1.5h, 90m, 1d12h, 04:00:00 or 1-12:00")


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts[:2])


def human_distance(seconds: float) -> str:
    """How far off a time is (an ETA, a checkpoint, a likely start passed) as the job and jobs
    pages say it, by their one rule (services/distance_text): "42 s", "10 min" of 9 min 51 s,
    "3.0 h", "3.5 days" (qm said "9m", "3h" and "2h29m" beside the page's "10 min", "3.0 h" and
    "2.5 h"). A table's elapsed column keeps `human_duration`, cut as Slurm's squeue TIME is."""
    return distance_words(seconds)


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def utc_text(value: str | None, suffix: str = " UTC") -> str:
    """An API time as the pages and the API's sentences say it: UTC, to the nearest second
    (`2026-11-30 03:14:21 UTC`); "-" for none. The raw `2026-11-30T03:14:20.769399Z` sat a
    second away from the sentence above it."""
    when = parse_time(value)
    if when is None:
        return "-"
    when = (when + timedelta(microseconds=500_000)).astimezone(timezone.utc)
    return f"{when:%Y-%m-%d %H:%M:%S}{suffix}"


def age(value: str | None, now: datetime | None = None) -> str:
    when = parse_time(value)
    if when is None:
        return "-"
    return human_duration(((now or datetime.now(timezone.utc)) - when).total_seconds())


def ago(value: str | None) -> str:
    """How long ago a time was, as the job page says it beside the time ("18 min ago", of
    17 min 40 s; "3.0 h ago"): `human_distance`, where `age`, a table's elapsed column, cuts;
    "-" for none."""
    when = parse_time(value)
    if when is None:
        return "-"
    return human_distance(max(0.0, (datetime.now(timezone.utc) - when).total_seconds()))


_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(value: Any) -> str:
    """`value` as text the terminal prints as it is: control characters and bidirectional
    overrides written as escapes (a job named with an escape sequence cannot recolour or move
    the cursor of whoever lists it, nor split a table's row)."""
    text = str(value)
    if not _INVISIBLE.search(text):
        return text
    return _INVISIBLE.sub(lambda m: repr(m.group())[1:-1], text)  # "\x1b", "\n", "\u202e"


#: In a job's output on a terminal: a colour or style (SGR: ESC [ numbers m), kept as the job wrote
#: it, or one control character (newline, tab and carriage return excepted: line and progress-bar
#: layout), or a bidirectional override, written as an escape.
_OUTPUT_CONTROL = re.compile("(\x1b\\[[0-9;:]*m)|([\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069])")
#: What may be the start of a colour sequence cut at the end of a chunk: held for the next one.
_CUT_SEQUENCE = re.compile("\x1b(\\[[0-9;:]*)?\\Z")


def terminal_output(text: str) -> tuple[str, str]:
    """A job's output as a terminal should get it, and the tail held back for the next chunk.
    Colours stay; any other escape sequence (cursor moves, window titles, OSC 52 clipboard
    writes, hyperlinks) and other control characters are shown as escapes, so a job's output
    cannot rewrite the screen, the title or the clipboard of whoever reads it (`less -R`'s rule)."""
    cut = _CUT_SEQUENCE.search(text)
    held = text[cut.start():] if cut else ""
    text = text[:cut.start()] if cut else text
    return _OUTPUT_CONTROL.sub(lambda m: m.group(1) or repr(m.group(2))[1:-1], text), held


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], out: TextIO = sys.stdout,
          cut: Sequence[str] = (), wide: Sequence[str] = (), short: dict[str, str] | None = None,
          least: dict[str, int] | None = None, wrap: Sequence[str] = (),
          labels: Sequence[str] = ()) -> dict[str, str]:
    """Columns padded to their widest cell; numbers right-aligned. On a terminal (or with COLUMNS)
    the table is its narrow view, as kubectl's and squeue's default: the columns named in `wide`
    are left out and the headers in `short` say their short form (`PREEMPTION WASTE $` → `WASTE $`,
    the figures as they are); `--wide`, a pipe or file without COLUMNS show every column. The
    columns named in `cut` (free text: a job's NAME) are then cut with `…` to fit the terminal
    (terminal_width.py), none below its `least` (by full header; else SHORTEST): a column cut
    only once the others are at theirs, and a line on stderr says which and that `--wide` shows
    them whole. The columns named in `wrap` (sentences: an event's WHAT) give way as the cut ones
    do, but their cells are wrapped between words onto the lines below, the other cells blank
    there, so the whole sentence is read (a sentence cut said only its start and end).
    The cells in `labels` (showback's `__idle__` and TOTAL, among its job ids) are row labels,
    not figures: a column of figures and such labels still has its figures right-aligned, the
    labels at its left edge (the words made the ids read as text, left-aligned).
    Returns the header printed for each column shown, by its full header (a footnote names a
    column only when it is there, as it is headed)."""
    limit = terminal_width.columns()
    kept = [i for i, h in enumerate(headers) if limit is None or h not in wide]
    shown = {headers[i]: (short or {}).get(headers[i], headers[i]) if limit is not None else headers[i] for i in kept}
    titles = [shown[headers[i]] for i in kept]
    cells = [[("-" if row[i] is None or row[i] == "" else visible(row[i])) for i in kept] for row in rows]
    natural = [max([width(h)] + [width(r[i]) for r in cells]) for i, h in enumerate(titles)]
    widths = terminal_width.fitted(natural, [headers[i] in cut or headers[i] in wrap for i in kept],
                                   [max(width(titles[k]), (least or {}).get(headers[i], terminal_width.SHORTEST))
                                    for k, i in enumerate(kept)], 2, limit)
    narrowed = [i for i, (w, n) in enumerate(zip(widths, natural, strict=True)) if w < n]
    folded = [i for i in narrowed if headers[kept[i]] in wrap]
    narrowed = [i for i in narrowed if i not in folded]
    for row in cells:
        for i in narrowed:
            row[i] = terminal_width.cut(row[i], widths[i], width)
    numeric = [all(_is_number(r[i]) or r[i] in labels for r in cells) and any(r[i] not in labels for r in cells)
               for i in range(len(titles))]
    out.write("  ".join(_pad(h, w) for h, w in zip(titles, widths, strict=True)).rstrip() + "\n")
    for row in cells:
        pieces = {i: terminal_width.wrapped(row[i], widths[i], width) for i in folded}
        for n in range(max((len(p) for p in pieces.values()), default=1)):
            line_cells = [(pieces[i][n] if n < len(pieces[i]) else "") if i in pieces else (c if n == 0 else "")
                          for i, c in enumerate(row)]
            line = "  ".join(_pad(c, w, right=num and c not in labels)
                             for c, w, num in zip(line_cells, widths, numeric, strict=True))
            out.write(line.rstrip() + "\n")
    if narrowed:
        names = ", ".join(titles[i] for i in narrowed)
        it = "it" if len(narrowed) == 1 else "them"
        out.flush()  # under the table, not above it, when both go to one pipe or file
        print(f"{names} cut to fit {limit} columns: --wide shows {it} whole.", file=sys.stderr)
    return shown


def width(text: str) -> int:
    """Columns `text` takes on a terminal: East Asian wide and full-width characters (名, 🚀) take
    two, combining marks none (a job named in Japanese pushed every later column out of line)."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, columns: int, right: bool = False) -> str:
    gap = " " * max(0, columns - width(text))
    return gap + text if right else text + gap


#: Counts of a whole: `qm list`'s `16/8` (an elastic job's GPUs held of asked), `qm nodes`' `7/8` used.
_COUNT_OF = re.compile(r"^\d+/\d+$")


def _is_number(text: str) -> bool:
    """A figure, as a right-aligned column's cells are: `1,234.50`, `$7.54`, `-` (none),
    `< 0.01`, a figure below a hundredth as the pages say it, and `16/8`, a count of a whole
    (each left-aligned the whole column)."""
    if _COUNT_OF.match(text):
        return True
    try:
        float(text.replace(",", "").lstrip("$").removeprefix("< "))
    except ValueError:
        return text == "-"
    return True


def fields(pairs: Iterable[tuple[str, Any]], out: TextIO = sys.stdout) -> None:
    items = [(k, "-" if v is None or v == "" else visible(v)) for k, v in pairs]
    width = max((len(k) for k, _ in items), default=0)
    for key, value in items:
        out.write(f"{key + ':':<{width + 1}} {value}\n")


def emit_json(data: Any, out: TextIO = sys.stdout) -> None:
    out.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def say_answer(answer: dict[str, Any], as_json: bool) -> None:
    """The API's answer to an action: its JSON (`--json`), else its sentence (`detail`)."""
    if as_json:
        emit_json(answer)
    else:
        note(answer["detail"])


def note(text: Any = "", out: TextIO | None = None) -> None:
    """A sentence for a person (a note under a table, a line in a table's place, an answer) on
    its own line: on a terminal (or with COLUMNS) wrapped between words at its width, as the
    tables are fitted to it (a note of 208 columns broke mid-word at 80); whole on one line with
    `--wide` or to a pipe or file without COLUMNS, as a script reads it. A word wider than the
    terminal (a URL, a secret) is kept whole on a line of its own. Its indent is kept on
    every line; control characters, a line break included, are written as escapes (`visible`:
    a job's name cannot split the sentence it is named in)."""
    out = out or sys.stdout
    line = visible(text)
    limit = terminal_width.columns()
    body = line.lstrip(" ")
    indent = line[:len(line) - len(body)]
    if limit is None or width(line) <= limit or not body:
        out.write(line + "\n")
        return
    for piece in terminal_width.wrapped(body, max(limit - len(indent), terminal_width.SHORTEST), width,
                                         break_words=False):
        out.write(indent + piece + "\n")


def emit_json_line(data: Any, out: TextIO = sys.stdout) -> None:
    """One JSON document on one line (a stream a script reads line by line)."""
    out.write(json.dumps(data) + "\n")


_DAY_WORDS = {"today": 0, "yesterday": 1}
_WHEN_HELP = ("use 2h, 90m, 3d (that long ago), today, yesterday, now, 10:30 (today, UTC), a date "
              "(2026-11-29) or a time (2026-11-29T10:00, UTC unless it says its offset)")


_TIME_OF_DAY = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


def parse_when(text: str, now: datetime) -> datetime:
    """A moment as `qm history --since/--until` takes it: `2h`, `1d12h` (that long before
    `now`), `today` and `yesterday` (their 00:00 UTC), `now`, `10:30` (today at that time UTC,
    as sacct takes `HH:MM`), a date (its 00:00 UTC) or an ISO time (UTC when it gives no
    offset). Anything else is a ValueError saying what to give."""
    value = text.strip().lower()
    midnight = now.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        if value in _DAY_WORDS:
            return midnight - timedelta(days=_DAY_WORDS[value])
        if value == "now":
            return now
        m = _DURATION.match(value)
        if value and m and any(m.groups()):
            return now - timedelta(seconds=parse_duration(value))
        m = _TIME_OF_DAY.match(value)
        if m:
            return midnight.replace(hour=int(m.group(1)), minute=int(m.group(2)), second=int(m.group(3) or 0))
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise ValueError(f"'{text}' is not a time: {_WHEN_HELP}") from None


def clock(seconds: float | None) -> str:
    """Elapsed time as sacct says it: `HH:MM:SS`, `D-HH:MM:SS` from a day on; "-" for none."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


# Said alike by several commands: a job's state (qm list, status, history), its nodes (qm history, maint).


def job_state(job: dict[str, Any]) -> str:
    """The job's state as the API labels it: a stopping job (state `preempting` whatever stops it)
    says why, `stopping: cancelled`, `stopping: runtime limit` or `preempting` (the job list and
    timeline say the same). A server without `state_label` gives the state."""
    label = str(job.get("state_label") or job["state"])
    # A held job waits out of the queue: `pending (held)`, `pending (held by admin)`.
    if job["state"] == "pending" and job.get("hold"):
        return f"{label} (held{' by admin' if job['hold'] == 'admin' else ''})"
    return label


def job_name(job: dict[str, Any]) -> str:
    """A job's name for a table's NAME cell: an array's task with its index, `sweep [3]`, as the
    jobs and history pages say it (every task of an array has the array's name)."""
    if job.get("array_id") is not None and job.get("array_index") is not None:
        return f"{job['name']} [{job['array_index']}]"
    return str(job["name"])


def number_ranges(numbers: Iterable[int]) -> str:
    """Whole numbers as runs of consecutive ones, in order: `3–52`, `1, 4–6, 9`."""
    spans: list[list[int]] = []
    for n in sorted(set(numbers)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(low) if low == high else f"{low}–{high}" for low, high in spans)


def nodes_cell(nodes: list[str]) -> str:
    """In the table at most three (`h100-01,h100-02,+6`); JSON and the CSV name every one."""
    if len(nodes) <= 3:
        return ",".join(nodes)
    return ",".join(nodes[:2]) + f",+{len(nodes) - 2}"


def pause(seconds: float) -> None:
    """Wait `seconds` between two rounds of a follow, or raise BrokenPipeError as soon as standard
    output's reader has gone (`qm events --follow | head -3`, head done): a follow of a quiet job
    writes nothing for hours, and a closed pipe is otherwise found only by the next write. The
    kernel says so on the pipe's writing end (POLLERR; POLLHUP for a terminal or socket hung
    up), so the wait is a poll on it. A file or /dev/null never says either: a plain wait."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # no stdout, or not a file (a test's StringIO)
        time.sleep(seconds)
        return
    watch = select.poll()
    watch.register(fd, 0)  # POLLERR, POLLHUP and POLLNVAL are reported whatever is asked
    for _, happened in watch.poll(max(0, round(seconds * 1000))):
        if happened & select.POLLNVAL:  # stdout was closed under us: nothing to watch
            time.sleep(seconds)
        elif happened & (select.POLLERR | select.POLLHUP):
            raise BrokenPipeError("standard output's reader has gone")
