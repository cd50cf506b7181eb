"""The one reading of a yes-or-no value, in a body or a query parameter: a JSON true or false,
or the words true and false, 1 and 0, in any case. DRF's BooleanField also read "yes", "on",
"y", "t" (and "no", "off", "n", "f") and the number 1.0, while the list filters refused them
(`?preemptible=yes` a 400, `{"preemptible": "yes"}` taken): one value meant yes in one place
and nothing in the other."""

from __future__ import annotations

from typing import Any

_WORDS = {"true": True, "1": True, "false": False, "0": False}


class NotYesOrNo(ValueError):
    """What was given, said as not true or false."""


def yes_or_no(given: Any) -> bool:
    if isinstance(given, bool):
        return given
    if type(given) is int and given in (0, 1):
        return bool(given)
    if isinstance(given, str) and given.strip().lower() in _WORDS:
        return _WORDS[given.strip().lower()]
    shown = repr(given[:40]) if isinstance(given, str) else repr(given)[:40]
    raise NotYesOrNo(f"{shown} is not true or false")
