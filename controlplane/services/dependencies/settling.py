"""A job started or ended (services/transitions.py calls `started` and `ended`): its dependents'
conditions are met, each with an event, or can never be met (cancels.py), down a chain of any
length; a waiting singleton it held up, free now, is told so."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from controlplane.choices import DependencyCondition, DependencyMode, EventKind, JobState
from controlplane.models import Event, Job, JobDependency
from controlplane.services.dependencies.cancels import cancel_never_met, without_alternatives
from controlplane.services.dependencies.conditions import SATISFIED, Change, is_met, never_met
from controlplane.services.dependencies.waiting import among_ids, unmet_counts
from controlplane.services.dependencies.words import outcome, still_waiting
from controlplane.services.dependency_text import SINGLETON


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
        found = _unmet_on(list(by_id), only_after=only_after)
        if not found:
            return ended_here
        met, doomed, maybe = _sorted_out(found, by_id)
        if met:
            JobDependency.objects.filter(pk__in=[m[0] for m in met]).update(satisfied_at=at)
        doomed.update(without_alternatives(maybe))
        if met:
            _record_met(met, by_id, {m[1] for m in met if m[1] not in doomed}, at=at, actor=actor)
        changes = cancel_never_met(doomed, by_id, at=at, actor=actor)
        only_after = False
    return ended_here


def _unmet_on(upstream_ids: list[int], *, only_after: bool) -> list[tuple[Any, ...]]:
    """`_settle`'s step 1: the dependencies not met yet on these jobs (only ``after`` ones when
    `only_after`): (pk, job, upstream, condition, the job's state, team and dependency_mode)."""
    rows = JobDependency.objects.filter(upstream_id__in=upstream_ids, satisfied_at__isnull=True)
    if only_after:
        rows = rows.filter(condition=DependencyCondition.AFTER)
    return list(rows.order_by("job_id", "upstream_id").values_list(
        "pk", "job_id", "upstream_id", "condition", "job__state", "job__team_id", "job__dependency_mode"))


#: Per waiting job whose dependency can never be met: (the upstream job, the condition, its
#: team, the text of its any-of list: "" for all-of).
_Doomed = dict[int, tuple[int, str, int, str]]


def _sorted_out(found: list[tuple[Any, ...]], by_id: dict[int, Change]) -> tuple[
        list[tuple[int, int, int, str, int]], _Doomed, _Doomed]:
    """`_unmet_on`'s rows as the upstream's change leaves them: met (pk, job, upstream,
    condition, team); never to be met, for a waiting all-of job (`_Doomed`); and never to be met
    for a waiting any-of job, doomed only if no alternative is left (`without_alternatives`)."""
    met: list[tuple[int, int, int, str, int]] = []
    doomed: _Doomed = {}
    maybe: _Doomed = {}
    for pk, job_id, upstream_id, condition, job_state, team_id, mode in found:
        change = by_id[upstream_id]
        if is_met(condition, change.state):
            met.append((pk, job_id, upstream_id, condition, team_id))
        elif never_met(condition, change.state) and job_state == JobState.PENDING:
            (maybe if mode == DependencyMode.ANY else doomed).setdefault(job_id, (upstream_id, condition, team_id, ""))
    return met, doomed, maybe


def _met_event(change: Change, job_id: int, team_id: int, condition: str, met: str, waiting_on: int, *,
               at: datetime, actor: str) -> Event:
    """The event on a waiting job that an upstream job's start or end met a dependency of: "Job
    12 succeeded: <`met`>; it still waits on 1 other job"."""
    return Event(
        created_at=at, kind=str(EventKind.JOB_UPDATED), actor=actor, reason=SATISFIED,
        message=f"Job {change.job_id} {outcome(change.state, change.exit_code)}: {met}{still_waiting(waiting_on)}",
        job_id=job_id, team_id=team_id,
        data={"upstream": change.job_id, "condition": condition, "upstream_state": change.state,
              "waiting_on": waiting_on},
    )


def _record_met(met: list[tuple[int, int, int, str, int]], by_id: dict[int, Change], waiting: set[int], *,
                at: datetime, actor: str) -> None:
    """One event per dependency met, on its dependent if that still waits: what the upstream
    job did, and what is left to wait for (one query for all of them)."""
    modes = dict(Job.objects.filter(pk__in=waiting, state=JobState.PENDING).values_list("pk", "dependency_mode"))
    pending = set(modes)
    if not pending:
        return
    # an any-of job waits on no other job once one is met
    left = unmet_counts(pk for pk in pending if modes[pk] != DependencyMode.ANY)
    events = []
    for _, job_id, upstream_id, condition, team_id in met:
        if job_id not in pending:
            continue
        enough = " (any one of its dependencies is enough)" if modes[job_id] == DependencyMode.ANY else ""
        events.append(_met_event(by_id[upstream_id], job_id, team_id, condition,
                                 f"its dependency {condition} is met{enough}", left.get(job_id, 0), at=at, actor=actor))
    Event.objects.bulk_create(events)


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
    freed = _freed_singletons(list(by_id))
    if not freed:
        return
    left = unmet_counts([row[0] for row in freed])
    Event.objects.bulk_create([
        _met_event(by_id[upstream_id], job_id, team_id, SINGLETON,
                   f"no other job named “{name}” of this submitter runs or waits ahead of it now, so its singleton "
                   "dependency is met", left.get(job_id, 0), at=at, actor=actor)
        for job_id, team_id, name, upstream_id in freed])


def _freed_singletons(ended_ids: list[int]) -> list[tuple[Any, ...]]:
    """The waiting singletons one of these ended jobs held up (it ran, or waited ahead) and that
    nothing of their name holds up now: (id, team, name, the ended job), one short query when
    no singleton of their names waits, else two."""
    job = connection.ops.quote_name(Job._meta.db_table)
    in_e, id_params = among_ids("e.id", ended_ids)
    # 1. any waiting singleton of their names at all? (A short statement, planned in a fraction
    #    of the next one's time: most ends have none.)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT j.id FROM {job} e JOIN {job} j ON j.submitter_id = e.submitter_id AND j.name = e.name "
                       f"AND j.singleton AND j.state = %s WHERE {in_e} LIMIT 1", [JobState.PENDING.value, *id_params])
        if cursor.fetchone() is None:
            return []
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
        return cursor.fetchall()
