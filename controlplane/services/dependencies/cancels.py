"""A waiting job whose dependency can no longer be met (an any-of job: none of its alternatives) is
cancelled (reason ``DependencyNeverSatisfied``), saying what became of the upstream job and, down
a chain, of the job whose end began it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db.models import Q

from controlplane.choices import DependencyCondition, DependencyMode, EventKind, JobState
from controlplane.models import Event, Job, JobDependency
from controlplane.services import dependency_text
from controlplane.services.dependencies.conditions import NEVER_SATISFIED, Change, never_met
from controlplane.services.dependencies.words import AWAITED, outcome


def without_alternatives(maybe: dict[int, tuple[int, str, int, str]]) -> dict[int, tuple[int, str, int, str]]:
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


def cancel_never_met(doomed: dict[int, tuple[int, str, int, str]], by_id: dict[int, Change], *, at: datetime,
                     actor: str) -> list[Change]:
    """Cancel each waiting job whose dependency can no longer be met (an any-of job: none of its
    alternatives, their text given); returns those cancelled (a job bound or cancelled meanwhile
    is left alone: compare-and-set on pending)."""
    cancelled: list[Change] = []
    events: list[Event] = []
    for job_id, (upstream_id, condition, team_id, alternatives) in sorted(doomed.items()):
        change = by_id[upstream_id]
        sentence, root = _why_cancelled(change, condition, alternatives)
        if not Job.objects.filter(pk=job_id, state=JobState.PENDING).update(
            state=JobState.CANCELLED, finished_at=at, state_changed_at=at, pending_code=NEVER_SATISFIED,
            pending_words=sentence[:500], would_start_if_words="", pending_resolvable=False,
        ):
            continue
        cancelled.append(Change(job_id, JobState.CANCELLED, because=root))
        events += _cancel_events(job_id, team_id, change, condition, alternatives, sentence, at=at, actor=actor)
    if events:
        Event.objects.bulk_create(events)
    return cancelled


def _why_cancelled(change: Change, condition: str, alternatives: str) -> tuple[str, tuple[int, str]]:
    """The sentence a job is cancelled with for `change` (its upstream's end: what became of it
    and, when it was itself cancelled down a chain, why: "was cancelled because job 107 failed
    (exit 3)", not a bare "was cancelled" that sends the researcher up the chain one job page at
    a time to find the failure), and the chain's root for the jobs further down."""
    became = outcome(change.state, change.exit_code)
    root = change.because or (change.job_id, became)
    if change.because is not None:
        became += f" because job {change.because[0]} {change.because[1]}"
    if alternatives:
        return (f"Job {change.job_id} {became}: this job was to run after any one of its dependencies was met "
                f"({alternatives}), and none can be now, so it is cancelled."), root
    return (f"Job {change.job_id} {became}: this job was to run only after it "
            f"{AWAITED[DependencyCondition(condition)]} ({condition}), so it is cancelled."), root


def _cancel_events(job_id: int, team_id: int, change: Change, condition: str, alternatives: str, sentence: str, *,
                   at: datetime, actor: str) -> list[Event]:
    """A job cancelled for a dependency never met: its ``job.cancelled`` event (why, with the
    upstream's end) and its ``job.finished``."""
    upstream_id = change.job_id
    data = {"upstream": upstream_id, "condition": condition, "upstream_state": change.state,
            "upstream_exit_code": change.exit_code,
            **({"because_job": change.because[0]} if change.because is not None else {}),
            **({"dependency_mode": DependencyMode.ANY.value, "dependencies": alternatives} if alternatives else {})}
    return [
        Event(created_at=at, kind=str(EventKind.JOB_CANCELLED), actor=actor, reason=NEVER_SATISFIED,
              message=sentence, job_id=job_id, team_id=team_id, data=data),
        Event(created_at=at, kind=str(EventKind.JOB_FINISHED), actor=actor, reason="Cancelled",
              message=f"Job cancelled: its dependency on job {upstream_id} can never be met",
              job_id=job_id, team_id=team_id, data={"state": JobState.CANCELLED.value, "exit_code": None}),
    ]


def cancelled_with(ends: Mapping[int, datetime]) -> list[tuple[int, str, int | None, int]]:
    """The jobs the cancels of `ends` (a job's id → the instant it was cancelled: one job, or an
    array's tasks) cancelled down their chains (their dependency never to be met now): (id,
    name, array index, team id), by id, the cancelled jobs themselves left out. Read from their
    own `job.cancelled` events, which name the job whose end began the chain (`data.upstream`
    for its direct dependents, `data.because_job` further down) and the instant, so a cascade of
    an earlier end of the same job (it was requeued since) is not counted. One query, with a
    clause per instant (an array's waiting tasks are cancelled at one)."""
    by_instant: dict[datetime, list[int]] = defaultdict(list)
    for job_id, at in ends.items():
        by_instant[at].append(job_id)
    if not by_instant:
        return []
    began = Q()
    for at, ids in by_instant.items():
        began |= Q(created_at=at) & (Q(data__upstream__in=ids, data__because_job__isnull=True)
                                     | Q(data__because_job__in=ids))
    events = Event.objects.filter(kind=EventKind.JOB_CANCELLED, reason=NEVER_SATISFIED).filter(began)
    return list(Job.objects.filter(pk__in=events.values("job_id")).exclude(pk__in=list(ends)).order_by("pk")
                .values_list("pk", "name", "array_index", "team_id"))
