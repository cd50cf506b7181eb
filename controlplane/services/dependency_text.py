"""Slurm's dependency text (``afterok:12:13,afterany:14``), read and written in one place.

Three callers share it:

- `qm submit -d` and `qm update -d` (controlplane/cli/jobs/dependencies.py) parse it before sending the API's
  list, so a typo never reaches the server; `qm` imports no Django, and neither does this
  module (the rules on what a dependency means live in services/dependencies/, which does);
- the API's `dependencies` field takes this text as well as the list
  (api/serializers/job_requests.py, `DependencyListSerializer`): the jobs page's "Runs after" field sends what was typed, and the
  live check (ui/jobs/check.json) and the submit say what is wrong with it on that field;
- the JOB_UPDATED event of a change of dependencies says old → new in it (`text_of`).

Grammar: ``TYPE:JOB[:JOB...][,TYPE:JOB...]``, TYPE one of after, afterok, afternotok, afterany,
aftercorr (a job array's tasks, each after the task of the same index of the array named),
JOB a job id or a job array's id (a UUID: every task of the array); ``singleton`` (no job: at
most one job of this name and submitter runs at a time, in submission order; the item
``{"condition": "singleton"}``) among them or alone. ``none`` (or nothing) is no dependency at
all. Items joined by ``?`` instead of ``,`` are any-of (Slurm's ``afterok:12?afterok:13``:
the job may start once any one of them is met; `parse` returns them as an `AnyOf` list, the
API's ``"dependency_mode": "any"``); as in Slurm, one list never mixes ``,`` and ``?``, and
``singleton`` is no alternative among any-of items (it is refused there).

A change of a waiting job may add to or remove from its list instead of replacing it (Slurm's
``scontrol update dependency+=`` and ``dependency-=``): the text led by ``+`` (or ``+=``) or
``-`` (or ``-=``), e.g. ``+afterok:5``, ``-=afterany:7,singleton`` (`parse_edit`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from controlplane.services.whole_numbers import is_whole_number, whole_number

#: Slurm's dependency types, in the order the text lists them.
CONDITIONS = ("after", "afterok", "afternotok", "afterany")
#: Slurm's `singleton`: one job of a name and submitter at a time (it names no job).
SINGLETON = "singleton"
#: Slurm's `aftercorr`: each task of a job array after the task of the same index of another
#: array succeeded (recorded per task as afterok on that task: the text of a task says afterok).
AFTERCORR = "aftercorr"
#: What leads a change's text that adds to the list, and one that removes from it.
ADD, REMOVE = "+", "-"
#: The text for no dependency at all (`qm update -d none` removes them all).
NONE = "none"
#: What joins any-of items (Slurm's `?`: any one of them met is enough), and all-of ones.
ANY, ALL = "?", ","


class AnyOf(list):  # type: ignore[type-arg]
    """A dependency list whose items are alternatives (``afterok:12?afterok:13``; the API's
    ``"dependency_mode": "any"``): the job may start once any one of them is met. A plain list
    is all-of."""


class BadDependencyText(ValueError):
    """The text is not Slurm's dependency syntax; the message names the part at fault."""


@dataclass(frozen=True)
class Edit:
    """A change's text that adds to (``+``) or removes from (``-``) a waiting job's list rather
    than replacing it: `op` and the items it names (the API's items, as `parse` reads them)."""

    op: str
    items: list[dict[str, Any]] = field(default_factory=list)
    #: The items were joined by ``?`` (any-of), not ``,``.
    any_of: bool = False


def parse_edit(text: str) -> Edit | None:
    """``+afterok:5`` / ``+=afterok:5`` → Edit("+", [{job 5, afterok}]); ``-afterany:7`` /
    ``-=afterany:7`` → Edit("-", …); None for a text that replaces the list (`parse` reads it).
    Raises BadDependencyText for a bad list or one naming nothing (``+`` alone, ``-none``)."""
    compact = "".join(text.split())
    op = compact[:1]
    if op not in (ADD, REMOVE):
        return None
    rest = compact[2:] if compact[1:2] == "=" else compact[1:]
    verb = "add" if op == ADD else "remove"
    if rest.lower() in ("", NONE):
        raise BadDependencyText(f"'{op}' names nothing to {verb}; write {op}TYPE:JOB (e.g. {op}afterok:12) "
                                f"or {op}{SINGLETON}")
    items = parse(rest)
    return Edit(op, list(items), isinstance(items, AnyOf))

def parse(text: str) -> list[dict[str, Any]]:
    """The text as the API's `dependencies` list: ``afterok:12:13,afterany:14`` →
    [{job 12, afterok}, {job 13, afterok}, {job 14, afterany}]; a job array's id as
    ``{"array": id}``. ``none`` or blank: []. Raises BadDependencyText naming the part at
    fault (without the text itself: the caller says where it came from)."""
    compact = "".join(text.split())
    if compact.lower() in ("", NONE):
        return []
    if compact[:1] in (ADD, REMOVE):
        raise BadDependencyText(f"'{compact[:1]}' adds to or removes from a waiting job's dependencies (a change, "
                                "PATCH or qm update); give the whole list here")
    any_of = ANY in compact
    if any_of and ALL in compact:
        raise BadDependencyText("',' (every one met) and '?' (any one of them met) cannot be mixed in one list, as "
                                "in Slurm; write afterok:12?afterok:13 for any one, afterok:12,afterok:13 for all")
    items: list[dict[str, Any]] = []
    for part in compact.split(ANY if any_of else ALL):
        kind, sep, ids = part.partition(":")
        if not part:
            joiner = ANY if any_of else ALL
            raise BadDependencyText(f"an empty dependency: a '{joiner}' at an end or two together; write "
                                    f"afterok:12{joiner}afterany:13")
        if part.lower() == NONE:
            raise BadDependencyText(f"'{NONE}' stands alone (no dependency at all), not among others")
        if kind == SINGLETON:
            if any_of:
                raise BadDependencyText(f"{SINGLETON} cannot be one of any-of ('?') dependencies: it holds the job "
                                        "up on its own; give it with ',' among all-of ones")
            if sep:
                raise BadDependencyText(f"'{part}': {SINGLETON} names no job (it waits on the earlier jobs of "
                                        "this name and submitter); write it alone: singleton")
            items.append({"condition": SINGLETON})
            continue
        if kind == AFTERCORR and any_of:
            raise BadDependencyText(f"{AFTERCORR} cannot be one of any-of ('?') dependencies: give it with ',' "
                                    "among all-of ones")
        if kind not in (*CONDITIONS, AFTERCORR):
            raise BadDependencyText(f"'{part}' is not TYPE:JOB[:JOB...] or {SINGLETON}; TYPE is one of "
                                    f"{', '.join((*CONDITIONS, AFTERCORR))}")
        if not sep or not ids:
            raise BadDependencyText(f"'{part}' names no job; write {kind}:JOB (e.g. {kind}:12)")
        for ref in ids.split(":"):
            if is_whole_number(ref, signed=False) and whole_number(ref) > 0:
                items.append({"job": whole_number(ref), "condition": kind})
                continue
            if not ref:
                raise BadDependencyText(f"'{part}' has an empty job id: a ':' at the end or two together; write "
                                        f"{kind}:12:13")
            if is_whole_number(ref):  # 0, -3: numbers, not ids
                raise BadDependencyText(f"'{ref}' is not a job id: job ids start at 1")
            try:
                items.append({"array": str(uuid.UUID(ref)), "condition": kind})
            except ValueError:
                raise BadDependencyText(f"'{ref}' is not a job id (a number) or a job array's id") from None
    return AnyOf(items) if any_of else items


def text_of(pairs: Iterable[tuple[int, str]], *, singleton: bool = False, any_of: bool = False) -> str:
    """(upstream job id, condition) pairs as the text, one TYPE per condition in Slurm's order,
    ids ascending, then ``singleton`` if the job is one: ``afterok:12:13,afterany:14,singleton``;
    ``none`` for no pair and no singleton. `any_of`: each pair its own item, joined by ``?``
    (``afterok:12?afterok:13?afterany:14``), in the same order."""
    by_condition: dict[str, list[int]] = {}
    for job_id, condition in pairs:
        by_condition.setdefault(str(condition), []).append(int(job_id))
    if any_of:
        return ANY.join(f"{c}:{pk}" for c in (*CONDITIONS, *sorted(set(by_condition) - set(CONDITIONS)))
                        for pk in sorted(by_condition.get(c, ()))) or NONE
    parts = [f"{c}:" + ":".join(str(pk) for pk in sorted(by_condition[c]))
             for c in (*CONDITIONS, *sorted(set(by_condition) - set(CONDITIONS))) if c in by_condition]
    if singleton:
        parts.append(SINGLETON)
    return ",".join(parts) or NONE
