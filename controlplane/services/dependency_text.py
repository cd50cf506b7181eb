"""Slurm's dependency text (``afterok:12:13,afterany:14``), read and written in one place.

Three callers share it:

- `qm submit -d` and `qm update -d` (controlplane/cli/main.py) parse it before sending the API's
  list, so a typo never reaches the server; `qm` imports no Django, and neither does this
  module (the rules on what a dependency means live in services/dependencies.py, which does);
- the API's `dependencies` field takes this text as well as the list (api/serializers.py,
  `DependencyListSerializer`): the jobs page's "Runs after" field sends what was typed, and the
  live check (ui/jobs/check.json) and the submit say what is wrong with it on that field;
- the JOB_UPDATED event of a change of dependencies says old → new in it (`text_of`).

Grammar: ``TYPE:JOB[:JOB...][,TYPE:JOB...]``, TYPE one of after, afterok, afternotok, afterany,
JOB a job id or a job array's id (a UUID: every task of the array). ``none`` (or nothing) is no
dependency at all. Slurm's ``?`` (any one of them) is refused: every dependency must be met.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

#: Slurm's dependency types, in the order the text lists them.
CONDITIONS = ("after", "afterok", "afternotok", "afterany")
#: The text for no dependency at all (`qm update -d none` removes them all).
NONE = "none"


class BadDependencyText(ValueError):
    """The text is not Slurm's dependency syntax; the message names the part at fault."""


def parse(text: str) -> list[dict[str, Any]]:
    """The text as the API's `dependencies` list: ``afterok:12:13,afterany:14`` →
    [{job 12, afterok}, {job 13, afterok}, {job 14, afterany}]; a job array's id as
    ``{"array": id}``. ``none`` or blank: []. Raises BadDependencyText naming the part at
    fault (without the text itself: the caller says where it came from)."""
    if "?" in text:
        raise BadDependencyText("'?' (any one of them) is not supported; every dependency must be met "
                                "(separate them with commas)")
    compact = "".join(text.split())
    if compact.lower() in ("", NONE):
        return []
    items: list[dict[str, Any]] = []
    for part in compact.split(","):
        kind, sep, ids = part.partition(":")
        if part.lower() == NONE:
            raise BadDependencyText(f"'{NONE}' stands alone (no dependency at all), not among others")
        if kind not in CONDITIONS:
            raise BadDependencyText(f"'{part}' is not TYPE:JOB[:JOB...]; TYPE is one of {', '.join(CONDITIONS)}")
        if not sep or not ids:
            raise BadDependencyText(f"'{part}' names no job; write {kind}:JOB (e.g. {kind}:12)")
        for ref in ids.split(":"):
            if ref.isascii() and ref.isdigit() and int(ref) > 0:
                items.append({"job": int(ref), "condition": kind})
                continue
            try:
                items.append({"array": str(uuid.UUID(ref)), "condition": kind})
            except ValueError:
                raise BadDependencyText(f"'{ref}' is not a job id (a number) or a job array's id") from None
    return items


def text_of(pairs: Iterable[tuple[int, str]]) -> str:
    """(upstream job id, condition) pairs as the text, one TYPE per condition in Slurm's order,
    ids ascending: ``afterok:12:13,afterany:14``; ``none`` for no pair."""
    by_condition: dict[str, list[int]] = {}
    for job_id, condition in pairs:
        by_condition.setdefault(str(condition), []).append(int(job_id))
    parts = [f"{c}:" + ":".join(str(pk) for pk in sorted(by_condition[c]))
             for c in (*CONDITIONS, *sorted(set(by_condition) - set(CONDITIONS))) if c in by_condition]
    return ",".join(parts) or NONE
