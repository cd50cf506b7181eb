"""A job array's task limit, changed after submit (Slurm's `scontrol update jobid=ARRAY
ArrayTaskThrottle=N`): `PATCH job-arrays/{array_id}/`, `qm update ARRAY_ID --array-limit N`.

Arrays have no table: the limit is a column of each task (`Job.array_task_limit`, written at
submit, the same on every task), and the engine counts the array's tasks that hold GPUs against
it (scheduler_core/array_limit.py). A change sets it on every task of the array in one UPDATE,
with one `job.updated` event per task (old → new), all or nothing. Who may: the array's team's
members (as for holding or releasing the whole array, services/holds.hold_array) and admins;
an array the user cannot see is a 404. A raised limit lets more tasks start at the next cycle
(asked for at commit); a lowered one stops nothing: its running tasks run on, and no more
start until fewer than the limit hold GPUs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import structlog
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, Job
from controlplane.services import access
from controlplane.services import jobs as job_service
from controlplane.services.holds import Refused, change_words
from controlplane.services.transitions import event_fields
from scheduler_core.sentences import counted

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class LimitOutcome:
    """What a change of an array's task limit did: its limit before (`was`, the first task's),
    whether any task changed, the ids of those that did, and the sentence said."""

    array_id: uuid.UUID
    was: int | None
    limit: int | None
    changed: list[int]
    detail: str


def limit_words(limit: int | None) -> str:
    """`at most 4 tasks at a time`, or `no task limit`."""
    return f"at most {counted(limit, 'task')} at a time" if limit is not None else "no task limit"


def _runs(limit: int | None) -> str:
    """`runs at most 4 tasks at a time`, or `has no task limit`."""
    return f"runs {limit_words(limit)}" if limit is not None else "has no task limit"


def set_task_limit(user: AbstractBaseUser, array_id: uuid.UUID | str, limit: int | None) -> LimitOutcome:
    """Set the task limit of every task of the array (None: lift it). Raises Refused: 404 for
    an array the user cannot see, 403 for another team's, 400 for a bad limit (naming
    `array_task_limit`)."""
    try:
        array = uuid.UUID(str(array_id))
    except ValueError:
        raise Refused(404, "No such job array, or not yours to see.") from None
    problem = job_service.task_limit_problem(limit)
    if problem:
        raise Refused(400, f"array_task_limit: {problem}.", {"array_task_limit": problem})
    who = access.access_of(user)
    name = user.get_username()
    at = timezone.now()
    with transaction.atomic():
        team_id = access.visible_jobs(user).filter(array_id=array).values_list("team_id", flat=True).first()
        if team_id is None:
            raise Refused(404, "No such job array, or not yours to see.")
        if not who.may_submit_for(team_id):
            raise Refused(403, f"Array {array} belongs to another team; only its team or an admin may change it.")
        # Every task locked, in id order (as a hold of the array locks them): a cycle binding
        # one meanwhile either commits first (its bind counted under the old limit) or finds
        # the row changed under its plan and leaves it to the next cycle (snapshot's bind guard).
        rows = list(Job.objects.filter(array_id=array).select_for_update(no_key=True).order_by("pk")
                    .values_list("pk", "team_id", "state", "array_task_limit", "array_index"))
        was = min(rows, key=lambda r: (r[4] is None, r[4] or 0))[3]
        changed = [(pk, team, state, old) for pk, team, state, old, _ in rows if old != limit]
        if not changed:
            return LimitOutcome(array, was, limit, [],
                                f"Array {array} already {_runs(limit)}: nothing changed.")
        Job.objects.filter(array_id=array).update(array_task_limit=limit)
        actor = f"user:{name}"
        events: list[Event] = []
        for pk, team, state, old in changed:
            message = (f"Changed by {name} for its whole array: {change_words('array_task_limit', old, limit)} "
                       f"({limit_words(limit)})")
            data: dict[str, Any] = {"changes": {"array_task_limit": [old, limit]}, "state": state,
                                    "array_id": str(array)}
            events.append(Event(**event_fields(EventKind.JOB_UPDATED, actor, job=Job(pk=pk, team_id=team), at=at,
                                               reason="Changed", message=message, data=data)))
        Event.objects.bulk_create(events, batch_size=2000)
        # More tasks may start (a raised limit) or the waiting ones' reasons change: a cycle says so.
        transaction.on_commit(job_service._request_cycle)
    log.info("array_task_limit_changed", array_id=str(array), was=was, limit=limit, tasks=len(changed), user=name)
    # Said for people, as a job's change is ("array task limit 2 → 4"), not the API's name.
    detail = (f"Array {array}: {change_words('array_task_limit', was, limit)}: it {_runs(limit)} "
              f"({counted(len(changed), 'task')} changed).")
    if was is not None and limit is not None and limit < was:
        detail += " Tasks running above the new limit run on; no more start until fewer than it hold GPUs."
    return LimitOutcome(array, was, limit, [pk for pk, *_ in changed], detail)
