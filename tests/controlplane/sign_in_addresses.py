"""Client addresses and sign-in rates for the tests of sign-in throttling (API, pages, admin)."""

from __future__ import annotations

import itertools
from typing import Any

_addresses = itertools.count(1)


def fresh_address() -> str:
    """An address no other test of this process counted against (the counters live in Redis for
    a minute): one counter for every file, so two files never hand out the same address."""
    n = next(_addresses)
    return f"198.51.{n // 250}.{n % 250 + 1}"


def sign_in_rates(settings: Any, **rates: str) -> None:
    """The API's throttle rates with `rates` in place (`login`, `login_user`), every user's own
    rate out of reach."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"user": "10000000/hour", **rates}}
