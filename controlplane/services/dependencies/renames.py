"""A waiting job's rename changes which singletons wait on it: each waiting job whose wait changed
is said anew at once (`reword_after_rename`), as the next cycle would say it."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q

import scheduler_core as engine
from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, PendingPlace
from controlplane.models.jobs import split_numbers
from controlplane.services.dependencies.conditions import SATISFIED
from controlplane.services.dependencies.waiting import waits
from controlplane.services.dependencies.words import still_waiting, stored_words
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
                new = stored_words(engine.JobSpec(id=str(pk), team="", priority_class="", gpus=1, submitted_at=0.0,
                                               waits_on=waits_on, held_by=hold_label_of(hold, holder or ""),
                                               hold_reason=hold_reason), pk in alternatives)
        elif waits_on:
            new = stored_words(engine.JobSpec(id=str(pk), team="", priority_class="", gpus=1, submitted_at=0.0,
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
                            f"{still_waiting(0)}",
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
