"""The one rule, and the one wording, for a value given twice where each is given once: a hook's
events, an array's indices, a job's (or a role's) GPU types, a team's priority classes, the
states an array requeue takes, the keys of a JSON object. Refused naming the value, never
collapsed: a list read back shorter than it was sent says the client's list was not what it
meant (a mistyped type, a range's end), and quietly keeping one of two leaves the client's
mistake unseen."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def given_twice(what: str, each: str, *, where: str = "") -> str:
    """The words for `what` given twice: "'H100-80GB' is given twice: give each type once".
    `where`: where the two are, said after "given twice" (", in 0-3 and in 2")."""
    return f"{what} is given twice{where}: give each {each} once"


def repeated_problem(items: Iterable[Any], each: str) -> str | None:
    """The words for the first item of `items` given a second time, or None when each is given once."""
    seen: list[Any] = []  # a list, not a set: items need not be hashable (a JSON object in a list)
    for item in items:
        if item in seen:
            return given_twice(repr(item)[:80], each)
        seen.append(item)
    return None
