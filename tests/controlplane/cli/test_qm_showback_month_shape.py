"""`qm showback --month banana` answered "month: This value does not match the required
pattern." (the API's regular expression's words): it now names the flag and what a month looks
like, before any request. A well-formed month the API refuses still gets the API's words."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("month", ["banana", "2026-1", "11-2026", ""])
def test_a_month_not_shaped_yyyy_mm_names_the_flag(qm, fleet, month) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--month", month)

    assert r.code == 1 and r.out == ""
    assert r.err == f"error: --month: '{month}' is not a month: use YYYY-MM, such as 2026-11\n"


def test_a_well_formed_month_goes_to_the_api(qm, fleet) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    assert qm("showback", "--month", "2026-11").code == 0
    r = qm("showback", "--month", "2026-13")
    assert r.code == 1 and "'2026-13' is not a month: use YYYY-MM" in r.err
