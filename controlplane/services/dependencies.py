"""Job dependencies (Slurm's ``--dependency=afterok:12:13,afterany:14``): the rules, in one home.

A dependency says that job J may start only once job U meets a condition:

- ``after``: U has started (or ended without starting: Slurm's "begun execution or been
  cancelled"). A preempted or requeued U does not take it back.
- ``afterok``: U succeeded. Never met once U failed, was cancelled, timed out or can never run.
- ``afternotok``: U ended without succeeding (failed, cancelled, timed out, can never run).
  Never met once U succeeded.
- ``afterany``: U ended, however.

- ``singleton`` (a flag on the job, `Job.singleton`, not a row: it names no job): no other job
  of its submitter and name runs (running or stopping, whenever submitted) or waits ahead of it
  (pending, held or not, submitted earlier: submitted_at, then id), as Slurm's
  ``--dependency=singleton`` checks it. So such jobs run one at a time in submission order; it is
  never "never met" (the jobs ahead of it end, one way or another). Its blockers are read live
  (`_waiting_rows`), not stored: a job of that name that starts later (a non-singleton one) holds
  it up too, and one that ends frees it (`_free_singletons`, an event, as for a condition met).

- ``aftercorr`` (a job array's submit): each task after the task of the same index of the array
  named succeeded; recorded per task as ``afterok`` on that task (`resolve`'s `indices`,
  `Upstream.index`), a task without one waits for nothing (as Slurm).

A job's dependencies are all-of (every one met: Slurm's ``,``, the default) or any-of
(`Job.dependency_mode` ``any``, Slurm's ``?``): any one met is enough, and the job is cancelled
only once none can be met (`_without_alternatives`); while none is met it waits on the
alternatives still possible, its sentence saying "any one of … or …" (`any_of_words`: the
engine lists them joined by "and").

The control plane decides what is met; the engine only keeps a job with unmet dependencies out
of line (scheduler_core/eligibility.py, ``JobSpec.waits_on``). Three places use these rules:

1. the submit (`resolve`, `record`): refuses a dependency that can already never be met, and
   records one already met as satisfied at once; a change of a waiting job's dependencies
   (PATCH jobs/{id}/, `judge`, `replace`) the same way, and refuses a cycle too;
2. the transitions (`started`, `ended`, called from services/transitions.py wherever a job
   starts or ends): mark the dependents' conditions satisfied, and cancel a waiting dependent
   whose condition can no longer be met (reason ``DependencyNeverSatisfied``), which in turn
   ends its own dependents' hopes, down a chain of any length (a work list, no recursion);
3. the snapshot (`waits`): the unmet dependencies of every waiting job, in one query.

Concurrency: the submit locks its upstream jobs' rows FOR SHARE (PostgreSQL) while it reads
their states and writes its dependency rows, and every transition updates the upstream job's
row before it looks for dependents. So either the transition waits for the submit to commit and
then finds its new dependency rows (READ COMMITTED: each statement sees what committed before
it), or the submit waits for the transition and reads the new state: a dependency is never
left waiting on a job that already ended.

A change (`judge`, then `replace`) takes a transaction-wide advisory lock first (`lock_changes`;
a rename takes it too, since it changes which singletons wait on the job), so changes of
dependencies run one at a time and each cycle check (`cycle_errors`, once the job's row says
its new name) sees every edge the others wrote, then
locks its upstream jobs FOR SHARE before services/holds.update locks the job itself: the order
a transition takes them in (the upstream job's row, then its dependents'), so the two never
deadlock. A cycle's bind of a job whose dependencies changed after its snapshot finds them in
`waiting_among` and drops it as stale. The text form (``afterok:12:13,afterany:14``) is read and
written by services/dependency_text.py, shared with `qm`.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Count, Q

import scheduler_core as engine
from controlplane.choices import FINISHED_JOB_STATES, DependencyCondition, DependencyMode, EventKind, JobState
from controlplane.models import Event, Job, JobDependency, PendingPlace
from controlplane.models.jobs import split_numbers
from controlplane.services import access, dependency_text
from controlplane.services.dependency_text import AFTERCORR, SINGLETON, AnyOf, Edit
from controlplane.services.hold_text import hold_label_of
from scheduler_core.eligibility import OutOfLine

#: The most dependencies one submit may list (each a job, or a whole job array).
MAX_DEPENDENCIES = 64
#: The most upstream jobs one job may wait on, once arrays are counted task by task.
MAX_UPSTREAM_JOBS = 10_000
#: The reason a job is cancelled with when a dependency of it can no longer be met.
NEVER_SATISFIED = "DependencyNeverSatisfied"
#: The reason of the event saying a dependency is met.
SATISFIED = "DependencySatisfied"

_ENDED_BADLY = frozenset({JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT, JobState.UNSCHEDULABLE})
_FINISHED = frozenset(FINISHED_JOB_STATES)
_STARTED = frozenset({JobState.RUNNING, JobState.PREEMPTING}) | _FINISHED

#: What the dependent waits for, said after "this job was to run only after it ...".
_AWAITED = {
    DependencyCondition.AFTER: "started",
    DependencyCondition.AFTER_OK: "succeeded",
    DependencyCondition.AFTER_NOT_OK: "failed",
    DependencyCondition.AFTER_ANY: "ended",
}
#: The same, as the job page and `qm status` say it ("Runs after: job 12 succeeds").
AWAITS = {
    DependencyCondition.AFTER: "starts",
    DependencyCondition.AFTER_OK: "succeeds",
    DependencyCondition.AFTER_NOT_OK: "fails",
    DependencyCondition.AFTER_ANY: "ends",
}


#: How a singleton's blocker is said in the engine's sentence, after its state:
#: "Waits for job 12 to end (now running; same name “train”, singleton)".
def singleton_word(state: str, name: str, *, held: bool = False, can_run: bool = True) -> str:
    return f"{state_word(state, held=held, can_run=can_run)}; same name “{name}”, singleton"


def is_met(condition: str, state: str, *, has_started: bool = False) -> bool:
    """Whether a job in `state` meets `condition` now. `has_started`: it ran before and was
    requeued (pending again), which still meets ``after``."""
    if condition == DependencyCondition.AFTER:
        return state in _STARTED or has_started
    if condition == DependencyCondition.AFTER_OK:
        return state == JobState.SUCCEEDED
    if condition == DependencyCondition.AFTER_NOT_OK:
        return state in _ENDED_BADLY
    return state in _FINISHED  # afterany


def never_met(condition: str, state: str) -> bool:
    """Whether `condition` can no longer be met by a job in `state` (it ended otherwise)."""
    if condition == DependencyCondition.AFTER_OK:
        return state in _ENDED_BADLY
    if condition == DependencyCondition.AFTER_NOT_OK:
        return state == JobState.SUCCEEDED
    return False


def outcome(state: str, exit_code: int | None) -> str:
    """What became of a job, for a sentence after "job 12 ": "failed (exit 3)", "succeeded"."""
    if state == JobState.FAILED:
        return f"failed (exit {exit_code})" if exit_code is not None else "failed"
    return {
        JobState.SUCCEEDED: "succeeded",
        JobState.CANCELLED: "was cancelled",
        JobState.TIMED_OUT: "timed out",
        JobState.UNSCHEDULABLE: "can never run",
        JobState.RUNNING: "started",
        JobState.PREEMPTING: "started",
    }.get(JobState(state), str(state))


def state_word(state: str, *, held: bool = False, can_run: bool = True) -> str:
    """Where an upstream job stands, in the words the engine's sentence puts in brackets
    ("now running"): its state, "stopping" for a job being stopped; a waiting upstream that is
    held, or that the engine found can never run as asked, says so, since that is why its
    dependent may wait for ever (it waits: the upstream's owner may release or change it)."""
    if state == JobState.PENDING and held:
        return "held"
    if state == JobState.PENDING and not can_run:
        return "pending, and it can never run as asked"
    return "stopping" if state == JobState.PREEMPTING else JobState(state).label.lower()


# ----------------------------------------------------------------------------------- submit


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
    errors: dict[str, str] = {}
    if len(wanted) - kept > MAX_DEPENDENCIES:
        raise Refused({"dependencies": f"at most {MAX_DEPENDENCIES} dependencies, got {len(wanted) - kept}; "
                                       "depend on a job array to wait on many jobs at once"})
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
        if key in seen:
            errors[field] = (f"{key[0]} {key[1]} is already dependency {seen[key]}; a job depends on another "
                             "job once, with one condition")
        else:
            seen[key] = i
    # An item refused so far is said as it is; the others are still judged (that job 999999 does
    # not exist was said only once a job named twice was named once).
    faulted = {int(name.split(".")[1]) for name in errors}
    visible = access.visible_jobs(user)
    corr_arrays = _corresponding_arrays(visible, wanted, indices, errors, skip=faulted)
    faulted |= {int(name.split(".")[1]) for name in errors}
    ids = [w.job for i, w in enumerate(wanted) if w.job is not None and w.condition != AFTERCORR and i not in faulted]
    arrays = [w.array for i, w in enumerate(wanted) if w.array is not None and i not in faulted] + list(
        corr_arrays.values())
    rows = _locked_rows(visible, ids, arrays, lock=lock)
    by_id = {row[0]: row for row in rows}
    by_array: dict[uuid.UUID, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        if row[4] is not None:
            by_array[row[4]].append(row)
    upstream: dict[int, Upstream] = {}
    never: list[str] = []  # any-of: the alternatives that can never be met, said if none can
    for i, item in enumerate(wanted):
        if item.condition == SINGLETON or i in faulted:
            continue
        if item.condition == AFTERCORR:
            _correspond(i, item, by_array.get(corr_arrays[i], []), indices, upstream, errors)
            continue
        if item.job is not None:
            field, found = f"dependencies.{i}.job", [by_id[item.job]] if item.job in by_id else []
            if not found:
                errors[field] = f"no job {item.job} you can see"
                continue
        else:
            field, found = f"dependencies.{i}.array", by_array.get(item.array, [])  # type: ignore[arg-type]
            if not found:
                errors[field] = f"no job array {item.array} you can see"
                continue
        for job_id, state, exit_code, requeue_count, _array, _index in sorted(found):
            if never_met(item.condition, state) and any_of:
                never.append(f"job {job_id} {outcome(state, exit_code)} ({item.condition})")
            elif never_met(item.condition, state):
                errors[f"dependencies.{i}.condition"] = (
                    f"job {job_id} {outcome(state, exit_code)}: {item.condition} can never be met "
                    f"(this job would run only after it {_AWAITED[DependencyCondition(item.condition)]})"
                )
                break
            if job_id in upstream:
                errors[field] = f"job {job_id} is named twice among the dependencies (once directly, once in an array)"
                break
            upstream[job_id] = Upstream(job_id, item.condition,
                                        is_met(item.condition, state, has_started=requeue_count > 0), state, i)
    if not errors and any_of and upstream and len(never) == len(upstream):
        errors["dependencies"] = (f"none of these any-of dependencies can ever be met: {'; '.join(never)}; this "
                                  "job could never start")
    every = sum(1 for u in upstream.values() if u.index is None)
    if not errors and every * tasks + len(upstream) - every > MAX_UPSTREAM_JOBS:
        errors["dependencies"] = (f"{len(upstream)} upstream jobs for {tasks} tasks make "
                                  f"{every * tasks + len(upstream) - every} dependencies; at most {MAX_UPSTREAM_JOBS}")
    if errors:
        raise Refused(errors)
    return list(upstream.values())


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


@dataclass(frozen=True)
class Blocker:
    """A job that keeps a singleton waiting: of its submitter and name, running or stopping, or
    waiting and submitted earlier. `word`: where it stands, as the engine's sentence says it."""

    job_id: int
    state: str
    word: str
    submitted_at: datetime | None = None
    team_id: int | None = None


def _shown(blockers: Iterable[Blocker]) -> list[Blocker]:
    """The blockers a singleton's sentence names: the nearest waiting one ahead of it (the one
    that runs next, before it), else those that run now. All of them hold it up; the rest are
    said in turn as each goes."""
    found = list(blockers)
    waiting = [b for b in found if b.state == JobState.PENDING]
    if waiting:
        return [max(waiting, key=lambda b: (b.submitted_at or datetime.min, b.job_id))]
    return sorted(found, key=lambda b: b.job_id)


def singleton_blockers(submitter_id: int | None, name: str, *, job_id: int | None = None,
                       submitted_at: datetime | None = None) -> list[Blocker]:
    """What keeps a singleton of `submitter_id` named `name` waiting now: the other jobs of that
    submitter and name that run or stop, or wait and were submitted before it (`job_id`,
    `submitted_at`; a job not inserted yet: every one waiting). One query (an index of the live
    jobs by submitter and name); none for a job without a submitter (its account was removed)."""
    if submitter_id is None:
        return []
    ahead = Q(state=JobState.PENDING)
    if submitted_at is not None:
        ahead &= Q(submitted_at__lt=submitted_at) | Q(submitted_at=submitted_at, pk__lt=job_id or 0)
    rows = (Job.objects.filter(submitter_id=submitter_id, name=name)
            .filter(Q(state__in=(JobState.RUNNING, JobState.PREEMPTING)) | ahead)
            .exclude(pk=job_id or 0).order_by("pk")
            .values_list("pk", "state", "hold", "pending_resolvable", "submitted_at", "team_id"))
    return [Blocker(pk, state, singleton_word(state, name, held=bool(hold), can_run=can_run), at, team)
            for pk, state, hold, can_run, at, team in rows]


_WAITS_FOR = "Waits for "
_UNTIL_THEN = ": until then it is not in the queue and holds nothing."


def _joined(parts: Sequence[str], word: str) -> str:
    """`parts` as the engine's sentences list them: "a and b", "a, b and c" (or with "or")."""
    if len(parts) <= 2:
        return f" {word} ".join(parts)
    return ", ".join(parts[:-1]) + f" {word} " + parts[-1]


def any_of_words(message: str, would_start_if: str, waits_on: Sequence[engine.DependencyWait]) -> tuple[str, str]:
    """The engine's sentence on a job whose dependencies are any-of (Slurm's ``?``) said as
    such: the engine lists what a job waits on joined by "and" (all of them, `JobSpec.waits_on`:
    it only keeps the job out of line), so the control plane, which decides any-of, says it
    "Waits for any one of job 12 to succeed (now running) or job 13 to succeed (now pending): …"
    and what would start it "job 12 succeeds or job 13 succeeds". Each part is the engine's own
    words for that one dependency (`OutOfLine` of it alone); a sentence not so made is kept."""
    if len(waits_on) < 2:
        return message, would_start_if
    parts, woulds = [], []
    for wait in waits_on:
        one = OutOfLine(engine.JobSpec(id="one", team="", priority_class="", gpus=1, submitted_at=0.0,
                                       waits_on=(wait,)))
        if not (one.message.startswith(_WAITS_FOR) and one.message.endswith(_UNTIL_THEN)):
            return message, would_start_if
        parts.append(one.message[len(_WAITS_FOR):-len(_UNTIL_THEN)])
        woulds.append(one.would_start_if)
    return (message.replace(_joined(parts, "and"), "any one of " + _joined(parts, "or"), 1),
            would_start_if.replace(_joined(woulds, "and"), _joined(woulds, "or"), 1))


def _sentence(spec: engine.JobSpec, any_of: bool) -> tuple[str, str, str]:
    """(code, sentence, would start if) of a job out of line, as the cycle stores them."""
    why = OutOfLine(spec)
    message, would = any_of_words(why.message, why.would_start_if, spec.waits_on) if any_of else \
        (why.message, why.would_start_if)
    return why.code.value, message, would


def waiting_words(upstream: Sequence[Upstream], blockers: Sequence[Blocker] = (), *,
                  any_of: bool = False) -> tuple[str, str, str]:
    """A new job's reason until the first cycle says it: ("WaitingForDependency", the engine's
    sentence, what would start it; `any_of`: none of its alternatives met, said as such) when a
    dependency is not met yet or a singleton's job of the
    same name runs or waits ahead (`blockers`), else the submit's own ("Submitted", "Waiting for
    the next scheduling cycle", ""). The sentence is the engine's (scheduler_core.eligibility),
    so the cycle's first word on it is the same."""
    unmet = [u for u in sorted(upstream, key=lambda u: u.job_id) if not u.met]
    if any_of:  # the alternatives still possible, as the cycle says them
        unmet = [u for u in unmet if not never_met(u.condition, u.state)] or unmet
    waits = tuple(
        engine.DependencyWait(upstream=str(u.job_id), condition=engine.DependencyCondition(u.condition),
                              upstream_state=state_word(u.state))
        for u in unmet
    ) + tuple(
        engine.DependencyWait(upstream=str(b.job_id), condition=engine.DependencyCondition.AFTER_ANY,
                              upstream_state=b.word)
        for b in _shown(blockers)
    )
    if any_of and any(u.met for u in upstream):
        waits = ()  # any-of: one met is enough
    if not waits:
        return "Submitted", "Waiting for the next scheduling cycle", ""
    return _sentence(engine.JobSpec(id="submit", team="", priority_class="", gpus=1, submitted_at=0.0,
                                    waits_on=waits), any_of)


def corresponding_words(job_ids: Sequence[int], indices: Sequence[int | None], upstream: Sequence[Upstream],
                        blockers: Sequence[Blocker] = ()) -> int:
    """After an array's submit with aftercorr (its tasks inserted with the words of what every
    task waits on): each task whose counterpart it waits on now says so, in the engine's words
    for its own dependencies (`waiting_words`), as the first cycle will. One statement for all
    of them (PostgreSQL: an UPDATE from arrays; SQLite: one per task); returns how many."""
    corr = {u.index: u for u in upstream if u.index is not None and not u.met}
    if not corr:
        return 0
    common = [u for u in upstream if u.index is None]
    rows = []
    for job_id, index in zip(job_ids, indices, strict=True):
        if index in corr:
            code, message, would = waiting_words([*common, corr[index]], blockers)
            rows.append((job_id, code, message[:500], would[:300]))
    if not rows:
        return 0
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"UPDATE {table} AS j SET pending_code = v.code, pending_words = v.words, would_start_if_words = v.would "
                "FROM unnest(%s::bigint[], %s::varchar[], %s::varchar[], %s::varchar[]) AS v(id, code, words, would) "
                "WHERE j.id = v.id", [list(column) for column in zip(*rows, strict=True)])
        else:
            cursor.executemany(f"UPDATE {table} SET pending_code = %s, pending_words = %s, would_start_if_words = %s "
                               "WHERE id = %s", [(code, words, would, pk) for pk, code, words, would in rows])
    return len(rows)


def record(job_ids: Sequence[int], upstream: Sequence[Upstream], *, at: datetime,
           indices: Sequence[int | None] | None = None) -> int:
    """Write each new job's dependency rows (a condition met already: satisfied now). Returns
    how many were written. The caller's transaction also holds the jobs' insert. `indices`: the
    new jobs' array indices, in `job_ids`' order: an aftercorr upstream (`Upstream.index`) is
    written for the task of its index only."""
    every = [u for u in upstream if u.index is None]
    by_index = {u.index: u for u in upstream if u.index is not None}
    rows = [
        JobDependency(job_id=job_id, upstream_id=u.job_id, condition=u.condition, satisfied_at=at if u.met else None)
        for job_id, index in zip(job_ids, indices or [None] * len(job_ids), strict=True)
        for u in (*every, *((by_index[index],) if index in by_index else ()))
    ]
    JobDependency.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


# ------------------------------------------------------------------------------------ change

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
    #: item's index in the edit's own list (`_renumbered`): the cycle's errors name them too.
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
        return Replacement(job_id, [], "", _renumbered(exc.errors, wanted, kept, origin))
    singleton = singleton_of(wanted)
    blockers = tuple(singleton_blockers(submitter_id, name, job_id=job_id, submitted_at=submitted_at)
                     if singleton else ())
    any_of = any_of and len(upstream) > 1
    return Replacement(job_id, upstream,
                       dependency_text.text_of(((u.job_id, u.condition) for u in upstream), singleton=singleton,
                                               any_of=any_of),
                       {}, singleton, blockers, tuple(wanted), kept, origin, any_of)


def _edited(job_id: int, was_singleton: bool, was_any: bool,
            edit: Edit) -> tuple[list[Wanted], int, list[int], bool] | dict[str, str]:
    """An edit applied to the job's dependencies now: (the whole new list, how many of its first
    items are the ones kept, for each item after those the index in the edit's own list, which
    its errors name, and whether the list is any-of), or the errors of an edit that cannot
    apply, each on its item's field: ``+`` a job there already with another condition (once,
    with one condition); ``-`` one that is not there. Adding one there already, as it is,
    changes nothing. An edit keeps the list's mode: alternatives are added joined by ``?`` to
    an any-of list (or to none), items by ``,`` to an all-of one; the other is refused on
    ``dependencies`` (send the whole list to change the mode). One query."""
    current = list(JobDependency.objects.filter(job_id=job_id).order_by("upstream_id")
                   .values_list("upstream_id", "condition", "upstream__array_id"))
    has = {upstream_id: condition for upstream_id, condition, _ in current}
    now = dependency_text.text_of(((u, c) for u, c, _ in current), singleton=was_singleton,
                                  any_of=was_any and len(current) > 1)
    errors: dict[str, str] = {}
    items = wanted_from(edit.items)
    any_of = was_any or (edit.any_of and not current and not was_singleton)
    if edit.op == dependency_text.ADD and (current or was_singleton) and len(items) > 1 and edit.any_of != was_any:
        said = "any-of (any one met)" if was_any else "all-of (every one met)"
        joiner = "'?'" if was_any else "','"
        return {"dependencies": (f"job {job_id}'s dependencies are {said}: {now}; an edit keeps that, so join what "
                                 f"it adds with {joiner}, or send the whole list to change it")}
    if edit.op == dependency_text.ADD:
        kept_items = [Wanted(u, None, c) for u, c, _ in current] + ([Wanted(None, None, SINGLETON)]
                                                                     if was_singleton else [])
        added: list[Wanted] = []
        origin: list[int] = []
        for i, w in enumerate(items):
            if w.condition == SINGLETON and was_singleton:
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
        return errors or (kept_items + added, len(kept_items), origin, any_of)
    drop: set[int] = set()
    unsingle = False
    for i, w in enumerate(items):
        said = f"{w.condition}:{w.job if w.job is not None else w.array}"
        if w.condition == AFTERCORR:  # recorded as afterok on the counterpart: removed as such
            w = Wanted(w.job, w.array, DependencyCondition.AFTER_OK.value)
        if w.condition == SINGLETON:
            unsingle = True
            if not was_singleton:
                errors[f"dependencies.{i}.condition"] = (f"singleton is not among job {job_id}'s dependencies "
                                                         f"({now}); nothing to remove")
        elif w.job is not None:
            if w.job not in has:
                errors[f"dependencies.{i}.job"] = f"{said} is not among job {job_id}'s dependencies ({now}); nothing to remove"
            elif has[w.job] != w.condition:
                errors[f"dependencies.{i}.condition"] = (f"job {w.job} is a dependency of job {job_id} with "
                                                         f"{has[w.job]}, not {w.condition}: remove {has[w.job]}:{w.job}")
            else:
                drop.add(w.job)
        else:
            tasks = {u for u, c, array in current if array == w.array and c == w.condition}
            if not tasks:
                errors[f"dependencies.{i}.array"] = (f"{said}: no task of that job array is among job {job_id}'s "
                                                     f"dependencies with {w.condition} ({now}); nothing to remove")
            drop |= tasks
    if errors:
        return errors
    kept_items = [Wanted(u, None, c) for u, c, _ in current if u not in drop]
    if was_singleton and not unsingle:
        kept_items.append(Wanted(None, None, SINGLETON))
    return kept_items, len(kept_items), [], was_any


def _renumbered(errors: dict[str, str], wanted: Sequence[Wanted], kept: int, origin: list[int] | None) -> dict[str, str]:
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


def cycle_errors(job_id: int, change: Replacement | None = None, *, renamed: str | None = None) -> dict[str, str]:
    """The cycles a change of waiting job `job_id` would close, each on the field that closes it:
    a change of its dependencies (`change`, judged: on the item that starts the chain, as
    `_cycle_errors` says it), or a rename alone (`renamed`, the new name: on ``name``). Call it
    under `lock_changes`, once the job's row says its new name in the caller's transaction: the
    walk reads what waits on what as the next snapshot will, so the singletons of the new name
    submitted after the job wait on it, those of the old one no longer do, and a singleton job
    waits on the jobs of its new name ahead of it. The caller's refusal rolls the name back.

    A rename closes a cycle when the job, by what it waits on (its dependencies not met yet, and
    as a singleton the jobs of its new name running or waiting ahead), reaches itself: through a
    later singleton of the new name that now waits on it (job 16, a singleton named “n”, waits on
    job 15 renamed “n” and submitted before it, which waits afterok on job 16), or, the job a
    singleton, through an earlier job of the new name waiting on it."""
    if change is not None:
        errors = _cycle_errors(job_id, change.wanted, change.upstream, change.blockers, any_of=change.any_of)
        return _renumbered(errors, change.wanted, change.kept, change.origin)
    row = Job.objects.filter(pk=job_id).values_list("singleton", "submitter_id", "name", "submitted_at",
                                                    "dependency_mode").first()
    if row is None or renamed is None:
        return {}
    singleton, submitter_id, name, submitted_at, mode = row
    any_of = mode == DependencyMode.ANY
    rows = list(JobDependency.objects.filter(job_id=job_id).order_by("upstream_id").values_list(
        "upstream_id", "condition", "upstream__state", "upstream__requeue_count", "satisfied_at"))
    met = [at is not None or is_met(condition, state, has_started=requeues > 0)
           for _, condition, state, requeues, at in rows]
    if any_of and any(met):
        return {}  # one alternative met: it waits on nothing, so closes nothing
    heads: list[tuple[int, str]] = [(row[0], row[1]) for row, done in zip(rows, met, strict=True) if not done]
    if singleton:
        heads += [(b.job_id, SINGLETON) for b in singleton_blockers(submitter_id, name, job_id=job_id,
                                                                    submitted_at=submitted_at)]
    toward, labels = _walk(job_id, {head for head, _ in heads}, any_of=any_of)
    for head, condition in heads:
        if head not in toward:
            continue
        chain = [head]
        while toward[chain[-1]] != job_id:
            chain.append(toward[chain[-1]])
        links = [f"job {job_id} waits on job {head} ({_label(condition, name)})"]
        links += [f"which waits on job {after} ({labels[(before, after)]})"
                  for before, after in zip(chain, [*chain[1:], job_id], strict=True)]
        return {"name": (f"named “{renamed}”, job {job_id} would wait on itself: {', '.join(links)}: a cycle, "
                         f"{'neither' if len(chain) == 1 else 'none of them'} could ever start; change its "
                         "dependencies first, or keep its name")}
    return {}


def _label(condition: str, name: str) -> str:
    """How a link of a cycle says why it waits: its condition, or the singleton's name."""
    return f"singleton, same name “{name}”" if condition == SINGLETON else condition


def _walk(job_id: int, starts: set[int], *, any_of: bool = False) -> tuple[dict[int, int], dict[tuple[int, int], str]]:
    """Forward from `starts` along what waits (unmet dependencies of waiting jobs, and the jobs
    waiting singletons wait on, as `waits` reads them; `job_id` itself is not followed: its own
    waits are the starts, any-of ones if `any_of`), one query per link of the longest chain: a
    job that started or ended waits on nothing, and a condition met already holds nothing up.
    Returns, for each job that could never start for waiting on `job_id` (in a cycle through
    it), its next link on the shortest way there (empty when there is none), and each link's
    words (its condition, or ``singleton, same name “n”``).

    Which could never start: of the jobs that reach `job_id` (all of them, when every job's
    dependencies are all-of: a cycle is any way back), those that cannot start even if every
    job outside that set does (the greatest such set): an all-of job waiting on one of them, an
    any-of job (Slurm's ``?``) waiting on nothing else; an any-of job with an alternative
    outside can start once that alternative is met, and takes none of the cycle with it."""
    waits_on: dict[int, list[int]] = defaultdict(list)  # j → the jobs j waits on
    waited_by: dict[int, list[int]] = defaultdict(list)  # j → the jobs that wait on j
    labels: dict[tuple[int, int], str] = {}
    alternatives: set[int] = {job_id} if any_of else set()
    waits_on[job_id] = sorted(starts)
    seen, frontier = set(starts), set(starts)
    while frontier:
        frontier_now, frontier = frontier, set()
        rows = _waiting_rows(frontier_now)
        freed = {r[0] for r in rows if r[9] and is_met(r[2], r[3], has_started=r[4] > 0)}  # any-of, one met
        for waiting, waited_on, condition, state, requeues, _hold, _can_run, name, _at, alternative in rows:
            if waiting in freed or (condition != SINGLETON and is_met(condition, state, has_started=requeues > 0)):
                continue
            if alternative:
                alternatives.add(waiting)
            waits_on[waiting].append(waited_on)
            waited_by[waited_on].append(waiting)
            labels[(waiting, waited_on)] = _label(condition, name)
            if waited_on != job_id and waited_on not in seen:
                seen.add(waited_on)
                frontier.add(waited_on)
    for start in starts:
        waited_by[start].append(job_id)
    # the jobs that reach this one
    reach = {job_id}
    queue = [job_id]
    for target in queue:
        for waiting in waited_by.get(target, ()):
            if waiting not in reach:
                reach.add(waiting)
                queue.append(waiting)
    if not any(start in reach for start in starts):
        return {}, labels
    # of those, the ones that could never start (an any-of job with an alternative outside can)
    stuck = set(reach)
    changed = True
    while changed:
        changed = False
        for pk in list(stuck):
            inside = [d for d in waits_on.get(pk, ()) if d in stuck]
            if not inside or (pk in alternatives and len(inside) < len(waits_on[pk])):
                stuck.discard(pk)
                changed = True
    toward: dict[int, int] = {}
    if job_id not in stuck:
        return toward, labels
    # back from this job through those: each one's next link on the shortest way
    queue = [job_id]
    for target in queue:
        for waiting in waited_by.get(target, ()):
            if waiting != job_id and waiting in stuck and waiting not in toward:
                toward[waiting] = target
                queue.append(waiting)
    return toward, labels


def _cycle_errors(job_id: int, wanted: Sequence[Wanted], upstream: Sequence[Upstream],
                  blockers: Sequence[Blocker] = (), *, any_of: bool = False) -> dict[str, str]:
    """A job that would wait, directly or down a chain, on itself: the item naming the first
    job of each such chain is refused, with the chain (`_walk`). A singleton's `blockers` are
    where its chains start (an earlier job of its name that waits on it: neither would ever
    start)."""
    def field(u: Upstream) -> str:
        return f"dependencies.{u.item}.{'job' if wanted[u.item].job is not None else 'array'}"

    errors: dict[str, str] = {}
    for u in upstream:
        if u.job_id == job_id:
            errors[field(u)] = f"job {job_id} is this job: a job cannot wait on itself"
    # Where chains start: each new dependency not met yet, and each job a singleton waits on.
    singleton_field = next((f"dependencies.{i}.condition" for i, w in enumerate(wanted) if w.condition == SINGLETON), "")
    if any_of and any(u.met for u in upstream):
        return errors  # any-of, one met already: it waits on nothing
    heads = [(u.job_id, field(u), "") for u in upstream if not u.met and u.job_id != job_id]
    heads += [(b.job_id, singleton_field, "singleton: ") for b in blockers]
    toward, _ = _walk(job_id, {head for head, _, _ in heads}, any_of=any_of)
    for head, head_field, lead in heads:
        if head not in toward or head_field in errors:
            continue
        chain = [head]
        while toward[chain[-1]] != job_id:
            chain.append(toward[chain[-1]])
        said = " waits on ".join(f"job {pk}" for pk in chain[:2])
        said += "".join(f", which waits on job {pk}" for pk in chain[2:])
        said += (" waits on" if len(chain) == 1 else ", which waits on") + f" this job (job {job_id})"
        errors[head_field] = (f"{lead}{said}: a cycle, {'neither' if len(chain) == 1 else 'none of them'} "
                              "could ever start")
    return errors


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


def _among(column: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
    """`column` among `ids`, as SQL and its parameters: one array on PostgreSQL (`= ANY(%s)`: a
    short statement, planned fast, whatever the number of ids), a list of markers on SQLite."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [list(ids)]
    return f"{column} IN ({', '.join(['%s'] * len(ids))})", list(ids)


def _waiting_rows(job_ids: Iterable[int] | None = None) -> list[tuple[Any, ...]]:
    """What waiting jobs wait on, read in one statement: (job id, upstream id, condition, the
    upstream's state, requeue count, hold, pending_resolvable, name, submitted_at, any-of), by
    job and upstream. Two kinds of row:
    - each dependency not satisfied yet of a waiting job (the caller drops those its upstream
      meets already, `is_met`, and every one of an any-of job one of whose rows it meets; name
      ""); none of an any-of job one of whose alternatives is satisfied already;
    - each job a waiting singleton waits on (condition ``singleton``, `_singleton_edges`), from
      the live jobs (waiting, running, stopping) of each submitter and name that has a waiting
      singleton: the statement reads each such job once, so a job array of 1,000 singleton tasks
      is 1,000 rows, not one per pair.
    `job_ids`: only these jobs' (None: every waiting job's; an empty list: nothing, no query).
    The cycle's bind asks `waiting_among` instead (a probe per singleton, not its group)."""
    ids = None if job_ids is None else list(job_ids)
    if ids is not None and not ids:
        return []
    job, dep = connection.ops.quote_name(Job._meta.db_table), connection.ops.quote_name(JobDependency._meta.db_table)
    only_d, only_s, id_params = "", "", []
    if ids is not None:
        (only_d, id_params), (only_s, _) = _among("j.id", ids), _among("s.id", ids)
        only_d, only_s = f" AND {only_d}", f" AND {only_s}"
    sql = (
        "SELECT 'd', d.job_id, d.upstream_id, d.condition, u.state, u.requeue_count, u.hold, u.pending_resolvable, "
        f"'', NULL, NULL, j.dependency_mode = '{DependencyMode.ANY.value}' FROM {dep} d JOIN {job} j ON j.id = d.job_id "
        f"JOIN {job} u ON u.id = d.upstream_id WHERE d.satisfied_at IS NULL AND j.state = %s{only_d} "
        "UNION ALL "
        "SELECT 'g', b.id, NULL, '', b.state, b.requeue_count, b.hold, b.pending_resolvable, b.name, b.submitted_at, "
        f"b.submitter_id, b.singleton FROM {job} b WHERE b.state IN (%s, %s, %s) AND EXISTS (SELECT 1 FROM {job} s "
        f"WHERE s.singleton AND s.state = %s AND s.submitter_id = b.submitter_id AND s.name = b.name{only_s}) "
        "UNION ALL "
        # each waiting any-of job one of whose alternatives is met already: it waits on none of
        # the others (the partial index of waiting any-of jobs, then their rows by job)
        f"SELECT 'f', j.id, NULL, '', '', 0, '', true, '', NULL, NULL, true FROM {job} j "
        f"WHERE j.dependency_mode = '{DependencyMode.ANY.value}' AND j.state = %s{only_d} AND EXISTS (SELECT 1 "
        f"FROM {dep} d WHERE d.job_id = j.id AND d.satisfied_at IS NOT NULL)"
    )
    params = [JobState.PENDING.value, *id_params, JobState.PENDING.value, JobState.RUNNING.value,
              JobState.PREEMPTING.value, JobState.PENDING.value, *id_params, JobState.PENDING.value, *id_params]
    rows: list[tuple[Any, ...]] = []
    freed: set[int] = set()
    groups: dict[tuple[int, str], list[tuple[Any, ...]]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for kind, job_id, upstream_id, condition, state, requeues, hold, can_run, name, at, submitter, single in (
                cursor.fetchall()):
            if kind == "d":
                rows.append((job_id, upstream_id, condition, state, requeues, hold, can_run, name, at, bool(single)))
            elif kind == "f":
                freed.add(job_id)
            else:
                groups[(submitter, name)].append((job_id, state, requeues, hold, can_run, name, at, bool(single)))
    if freed:
        rows = [r for r in rows if r[0] not in freed]
    rows += _singleton_edges(groups, None if ids is None else set(ids))
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows


def _singleton_edges(groups: dict[tuple[int, str], list[tuple[Any, ...]]],
                     ids: set[int] | None) -> list[tuple[Any, ...]]:
    """The `_waiting_rows` of singletons, from the live jobs of each submitter and name (id,
    state, requeue count, hold, pending_resolvable, name, submitted_at, singleton). A waiting
    singleton waits on every job of its group that runs or stops, and on every one waiting ahead
    of it (submitted_at, then id); of those ahead, the rows name every one that is no singleton
    and only the nearest singleton, which itself waits on the singletons before it: what holds
    it up, and what a cycle can pass through, is the same, in rows that grow with the group, not
    with its square (but for jobs of the name that are no singleton waiting ahead of singletons:
    a row per such pair, the jobs of a name mixing both being few). Only the singletons among
    `ids` (None: all of them)."""
    edges: list[tuple[Any, ...]] = []
    for members in groups.values():
        members.sort(key=lambda m: (m[6], m[0]))
        running = [m for m in members if m[1] in (JobState.RUNNING, JobState.PREEMPTING)]
        plain_ahead: list[tuple[Any, ...]] = []
        last_singleton: tuple[Any, ...] | None = None
        for m in members:
            if m[1] != JobState.PENDING:
                continue
            if m[7] and (ids is None or m[0] in ids):
                by = {b[0]: b for b in (*running, *plain_ahead, *([last_singleton] if last_singleton else []))
                      if b[0] != m[0]}
                edges += [(m[0], b[0], SINGLETON, b[1], b[2], b[3], b[4], b[5], b[6], False) for b in by.values()]
            if m[7]:
                last_singleton = m
            else:
                plain_ahead.append(m)
    return edges


def waiting_among(job_ids: Iterable[int], *, singletons: Iterable[int] | None = None,
                  alternatives: Iterable[int] | None = None) -> set[int]:
    """The jobs among `job_ids` that wait on a job now (a dependency not met, by the rule `waits`
    reads; a singleton with a job of its name running or waiting ahead, or bound with it in
    this batch, which `job_ids` are, and no singleton itself): the cycle's bind drops them, as a
    job whose dependencies were changed after its snapshot read it, and so two singletons of a
    name never start in one cycle. One query (a probe of the live jobs' index per singleton
    among them, not a read of their groups); none for no job. `singletons`: those of `job_ids`
    that are singletons, when the caller read it under their rows' lock (the bind: a change
    waits for that lock); none of them: the statement reads the dependencies only, as before
    singletons (a shorter plan: 1 ms less for 40 jobs). `alternatives`: likewise, those whose
    dependencies are any-of (Slurm's `?`): the statement is the one before any-of, and one more
    query asks which of those have an alternative met already, only when there is one; not
    given, the statement reads every job's mode and an any-of job's met rows itself."""
    ids = list(job_ids)
    if not ids:
        return set()
    known = alternatives is not None
    alts = set(alternatives or ())

    def modes(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The statement before any-of's rows, with the modes the caller read."""
        return [(job_id, condition, state, requeues, None,
                 DependencyMode.ANY.value if job_id in alts else DependencyMode.ALL.value)
                for job_id, condition, state, requeues, *_ in rows]

    if singletons is not None and not set(singletons):
        if known:
            return _still_waiting_of(modes(
                JobDependency.objects.filter(job_id__in=ids, satisfied_at__isnull=True).order_by()
                .values_list("job_id", "condition", "upstream__state", "upstream__requeue_count"))) - _met_any(alts)
        return _still_waiting_of(
            JobDependency.objects.filter(job_id__in=ids).filter(
                Q(satisfied_at__isnull=True) | Q(job__dependency_mode=DependencyMode.ANY)).order_by()
            .values_list("job_id", "condition", "upstream__state", "upstream__requeue_count", "satisfied_at",
                         "job__dependency_mode"))
    single = list(singletons) if singletons is not None else ids
    job, dep = connection.ops.quote_name(Job._meta.db_table), connection.ops.quote_name(JobDependency._meta.db_table)
    (in_d, id_params), (in_s, single_params), (in_b, _) = (_among("d.job_id", ids), _among("s.id", single),
                                                          _among("b.id", ids))
    if known:
        dependency_part = (
            f"SELECT d.job_id, d.condition, u.state, u.requeue_count, NULL, '' FROM {dep} d "
            f"JOIN {job} u ON u.id = d.upstream_id WHERE d.satisfied_at IS NULL AND {in_d} ")
    else:
        dependency_part = (
            "SELECT d.job_id, d.condition, u.state, u.requeue_count, d.satisfied_at, j.dependency_mode "
            f"FROM {dep} d JOIN {job} u ON u.id = d.upstream_id JOIN {job} j ON j.id = d.job_id "
            f"WHERE (d.satisfied_at IS NULL OR j.dependency_mode = '{DependencyMode.ANY.value}') AND {in_d} ")
    sql = (
        dependency_part + "UNION ALL "
        f"SELECT s.id, '{SINGLETON}', '', 0, NULL, '' FROM {job} s WHERE s.singleton AND {in_s} AND EXISTS ("
        f"SELECT 1 FROM {job} b WHERE b.submitter_id = s.submitter_id AND b.name = s.name AND b.id <> s.id "
        "AND b.state IN (%s, %s, %s) AND (b.state IN (%s, %s) OR (b.state = %s AND (b.submitted_at < s.submitted_at "
        f"OR (b.submitted_at = s.submitted_at AND b.id < s.id))) OR ({in_b} AND NOT b.singleton)))"
    )
    params = [*id_params, *single_params, JobState.PENDING.value, JobState.RUNNING.value, JobState.PREEMPTING.value,
              JobState.RUNNING.value, JobState.PREEMPTING.value, JobState.PENDING.value, *id_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if known:
        return _still_waiting_of(r if r[1] == SINGLETON else modes([r])[0] for r in rows) - _met_any(alts)
    return _still_waiting_of(rows)


def _met_any(job_ids: set[int]) -> set[int]:
    """Of these any-of jobs, those with an alternative met already (one query; none for none)."""
    if not job_ids:
        return set()
    return set(JobDependency.objects.filter(job_id__in=list(job_ids), satisfied_at__isnull=False)
               .values_list("job_id", flat=True))


def _still_waiting_of(rows: Iterable[tuple[Any, ...]]) -> set[int]:
    """(job, condition, upstream state, requeue count, satisfied_at, dependency_mode) rows → the
    jobs that wait: an all-of job on a row not met (and a singleton's row always), an any-of job
    while none of its rows is met (they carry its satisfied ones too)."""
    waiting: set[int] = set()
    freed: set[int] = set()
    for job_id, condition, state, requeues, satisfied_at, mode in rows:
        if condition == SINGLETON:
            waiting.add(job_id)
            continue
        met = satisfied_at is not None or is_met(condition, state, has_started=requeues > 0)
        if mode == DependencyMode.ANY:
            (freed if met else waiting).add(job_id)
        elif not met:
            waiting.add(job_id)
    return waiting - freed


# ------------------------------------------------------------------------------ transitions


@dataclass(frozen=True)
class Change:
    """A job that started or ended: its new state and, once ended, its exit code."""

    job_id: int
    state: str
    exit_code: int | None = None
    # A job cancelled down a chain (its own dependency never met): the job whose end began it and
    # what became of it, (107, "failed (exit 3)"), so each job further down names the cause.
    because: tuple[int, str] | None = None


def started(job_ids: Iterable[int], *, at: datetime, actor: str) -> None:
    """Jobs just bound (pending → running): their ``after`` dependents' conditions are met.
    One query when no job waits on them starting."""
    changes = [Change(pk, JobState.RUNNING) for pk in job_ids]
    if changes:
        _settle(changes, at=at, actor=actor, only_after=True)


def ended(changes: Sequence[Change], *, at: datetime, actor: str) -> None:
    """Jobs that just ended (succeeded, failed, cancelled, timed out): their dependents'
    conditions are met, or can no longer be met (the waiting dependent is cancelled, and so
    on down its chain), and a waiting singleton that waited on one of them, with nothing of its
    name left running or waiting ahead, may start (`_free_singletons`). Two queries when no job
    depends on them and no singleton of their names waits."""
    if changes:
        _free_singletons(_settle(list(changes), at=at, actor=actor, only_after=False), at=at, actor=actor)


def _settle(changes: list[Change], *, at: datetime, actor: str, only_after: bool) -> list[Change]:
    """Steps, repeated while a round cancels dependents (a work list, so a chain of any
    length costs rounds, not stack):
    1. the unmet dependencies on this round's jobs, with their dependent's state (one query);
    2. those now met: satisfied_at set (one update), and an event on each waiting dependent;
    3. those never to be met: each waiting dependent cancelled (compare-and-set on pending),
       with its events; the cancelled jobs are the next round's changes. A dependent whose
       dependencies are any-of (Slurm's ``?``) is cancelled only once none of them can be met
       (none satisfied, every upstream ended otherwise: one query more, only then).
    Returns every job that ended here: the given ones and those it cancelled."""
    ended_here: list[Change] = []
    while changes:
        ended_here += changes
        by_id = {c.job_id: c for c in changes}
        rows = JobDependency.objects.filter(upstream_id__in=list(by_id), satisfied_at__isnull=True)
        if only_after:
            rows = rows.filter(condition=DependencyCondition.AFTER)
        found = list(rows.order_by("job_id", "upstream_id").values_list(
            "pk", "job_id", "upstream_id", "condition", "job__state", "job__team_id", "job__dependency_mode"))
        if not found:
            return ended_here
        met: list[tuple[int, int, int, str, int]] = []
        doomed: dict[int, tuple[int, str, int, str]] = {}
        maybe: dict[int, tuple[int, str, int, str]] = {}  # any-of: doomed if no alternative is left
        for pk, job_id, upstream_id, condition, job_state, team_id, mode in found:
            change = by_id[upstream_id]
            if is_met(condition, change.state):
                met.append((pk, job_id, upstream_id, condition, team_id))
            elif never_met(condition, change.state) and job_state == JobState.PENDING:
                (maybe if mode == DependencyMode.ANY else doomed).setdefault(job_id, (upstream_id, condition, team_id, ""))
        if met:
            JobDependency.objects.filter(pk__in=[m[0] for m in met]).update(satisfied_at=at)
        doomed.update(_without_alternatives(maybe))
        if met:
            _record_met(met, by_id, {m[1] for m in met if m[1] not in doomed}, at=at, actor=actor)
        changes = _cancel(doomed, by_id, at=at, actor=actor)
        only_after = False
    return ended_here


def _without_alternatives(maybe: dict[int, tuple[int, str, int, str]]) -> dict[int, tuple[int, str, int, str]]:
    """Of the waiting any-of jobs one of whose alternatives can no longer be met (`maybe`: job →
    that upstream, condition, team), those none of whose alternatives can be met any more (none
    satisfied, every upstream ended otherwise), each with its list's text: they are cancelled.
    One query (none for none)."""
    if not maybe:
        return {}
    rows: dict[int, list[tuple[int, str, Any, str]]] = defaultdict(list)
    for job_id, upstream_id, condition, satisfied_at, state in JobDependency.objects.filter(
            job_id__in=list(maybe)).order_by("job_id", "upstream_id").values_list(
            "job_id", "upstream_id", "condition", "satisfied_at", "upstream__state"):
        rows[job_id].append((upstream_id, condition, satisfied_at, state))
    return {
        job_id: (*maybe[job_id][:3], dependency_text.text_of(((u, c) for u, c, _, _ in mine), any_of=True))
        for job_id, mine in rows.items()
        if all(at is None and never_met(condition, state) for _, condition, at, state in mine)
    }


def _free_singletons(changes: Sequence[Change], *, at: datetime, actor: str) -> None:
    """Jobs that just ended: each waiting singleton of the same submitter and name that one of
    them held up (it ran, or waited ahead of it) and that nothing of that name now holds up
    (no other such job runs or waits ahead of it) gets an event, as a condition met does:
    "Job 12 succeeded: no other job named “train” of this submitter runs or waits ahead of it
    now; its singleton dependency is met; …". The next cycle then ranks it. One short query
    when no singleton of their names waits (the partial index of the waiting singletons: 0.5 ms
    p50 on the test PostgreSQL), else one more to find them (the live jobs by submitter and name)
    and two for the events."""
    if not changes:
        return
    by_id = {c.job_id: c for c in changes}
    job = connection.ops.quote_name(Job._meta.db_table)
    in_e, id_params = _among("e.id", list(by_id))
    # 1. any waiting singleton of their names at all? (A short statement, planned in a fraction
    #    of the next one's time: most ends have none.)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT j.id FROM {job} e JOIN {job} j ON j.submitter_id = e.submitter_id AND j.name = e.name "
                       f"AND j.singleton AND j.state = %s WHERE {in_e} LIMIT 1", [JobState.PENDING.value, *id_params])
        if cursor.fetchone() is None:
            return
    # 2. those one of them held up and nothing of their name holds up now
    sql = (
        f"SELECT j.id, j.team_id, j.name, MIN(e.id) FROM {job} j JOIN {job} e ON e.submitter_id = j.submitter_id "
        f"AND e.name = j.name AND e.id <> j.id AND {in_e} "
        "AND (e.started_at IS NOT NULL OR e.submitted_at < j.submitted_at "
        "OR (e.submitted_at = j.submitted_at AND e.id < j.id)) "
        "WHERE j.singleton AND j.state = %s AND NOT EXISTS ("
        f"SELECT 1 FROM {job} b WHERE b.submitter_id = j.submitter_id AND b.name = j.name AND b.id <> j.id "
        "AND b.state IN (%s, %s, %s) AND (b.state IN (%s, %s) OR b.submitted_at < j.submitted_at "
        "OR (b.submitted_at = j.submitted_at AND b.id < j.id))) "
        "GROUP BY j.id, j.team_id, j.name ORDER BY j.id"
    )
    params = [*id_params, JobState.PENDING.value, JobState.PENDING.value, JobState.RUNNING.value,
              JobState.PREEMPTING.value, JobState.RUNNING.value, JobState.PREEMPTING.value]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        freed = cursor.fetchall()
    if not freed:
        return
    left = _unmet_counts([row[0] for row in freed])
    events = []
    for job_id, team_id, name, upstream_id in freed:
        change = by_id[upstream_id]
        n = left.get(job_id, 0)
        rest = _still_waiting(n)
        events.append(Event(
            created_at=at, kind=str(EventKind.JOB_UPDATED), actor=actor, reason=SATISFIED,
            message=f"Job {upstream_id} {outcome(change.state, change.exit_code)}: no other job named “{name}” of "
                    f"this submitter runs or waits ahead of it now, so its singleton dependency is met{rest}",
            job_id=job_id, team_id=team_id,
            data={"upstream": upstream_id, "condition": SINGLETON, "upstream_state": change.state, "waiting_on": n},
        ))
    Event.objects.bulk_create(events)


def _unmet_counts(job_ids: Iterable[int]) -> dict[int, int]:
    """Per job, how many of its dependencies are not met yet (one query; a job with none is absent)."""
    return dict(
        JobDependency.objects.filter(job_id__in=list(job_ids), satisfied_at__isnull=True).order_by()
        .values("job_id").annotate(n=Count("id")).values_list("job_id", "n")
    )


def _still_waiting(n: int) -> str:
    """The end of a dependency-met event's message: what the dependent still waits on."""
    return "; it waits on no other job now" if not n else f"; it still waits on {n} other job{'s' if n != 1 else ''}"


def _record_met(met: list[tuple[int, int, int, str, int]], by_id: dict[int, Change], waiting: set[int], *,
                at: datetime, actor: str) -> None:
    """One event per dependency met, on its dependent if that still waits: what the upstream
    job did, and what is left to wait for (one query for all of them)."""
    modes = dict(Job.objects.filter(pk__in=waiting, state=JobState.PENDING).values_list("pk", "dependency_mode"))
    pending = set(modes)
    if not pending:
        return
    # an any-of job waits on no other job once one is met
    left = _unmet_counts(pk for pk in pending if modes[pk] != DependencyMode.ANY)
    events = []
    for _, job_id, upstream_id, condition, team_id in met:
        if job_id not in pending:
            continue
        change = by_id[upstream_id]
        n = left.get(job_id, 0)
        rest = _still_waiting(n)
        events.append(Event(
            created_at=at, kind=str(EventKind.JOB_UPDATED), actor=actor, reason=SATISFIED,
            message=f"Job {upstream_id} {outcome(change.state, change.exit_code)}: its dependency {condition} "
                    f"is met{' (any one of its dependencies is enough)' if modes[job_id] == DependencyMode.ANY else ''}"
                    f"{rest}",
            job_id=job_id, team_id=team_id,
            data={"upstream": upstream_id, "condition": condition, "upstream_state": change.state,
                  "waiting_on": n},
        ))
    Event.objects.bulk_create(events)


def _cancel(doomed: dict[int, tuple[int, str, int, str]], by_id: dict[int, Change], *, at: datetime,
            actor: str) -> list[Change]:
    """Cancel each waiting job whose dependency can no longer be met (an any-of job: none of its
    alternatives, their text given); returns those cancelled (a job bound or cancelled meanwhile
    is left alone: compare-and-set on pending)."""
    cancelled: list[Change] = []
    events: list[Event] = []
    for job_id, (upstream_id, condition, team_id, alternatives) in sorted(doomed.items()):
        change = by_id[upstream_id]
        # What became of the upstream job and, when it was itself cancelled down a chain, why:
        # "was cancelled because job 107 failed (exit 3)", not a bare "was cancelled" that sends
        # the researcher up the chain one job page at a time to find the failure.
        became = outcome(change.state, change.exit_code)
        root = change.because or (upstream_id, became)
        if change.because is not None:
            became += f" because job {change.because[0]} {change.because[1]}"
        if alternatives:
            sentence = (f"Job {upstream_id} {became}: this job was to run after "
                        f"any one of its dependencies was met ({alternatives}), and none can be now, so it is "
                        "cancelled.")
        else:
            sentence = (f"Job {upstream_id} {became}: this job was to run only "
                        f"after it {_AWAITED[DependencyCondition(condition)]} ({condition}), so it is cancelled.")
        if not Job.objects.filter(pk=job_id, state=JobState.PENDING).update(
            state=JobState.CANCELLED, finished_at=at, state_changed_at=at, pending_code=NEVER_SATISFIED,
            pending_words=sentence[:500], would_start_if_words="", pending_resolvable=False,
        ):
            continue
        cancelled.append(Change(job_id, JobState.CANCELLED, because=root))
        data = {"upstream": upstream_id, "condition": condition, "upstream_state": change.state,
                "upstream_exit_code": change.exit_code,
                **({"because_job": change.because[0]} if change.because is not None else {}),
                **({"dependency_mode": DependencyMode.ANY.value, "dependencies": alternatives} if alternatives else {})}
        events.append(Event(created_at=at, kind=str(EventKind.JOB_CANCELLED), actor=actor, reason=NEVER_SATISFIED,
                            message=sentence, job_id=job_id, team_id=team_id, data=data))
        events.append(Event(created_at=at, kind=str(EventKind.JOB_FINISHED), actor=actor, reason="Cancelled",
                            message=f"Job cancelled: its dependency on job {upstream_id} can never be met",
                            job_id=job_id, team_id=team_id, data={"state": JobState.CANCELLED.value,
                                                                  "exit_code": None}))
    if events:
        Event.objects.bulk_create(events)
    return cancelled


# --------------------------------------------------------------------------------- snapshot


def waits(job_ids: Iterable[int] | None = None, *,
          any_of: set[int] | None = None) -> dict[int, list[tuple[int, str, str]]]:
    """Per waiting job, its dependencies not met yet: (upstream id, condition, the upstream's
    state word), by upstream id; a waiting singleton's job of its name ahead of it as ``afterany``
    on that job, its word saying why ("running; same name “train”, singleton"). One query per
    cycle, whatever the number of jobs (`_waiting_rows`). A condition
    its upstream meets already (a transition missed; it cannot, but the snapshot does not
    trust it) does not keep the job waiting. `job_ids`: only these jobs' (a rename's rewording).
    A job whose dependencies are any-of (Slurm's ``?``) waits on all of them while none is met
    (the engine keeps it out of line), and on none once one is; `any_of`, when given, receives
    the ids of those that wait (their sentences say "any one of": `any_of_words`)."""
    out: dict[int, list[tuple[int, str, str]]] = {}
    singletons: dict[int, list[Blocker]] = {}
    freed: set[int] = set()  # any-of jobs one of whose alternatives is met
    alternatives: dict[int, list[tuple[int, str, str, bool]]] = {}
    for job_id, upstream_id, condition, state, requeues, hold, can_run, name, submitted_at, alternative in (
            _waiting_rows(job_ids)):
        if condition == SINGLETON:
            singletons.setdefault(job_id, []).append(
                Blocker(upstream_id, state, singleton_word(state, name, held=bool(hold), can_run=can_run), submitted_at))
            continue
        if is_met(condition, state, has_started=requeues > 0):
            if alternative:
                freed.add(job_id)
            continue
        if alternative:
            alternatives.setdefault(job_id, []).append(
                (upstream_id, condition, state_word(state, held=bool(hold), can_run=can_run), never_met(condition, state)))
            continue
        out.setdefault(job_id, []).append((upstream_id, condition, state_word(state, held=bool(hold), can_run=can_run)))
    # An any-of job waits on its alternatives still possible (all of them, if none is: its
    # cancel is on its way in the transaction that ended the last one).
    for job_id, rows in alternatives.items():
        if job_id in freed:
            continue
        out[job_id] = [row[:3] for row in rows if not row[3]] or [row[:3] for row in rows]
        if any_of is not None:
            any_of.add(job_id)
    # A singleton waits on the jobs of its name ahead of it: said as "to end", naming the one
    # that goes before it (`_shown`), after its own dependencies.
    for job_id, blockers in singletons.items():
        out.setdefault(job_id, []).extend(
            (b.job_id, str(DependencyCondition.AFTER_ANY), b.word) for b in _shown(blockers))
    return out


def reword_after_rename(job: Job, old_name: str, *, by: str, actor: str, at: datetime, itself: bool) -> None:
    """After `job` was renamed from `old_name` (services/holds.update, in its transaction): the
    stored reason of each waiting job whose wait the rename changed, said at once as the next
    cycle would say it (`waits`, the engine's sentence), not from the next cycle on: the
    singletons of its submitter and old name (the job no longer holds them up) and new name (it
    does now, if it runs or waits ahead of them), and the job itself when `itself` (the rename is
    all that changed while it waits and it is not held: a singleton waits on the jobs of its new
    name). Only a reason that changes is written; held jobs keep their ``Held`` sentence, said
    anew with what they also wait for.

    - A job that now waits on a job it did not: ``WaitingForDependency``, out of the queue at
      once (its place dropped, as a change of its dependencies drops it), and a ``job.pending``
      event, since the next cycle finds its reason unchanged and records none.
    - A singleton the rename frees (nothing of its name runs or waits ahead of it now, no other
      dependency unmet): ``DependencySatisfied`` "… back in the queue from the next scheduling
      cycle." and a ``job.updated`` event, as a job's end freeing it gets; the job itself
      ``Changed``, as any change of it (its ``job.updated`` event says the rename).
    - One waiting still, on another job of the name: the engine's sentence naming it.
    Two queries (the jobs, then what they wait on), and one write per job whose reason changed."""
    names = {old_name, job.name}
    # The singletons it holds up (or held up) by the rule `waits` reads: it runs, or waits ahead.
    ahead = Q(singleton=True, submitter_id=job.submitter_id, name__in=names) if job.submitter_id else Q(pk__in=[])
    if job.state == JobState.PENDING:
        ahead &= Q(submitted_at__gt=job.submitted_at) | Q(submitted_at=job.submitted_at, pk__gt=job.pk)
    rows = list(Job.objects.filter(ahead | Q(pk=job.pk) if itself else ahead, state=JobState.PENDING)
                .exclude(pk__in=[] if itself else [job.pk])
                .values_list("pk", "team_id", "name", "hold", "held_by__username", "hold_reason", "pending_code",
                             "pending_words", "would_start_if_words"))
    if not rows:
        return
    alternatives: set[int] = set()
    now_waits = waits([row[0] for row in rows], any_of=alternatives)
    events: list[Event] = []
    out_of_line: list[int] = []
    for pk, team_id, name, hold, holder, hold_reason, code, words, would in rows:
        waits_on = tuple(
            engine.DependencyWait(upstream=str(upstream), condition=engine.DependencyCondition(condition),
                                  upstream_state=word)
            for upstream, condition, word in now_waits.get(pk, ()))
        new: tuple[str, str, str] | None = None
        if hold:
            if code == engine.ReasonCode.HELD.value:
                new = _sentence(engine.JobSpec(id=str(pk), team="", priority_class="", gpus=1, submitted_at=0.0,
                                               waits_on=waits_on, held_by=hold_label_of(hold, holder or ""),
                                               hold_reason=hold_reason), pk in alternatives)
        elif waits_on:
            new = _sentence(engine.JobSpec(id=str(pk), team="", priority_class="", gpus=1, submitted_at=0.0,
                                           waits_on=waits_on), pk in alternatives)
            if code != new[0]:
                out_of_line.append(pk)
                events.append(Event(created_at=at, kind=str(EventKind.JOB_PENDING), actor=actor, reason=new[0],
                                    message=new[1], job_id=pk, team_id=team_id,
                                    data={"renamed": job.pk, "from": old_name, "to": job.name}))
        elif code == engine.ReasonCode.WAITING_FOR_DEPENDENCY.value:
            if pk == job.pk:
                new = ("Changed", f"Changed by {by}; waiting for the next scheduling cycle to judge it as it is now.", "")
            elif name == old_name:  # joining a name frees nobody: only leaving one does
                new = (SATISFIED, f"No other job named “{name}” of this submitter runs or waits ahead of it now "
                                  f"(job {job.pk} was renamed “{job.name}”): back in the queue from the next "
                                  "scheduling cycle.", "")
                events.append(Event(
                    created_at=at, kind=str(EventKind.JOB_UPDATED), actor=actor, reason=SATISFIED,
                    message=f"Job {job.pk} was renamed “{job.name}” (was “{old_name}”): no other job named “{name}” "
                            f"of this submitter runs or waits ahead of it now, so its singleton dependency is met"
                            f"{_still_waiting(0)}",
                    job_id=pk, team_id=team_id,
                    data={"upstream": job.pk, "condition": SINGLETON, "renamed": [old_name, job.name],
                          "waiting_on": 0}))
        if new is None or (new[0] == code and new[1] in (words, split_numbers(new[1])[0])
                           and new[2] in (would, split_numbers(new[2])[0])):
            continue
        Job.objects.filter(pk=pk, state=JobState.PENDING).update(
            pending_code=new[0], pending_words=new[1][:500], would_start_if_words=new[2][:300])
        if pk == job.pk:
            job.pending_code, job.pending_words, job.would_start_if_words = new[0], new[1][:500], new[2][:300]
    if out_of_line:
        PendingPlace.objects.filter(job_id__in=out_of_line).delete()
    if events:
        Event.objects.bulk_create(events)


# -------------------------------------------------------------------------------- read side


def of_jobs(job_ids: Sequence[int]) -> tuple[dict[int, list[dict[str, Any]]], dict[int, list[int]]]:
    """For the API: each job's dependencies (job, condition, satisfied_at, the upstream's
    state) and the ids of the jobs that depend on it. One query for any number of jobs (none
    for none)."""
    deps: dict[int, list[dict[str, Any]]] = {pk: [] for pk in job_ids}
    dependents: dict[int, list[int]] = {pk: [] for pk in job_ids}
    if not job_ids:
        return deps, dependents
    for job_id, upstream_id, condition, satisfied_at, state in (
        JobDependency.objects.filter(Q(job_id__in=job_ids) | Q(upstream_id__in=job_ids)).order_by("job_id", "upstream_id")
        .values_list("job_id", "upstream_id", "condition", "satisfied_at", "upstream__state")
    ):
        if job_id in deps:
            deps[job_id].append({"job": upstream_id, "condition": condition, "satisfied_at": satisfied_at,
                                 "state": state})
        if upstream_id in dependents:
            dependents[upstream_id].append(job_id)
    return deps, dependents


def page_of(job_id: int, viewer: access.Access) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """For the job's page, in one query: what it runs after (each upstream job, what it waits
    for it to do in words, where it stands, when it was met) and the jobs waiting on it. A job
    of a team the viewer may not read (an admin may tie jobs of two teams) is named by its id
    only: no name, no link (`visible` False)."""
    runs_after: list[dict[str, Any]] = []
    waited_on_by: list[dict[str, Any]] = []
    for dependent, upstream, condition, met_at, up_state, up_name, up_team, down_state, down_name, down_team in (
        JobDependency.objects.filter(Q(job_id=job_id) | Q(upstream_id=job_id)).order_by("job_id", "upstream_id")
        .values_list("job_id", "upstream_id", "condition", "satisfied_at", "upstream__state", "upstream__name",
                     "upstream__team_id", "job__state", "job__name", "job__team_id")
    ):
        if dependent == job_id:
            visible = viewer.may_read_team(up_team)
            runs_after.append({"job": upstream, "name": up_name if visible else "", "visible": visible,
                               "condition": condition, "awaits": AWAITS[DependencyCondition(condition)],
                               "state": state_word(up_state), "met_at": met_at})
        else:
            visible = viewer.may_read_team(down_team)
            waited_on_by.append({"job": dependent, "name": down_name if visible else "", "visible": visible,
                                 "condition": condition, "state": state_word(down_state), "met_at": met_at})
    return runs_after, waited_on_by


def singleton_page(job: Job, viewer: access.Access) -> dict[str, Any] | None:
    """For the job's page, a singleton's line of "Runs after": its name and, while it waits, the
    job of that name it waits for now (`_shown`: the nearest one ahead, else those running), each
    with where it stands; a job of a team the viewer may not read by its id only. None for a job
    that is not a singleton; one query for a waiting one, none otherwise."""
    if not job.singleton:
        return None
    shown: list[dict[str, Any]] = []
    if job.state == JobState.PENDING:
        for b in _shown(singleton_blockers(job.submitter_id, job.name, job_id=job.pk, submitted_at=job.submitted_at)):
            shown.append({"job": b.job_id, "visible": viewer.may_read_team(b.team_id),
                          "state": state_word(b.state)})
    return {"name": job.name, "waits_for": shown}
