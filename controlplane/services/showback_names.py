"""The names the showback gives its own rows, which no team, priority class or project may take.

`__idle__` (the capacity no job held) and `TOTAL` name rows of every report: by team and by
priority class beside the groups, whose rows are named after them; `team/__unallocated__` is a
team's jobs without a project in the project report. A group of one of these names collided with
them: two `TOTAL` rows in the CSV, on the page and in `qm showback`, and in the JSON (its `data`
keyed by name) the team `__idle__` overwritten by the idle capacity, so the rows no longer added
up to `totals`. Kept apart from services/showback.py so the models can say it without importing
the accounting (which imports them).

A name stored before the rule (7 Dec) is not renamed: the report tells its own rows by their
kind (`ShowbackEntry.kind`: the JSON's `kind`, the CSV's `row_kind`), never by these names, and
keys such a group in the JSON's `data` by its name and id (`showback.data_key`)."""

from __future__ import annotations

IDLE = "__idle__"
TOTAL = "TOTAL"
UNALLOCATED = "__unallocated__"

#: Per kind of record, the names it may not take, in lower case: TOTAL in any case, since a
#: spreadsheet matches "total" to it (Excel's SUMIF and VLOOKUP ignore case).
_RESERVED = {
    "team": (IDLE, TOTAL.lower()),
    "priority class": (IDLE, TOTAL.lower()),
    "project": (UNALLOCATED,),
}


def reserved_name_problem(name: str, kind: str) -> str | None:
    """Why a `kind` ("team", "priority class", "project") may not be called `name`, or None."""
    if not name or name.lower() not in _RESERVED[kind]:
        return None
    row = {IDLE: "the capacity no job held", UNALLOCATED: "a team's jobs without a project"}.get(
        name.lower(), "the report's total")
    return (f"'{name}' is a name the showback gives its own rows ({row}): a {kind} of that name would read as "
            "that row in the CSV, the API's JSON and the page, and its figures would not add up there. "
            "Choose another name")



def project_key(team: str, project: str | None) -> str:
    """A row's key and name in the project report: `team/project` (`language/eval`), and
    `team/__unallocated__` for a team's jobs that named no project (`project` None).

    Each name is written as a URL path segment writes it, `%` as `%25` and `/` as `%2F`, so the
    one "/" between them is the only one and a key names one (team, project) pair: team `a/b`'s
    project `c` is `a%2Fb/c`, team `a`'s project `b/c` is `a/b%2Fc`. Names the product accepts
    (slugs) have neither character, so their keys read as they always did; only a name written
    around the validation (a shell, a data import, SQL) can. Until 7 Dec the two were both
    `a/b/c`: the JSON's `data`, keyed by it, dropped one row's cost, and the page's cost chart
    added the two rows into one series."""
    return f"{_key_part(team)}/{UNALLOCATED if project is None else _key_part(project)}"


def _key_part(name: str) -> str:
    return name.replace("%", "%25").replace("/", "%2F")
