"""A waiting job's rename changes which singletons wait on it: each waiting job whose wait changed
is said anew at once (`reword_after_rename`), as the next cycle would say it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

import scheduler_core as engine
from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, PendingPlace
from controlplane.models.jobs import split_numbers
from controlplane.services.dependencies.conditions import SATISFIED
from controlplane.services.dependencies.waiting import waits
from controlplane.services.dependencies.words import sentence_spec, still_waiting, stored_words, wait_on
from controlplane.services.dependency_text import SINGLETON
from controlplane.services.hold_text import hold_label_of


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
    rows = _waiting_on_the_names(job, old_name, itself=itself)
    if not rows:
        return
    rename = _Rename(job, old_name, by, actor, at)
    alternatives: set[int] = set()
    now_waits = waits([row[0] for row in rows], any_of=alternatives)
    events: list[Event] = []
    out_of_line: list[int] = []
    for row in rows:
        pk, code, words, would = row[0], row[6], row[7], row[8]
        waits_on = tuple(wait_on(*wait) for wait in now_waits.get(pk, ()))
        new = _said_anew(rename, row, waits_on, pk in alternatives, events, out_of_line)
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


@dataclass(frozen=True)
class _Rename:
    """A rename as its words say it: the job (with its new name), its old name, who renamed it
    (`by`, `actor`) and when."""

    job: Job
    old_name: str
    by: str
    actor: str
    at: datetime


def _waiting_on_the_names(job: Job, old_name: str, *, itself: bool) -> list[tuple[Any, ...]]:
    """The waiting singletons of `job`'s submitter and old or new name that it holds up, or held
    up, by the rule `waits` reads (it runs, or waits ahead of them), and `job` itself when
    `itself`: (id, team, name, hold, holder, hold reason, code, words, would start if), one query."""
    names = {old_name, job.name}
    ahead = Q(singleton=True, submitter_id=job.submitter_id, name__in=names) if job.submitter_id else Q(pk__in=[])
    if job.state == JobState.PENDING:
        ahead &= Q(submitted_at__gt=job.submitted_at) | Q(submitted_at=job.submitted_at, pk__gt=job.pk)
    return list(Job.objects.filter(ahead | Q(pk=job.pk) if itself else ahead, state=JobState.PENDING)
                .exclude(pk__in=[] if itself else [job.pk])
                .values_list("pk", "team_id", "name", "hold", "held_by__username", "hold_reason", "pending_code",
                             "pending_words", "would_start_if_words"))


def _said_anew(rename: _Rename, row: tuple[Any, ...], waits_on: tuple[engine.DependencyWait, ...], any_of: bool,
               events: list[Event], out_of_line: list[int]) -> tuple[str, str, str] | None:
    """A waiting job's (code, sentence, would start if) after the rename, or None where the
    rename does not change them: a held job's ``Held`` sentence said anew with what it waits
    for; one that now waits on a job, the engine's sentence (out of line, with an event, when it
    did not wait before); one the rename frees (`_freed`)."""
    pk, team_id, name, hold, holder, hold_reason, code, _words, _would = row
    if hold:
        if code != engine.ReasonCode.HELD.value:
            return None
        return stored_words(sentence_spec(str(pk), waits_on, held_by=hold_label_of(hold, holder or ""),
                                          hold_reason=hold_reason), any_of)
    if waits_on:
        new = stored_words(sentence_spec(str(pk), waits_on), any_of)
        if code != new[0]:
            out_of_line.append(pk)
            events.append(Event(created_at=rename.at, kind=str(EventKind.JOB_PENDING), actor=rename.actor,
                                reason=new[0], message=new[1], job_id=pk, team_id=team_id,
                                data={"renamed": rename.job.pk, "from": rename.old_name, "to": rename.job.name}))
        return new
    if code != engine.ReasonCode.WAITING_FOR_DEPENDENCY.value:
        return None
    return _freed(rename, pk, team_id, name, events)


def _freed(rename: _Rename, pk: int, team_id: int, name: str, events: list[Event]) -> tuple[str, str, str] | None:
    """The words of a job that waited for a dependency and waits on nothing now: the renamed job
    itself ``Changed``; a singleton of the old name ``DependencySatisfied``, with its event (a
    job of the new name: None, joining a name frees nobody)."""
    job, old_name = rename.job, rename.old_name
    if pk == job.pk:
        return ("Changed", f"Changed by {rename.by}; waiting for the next scheduling cycle to judge it as it is now.",
                "")
    if name != old_name:  # joining a name frees nobody: only leaving one does
        return None
    events.append(Event(
        created_at=rename.at, kind=str(EventKind.JOB_UPDATED), actor=rename.actor, reason=SATISFIED,
        message=f"Job {job.pk} was renamed “{job.name}” (was “{old_name}”): no other job named “{name}” "
                f"of this submitter runs or waits ahead of it now, so its singleton dependency is met"
                f"{still_waiting(0)}",
        job_id=pk, team_id=team_id,
        data={"upstream": job.pk, "condition": SINGLETON, "renamed": [old_name, job.name], "waiting_on": 0}))
    return (SATISFIED, f"No other job named “{name}” of this submitter runs or waits ahead of it now "
                       f"(job {job.pk} was renamed “{job.name}”): back in the queue from the next "
                       "scheduling cycle.", "")
