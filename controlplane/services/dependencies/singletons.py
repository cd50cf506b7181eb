"""Slurm's ``singleton``: what holds a singleton job up, read live (no row names it): the other
jobs of its submitter and name that run, or wait ahead of it (`Blocker`, `singleton_blockers`),
which one its sentence names (`shown`), and the snapshot's rows of them (`singleton_edges`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services.dependencies.words import singleton_word
from controlplane.services.dependency_text import SINGLETON


@dataclass(frozen=True)
class Blocker:
    """A job that keeps a singleton waiting: of its submitter and name, running or stopping, or
    waiting and submitted earlier. `word`: where it stands, as the engine's sentence says it."""

    job_id: int
    state: str
    word: str
    submitted_at: datetime | None = None
    team_id: int | None = None


def shown(blockers: Iterable[Blocker]) -> list[Blocker]:
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


def singleton_edges(groups: dict[tuple[int, str], list[tuple[Any, ...]]],
                     ids: set[int] | None) -> list[tuple[Any, ...]]:
    """The `waiting_rows` of singletons, from the live jobs of each submitter and name (id,
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
