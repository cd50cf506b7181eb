"""What places each waiting job in the queue, as Slurm's `sprio` shows it.

The engine decides the order (scheduler_core.queue: `queue_factors_of`, the very keys phase 1
sorts by); this module reads what the order reads of the fleet as a cycle would and keeps the
jobs the asker may see.
The figures are the ones the next cycle orders by: the team shares move with usage, and aging
adds its points as jobs wait. A job's `queue_position` (from the last cycle) counts only the
jobs that cycle left waiting, ranks jobs that can never run after those that can and held jobs
after them, and is None for a job waiting for a dependency (not in the queue, counted in no
one's); `order` here is the place among every job in line now."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

import scheduler_core as engine
from controlplane.choices import JobState
from controlplane.models.jobs import Job, fill_numbers
from controlplane.services import access
from controlplane.services.snapshot import read_queue, scheduler_config

#: How each queue-order plugin orders jobs of equal priority, in the words the job page says it
#: beside a waiting job's place (`qm sprio` heads its table with the same rule, in its columns'
#: names): scheduler_core.plugins' sort keys, in order.
AMONG_EQUALS = {
    "priority_fair_share": "among equal priorities the lower team share goes first, then the shorter runtime "
                           "limit, then the earlier submission",
    "priority_fifo": "among equal priorities the earlier submission goes first",
    "fifo": "the queue is in submission order alone",
}


@dataclass(frozen=True)
class QueueOrder:
    """The next cycle's order of every job in line, fleet-wide: ids, team names and numbers
    only (no job's name), so a page may keep it a few seconds and share it among viewers;
    `priorities` keeps of it what an asker may see."""

    at: datetime
    queue_order: str
    factors: tuple[engine.QueueFactors, ...]


@dataclass(frozen=True)
class QueuePriorities:
    """The jobs in line the asker may see (of `team` only, when asked), in queue order, with the
    factors of their places: `count` of them, `jobs` the ones from `offset` (at most `limit`);
    how many jobs are in line in all; the queue-order plugin; every team's dominant share."""

    at: datetime
    queue_order: str
    in_line: int
    jobs: list[dict[str, Any]]
    team_shares: dict[str, float]
    count: int = 0
    offset: int = 0


def queue_order(now: datetime | None = None) -> QueueOrder:
    """Every job in line in the next cycle's order, with its factors: of the fleet as a cycle
    reads it, only what the order reads (services/snapshot.read_queue: the waiting jobs' few
    fields and the shares' sums, not the nodes and running jobs), ordered by the engine's
    `queue_factors_of`, which gives the very factors `queue_factors` gives of the whole snapshot."""
    now = now or timezone.now()
    config = scheduler_config()
    return QueueOrder(at=now, queue_order=config.queue_order,
                      factors=engine.queue_factors_of(read_queue(now), config))


def _never_runnable_orders(factors: Sequence[engine.QueueFactors]) -> list[int]:
    """The `order`s, ascending, of the jobs in line that can never run as asked (the last cycle's
    word), whoever's: a job that can start counts those ahead of it, which the cycle places after
    it (its queue position is its place among the jobs that can start). One query, of the few."""
    never = set(Job.objects.filter(state=JobState.PENDING, pending_resolvable=False).values_list("pk", flat=True))
    return sorted(f.order for f in factors if int(f.job_id) in never)


def priorities(user: AbstractBaseUser, job_ids: Collection[int] = (), now: datetime | None = None,
               order: QueueOrder | None = None, *, team: str | None = None, offset: int = 0,
               limit: int | None = None) -> QueuePriorities:
    """The factors of the waiting jobs `user` may see (only `job_ids` when given, only `team`'s
    when given), from `order` (read now when not given): those from `offset`, at most `limit`
    (every one from `offset` when None). The jobs a reader may see are their teams' (access's
    scope), told apart by the order's team names; only the page's jobs are read, for their
    names, array indices and, of a job that can never run as asked, the reason the last cycle
    stored (one query however many wait)."""
    if order is None:
        order = queue_order(now)
    factors = order.factors
    who = access.access_of(user)
    readable = None if who.is_admin else set(access.member_teams(user).values_list("name", flat=True))
    kept = [f for f in factors
            if (not job_ids or int(f.job_id) in job_ids) and (team is None or f.team == team)
            and (readable is None or f.team in readable)]
    shown = kept[offset:] if limit is None else kept[offset:offset + limit]
    # Each job's name, and its array and index: a task is named `sweep [3]`, as the job list says it;
    # and whether it can run as asked (the last cycle's word): one that never can is ranked here by
    # priority alone, and the cycle places it after every job that can start. Of one that never can,
    # why, as the last cycle stored it (its code, its sentence's words and, in its place, their
    # numbers): read with the names, in the same query (a join), not decided here.
    jobs = {row[0]: row[1:] for row in access.visible_jobs(user).filter(
        pk__in=[int(f.job_id) for f in shown]).values_list(
            "pk", "name", "array_id", "array_index", "pending_resolvable", "pending_code", "pending_words",
            "place__numbers")}
    never_orders = _never_runnable_orders(factors) if any(job[3] for job in jobs.values()) else []
    rows = []
    for f in shown:
        job = jobs.get(int(f.job_id))
        if job is None:
            continue
        name, array_id, index, can_run, code, words, numbers = job
        rows.append({
            "job": int(f.job_id), "name": name, "array_id": str(array_id) if array_id else None,
            "array_index": index, "order": f.order, "team": f.team, "priority_class": f.priority_class,
            "class_value": f.class_value, "aging_points": f.aging_points, "effective_priority": f.effective_priority,
            "team_share": f.team_share, "runtime_limit_s": f.runtime_limit_s, "can_run": can_run,
            "never_ahead": bisect_left(never_orders, f.order) if can_run else 0,
            "reason_code": None if can_run else code or None,
            "reason": None if can_run else fill_numbers(words, numbers.split() if numbers else []) or None})
    return QueuePriorities(
        at=order.at,
        queue_order=order.queue_order,
        in_line=len(factors),
        jobs=rows,
        team_shares=dict(sorted({f.team: f.team_share for f in factors}.items())),
        count=len(kept),
        offset=offset,
    )
