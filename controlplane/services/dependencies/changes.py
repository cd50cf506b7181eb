"""A change of a waiting job's dependencies (PATCH jobs/{id}/): a whole new list or an edit of the
one it has (``+afterok:5``, ``-afterany:7``), judged as a submit's (`judge` → `Replacement`), then
written (`replace`); one change at a time (`lock_changes`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection

from controlplane.choices import DependencyCondition, DependencyMode
from controlplane.models import Job, JobDependency, PendingPlace
from controlplane.services import dependency_text
from controlplane.services.dependencies.recording import record
from controlplane.services.dependencies.singletons import Blocker, singleton_blockers
from controlplane.services.dependencies.upstream import (
    Refused,
    Upstream,
    Wanted,
    resolve,
    singleton_of,
    wanted_from,
)
from controlplane.services.dependency_text import AFTERCORR, SINGLETON, AnyOf, Edit

#: The advisory lock key that serialises changes of dependencies (PostgreSQL; "qmdeps").
_EDIT_LOCK = 0x716D64657073


@dataclass(frozen=True)
class Replacement:
    """A waiting job's new dependencies as judged (`judge`): the upstream jobs, read and locked,
    whether it is a singleton and what holds that up now, and the text of the new list;
    `errors` (field → why) when it may not be made."""

    job_id: int
    upstream: list[Upstream]
    text: str
    errors: dict[str, str]
    singleton: bool = False
    blockers: tuple[Blocker, ...] = ()
    #: The whole new list as judged, how many of its first items an edit kept, and each added
    #: item's index in the edit's own list (`renumbered`): the cycle's errors name them too.
    wanted: tuple[Wanted, ...] = ()
    kept: int = 0
    origin: list[int] | None = None
    #: Any one of them met is enough (Slurm's ``?``; `mode`).
    any_of: bool = False

    @property
    def mode(self) -> str:
        """The job's `dependency_mode` after the change: ``any`` for alternatives (two jobs or
        more: one is all of itself), else ``all``."""
        return DependencyMode.ANY.value if self.any_of and len(self.upstream) > 1 else DependencyMode.ALL.value

    @property
    def waits(self) -> bool:
        """Whether the job waits on a job after the change (a condition not met yet, or none of
        its alternatives met; or a job of its name running or waiting ahead of a singleton)."""
        if self.mode == DependencyMode.ANY:
            return not any(u.met for u in self.upstream)
        return any(not u.met for u in self.upstream) or bool(self.blockers)


def lock_changes() -> None:
    """Run this transaction's change of what waits on what after any other's (a transaction-wide
    advisory lock, PostgreSQL): a change of a waiting job's dependencies (`judge`) and a waiting
    job's rename (which changes which singletons wait on it) take it before any row lock, so each
    cycle check sees every edge the others wrote and two changes never close a cycle between them."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_EDIT_LOCK])


def judge(user: AbstractBaseUser, job_id: int, items: Iterable[dict[str, Any]] | Edit, *,
          name: str | None = None) -> Replacement:
    """Judge `items` (the API's list, typed) as `job_id`'s whole new dependencies, or an `Edit`
    (``+afterok:5``, ``-afterany:7``: added to or removed from the list it has, `_edited`): as a
    submit's (`resolve`: visible jobs, no job twice, no condition that can already never be met).
    `name`: the job's new name when the same change renames it (a singleton waits on the jobs of
    that name). Call it inside the change's transaction before the job's own row is locked (see
    the module's note on locks); it writes nothing, and returns the errors rather than raising, so
    the caller refuses a job that no longer waits first (409). The cycle is checked after, once
    the job's row says its new name (`cycle_errors`)."""
    lock_changes()
    row = Job.objects.filter(pk=job_id).values_list("singleton", "submitter_id", "name", "submitted_at",
                                                    "dependency_mode", "array_id", "array_index").first()
    if row is None:
        return Replacement(job_id, [], "", {})  # the caller's own read answers for a job that is not there
    was_singleton, submitter_id, name_now, submitted_at, mode, array_id, array_index = row
    name = name_now if name is None else name
    kept, origin = 0, None
    if isinstance(items, Edit):
        edited = _edited(job_id, was_singleton, mode == DependencyMode.ANY, items)
        if isinstance(edited, dict):
            return Replacement(job_id, [], "", edited)
        wanted, kept, origin, any_of = edited
    else:
        wanted, any_of = wanted_from(items), isinstance(items, AnyOf)
    try:
        upstream = resolve(user, wanted, kept=kept, any_of=any_of,
                           indices=[array_index] if array_id is not None else None)
        # aftercorr: the counterpart of this task, its afterok like any other (one task: every row is its)
        upstream = [dataclasses.replace(u, index=None) for u in upstream]
    except Refused as exc:
        return Replacement(job_id, [], "", renumbered(exc.errors, wanted, kept, origin))
    singleton = singleton_of(wanted)
    blockers = tuple(singleton_blockers(submitter_id, name, job_id=job_id, submitted_at=submitted_at)
                     if singleton else ())
    any_of = any_of and len(upstream) > 1
    return Replacement(job_id, upstream,
                       dependency_text.text_of(((u.job_id, u.condition) for u in upstream), singleton=singleton,
                                               any_of=any_of),
                       {}, singleton, blockers, tuple(wanted), kept, origin, any_of)


def _edited(job_id: int, was_singleton: bool, was_any: bool, edit: Edit) -> _Edited | dict[str, str]:
    """An edit applied to the job's dependencies now: (the whole new list, how many of its first
    items are the ones kept, for each item after those the index in the edit's own list, which
    its errors name, and whether the list is any-of), or the errors of an edit that cannot
    apply, each on its item's field: ``+`` a job there already with another condition (once,
    with one condition); ``-`` one that is not there. Adding one there already, as it is,
    changes nothing. An edit keeps the list's mode: alternatives are added joined by ``?`` to
    an any-of list (or to none), items by ``,`` to an all-of one; the other is refused on
    ``dependencies`` (send the whole list to change the mode). One query."""
    now = _current(job_id, was_singleton, was_any)
    items = wanted_from(edit.items)
    if edit.op == dependency_text.ADD:
        return _added(now, items, any_of=edit.any_of)
    return _removed(now, items)


#: An edit applied (`_edited`): the whole new list, how many of its first items are kept, each
#: added item's index in the edit's own list, and whether the list is any-of.
_Edited = tuple[list[Wanted], int, list[int], bool]


@dataclass(frozen=True)
class _Current:
    """A job's dependencies as an edit finds them: its rows (upstream id, condition, the
    upstream's array id), each upstream's condition (`has`), the list's text (`text`, as the
    errors say it), and whether it is a singleton and any-of."""

    job_id: int
    rows: list[tuple[Any, ...]]
    has: dict[int, str]
    text: str
    singleton: bool
    any_of: bool


def _current(job_id: int, singleton: bool, any_of: bool) -> _Current:
    """The job's dependencies now (one query)."""
    rows = list(JobDependency.objects.filter(job_id=job_id).order_by("upstream_id")
                .values_list("upstream_id", "condition", "upstream__array_id"))
    text = dependency_text.text_of(((u, c) for u, c, _ in rows), singleton=singleton, any_of=any_of and len(rows) > 1)
    return _Current(job_id, rows, {upstream_id: condition for upstream_id, condition, _ in rows}, text, singleton,
                    any_of)


def _added(now: _Current, items: Sequence[Wanted], *, any_of: bool) -> _Edited | dict[str, str]:
    """``+``: the items not there yet after the job's own (`any_of`: the edit joins them by
    ``?``); refused, a list of another mode than the job's, or a job there already with another
    condition."""
    job_id, has = now.job_id, now.has
    if (now.rows or now.singleton) and len(items) > 1 and any_of != now.any_of:
        said = "any-of (any one met)" if now.any_of else "all-of (every one met)"
        joiner = "'?'" if now.any_of else "','"
        return {"dependencies": (f"job {job_id}'s dependencies are {said}: {now.text}; an edit keeps that, so join "
                                 f"what it adds with {joiner}, or send the whole list to change it")}
    errors: dict[str, str] = {}
    kept_items = [Wanted(u, None, c) for u, c, _ in now.rows] + ([Wanted(None, None, SINGLETON)]
                                                                  if now.singleton else [])
    added: list[Wanted] = []
    origin: list[int] = []
    for i, w in enumerate(items):
        if w.condition == SINGLETON and now.singleton:
            continue  # there already: nothing to add
        if w.job is not None and w.job in has:
            if has[w.job] != w.condition:
                errors[f"dependencies.{i}.job"] = (
                    f"job {w.job} is already a dependency of job {job_id} ({has[w.job]}:{w.job}); a job waits "
                    f"on another once, with one condition: remove it first (-{has[w.job]}:{w.job}) or send the "
                    "whole list")
            continue  # the same, as it is: nothing to add
        added.append(w)
        origin.append(i)
    mode = now.any_of or (any_of and not now.rows and not now.singleton)
    return errors or (kept_items + added, len(kept_items), origin, mode)


def _removed(now: _Current, items: Sequence[Wanted]) -> _Edited | dict[str, str]:
    """``-``: the job's dependencies but the items'; refused, an item that is not there (or is
    there with another condition)."""
    errors: dict[str, str] = {}
    drop: set[int] = set()
    unsingle = False
    for i, w in enumerate(items):
        if w.condition == SINGLETON:
            unsingle = True
            if not now.singleton:
                errors[f"dependencies.{i}.condition"] = (f"singleton is not among job {now.job_id}'s dependencies "
                                                         f"({now.text}); nothing to remove")
            continue
        drop |= _dropped(now, i, w, errors)
    if errors:
        return errors
    kept_items = [Wanted(u, None, c) for u, c, _ in now.rows if u not in drop]
    if now.singleton and not unsingle:
        kept_items.append(Wanted(None, None, SINGLETON))
    return kept_items, len(kept_items), [], now.any_of


def _dropped(now: _Current, i: int, w: Wanted, errors: dict[str, str]) -> set[int]:
    """The upstream jobs item `i` of a ``-`` edit removes (a job, or the tasks of an array); one
    that is not there, or not with that condition, is refused on its field in `errors`."""
    job_id, has = now.job_id, now.has
    said = f"{w.condition}:{w.job if w.job is not None else w.array}"
    if w.condition == AFTERCORR:  # recorded as afterok on the counterpart: removed as such
        w = Wanted(w.job, w.array, DependencyCondition.AFTER_OK.value)
    if w.job is None:
        tasks = {u for u, c, array in now.rows if array == w.array and c == w.condition}
        if not tasks:
            errors[f"dependencies.{i}.array"] = (f"{said}: no task of that job array is among job {job_id}'s "
                                                 f"dependencies with {w.condition} ({now.text}); nothing to remove")
        return tasks
    if w.job not in has:
        errors[f"dependencies.{i}.job"] = f"{said} is not among job {job_id}'s dependencies ({now.text}); nothing to remove"
    elif has[w.job] != w.condition:
        errors[f"dependencies.{i}.condition"] = (f"job {w.job} is a dependency of job {job_id} with "
                                                 f"{has[w.job]}, not {w.condition}: remove {has[w.job]}:{w.job}")
    else:
        return {w.job}
    return set()


def renumbered(errors: dict[str, str], wanted: Sequence[Wanted], kept: int, origin: list[int] | None) -> dict[str, str]:
    """An edit's errors on the fields the request named: an added item's on its index in the
    edit's list (``dependencies.0.job`` for the first job of ``+afterok:5:6``), one of a kept
    dependency on `dependencies`, saying which. A whole list's errors as they are."""
    if origin is None:
        return errors
    out: dict[str, str] = {}
    for field, message in errors.items():
        parts = field.split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            out[field] = message
            continue
        k = int(parts[1])
        message = re.sub(r"is already dependency (\d+)",
                         lambda m: f"is already {'dependency ' + str(origin[int(m[1]) - kept]) if int(m[1]) >= kept else 'a dependency'}",
                         message)
        if k >= kept:
            out[f"dependencies.{origin[k - kept]}.{parts[2]}"] = message
        else:
            w = wanted[k]
            said = SINGLETON if w.condition == SINGLETON else f"{w.condition}:{w.job}"
            out["dependencies"] = f"{said} (kept): {message}"
    return out


def text_now(job_id: int, *, singleton: bool = False, any_of: bool = False) -> str:
    """The job's dependencies as the text says them (``afterok:12,afterany:14,singleton``; any-of
    ``afterok:12?afterok:13``; ``none``)."""
    return dependency_text.text_of(JobDependency.objects.filter(job_id=job_id).values_list("upstream_id", "condition"),
                                   singleton=singleton, any_of=any_of)


def replace(change: Replacement, *, at: datetime) -> None:
    """Write a judged change (`judge`, no errors): the job's dependency rows become the new list.
    A row kept as it was keeps its satisfied_at (or gets it now, met meanwhile); a new one met
    already is satisfied now, as a submit records it. A job now waiting on a job leaves the
    queue at once (its place is dropped, as a hold drops it; the next cycle says the same).
    The job's `singleton` is the caller's to write (services/holds.update holds its row)."""
    new = {u.job_id: u for u in change.upstream}
    kept: list[int] = []
    met_now: list[int] = []
    gone: list[int] = []
    for pk, upstream_id, condition, satisfied_at in JobDependency.objects.filter(job_id=change.job_id).values_list(
            "pk", "upstream_id", "condition", "satisfied_at"):
        u = new.get(upstream_id)
        if u is None or u.condition != condition:
            gone.append(pk)
            continue
        kept.append(upstream_id)
        if satisfied_at is None and u.met:
            met_now.append(pk)
    if gone:
        JobDependency.objects.filter(pk__in=gone).delete()
    if met_now:
        JobDependency.objects.filter(pk__in=met_now).update(satisfied_at=at)
    record([change.job_id], [u for u in change.upstream if u.job_id not in kept], at=at)
    if change.waits:
        PendingPlace.objects.filter(job_id=change.job_id).delete()
