"""What a submit (or a change) asks to wait on (`Wanted`), judged against the jobs as they are and
locked until the caller commits (`resolve`): each upstream job and whether its condition is met
already (`Upstream`), or `Refused`, naming each item's field at fault."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Q

from controlplane.choices import DependencyCondition
from controlplane.services import access
from controlplane.services.dependencies.conditions import (
    MAX_DEPENDENCIES,
    MAX_UPSTREAM_JOBS,
    is_met,
    never_met,
)
from controlplane.services.dependencies.words import AWAITED, outcome
from controlplane.services.dependency_text import AFTERCORR, SINGLETON


@dataclass(frozen=True)
class Wanted:
    """One dependency as asked: a job id or a job array's id, and the condition."""

    job: int | None
    array: uuid.UUID | None
    condition: str


@dataclass(frozen=True)
class Upstream:
    """One upstream job of a submit, read and locked: whether its condition is met already."""

    job_id: int
    condition: str
    met: bool
    state: str = ""
    #: The index of the item that named it (`dependencies.{item}.job`).
    item: int = 0
    #: Slurm's aftercorr: only the new array's task of this index waits on it (None: every task).
    index: int | None = None


class Refused(Exception):
    """The dependencies cannot be recorded: `errors` maps each item's field to why."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def singleton_of(wanted: Iterable[Wanted]) -> bool:
    """Whether the items ask for Slurm's ``singleton``."""
    return any(w.condition == SINGLETON for w in wanted)


def wanted_from(items: Iterable[dict[str, Any]]) -> tuple[Wanted, ...]:
    """The API's items (`{"job": 12, "condition": "afterok"}` or `{"array": uuid, ...}`),
    already typed by the serializer, as `Wanted`."""
    return tuple(
        Wanted(job=item.get("job"), array=item.get("array"),
               condition=str(item.get("condition") or DependencyCondition.AFTER_OK))
        for item in items
    )


#: `resolve`'s `indices` when the new job's array indices are not known (the form's live check):
#: an aftercorr item is checked (an array you can see) and waits on nothing.
UNKNOWN_INDICES: Sequence[int] = ()


def resolve(user: AbstractBaseUser, wanted: Sequence[Wanted], *, tasks: int = 1, lock: bool = True,
            kept: int = 0, any_of: bool = False,
            indices: Sequence[int | None] | None = UNKNOWN_INDICES) -> list[Upstream]:
    """Check a submit's dependencies and lock their upstream jobs; the caller holds the
    transaction that then inserts the job(s) and calls `record`. `lock=False`: a check that
    writes nothing after it (the submit form's live check) reads them without a lock.

    Steps:
    1. at most MAX_DEPENDENCIES items, none naming one job (or array) twice;
    2. read the named jobs and the tasks of the named arrays among those `user` may see
       (services/access.py: another team's job is "no job 12 you can see", as if it did not
       exist), locking their rows FOR SHARE so that none starts or ends before we commit;
    3. refuse a condition that can already never be met, saying what became of the job.
    A ``singleton`` item names no job: it is checked for being there once, and left to the
    caller (`singleton_of`). `kept`: the first `kept` items are a changed job's dependencies
    kept as they are (an edit's, `judge`), not counted against MAX_DEPENDENCIES.
    `any_of` (Slurm's ``?``): any one of them met is enough, so step 3 refuses only a list none
    of whose jobs can ever meet its condition (on ``dependencies``, saying each), and one that
    can never be met is kept among the alternatives; ``singleton`` is no alternative (refused).
    `indices` (Slurm's ``aftercorr:ARRAY``): the array indices of the new job's tasks (None: it
    is no array, and aftercorr is refused on the item's condition); an aftercorr item names a job
    array (its id, or one of its tasks' job ids: else refused on the item's job), and each of its
    tasks whose index is among `indices` becomes an ``afterok`` Upstream of the new task of that
    index alone (`Upstream.index`): a new task without a counterpart waits on nothing, as Slurm.
    Raises Refused naming every item at fault, each on its field (``dependencies.1.condition``): an
    item refused by step 1 is not read, the others are."""
    if len(wanted) - kept > MAX_DEPENDENCIES:
        raise Refused({"dependencies": f"at most {MAX_DEPENDENCIES} dependencies, got {len(wanted) - kept}; "
                                       "depend on a job array to wait on many jobs at once"})
    errors = _said_twice(wanted, any_of=any_of)
    # An item refused so far is said as it is; the others are still judged (that job 999999 does
    # not exist was said only once a job named twice was named once).
    faulted = _items_of(errors)
    visible = access.visible_jobs(user)
    corr_arrays = _corresponding_arrays(visible, wanted, indices, errors, skip=faulted)
    faulted |= _items_of(errors)
    by_id, by_array = _named_rows(visible, wanted, faulted, corr_arrays, lock=lock)
    upstream: dict[int, Upstream] = {}
    never: list[str] = []  # any-of: the alternatives that can never be met, said if none can
    for i, item in enumerate(wanted):
        if item.condition == SINGLETON or i in faulted:
            continue
        if item.condition == AFTERCORR:
            _correspond(i, item, by_array.get(corr_arrays[i], []), indices, upstream, errors)
        else:
            _judge_item(i, item, by_id, by_array, upstream, errors, never if any_of else None)
    if not errors:
        errors.update(_too_much(upstream, never, tasks=tasks, any_of=any_of))
    if errors:
        raise Refused(errors)
    return list(upstream.values())


def _said_twice(wanted: Sequence[Wanted], *, any_of: bool) -> dict[str, str]:
    """`resolve`'s step 1, each refusal on its item's field: a job or array named twice (or
    ``singleton`` said twice), and, among any-of dependencies, aftercorr, singleton or a job array."""
    errors: dict[str, str] = {}
    seen: dict[Any, int] = {}
    for i, item in enumerate(wanted):
        if item.condition == AFTERCORR and any_of:
            errors[f"dependencies.{i}.condition"] = ("aftercorr cannot be one of any-of dependencies: give it among "
                                                     "all-of ones")
        if item.condition == SINGLETON:
            if any_of:
                errors[f"dependencies.{i}.condition"] = ("singleton cannot be one of any-of dependencies: it holds "
                                                         "the job up on its own; give it among all-of ones")
            if ("singleton",) in seen:
                errors[f"dependencies.{i}.condition"] = (f"singleton is already dependency {seen[('singleton',)]}; "
                                                         "say it once")
            seen.setdefault(("singleton",), i)
            continue
        key = ("job", item.job) if item.job is not None else ("array", item.array)
        field = f"dependencies.{i}.{key[0]}"
        if item.array is not None and any_of and item.condition != AFTERCORR:
            # Its tasks would each be an alternative: the first to end as asked would start the
            # job, where Slurm's afterok:ARRAY waits for the whole array.
            errors[field] = (f"job array {item.array} cannot be one of any-of dependencies: it waits on every one "
                             "of its tasks, and '?' on any one job; give it among all-of ones "
                             "(afterok:ARRAY,afterany:12), or its tasks' job ids")
        if key in seen:
            errors[field] = (f"{key[0]} {key[1]} is already dependency {seen[key]}; a job depends on another "
                             "job once, with one condition")
        else:
            seen[key] = i
    return errors


def _items_of(errors: dict[str, str]) -> set[int]:
    """The indices of the items `errors` refuse (``dependencies.{i}.{field}``)."""
    return {int(name.split(".")[1]) for name in errors}


def _named_rows(visible: Any, wanted: Sequence[Wanted], faulted: set[int], corr_arrays: dict[int, uuid.UUID], *,
                lock: bool) -> tuple[dict[int, tuple[Any, ...]], dict[uuid.UUID, list[tuple[Any, ...]]]]:
    """The rows of the jobs and arrays' tasks the items not `faulted` name (`_locked_rows`), by
    job id and by array id."""
    ids = [w.job for i, w in enumerate(wanted) if w.job is not None and w.condition != AFTERCORR and i not in faulted]
    arrays = [w.array for i, w in enumerate(wanted) if w.array is not None and i not in faulted] + list(
        corr_arrays.values())
    rows = _locked_rows(visible, ids, arrays, lock=lock)
    by_array: dict[uuid.UUID, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        if row[4] is not None:
            by_array[row[4]].append(row)
    return {row[0]: row for row in rows}, by_array


def _judge_item(i: int, item: Wanted, by_id: dict[int, tuple[Any, ...]],
                by_array: dict[uuid.UUID, list[tuple[Any, ...]]], upstream: dict[int, Upstream],
                errors: dict[str, str], never: list[str] | None) -> None:
    """`resolve`'s step 3 for an item naming a job or a job array: each of its jobs an
    `Upstream`, or the item refused on its field (a job you cannot see, a condition that can
    already never be met, a job named twice). `never`: the item is one of any-of dependencies
    (None: all-of); a condition that can never be met is kept among the alternatives and said
    there."""
    if item.job is not None:
        field, found = f"dependencies.{i}.job", [by_id[item.job]] if item.job in by_id else []
        if not found:
            errors[field] = f"no job {item.job} you can see"
            return
    else:
        field, found = f"dependencies.{i}.array", by_array.get(item.array, [])  # type: ignore[arg-type]
        if not found:
            errors[field] = f"no job array {item.array} you can see"
            return
    for job_id, state, exit_code, requeue_count, _array, _index in sorted(found):
        if never_met(item.condition, state) and never is not None:
            never.append(f"job {job_id} {outcome(state, exit_code)} ({item.condition})")
        elif never_met(item.condition, state):
            errors[f"dependencies.{i}.condition"] = (
                f"job {job_id} {outcome(state, exit_code)}: {item.condition} can never be met "
                f"(this job would run only after it {AWAITED[DependencyCondition(item.condition)]})"
            )
            return
        if job_id in upstream:
            errors[field] = f"job {job_id} is named twice among the dependencies (once directly, once in an array)"
            return
        upstream[job_id] = Upstream(job_id, item.condition,
                                    is_met(item.condition, state, has_started=requeue_count > 0), state, i)


def _too_much(upstream: dict[int, Upstream], never: list[str], *, tasks: int, any_of: bool) -> dict[str, str]:
    """The refusal of a list judged item by item that cannot stand as a whole (on
    ``dependencies``): any-of dependencies none of which can ever be met, or more upstream jobs
    than MAX_UPSTREAM_JOBS once counted task by task; {} for none."""
    if any_of and upstream and len(never) == len(upstream):
        return {"dependencies": f"none of these any-of dependencies can ever be met: {'; '.join(never)}; this "
                                "job could never start"}
    every = sum(1 for u in upstream.values() if u.index is None)
    if every * tasks + len(upstream) - every > MAX_UPSTREAM_JOBS:
        return {"dependencies": f"{len(upstream)} upstream jobs for {tasks} tasks make "
                                f"{every * tasks + len(upstream) - every} dependencies; at most {MAX_UPSTREAM_JOBS}"}
    return {}


def _corresponding_arrays(visible: Any, wanted: Sequence[Wanted], indices: Sequence[int | None] | None,
                          errors: dict[str, str], *, skip: Collection[int] = ()) -> dict[int, uuid.UUID]:
    """Per aftercorr item, the job array it names (its id, or the array of the task named; one
    query, only for a task named by job id); each refusal on its field: aftercorr for a job that
    is no array (`indices` None), a job that is no task of an array, one you cannot see. The
    items at `skip` (refused already) are left out."""
    corr = {i: w for i, w in enumerate(wanted) if w.condition == AFTERCORR and i not in skip}
    if not corr:
        return {}
    if indices is None:
        for i in corr:
            errors[f"dependencies.{i}.condition"] = (
                "aftercorr is for a job array: each of its tasks waits for the task of the same index of the "
                "array named; this is one job (submit it as an array: POST job-arrays/, qm submit --array)")
        return {}
    named = {w.job for w in corr.values() if w.job is not None}
    arrays_of = dict(visible.filter(pk__in=named).values_list("pk", "array_id")) if named else {}
    out: dict[int, uuid.UUID] = {}
    for i, w in corr.items():
        if w.array is not None:
            out[i] = w.array
        elif w.job not in arrays_of:
            errors[f"dependencies.{i}.job"] = f"no job {w.job} you can see"
        elif arrays_of[w.job] is None:
            errors[f"dependencies.{i}.job"] = (
                f"job {w.job} is no task of a job array: aftercorr waits on the task of the same index of an "
                "array (give the array's id, or one of its tasks)")
        else:
            out[i] = arrays_of[w.job]
    return out


def _correspond(i: int, item: Wanted, tasks: list[tuple[Any, ...]], indices: Sequence[int | None],
                upstream: dict[int, Upstream], errors: dict[str, str]) -> None:
    """An aftercorr item's upstream: each task of the array named whose index is among the new
    tasks' `indices`, as ``afterok`` for the new task of that index; refused on its field when
    the array is not one you can see, or when a counterpart can already never succeed."""
    field = f"dependencies.{i}.{'array' if item.array is not None else 'job'}"
    if not tasks:
        errors[field] = f"no job array {item.array} you can see"
        return
    wanted_indices = set(indices)
    for job_id, state, exit_code, _requeues, _array, index in sorted(tasks, key=lambda row: row[5]):
        if index not in wanted_indices:
            continue  # no task of that index here: nothing waits on it
        if never_met(DependencyCondition.AFTER_OK, state):
            errors[f"dependencies.{i}.condition"] = (
                f"job {job_id} (task {index} of its array) {outcome(state, exit_code)}: aftercorr can never be met "
                f"for task {index} (it would run only after that task succeeded)")
            return
        if job_id in upstream:
            errors[field] = f"job {job_id} is named twice among the dependencies (once directly, once in an array)"
            return
        upstream[job_id] = Upstream(job_id, DependencyCondition.AFTER_OK.value,
                                    is_met(DependencyCondition.AFTER_OK, state), state, i, index)


def _locked_rows(visible: Any, ids: list[int], arrays: list[uuid.UUID], *, lock: bool = True) -> list[tuple[Any, ...]]:
    """(id, state, exit_code, requeue_count, array_id, array_index) of the named jobs and arrays' tasks the
    user may see. On PostgreSQL the rows are locked FOR SHARE: a transition's UPDATE of one
    waits for our commit (and then finds our dependency rows), and we wait for one already
    under way (and then read its new state). SQLite (the demo) writes one transaction at a
    time anyway."""
    if not ids and not arrays:
        return []
    named = Q(pk__in=ids) | Q(array_id__in=arrays)
    query = visible.filter(named).order_by("pk").values_list("pk", "state", "exit_code", "requeue_count", "array_id",
                                                             "array_index")
    if connection.vendor != "postgresql" or not lock:
        return list(query)
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} FOR SHARE", params)
        rows = cursor.fetchall()
    return [tuple(r) for r in rows]
