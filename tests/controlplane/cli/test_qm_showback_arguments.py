"""`qm showback`'s arguments checked before the request. `--month banana` answered "month: This
value does not match the required pattern." (the API's regular expression's words): it now names the
flag and what a month looks like; a well-formed month the API refuses still gets the API's words."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("month", ["banana", "2026-1", "11-2026", ""])
def test_a_month_not_shaped_yyyy_mm_names_the_flag(qm, fleet, month) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--month", month)

    assert r.code == 2 and r.out == ""
    assert r.err == f"error: --month: '{month}' is not a month: use YYYY-MM, such as 2026-11\n"


def test_a_well_formed_month_goes_to_the_api(qm, fleet) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    assert qm("showback", "--month", "2026-11").code == 0
    r = qm("showback", "--month", "2026-13")
    assert r.code == 1 and "'2026-13' is not a month: use YYYY-MM" in r.err


def test_csv_and_json_together_are_refused_not_csv_under_json(qm, fleet) -> None:
    """`qm showback --csv --json` printed the CSV, which a script asking for JSON could not read."""
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    for args in (("showback", "--csv", "--json"), ("--json", "showback", "--csv")):
        r = qm(*args)
        assert r.code == 2 and r.out == "", r.out
        assert r.err == "error: give --json (the API's JSON) or --csv (finance's CSV), not both\n"
    assert qm("showback", "--json").json()["data"] is not None


def test_by_class_is_by_priority_class_as_the_help_says_it(qm, fleet) -> None:
    """`qm --help` says showback is "by team, project, job or class"; `--by class` was refused
    ("invalid choice: 'class'"), only `priority_class` taken."""
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    by_class = qm("showback", "--by", "class", "--month", "2026-11")  # one window for both
    by_priority_class = qm("showback", "--by", "priority_class", "--month", "2026-11")

    assert by_class.code == 0, by_class.err
    assert by_class.out == by_priority_class.out and by_class.out.startswith("Showback by priority_class, ")
