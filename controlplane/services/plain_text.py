"""The one rule for the text the API takes (a name, a description, a reason, a command): given as
text, and holding no character that hides or disguises what it says. The API's serializer fields
(api/serializers/fields.TextField and the kinds built on it), the models' name validator
(models/names.py, so the admin's forms say it alike), the services that read a reason outside
a serializer (holds, requeues, maintenance windows), the text query parameters
(filtersets.PlainTextFormField, serializers' NamedRecordField, the hooks list's `?user=`) and
the node agent's protocol (api/agent.py) all ask it here.

Text is a JSON string: a number or a boolean where text goes is refused, not turned into its
digits. DRF's CharField read `{"name": 12345}` as "12345" and `1e20` as "1e+20", and a job file
read by YAML sends `name: 1.10` as the number 1.1: a name nobody wrote.

Refused in any text: the C0 controls U+0000-U+001F, DEL U+007F and the C1 controls U+0080-U+009F
(U+0085, the next-line, among them): escape sequences for whoever prints the text, a bell, a
carriage return that rewrites a line; Unicode's line and paragraph separators U+2028 and U+2029;
and the bidirectional embeddings, overrides and isolates U+202A-U+202E and U+2066-U+2069, which
reorder what a reader sees (a name with U+202E before "gpj.exe" shows as "exe.jpg"). Text of several lines
(a description, a command, an environment value) may hold the new line U+000A and the tab U+0009;
a name or a reason (one line, shown in tables and sentences) may not."""

from __future__ import annotations

import re
from typing import Any

from controlplane.services.whole_numbers import json_kind

_HIDING = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
#: Text of one line: every character above, and the new line and tab too.
ONE_LINE_REFUSED = re.compile(f"[\t\n{_HIDING}]")
#: Text of several lines: the new line and the tab are its own.
LINES_REFUSED = re.compile(f"[{_HIDING}]")

#: What some of the refused characters are called, beside their code point.
_CALLED = {"\t": "a tab", "\n": "a new line", "\r": "a carriage return", "\x1b": "an escape", "\x00": "a NUL",
           "\x85": "a next line"}


class NotText(ValueError):
    """What is wrong with what was given as text, in words for its field."""


def given_kind(given: Any) -> str:
    """What a JSON value is, in JSON's words (whole_numbers.json_kind), a boolean said as one:
    "a number", "a boolean (true)", "a list"."""
    if isinstance(given, bool):
        return f"a boolean ({str(given).lower()})"
    return json_kind(given)


def hidden_character_problem(text: str, *, lines: bool = False, offset: int = 0) -> str | None:
    """The first character of `text` the rule refuses, said with its code point and its
    position (1 for the first character, counted in characters of what was sent: `offset` is
    how many were trimmed before `text`); None when there is none. `lines`: the text may have
    several lines (new lines and tabs are its own)."""
    found = (LINES_REFUSED if lines else ONE_LINE_REFUSED).search(text)
    if found is None:
        return None
    char = found.group()
    point = ord(char)
    if 0x202A <= point <= 0x202E or 0x2066 <= point <= 0x2069:
        what = "a bidirectional control"
    elif point in (0x2028, 0x2029):
        what = "a line separator" if point == 0x2028 else "a paragraph separator"
    else:
        what = "a control character"
    called = f", {_CALLED[char]}" if char in _CALLED else ""
    said = f"contains {what} (U+{point:04X}{called}) at position {offset + found.start() + 1}"
    if char in "\t\n" and not lines:
        said += ": it is one line of text"
    return said


def text_problem(given: Any, *, lines: bool = False) -> str | None:
    """What is wrong with `given` as text (not text, or a character the rule refuses), or None."""
    if not isinstance(given, str):
        return f"must be text, got {given_kind(given)}"
    return hidden_character_problem(given, lines=lines)


def plain_text(given: Any, *, lines: bool = False) -> str:
    """`given` as text by the rule; NotText saying what is wrong otherwise."""
    problem = text_problem(given, lines=lines)
    if problem:
        raise NotText(problem)
    return str(given)
