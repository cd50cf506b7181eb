"""Job dependencies (Slurm's ``--dependency=afterok:12:13,afterany:14``): the rules, in one home.

A dependency says that job J may start only once job U meets a condition:

- ``after``: U has started (or ended without starting: Slurm's "begun execution or been
  cancelled"). A preempted or requeued U does not take it back.
- ``afterok``: U succeeded. Never met once U failed, was cancelled, timed out or can never run.
- ``afternotok``: U ended without succeeding (failed, cancelled, timed out, can never run).
  Never met once U succeeded.
- ``afterany``: U ended, however.

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

A change (`judge`, then `replace`) takes a transaction-wide advisory lock first, so changes of
dependencies run one at a time and each cycle check sees every edge the others wrote, then
locks its upstream jobs FOR SHARE before services/holds.update locks the job itself: the order
a transition takes them in (the upstream job's row, then its dependents'), so the two never
deadlock. A cycle's bind of a job whose dependencies changed after its snapshot finds them in
`waiting_among` and drops it as stale. The text form (``afterok:12:13,afterany:14``) is read and
written by services/dependency_text.py, shared with `qm`.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Count, Q

import scheduler_core as engine
from controlplane.choices import FINISHED_JOB_STATES, DependencyCondition, EventKind, JobState
from controlplane.models import Event, Job, JobDependency, PendingPlace
from controlplane.services import access, dependency_text
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


class Refused(Exception):
    """The dependencies cannot be recorded: `errors` maps each item's field to why."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def wanted_from(items: Iterable[dict[str, Any]]) -> tuple[Wanted, ...]:
    """The API's items (`{"job": 12, "condition": "afterok"}` or `{"array": uuid, ...}`),
    already typed by the serializer, as `Wanted`."""
    return tuple(
        Wanted(job=item.get("job"), array=item.get("array"),
               condition=str(item.get("condition") or DependencyCondition.AFTER_OK))
        for item in items
    )


def resolve(user: AbstractBaseUser, wanted: Sequence[Wanted], *, tasks: int = 1, lock: bool = True) -> list[Upstream]:
    """Check a submit's dependencies and lock their upstream jobs; the caller holds the
    transaction that then inserts the job(s) and calls `record`. `lock=False`: a check that
    writes nothing after it (the submit form's live check) reads them without a lock.

    Steps:
    1. at most MAX_DEPENDENCIES items, none naming one job (or array) twice;
    2. read the named jobs and the tasks of the named arrays among those `user` may see
       (services/access.py: another team's job is "no job 12 you can see", as if it did not
       exist), locking their rows FOR SHARE so that none starts or ends before we commit;
    3. refuse a condition that can already never be met, saying what became of the job.
    Raises Refused naming each item's field (``dependencies.1.condition``)."""
    errors: dict[str, str] = {}
    if len(wanted) > MAX_DEPENDENCIES:
        raise Refused({"dependencies": f"at most {MAX_DEPENDENCIES} dependencies, got {len(wanted)}; "
                                       "depend on a job array to wait on many jobs at once"})
    seen: dict[Any, int] = {}
    for i, item in enumerate(wanted):
        key = ("job", item.job) if item.job is not None else ("array", item.array)
        field = f"dependencies.{i}.{key[0]}"
        if key in seen:
            errors[field] = (f"{key[0]} {key[1]} is already dependency {seen[key]}; a job depends on another "
                             "job once, with one condition")
        else:
            seen[key] = i
    if errors:
        raise Refused(errors)
    ids = [w.job for w in wanted if w.job is not None]
    arrays = [w.array for w in wanted if w.array is not None]
    visible = access.visible_jobs(user)
    rows = _locked_rows(visible, ids, arrays, lock=lock)
    by_id = {row[0]: row for row in rows}
    by_array: dict[uuid.UUID, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        if row[4] is not None:
            by_array[row[4]].append(row)
    upstream: dict[int, Upstream] = {}
    for i, item in enumerate(wanted):
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
        for job_id, state, exit_code, requeue_count, _array in sorted(found):
            if never_met(item.condition, state):
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
    if not errors and len(upstream) * tasks > MAX_UPSTREAM_JOBS:
        errors["dependencies"] = (f"{len(upstream)} upstream jobs for {tasks} tasks make "
                                  f"{len(upstream) * tasks} dependencies; at most {MAX_UPSTREAM_JOBS}")
    if errors:
        raise Refused(errors)
    return list(upstream.values())


def _locked_rows(visible: Any, ids: list[int], arrays: list[uuid.UUID], *, lock: bool = True) -> list[tuple[Any, ...]]:
    """(id, state, exit_code, requeue_count, array_id) of the named jobs and arrays' tasks the
    user may see. On PostgreSQL the rows are locked FOR SHARE: a transition's UPDATE of one
    waits for our commit (and then finds our dependency rows), and we wait for one already
    under way (and then read its new state). SQLite (the demo) writes one transaction at a
    time anyway."""
    if not ids and not arrays:
        return []
    named = Q(pk__in=ids) | Q(array_id__in=arrays)
    query = visible.filter(named).order_by("pk").values_list("pk", "state", "exit_code", "requeue_count", "array_id")
    if connection.vendor != "postgresql" or not lock:
        return list(query)
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} FOR SHARE", params)
        rows = cursor.fetchall()
    return [tuple(r) for r in rows]


def waiting_words(upstream: Sequence[Upstream]) -> tuple[str, str, str]:
    """A new job's reason until the first cycle says it: ("WaitingForDependency", the engine's
    sentence, what would start it) when a dependency is not met yet, else the submit's own
    ("Submitted", "Waiting for the next scheduling cycle", ""). The sentence is the engine's
    (scheduler_core.eligibility), so the cycle's first word on it is the same."""
    waits = tuple(
        engine.DependencyWait(upstream=str(u.job_id), condition=engine.DependencyCondition(u.condition),
                              upstream_state=state_word(u.state))
        for u in sorted(upstream, key=lambda u: u.job_id) if not u.met
    )
    if not waits:
        return "Submitted", "Waiting for the next scheduling cycle", ""
    why = OutOfLine(engine.JobSpec(id="submit", team="", priority_class="", gpus=1, submitted_at=0.0, waits_on=waits))
    return why.code.value, why.message, why.would_start_if


def record(job_ids: Sequence[int], upstream: Sequence[Upstream], *, at: datetime) -> int:
    """Write each new job's dependency rows (a condition met already: satisfied now). Returns
    how many were written. The caller's transaction also holds the jobs' insert."""
    rows = [
        JobDependency(job_id=job_id, upstream_id=u.job_id, condition=u.condition, satisfied_at=at if u.met else None)
        for job_id in job_ids
        for u in upstream
    ]
    JobDependency.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


# ------------------------------------------------------------------------------------ change

#: The advisory lock key that serialises changes of dependencies (PostgreSQL; "qmdeps").
_EDIT_LOCK = 0x716D64657073


@dataclass(frozen=True)
class Replacement:
    """A waiting job's new dependencies as judged (`judge`): the upstream jobs, read and locked,
    and the text of the new list; `errors` (field → why) when it may not be made."""

    job_id: int
    upstream: list[Upstream]
    text: str
    errors: dict[str, str]

    @property
    def waits(self) -> bool:
        """Whether the job waits on a job after the change (a condition not met yet)."""
        return any(not u.met for u in self.upstream)


def judge(user: AbstractBaseUser, job_id: int, items: Iterable[dict[str, Any]]) -> Replacement:
    """Judge `items` (the API's list, typed) as `job_id`'s whole new dependencies: as a submit's
    (`resolve`: visible jobs, no job twice, no condition that can already never be met), and no
    cycle (`_cycle_errors`). Call it inside the change's transaction before the job's own row is
    locked (see the module's note on locks); it writes nothing, and returns the errors rather
    than raising, so the caller refuses a job that no longer waits first (409)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_EDIT_LOCK])
    wanted = wanted_from(items)
    try:
        upstream = resolve(user, wanted)
    except Refused as exc:
        return Replacement(job_id, [], "", exc.errors)
    return Replacement(job_id, upstream, dependency_text.text_of((u.job_id, u.condition) for u in upstream),
                       _cycle_errors(job_id, wanted, upstream))


def text_now(job_id: int) -> str:
    """The job's dependencies as the text says them (``afterok:12,afterany:14``; ``none``)."""
    return dependency_text.text_of(JobDependency.objects.filter(job_id=job_id).values_list("upstream_id", "condition"))


def _cycle_errors(job_id: int, wanted: Sequence[Wanted], upstream: Sequence[Upstream]) -> dict[str, str]:
    """A job that would wait, directly or down a chain, on itself: the item naming the first
    job of each such chain is refused, with the chain. The chain is followed along what waits
    (unmet dependencies of waiting jobs, as `waits` reads them), one query per link: a job
    that started or ended waits on nothing, and a condition met already holds nothing up."""
    def field(u: Upstream) -> str:
        return f"dependencies.{u.item}.{'job' if wanted[u.item].job is not None else 'array'}"

    errors: dict[str, str] = {}
    for u in upstream:
        if u.job_id == job_id:
            errors[field(u)] = f"job {job_id} is this job: a job cannot wait on itself"
    # 1. what waits on what, from the new dependencies on (one query per link of the longest chain)
    starts = {u.job_id for u in upstream if not u.met and u.job_id != job_id}
    waited_by: dict[int, list[int]] = defaultdict(list)  # j → the jobs that wait on j
    seen, frontier = set(starts), set(starts)
    while frontier:
        links = (JobDependency.objects.filter(job_id__in=frontier, satisfied_at__isnull=True,
                                              job__state=JobState.PENDING)
                 .order_by("job_id", "upstream_id")
                 .values_list("job_id", "upstream_id", "condition", "upstream__state", "upstream__requeue_count"))
        frontier = set()
        for waiting, waited_on, condition, state, requeues in links:
            if is_met(condition, state, has_started=requeues > 0):
                continue
            waited_by[waited_on].append(waiting)
            if waited_on != job_id and waited_on not in seen:
                seen.add(waited_on)
                frontier.add(waited_on)
    if job_id not in waited_by:
        return errors
    # 2. back from this job: each job that reaches it, and its next link on the shortest way
    toward: dict[int, int] = {}
    queue = [job_id]
    for target in queue:
        for waiting in waited_by.get(target, ()):
            if waiting != job_id and waiting not in toward:
                toward[waiting] = target
                queue.append(waiting)
    for u in upstream:
        if u.job_id not in starts or u.job_id not in toward or field(u) in errors:
            continue
        chain = [u.job_id]
        while toward[chain[-1]] != job_id:
            chain.append(toward[chain[-1]])
        said = " waits on ".join(f"job {pk}" for pk in chain[:2])
        said += "".join(f", which waits on job {pk}" for pk in chain[2:])
        said += (" waits on" if len(chain) == 1 else ", which waits on") + f" this job (job {job_id})"
        errors[field(u)] = f"{said}: a cycle, {'neither' if len(chain) == 1 else 'none of them'} could ever start"
    return errors


def replace(change: Replacement, *, at: datetime) -> None:
    """Write a judged change (`judge`, no errors): the job's dependency rows become the new list.
    A row kept as it was keeps its satisfied_at (or gets it now, met meanwhile); a new one met
    already is satisfied now, as a submit records it. A job now waiting on a job leaves the
    queue at once (its place is dropped, as a hold drops it; the next cycle says the same)."""
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


def waiting_among(job_ids: Iterable[int]) -> set[int]:
    """The jobs among `job_ids` that wait on a job now (a dependency not met, by the rule `waits`
    reads): the cycle's bind drops them, as a job whose dependencies were changed after its
    snapshot read it. One query; none for no job."""
    ids = list(job_ids)
    if not ids:
        return set()
    return {
        job_id
        for job_id, condition, state, requeues in JobDependency.objects.filter(job_id__in=ids, satisfied_at__isnull=True)
        .order_by().values_list("job_id", "condition", "upstream__state", "upstream__requeue_count")
        if not is_met(condition, state, has_started=requeues > 0)
    }


# ------------------------------------------------------------------------------ transitions


@dataclass(frozen=True)
class Change:
    """A job that started or ended: its new state and, once ended, its exit code."""

    job_id: int
    state: str
    exit_code: int | None = None


def started(job_ids: Iterable[int], *, at: datetime, actor: str) -> None:
    """Jobs just bound (pending → running): their ``after`` dependents' conditions are met.
    One query when no job waits on them starting."""
    changes = [Change(pk, JobState.RUNNING) for pk in job_ids]
    if changes:
        _settle(changes, at=at, actor=actor, only_after=True)


def ended(changes: Sequence[Change], *, at: datetime, actor: str) -> None:
    """Jobs that just ended (succeeded, failed, cancelled, timed out): their dependents'
    conditions are met, or can no longer be met (the waiting dependent is cancelled, and so
    on down its chain). One query when no job depends on them."""
    if changes:
        _settle(list(changes), at=at, actor=actor, only_after=False)


def _settle(changes: list[Change], *, at: datetime, actor: str, only_after: bool) -> None:
    """Steps, repeated while a round cancels dependents (a work list, so a chain of any
    length costs rounds, not stack):
    1. the unmet dependencies on this round's jobs, with their dependent's state (one query);
    2. those now met: satisfied_at set (one update), and an event on each waiting dependent;
    3. those never to be met: each waiting dependent cancelled (compare-and-set on pending),
       with its events; the cancelled jobs are the next round's changes."""
    while changes:
        by_id = {c.job_id: c for c in changes}
        rows = JobDependency.objects.filter(upstream_id__in=list(by_id), satisfied_at__isnull=True)
        if only_after:
            rows = rows.filter(condition=DependencyCondition.AFTER)
        found = list(rows.order_by("job_id", "upstream_id").values_list(
            "pk", "job_id", "upstream_id", "condition", "job__state", "job__team_id"))
        if not found:
            return
        met: list[tuple[int, int, int, str, int]] = []
        doomed: dict[int, tuple[int, str, int]] = {}
        for pk, job_id, upstream_id, condition, job_state, team_id in found:
            change = by_id[upstream_id]
            if is_met(condition, change.state):
                met.append((pk, job_id, upstream_id, condition, team_id))
            elif never_met(condition, change.state) and job_state == JobState.PENDING and job_id not in doomed:
                doomed[job_id] = (upstream_id, condition, team_id)
        if met:
            JobDependency.objects.filter(pk__in=[m[0] for m in met]).update(satisfied_at=at)
            _record_met(met, by_id, {m[1] for m in met if m[1] not in doomed}, at=at, actor=actor)
        changes = _cancel(doomed, by_id, at=at, actor=actor)
        only_after = False


def _record_met(met: list[tuple[int, int, int, str, int]], by_id: dict[int, Change], waiting: set[int], *,
                at: datetime, actor: str) -> None:
    """One event per dependency met, on its dependent if that still waits: what the upstream
    job did, and what is left to wait for (one query for all of them)."""
    pending = set(Job.objects.filter(pk__in=waiting, state=JobState.PENDING).values_list("pk", flat=True))
    if not pending:
        return
    left = dict(
        JobDependency.objects.filter(job_id__in=pending, satisfied_at__isnull=True).order_by()
        .values("job_id").annotate(n=Count("id")).values_list("job_id", "n")
    )
    events = []
    for _, job_id, upstream_id, condition, team_id in met:
        if job_id not in pending:
            continue
        change = by_id[upstream_id]
        n = left.get(job_id, 0)
        rest = ("; it waits on no other job now" if not n
                else f"; it still waits on {n} other job{'s' if n != 1 else ''}")
        events.append(Event(
            created_at=at, kind=str(EventKind.JOB_UPDATED), actor=actor, reason=SATISFIED,
            message=f"Job {upstream_id} {outcome(change.state, change.exit_code)}: its dependency {condition} "
                    f"is met{rest}",
            job_id=job_id, team_id=team_id,
            data={"upstream": upstream_id, "condition": condition, "upstream_state": change.state,
                  "waiting_on": n},
        ))
    Event.objects.bulk_create(events)


def _cancel(doomed: dict[int, tuple[int, str, int]], by_id: dict[int, Change], *, at: datetime,
            actor: str) -> list[Change]:
    """Cancel each waiting job whose dependency can no longer be met; returns those cancelled
    (a job bound or cancelled meanwhile is left alone: compare-and-set on pending)."""
    cancelled: list[Change] = []
    events: list[Event] = []
    for job_id, (upstream_id, condition, team_id) in sorted(doomed.items()):
        change = by_id[upstream_id]
        sentence = (f"Job {upstream_id} {outcome(change.state, change.exit_code)}: this job was to run only "
                    f"after it {_AWAITED[DependencyCondition(condition)]} ({condition}), so it is cancelled.")
        if not Job.objects.filter(pk=job_id, state=JobState.PENDING).update(
            state=JobState.CANCELLED, finished_at=at, state_changed_at=at, pending_code=NEVER_SATISFIED,
            pending_words=sentence[:500], would_start_if_words="", pending_resolvable=False,
        ):
            continue
        cancelled.append(Change(job_id, JobState.CANCELLED))
        data = {"upstream": upstream_id, "condition": condition, "upstream_state": change.state,
                "upstream_exit_code": change.exit_code}
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


def waits() -> dict[int, list[tuple[int, str, str]]]:
    """Per waiting job, its dependencies not met yet: (upstream id, condition, the upstream's
    state word), by upstream id. One query per cycle, whatever the number of jobs. A condition
    its upstream meets already (a transition missed; it cannot, but the snapshot does not
    trust it) does not keep the job waiting."""
    out: dict[int, list[tuple[int, str, str]]] = {}
    for job_id, upstream_id, condition, state, requeues, hold, can_run in (
        JobDependency.objects.filter(satisfied_at__isnull=True, job__state=JobState.PENDING)
        .order_by("job_id", "upstream_id")
        .values_list("job_id", "upstream_id", "condition", "upstream__state", "upstream__requeue_count",
                     "upstream__hold", "upstream__pending_resolvable")
    ):
        if is_met(condition, state, has_started=requeues > 0):
            continue
        out.setdefault(job_id, []).append((upstream_id, condition, state_word(state, held=bool(hold), can_run=can_run)))
    return out


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
