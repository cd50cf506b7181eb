"""The one rule for a whole number given as text or JSON: the API's bodies, its query
parameters and the texts it parses (a task limit's `%10`, a dependency's job ids, showback's
`7d`) all read one through ``whole_number``.

A whole number is a JSON integer, or text of the ASCII digits 0-9 with a leading `-` at most.
Python's int() reads far more: other scripts' digits ('٣', full-width '３'), `_` between digits
('3_0' is 30), a `+`, surrounding spaces, and DRF's and Django's integer fields add a fraction of
zeros ('8.0', the JSON number 8.0). Each of those was taken as a number nobody typed as one:
`{"gpus": "٣"}` ran a 3-GPU job. And isdigit() alone says yes to '²', which int() refuses, so a
check by isdigit() then int() answered 500.

A number with a fraction (a price, a GPU type's relative throughput) is read by the same rule
(``fractional_number``): a JSON number, or the digits 0-9 with one `.` and a leading `-` at most
(an exponent as `2.5e3` too); float() and Decimal() read '٣', '1_0' and ' 2 ' as well. Negative
zero is zero: a price of "-0" was stored, and shown, as -0.0000."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

_DIGITS = re.compile(r"-?[0-9]+\Z")  # \Z: "$" lets a trailing new line through

#: Digits past what any column holds (a bigint has 19): read no further, since Python's int()
#: refuses more than 4,300, and a range check then says "out of range", not "not a number".
_MOST_DIGITS = 40


class NotAWholeNumber(ValueError):
    """What is wrong, in a sentence that quotes what was given."""


def whole_number(given: Any) -> int:
    """`given` (a JSON value or a text) as an int; NotAWholeNumber saying why not otherwise.
    More digits than _MOST_DIGITS read as ±10**_MOST_DIGITS, beyond every range."""
    if isinstance(given, bool):
        raise NotAWholeNumber(f"{str(given).lower()} is not a whole number")
    if isinstance(given, int):
        return given
    if isinstance(given, float):
        if given.is_integer():
            raise NotAWholeNumber(f"{given!r} is not a whole number: give {int(given)}, without the fraction")
        raise NotAWholeNumber(f"{given!r} is not a whole number")
    if not isinstance(given, str):
        raise NotAWholeNumber(f"a whole number is a number or a string of digits, not {json_kind(given)}")
    if _DIGITS.match(given):
        digits = given.removeprefix("-").lstrip("0") or "0"
        value = int(digits) if len(digits) <= _MOST_DIGITS else 10**_MOST_DIGITS
        return -value if given.startswith("-") else value
    raise NotAWholeNumber(_why_not(given))


_FRACTIONAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")


def fractional_number(given: Any) -> Decimal:
    """`given` (a JSON number or a text) as a Decimal, negative zero as zero; NotAWholeNumber
    saying why not otherwise (a JSON number's range and precision are the field's to judge)."""
    if isinstance(given, bool) or not isinstance(given, int | float | str):
        raise NotAWholeNumber(f"{json_kind(given)} "
                              "is not a number")
    if isinstance(given, float) and not math.isfinite(given):
        raise NotAWholeNumber(f"{given!r} is not a number")
    if isinstance(given, str) and not _FRACTIONAL.match(given):
        shown = repr(given[:40] + ("…" if len(given) > 40 else ""))
        raise NotAWholeNumber(f"{shown} is not a number: use the digits 0-9, one '.' and a leading '-' at most "
                              "(no spaces, _ or other scripts' digits), as 2.5")
    try:
        value = Decimal(repr(given) if isinstance(given, float) else given)
    except ArithmeticError:  # an exponent past what Decimal holds (1e99999999999999999999)
        raise NotAWholeNumber(f"{str(given)[:40]!r} is beyond any number this API stores") from None
    return abs(value) if value.is_zero() else value


def is_whole_number(given: Any, *, signed: bool = True) -> bool:
    """Whether whole_number reads `given`; with `signed=False`, a text of digits alone (a
    count or an id in a text, where a `-` is no number: `%-1`, `afterok:-3`)."""
    if not signed and isinstance(given, str) and given.startswith("-"):
        return False
    try:
        whole_number(given)
    except NotAWholeNumber:
        return False
    return True


def _why_not(text: str) -> str:
    shown = repr(text[:40] + ("…" if len(text) > 40 else ""))
    if not text:
        return "an empty string is not a whole number"
    stripped = text.strip()
    fraction = re.fullmatch(r"(-?[0-9]+)\.0*", stripped)
    if fraction:
        return f"{shown} is not a whole number: give {int(fraction[1])}, without the fraction"
    try:
        read = int(stripped)  # what Python (and this API, until 7 Dec) read it as
    except ValueError:
        return f"{shown} is not a whole number: use the digits 0-9"
    return f"{shown} is not a whole number: use the digits 0-9 alone (no spaces, +, _ or other scripts' digits), as {read}"


def json_kind(data: Any) -> str:
    """What a JSON value is, in JSON's words: "a number", "true", "a list", "an object"."""
    if isinstance(data, bool):
        return "true" if data else "false"
    if data is None:
        return "null"
    if isinstance(data, int | float):
        return "a number"
    if isinstance(data, list | tuple):
        return "a list"
    if isinstance(data, dict):
        return "an object"
    return type(data).__name__
