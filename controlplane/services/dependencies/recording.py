"""A submit's dependencies written: the rows (`record`), and a new job's words until the first cycle
says them (`waiting_words`; an array's aftercorr tasks each their own: `corresponding_words`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection

from controlplane.choices import DependencyCondition
from controlplane.models import Job, JobDependency
from controlplane.services.dependencies.conditions import never_met
from controlplane.services.dependencies.singletons import Blocker, shown
from controlplane.services.dependencies.upstream import Upstream
from controlplane.services.dependencies.words import sentence_spec, state_word, stored_words, wait_on


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
    waits = tuple(wait_on(u.job_id, u.condition, state_word(u.state)) for u in unmet) + tuple(
        wait_on(b.job_id, DependencyCondition.AFTER_ANY, b.word) for b in shown(blockers))
    if any_of and any(u.met for u in upstream):
        waits = ()  # any-of: one met is enough
    if not waits:
        return "Submitted", "Waiting for the next scheduling cycle", ""
    return stored_words(sentence_spec("submit", waits), any_of)


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
