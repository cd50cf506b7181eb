"""Holding, releasing and changing a waiting job (Slurm's `scontrol hold/release/update`,
`sbatch -H`; Kueue's inactive workloads).

A held job stays pending but out of line: the snapshot passes who holds it (`JobSpec.held_by`)
and why (`JobSpec.hold_reason`, the holder's own words, e.g. "waiting for dataset v3"), and the
engine keeps it out of the queue and explains it (`Held`); a release clears the reason. A
user's hold is placed and released by the job's team (its submitter and any member) or an
admin; an admin's hold only by an admin. Only a waiting job is held, released or reshaped; a
running job may only be renamed and have its runtime limit lowered (raised by an admin only,
as in Slurm).

Concurrency: every write here locks the job row first (FOR NO KEY UPDATE, the mode the cycle's
bind takes, so the two serialise) and re-checks the state under the lock. A bind that locked
first wins: the job is then running and a hold or a shape change is refused with 409. A change
that locked first makes the row differ from what the cycle's snapshot read, and the bind of a
plan built from that snapshot is dropped as stale (`transitions.bind_jobs`, `as_read`): a job
is never bound with a shape it no longer asks for, nor while held.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Case, CharField, Q, QuerySet, Value, When
from django.utils import timezone

from controlplane.choices import EventKind, JobHold, JobState
from controlplane.models import Event, GpuType, Job, PendingPlace, PriorityClass, Project
from controlplane.models.events import actor_name
from controlplane.services import access, dependencies
from controlplane.services import jobs as job_service
from controlplane.services.hold_text import held_sentence, hold_label_of, reason_problem
from controlplane.services.span_text import span_words
from controlplane.services.transitions import event_fields
from scheduler_core.sentences import duration

log = structlog.get_logger(__name__)

#: The fields a waiting job's owner may change (PATCH jobs/{id}/), as the submit names them.
SHAPE_FIELDS = ("gpus", "gpus_per_node", "gpu_types", "min_gpu_memory_gb", "cpus_per_gpu", "memory_gb_per_gpu",
                "topology", "members_on_distinct_nodes", "min_gpus", "max_gpus")
#: What a submit request carries of them (`_as_submitted` judges a change as that submit).
_AS_SUBMITTED = ("name", "project", "priority_class", "runtime_limit_s", "checkpoint_interval_s", *SHAPE_FIELDS)
#: ... and its dependencies (the whole new list: judged by services/dependencies/).
CHANGEABLE_WHILE_WAITING = (*_AS_SUBMITTED, "dependencies")
#: The changes of a waiting job that change how it is scheduled: the first ETA of its stay in
#: the queue spoke of the old request, so such a change starts a new stay for the ETA record
#: (services/eta_record.py), as a hold or a requeue does; a rename, its project or its checkpoint
#: interval keep it (the engine reads none of them to order or place it).
NEW_ETA_STAY_FIELDS = (*SHAPE_FIELDS, "priority_class", "runtime_limit_s")
#: What may change once it runs: its name, and its runtime limit (lowered; raised by admins).
CHANGEABLE_WHILE_RUNNING = ("name", "runtime_limit_s")
_RUNNING_STATES = (JobState.RUNNING, JobState.PREEMPTING)


def held_waiting(jobs: QuerySet[Job]) -> int:
    """How many of `jobs` (an array's tasks) wait held: pending, out of the queue until released.
    The array summary says it beside its pending count, on the Jobs page ("Pending 3 (2 held)")
    and in the API (`held`). One query."""
    return jobs.filter(state=JobState.PENDING).exclude(hold="").count()


def changeable_now(job: Job) -> tuple[str, ...]:
    """The fields `update` may change on this job as it stands (the job page's Change form
    offers these): all of CHANGEABLE_WHILE_WAITING while it waits (its dependencies among
    them), CHANGEABLE_WHILE_RUNNING once it runs, none once it has ended. Who may change it is
    `access` (as PATCH)."""
    if job.state == JobState.PENDING:
        return CHANGEABLE_WHILE_WAITING
    if job.state in _RUNNING_STATES:
        return CHANGEABLE_WHILE_RUNNING
    return ()


class Refused(Exception):
    """A hold, release or change that may not happen: `status` (403, 409 or 400), one sentence,
    and the fields at fault when the refusal is about fields."""

    def __init__(self, status: int, detail: str, errors: dict[str, str | list[str]] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors or {}


@dataclass(frozen=True)
class Outcome:
    """What a hold, release or change did: the job as it is now, whether anything changed, and
    the sentence the API, `qm` and the page say."""

    job: Job
    changed: bool
    detail: str
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)


def hold_label(job: Job, username: str | None = None) -> str:
    name = username if username is not None else (job.held_by.get_username() if job.held_by_id else "")
    return hold_label_of(job.hold, name)


def _held_event_words(label: str, was: str, reason: str) -> tuple[str, dict[str, Any]]:
    """A job.held event's message, and the data beside what each caller adds: the reason."""
    message = (f"Held by {label}" + (f" (was held by {was})" if was else "")
               + (f": {reason} —" if reason else ":") + " out of the queue until released")
    return message, ({"reason": reason} if reason else {})


def _actor(user: AbstractBaseUser) -> str:
    return f"user:{user.get_username()}"


def _locked(job_id: int) -> Job:
    """The job row, locked for the rest of the caller's transaction (see the module's note)."""
    return Job.objects.select_for_update(no_key=True).get(pk=job_id)


def _may_act(user: AbstractBaseUser, job: Job) -> access.Access:
    who = access.access_of(user)
    if not who.may_submit_for(job.team_id):
        raise Refused(403, f"Job {job.pk} belongs to another team; only its team or an admin may change it.")
    return who


def _state_words(job: Job) -> str:
    if job.state == JobState.PREEMPTING:
        return "being stopped"
    return job.get_state_display().lower()


def _not_waiting(job: Job, verb: str) -> Refused:
    """Why a hold or release of a job that no longer waits is refused, and what to do instead."""
    if job.state == JobState.RUNNING:
        # Slurm's requeuehold: stopped, back in the queue held, from its last checkpoint (services/requeue.py).
        return Refused(409, f"Job {job.pk} is running: only a waiting job can be {verb}. To stop it, cancel it "
                            f"(qm cancel {job.pk}); to run it again later, requeue it held (qm requeue --hold "
                            f"{job.pk}) and release it when you want it to start.")
    if job.state in _RUNNING_STATES:
        return Refused(409, f"Job {job.pk} is {_state_words(job)}: only a waiting job can be {verb}. To stop it, "
                            f"cancel it (qm cancel {job.pk}); to run it later, resubmit it held (qm submit --hold) "
                            "and release it when you want it to start.")
    return Refused(409, f"Job {job.pk} has already ended ({_state_words(job)}): only a waiting job can be {verb}.")


def _since(job: Job) -> str:
    return _since_at(job.held_at)


def _since_at(held_at: datetime | None) -> str:
    return f" since {held_at:%Y-%m-%d %H:%M:%S} UTC" if held_at else ""


def _request_cycle_on_commit() -> None:
    # A held job frees its place for those behind it; a released one asks for its own.
    transaction.on_commit(job_service._request_cycle)


# ------------------------------------------------------------------------------ hold, release


def hold(user: AbstractBaseUser, job_id: int, *, reason: str = "", at: datetime | None = None) -> Outcome:
    """Hold a waiting job: out of the queue until released, for `reason` (the holder's words,
    one line; "" for none). An admin's hold is `admin` (only an admin releases it), anyone
    else's `user`. Holding a job already held changes nothing, except that an admin's hold
    replaces a user's, and that a hold of the same kind with another reason changes the
    reason (the hold stays whose it was, since when it was)."""
    at = at or timezone.now()
    problem = reason_problem(reason)
    if problem:
        raise Refused(400, f"reason: {problem}.", {"reason": problem})
    with transaction.atomic():
        job = _locked(job_id)
        who = _may_act(user, job)
        if job.state != JobState.PENDING:
            raise _not_waiting(job, "held")
        level = JobHold.ADMIN if who.is_admin else JobHold.USER
        again = _again(job.hold, level, job.hold_reason, reason)
        if again == REWORD:
            return _reword(user, job, reason, at)
        if again == KEEP:
            because = f" ({job.hold_reason})" if job.hold_reason else ""
            return Outcome(job, False, f"Job {job.pk} is already held by {hold_label(job)}{_since(job)}{because}; "
                                       "nothing changed.")
        was = hold_label(job) if job.hold else ""
        job.hold, job.held_at, job.held_by = level, at, user  # type: ignore[assignment]
        job.hold_reason = reason
        label = hold_label(job, user.get_username())
        message, would = held_sentence(label, reason)
        job.pending_code = "Held"
        job.pending_message, job.pending_would_start_if = message, would  # stored words (see models.jobs)
        job.pending_resolvable = True
        job.save(update_fields=["hold", "held_at", "held_by", "hold_reason", "pending_code", "pending_words",
                                "would_start_if_words", "pending_resolvable"])
        # Out of line: no queue position until released (the next cycle ranks it after every queued job).
        PendingPlace.objects.filter(job_id=job.pk).delete()
        said, because = _held_event_words(label, was, reason)
        Event.objects.create(**event_fields(
            EventKind.JOB_HELD, _actor(user), job=job, at=at, reason="Held", message=said,
            data={"hold": level, "held_by": user.get_username(), **({"was": was} if was else {}), **because},
        ))
        _request_cycle_on_commit()
    log.info("job_held", job=job.pk, hold=level, user=user.get_username(), reason=reason)
    return Outcome(job, True, f"Job {job.pk} held by {label}" + (f" ({reason})" if reason else "")
                   + f": it is out of the queue and holds nothing until released (qm release {job.pk}).")


#: What a hold does to a job already held (`_again`): nothing, or its reason only.
KEEP, REWORD, HOLD = "keep", "reword", "hold"


def _again(held: str, level: str, was_reason: str, reason: str) -> str:
    """What a hold of kind `level` (admin or user) for `reason` does to a waiting job held as
    `held` ("" for not held) for `was_reason`, the one rule `hold` and `hold_array` follow:
    HOLD when it is not held, or an admin's hold replaces a user's; REWORD when it is held by
    the same kind of holder and another reason is given (the hold stays whose it was, since
    when it was; only its reason changes); KEEP otherwise (the same reason, none, or a member's
    hold on an admin's)."""
    if held == JobHold.ADMIN or (held == JobHold.USER and level == JobHold.USER):
        return REWORD if reason and reason != was_reason and held == level else KEEP
    return HOLD


@dataclass(frozen=True)
class _Reworded:
    """A REWORD's words: the job's new stored Held sentence, and its job.held event."""

    pending_message: str
    would_start_if: str
    message: str
    data: dict[str, Any]


def _reworded(actor: str, held: str, holder: str, held_at: datetime | None, was_reason: str,
              reason: str) -> _Reworded:
    """The words of a REWORD by `actor` of a hold of kind `held` placed by `holder` (a username,
    "" once the account is gone) at `held_at`: what `hold` and `hold_array` store and record."""
    label = hold_label_of(held, holder)
    pending_message, would = held_sentence(label, reason)
    message = (f"Hold reason changed by {actor}: {reason}" + (f" (was: {was_reason})" if was_reason else "")
               + f"; held by {label}{_since_at(held_at)}")
    data = {"hold": held, "held_by": holder or None, "reason": reason,
            **({"was_reason": was_reason} if was_reason else {})}
    return _Reworded(pending_message, would, message, data)


def _reword(user: AbstractBaseUser, job: Job, reason: str, at: datetime) -> Outcome:
    """A second hold of the same kind (a member's on a user hold, an admin's on an admin hold)
    with another reason (`_again`'s REWORD): the hold stays as it was (who, since when), its
    reason is the new one, said at once and recorded as a job.held event. Called under the
    job's row lock."""
    holder = job.held_by.get_username() if job.held_by_id else ""
    words = _reworded(user.get_username(), job.hold, holder, job.held_at, job.hold_reason, reason)
    job.hold_reason = reason
    job.pending_message, job.pending_would_start_if = words.pending_message, words.would_start_if
    job.save(update_fields=["hold_reason", "pending_words", "would_start_if_words"])
    Event.objects.create(**event_fields(
        EventKind.JOB_HELD, _actor(user), job=job, at=at, reason="Held", message=words.message, data=words.data,
    ))
    log.info("job_hold_reworded", job=job.pk, user=user.get_username(), reason=reason)
    return Outcome(job, True, f"Job {job.pk} stays held by {hold_label(job)}{_since(job)}; its reason is now: "
                              f"{reason}.")


def release(user: AbstractBaseUser, job_id: int, *, at: datetime | None = None) -> Outcome:
    """Release a held job: back in line at the next cycle. A user's hold is released by the
    job's team or an admin, an admin's only by an admin (403 naming who holds it)."""
    at = at or timezone.now()
    with transaction.atomic():
        job = _locked(job_id)
        who = _may_act(user, job)
        if job.state != JobState.PENDING:
            raise _not_waiting(job, "released")
        if not job.hold:
            return Outcome(job, False, f"Job {job.pk} is not held; it waits in the queue. Nothing changed.")
        label = hold_label(job)
        if job.hold == JobHold.ADMIN and not who.is_admin:
            because = f" ({job.hold_reason})" if job.hold_reason else ""
            raise Refused(403, f"Job {job.pk} is held by {label}{_since(job)}{because}: only an admin may release "
                               "an admin's hold. Ask an admin to release it.")
        was_reason = job.hold_reason
        job.hold, job.held_at, job.held_by, job.hold_reason = JobHold.NONE, None, None, ""
        job.pending_code = "Released"
        job.pending_message = f"Released by {user.get_username()}: back in the queue from the next scheduling cycle."
        job.pending_would_start_if = ""
        job.save(update_fields=["hold", "held_at", "held_by", "hold_reason", "pending_code", "pending_words",
                                "would_start_if_words"])
        Event.objects.create(**event_fields(
            EventKind.JOB_RELEASED, _actor(user), job=job, at=at, reason="Released",
            message=f"Released by {user.get_username()} (was held by {label}): back in the queue",
            data={"was": label, **({"was_reason": was_reason} if was_reason else {})},
        ))
        _request_cycle_on_commit()
    log.info("job_released", job=job.pk, user=user.get_username())
    return Outcome(job, True, f"Job {job.pk} released: it is back in the queue from the next scheduling cycle.")


# ------------------------------------------------------------------------------ hold history


@dataclass(frozen=True)
class HoldStretch:
    """One stretch a job was held: from `placed_at` (its hold placed while it was not held) to
    `released_at` (None: still held, or not released by the time asked about), held by `by`
    (the first holder, as the engine names them: `hold_label_of`). `requeued`: the hold came
    with a requeue (`qm requeue --hold`), which stopped the job if it ran."""

    placed_at: datetime
    released_at: datetime | None
    by: str
    requeued: bool = False


def hold_history(job_ids: list[int], *, until: datetime) -> dict[int, tuple[HoldStretch, ...]]:
    """Every stretch each of `job_ids` was held before `until`, as the database records holds:
    the job row holds only the hold it has now (`hold`, `held_at`, `held_by`), so the history is
    read from the events written with each change: a hold placed at submission (sbatch -H: the
    job.submitted event's `hold`; from `submitted_at`), by `hold` or a requeue held (job.held;
    one on a job already held, a new reason or an admin's hold over a user's, does not start
    another stretch), ended by a release (job.released), by a requeue of the job after it ended
    held (job.requeued: the requeue clears the hold and writes no release), or by the job's end
    while held (a cancel: its `finished_at`, or to the end if it has none). Every hold and
    release writes its event (since holds exist, 30 Nov 2026); should one be missing all the
    same, a release with no hold recorded before it is held from submission, and a hold the row
    has now that no event placed, from its `held_at`. Jobs never held are left out.
    Two queries: the jobs' rows, and their hold events on the events' (job, created_at) index."""
    rows = {pk: rest for pk, *rest in Job.objects.filter(pk__in=job_ids).values_list(
        "pk", "submitted_at", "finished_at", "hold", "held_at", "held_by__username")}
    events: dict[int, list[tuple[str, datetime, str, dict[str, Any]]]] = {}
    for job_id, kind, at, actor, data in (
            Event.objects.filter(job_id__in=list(rows), created_at__lt=until)
            .filter(Q(kind__in=(EventKind.JOB_HELD, EventKind.JOB_RELEASED, EventKind.JOB_REQUEUED))
                    | Q(kind=EventKind.JOB_SUBMITTED, data__has_key="hold"))
            .order_by("job_id", "created_at", "id").values_list("job_id", "kind", "created_at", "actor", "data")):
        said = events.setdefault(job_id, [])
        # a job's submission comes first whatever its event's time (the row's submitted_at is its time)
        said.insert(0 if kind == EventKind.JOB_SUBMITTED else len(said), (kind, at, actor, data))
    history: dict[int, tuple[HoldStretch, ...]] = {}
    for pk, (submitted, finished, hold, held_at, holder) in rows.items():
        found: list[HoldStretch] = []
        open_: HoldStretch | None = None
        for kind, at, actor, data in events.get(pk, ()):
            if kind == EventKind.JOB_SUBMITTED:
                open_ = HoldStretch(submitted, None, hold_label_of(data["hold"], actor_name(actor)))
            elif kind == EventKind.JOB_HELD:
                if open_ is None:
                    open_ = HoldStretch(at, None, hold_label_of(data.get("hold", ""), data.get("held_by") or ""),
                                        requeued=bool(data.get("requeued")))
            elif open_ is not None:  # released, or requeued after it ended held
                found.append(dataclasses.replace(open_, released_at=at))
                open_ = None
            elif kind == EventKind.JOB_RELEASED and not found:
                found.append(HoldStretch(submitted, at, data.get("was") or "a user"))
        if open_ is None and hold and held_at is not None and held_at < until:
            open_ = HoldStretch(held_at, None, hold_label_of(hold, holder or ""))
        if open_ is not None:
            # held now, or held when it ended (cancelled while held): held to its end
            ended = finished if finished is not None and finished < until else None
            found.append(dataclasses.replace(open_, released_at=ended))
        if found:
            history[pk] = tuple(found)
    return history


@dataclass(frozen=True)
class ArrayOutcome:
    """A hold or release of every waiting task of an array: the tasks changed, and those left
    as they were (already so, not waiting, or an admin's hold a member may not release).
    `reworded`: the tasks among `changed` already held whose reason alone changed (`_again`)."""

    changed: list[int]
    unchanged: int
    not_waiting: int
    refused: int
    reworded: list[int] = field(default_factory=list)


def hold_array(user: AbstractBaseUser, job_ids: list[int], *, release_them: bool, reason: str = "") -> ArrayOutcome:
    """Hold (or release) each waiting task among `job_ids` as `hold`/`release` does one (the same
    rules, `_again` for a task already held, columns and one event each; a hold's `reason` on
    each), in a few statements whatever their number, as `jobs.cancel_waiting` cancels them:
    the rows are locked first, in id order, so a cycle binding one meanwhile either wins (the
    task runs and is counted as not waiting) or finds it held. Tasks that no longer wait are
    counted, not refused: an array is usually partly running. A task already held by the same
    kind of holder gets the new reason (REWORD: one UPDATE for them all, its stored sentence
    naming each task's own holder)."""
    at = timezone.now()
    problem = reason_problem(reason)
    if problem:
        raise Refused(400, f"reason: {problem}.", {"reason": problem})
    who = access.access_of(user)
    name = user.get_username()
    changed: list[int] = []
    reworded: dict[int, _Reworded] = {}
    unchanged = not_waiting = refused = 0
    with transaction.atomic():
        rows = list(Job.objects.filter(pk__in=job_ids).select_for_update(no_key=True).order_by("pk")
                    .values_list("pk", "team_id", "state", "hold", "held_by_id", "hold_reason", "held_at"))
        holders = dict(get_user_model().objects.filter(pk__in={r[4] for r in rows if r[4]}).values_list(
            "pk", "username"))
        level = JobHold.ADMIN if who.is_admin else JobHold.USER
        events: list[Event] = []
        for pk, team_id, state, held, held_by, held_for, held_at in rows:
            if state != JobState.PENDING:
                not_waiting += 1
                continue
            if not who.may_submit_for(team_id):
                refused += 1
                continue
            was = hold_label_of(held, holders.get(held_by, "")) if held else ""
            if release_them:
                if not held:
                    unchanged += 1
                    continue
                if held == JobHold.ADMIN and not who.is_admin:
                    refused += 1
                    continue
                message = f"Released by {name} (was held by {was}): back in the queue"
                kind, code = EventKind.JOB_RELEASED, "Released"
                data = {"was": was, **({"was_reason": held_for} if held_for else {})}
            else:
                again = _again(held, level, held_for, reason)
                if again == KEEP:
                    unchanged += 1
                    continue
                if again == REWORD:
                    words = reworded[pk] = _reworded(name, held, holders.get(held_by, ""), held_at, held_for, reason)
                    message, data = words.message, words.data
                else:
                    message, because = _held_event_words(hold_label_of(level, name), was, reason)
                    data = {"hold": level, "held_by": name, **({"was": was} if was else {}), **because}
                kind, code = EventKind.JOB_HELD, "Held"
            changed.append(pk)
            events.append(Event(**event_fields(kind, _actor(user), job=Job(pk=pk, team_id=team_id), at=at,
                                               reason=code, message=message, data=data)))
        placed = [pk for pk in changed if pk not in reworded]
        if placed:
            if release_them:
                Job.objects.filter(pk__in=placed).update(
                    hold=JobHold.NONE, held_at=None, held_by=None, hold_reason="", pending_code="Released",
                    pending_words=f"Released by {name}: back in the queue from the next scheduling cycle.",
                    would_start_if_words="")
            else:
                message, would = held_sentence(hold_label_of(level, name), reason)
                Job.objects.filter(pk__in=placed).update(
                    hold=level, held_at=at, held_by=user, hold_reason=reason, pending_code="Held", pending_words=message,
                    would_start_if_words=would, pending_resolvable=True)
                PendingPlace.objects.filter(job_id__in=placed).delete()
            _request_cycle_on_commit()
        if reworded:
            _reword_all(reworded, reason)
        if events:
            Event.objects.bulk_create(events, batch_size=2000)
    log.info("array_released" if release_them else "array_held", jobs=len(changed), user=name,
             **({} if release_them else {"reason": reason, "reworded": len(reworded)}))
    return ArrayOutcome(changed, unchanged, not_waiting, refused, sorted(reworded))


def _reword_all(reworded: dict[int, _Reworded], reason: str) -> None:
    """Store a REWORD on many held tasks in one UPDATE: the new reason, and each task's Held
    sentence, which names its own holder (one CASE branch per distinct sentence)."""
    def by_sentence(attribute: str) -> Case:
        groups: dict[str, list[int]] = {}
        for pk, words in reworded.items():
            groups.setdefault(getattr(words, attribute), []).append(pk)
        return Case(*(When(pk__in=pks, then=Value(text)) for text, pks in groups.items()),
                    output_field=CharField())

    Job.objects.filter(pk__in=list(reworded)).update(
        hold_reason=reason, pending_words=by_sentence("pending_message"),
        would_start_if_words=by_sentence("would_start_if"))


# ------------------------------------------------------------------------------------ change


def _value_of(job: Job, name: str) -> Any:
    """A field as the submit names it (names for the project and class, dependencies as their
    text: `afterok:12,afterany:14`)."""
    if name == "dependencies":
        return dependencies.text_now(job.pk, singleton=job.singleton, any_of=job.dependency_mode == "any")
    if name == "project":
        return job.project.name if job.project_id else None
    if name == "priority_class":
        return job.priority_class.name
    if name == "gpu_types":
        return list(job.gpu_types or ())
    return getattr(job, name)


#: A changed field as people name it, where the form's label (the model's verbose name, its unit
#: said with the value instead) is not: the dependencies are no field of the job's row, nor is
#: `gpu_type`, the API's shorthand of `gpu_types`.
_FIELD_WORDS = {"dependencies": "dependencies", "gpu_type": "GPU type"}


def field_words(name: str) -> str:
    """A changed field as the Change form labels it ("runtime limit", "GPUs per node"), not the
    API's name ("runtime_limit_s"): the change's sentence is the form's message and `qm
    update`'s output, read by people; `changes` keeps the API's names and values. The same
    words name a field a running job's change is refused on, and an array's task limit."""
    if name in _FIELD_WORDS:
        return _FIELD_WORDS[name]
    label = str(Job._meta.get_field(name).verbose_name)
    return label.split(" (")[0]  # "runtime limit (s)": the unit goes with the value


def change_words(name: str, old: Any, new: Any) -> str:
    """One field's change for people: "runtime limit 4 h → 2 h", "array task limit none → 4"."""
    return f"{field_words(name)} {_words(name, old)} → {_words(name, new)}"


def _words(name: str, value: Any) -> str:
    if value is None or value == []:
        return "none"
    if isinstance(value, bool):  # members on distinct nodes: "no → yes", not Python's "False → True"
        return "yes" if value else "no"
    if name in ("runtime_limit_s", "checkpoint_interval_s"):
        return span_words(value)
    if name in ("min_gpu_memory_gb", "memory_gb_per_gpu"):
        return f"{value} GB"
    if isinstance(value, list):
        return "/".join(map(str, value))
    return str(value)


def _as_submitted(job: Job, changes: dict[str, Any]) -> job_service.SubmitRequest:
    """The job as a submit request with `changes` applied: judged by the submit's own rules."""
    values = {name: _value_of(job, name) for name in _AS_SUBMITTED}
    values.update(changes)
    return job_service.SubmitRequest(
        name=values["name"], gpus=values["gpus"], gpus_per_node=values["gpus_per_node"],
        gpu_types=tuple(values["gpu_types"] or ()), min_gpu_memory_gb=values["min_gpu_memory_gb"] or 0,
        cpus_per_gpu=values["cpus_per_gpu"] or 0, memory_gb_per_gpu=values["memory_gb_per_gpu"] or 0,
        topology=values["topology"], members_on_distinct_nodes=values["members_on_distinct_nodes"],
        min_gpus=values["min_gpus"], max_gpus=values["max_gpus"],
        priority_class=values["priority_class"], team=job.team.name, project=values["project"],
        workload=job.workload, runtime_limit_s=values["runtime_limit_s"],
        checkpoint_interval_s=values["checkpoint_interval_s"], roles=tuple(dict(r) for r in job.roles or ()),
    )


@dataclass
class Problems:
    """What a change of a job would be refused for, each problem under its field, by kind:
    `invalid` (400: a value the job may not take, as a submit of the changed job would be
    refused, a dependency cycle), `conflicts` (409: a field the job's state does not let change,
    a running job's shape), `forbidden` (403: a running job's limit raised by a member)."""

    invalid: dict[str, str] = field(default_factory=dict)
    conflicts: dict[str, str] = field(default_factory=dict)
    forbidden: dict[str, str] = field(default_factory=dict)
    sentences: list[str] = field(default_factory=list)  # the conflicts' and the forbidden's, said whole

    def __bool__(self) -> bool:
        return bool(self.invalid or self.conflicts or self.forbidden)

    def refusal(self) -> Refused:
        """One refusal naming every field at fault. Its status, the rule: 400 when any value is
        invalid (the state's conflicts and the admin's limit said with the rest, each on its
        field); else 409 when a field conflicts with the job's state (the limit only an admin may
        raise named too); else 403."""
        if self.invalid:
            # A value that names nothing (an unknown GPU type) of a field the job's state does not
            # let change has both problems on that field: the value's first, as the API's
            # serializer says a malformed one ("gpus": 0 of a running job).
            errors: dict[str, str | list[str]] = {**self.conflicts, **self.forbidden}
            for name, problem in self.invalid.items():
                errors[name] = [problem, errors[name]] if isinstance(errors.get(name), str) else problem
            return Refused(400, "Invalid change.", errors)
        return Refused(409 if self.conflicts else 403, " ".join(self.sentences), {**self.conflicts, **self.forbidden})


@dataclass
class _Judged:
    """A change judged under the job's row lock (`_judge`), not applied yet."""

    job: Job
    deps: dependencies.Replacement | None
    resolved: Any
    before: dict[str, Any]
    problems: Problems


def update(user: AbstractBaseUser, job_id: int, changes: dict[str, Any], *, at: datetime | None = None) -> Outcome:
    """Change a job (Slurm's `scontrol update`): while it waits, its name, project, priority
    class, limits and shape, judged exactly as a submit of the changed job would be (names,
    the class's maximum runtime, the shape's rules, what this fleet can ever run); once it
    runs, only its name and a lower runtime limit (a higher one is for admins). While it
    waits, its dependencies too (the whole new list: judged as a submit's, and no cycle;
    services/dependencies/). One JOB_UPDATED event lists each field's old and new value.
    A refusal names every field at fault at once (`Problems.refusal` says its status).

    `changes` are typed already (the API's JobUpdateSerializer): field → new value, `gpu_types`
    a list, `runtime_limit_s` None for the class default, `dependencies` the list of items (its
    `singleton` item among them) or a `dependency_text.Edit` (`+afterok:5`, `-afterany:7`: added
    to or removed from the list it has, services/dependencies.judge).

    A record the change names (a project, a priority class) deleted between its judgement and
    the commit makes the database refuse the job's foreign key, and nothing is written: the
    change is judged again and refused on that field in the words it gets afterwards (before, a
    409 quoting the database's constraint)."""
    try:
        return _update(user, job_id, changes, at=at)
    except IntegrityError:
        with transaction.atomic():
            judged = _judge(user, job_id, changes)
        if judged.problems:
            raise judged.problems.refusal() from None
        raise


def _update(user: AbstractBaseUser, job_id: int, changes: dict[str, Any], *, at: datetime | None) -> Outcome:
    at = at or timezone.now()
    with transaction.atomic():
        judged = _judge(user, job_id, changes)
        if judged.problems:
            raise judged.problems.refusal()
        job, deps, resolved, before = judged.job, judged.deps, judged.resolved, judged.before
        old_name = job.name
        if deps is not None:
            changes = {**changes, "dependencies": deps.text}
        if resolved is not None and "runtime_limit_s" in changes:
            changes = {**changes, "runtime_limit_s": resolved.runtime_limit_s}  # null: the class default
        diff = {name: (before[name], value) for name, value in changes.items() if before[name] != value}
        if not diff:
            return Outcome(job, False, f"Job {job.pk} already is as asked; nothing changed.")
        _apply(job, diff, resolved)
        waiting = job.state == JobState.PENDING
        written = [name for name in diff if name != "dependencies"]  # the model's fields, named as the request's
        if deps is not None and "dependencies" in diff:
            dependencies.replace(deps, at=at)  # their rows: the snapshot's `waits_on` reads them
            if job.singleton != deps.singleton:
                job.singleton = deps.singleton  # Slurm's singleton: a flag of the job, not a row
                written.append("singleton")
            if job.dependency_mode != deps.mode:
                job.dependency_mode = deps.mode  # all of them, or any one (Slurm's `?`)
                written.append("dependency_mode")
        if waiting and set(diff) - {"name"} and not job.hold:
            # The stored reason spoke of the old request: say so until the next cycle words it
            # anew (a held job's reason, its hold, stays true).
            job.pending_code = "Changed"
            job.pending_message = (f"Changed by {user.get_username()}; waiting for the next scheduling cycle "
                                   "to judge it as it is now.")
            job.pending_would_start_if = ""
            # Not judged yet: "can never run as asked" was the old request's (the page said it
            # beside "Changed", and no ETA for it, until the next cycle).
            job.pending_resolvable = True
            if deps is not None and "dependencies" in diff and deps.waits:
                # It waits on a job now: the engine's own words at once, as a submit says them.
                job.pending_code, job.pending_message, job.pending_would_start_if = \
                    dependencies.waiting_words(deps.upstream, deps.blockers, any_of=deps.mode == "any")
            written += ["pending_code", "pending_words", "would_start_if_words", "pending_resolvable"]
        # Only what changed: agents write a running job's progress columns meanwhile (they wait
        # for this row lock, and write after it).
        job.save(update_fields=written)
        said = ", ".join(change_words(name, old, new) for name, (old, new) in diff.items())
        data: dict[str, Any] = {"changes": {name: [old, new] for name, (old, new) in diff.items()}, "state": job.state}
        stay = _new_eta_stay(job.pk) if waiting and set(diff) & set(NEW_ETA_STAY_FIELDS) else None
        if stay is not None:
            data["eta_stay"] = stay
        Event.objects.create(**event_fields(
            EventKind.JOB_UPDATED, _actor(user), job=job, at=at, reason="Changed",
            message=f"Changed by {user.get_username()} while {'waiting' if waiting else _state_words(job)}: {said}"
            + ("; a new stay for the ETA record: the next cycle tells its ETA anew" if stay is not None else ""),
            data=data,
        ))
        if "name" in diff:
            # The job's reason, if the rename is all that changed while it waits, and those of
            # the singletons of its old and new name, said anew at once (the next cycle would).
            dependencies.reword_after_rename(job, old_name, by=user.get_username(), actor=_actor(user), at=at,
                                             itself=waiting and not set(diff) - {"name"})
        if waiting and set(diff) - {"name"} or "runtime_limit_s" in diff:
            _request_cycle_on_commit()
    log.info("job_updated", job=job.pk, fields=sorted(diff), user=user.get_username())
    detail = f"Job {job.pk} changed: {said}."
    if not waiting and "runtime_limit_s" in diff and job.started_at is not None:
        ran = (at - job.started_at).total_seconds()
        if ran >= job.runtime_limit_s:
            detail += (f" It has run {duration(ran)}, past its new limit: the next scheduling cycle stops it.")
    return Outcome(job, True, detail, diff)


class _JudgedOnly(Exception):
    """Raised out of `refusals`' transaction: rolls back what judging wrote (a rename's name)."""

    def __init__(self, problems: Problems) -> None:
        super().__init__("judged only")
        self.problems = problems


def refusals(user: AbstractBaseUser, job_id: int, changes: dict[str, Any], *,
             unreadable: frozenset[str] = frozenset()) -> Problems:
    """What `update` would refuse `changes` for, each problem under its field (none: it would
    change the job); writes nothing (what judging writes is rolled back). The API asks it about
    the well-formed fields of a body some of whose fields are malformed (`unreadable`: those
    fields' names), so that one answer names every field at fault.

    Judged with fields that could not be read: the fields a running job cannot change (whatever
    their value), the names (project, class), the runtime limit, the dependencies. Not judged
    while a field they hang on cannot be read, as its value is unknown and the job's own would
    stand in for it: the shape's cross-field rules and what this fleet can run (any field of
    the shape), the runtime limit against a class (the class), the cycles a rename or new
    dependencies would close (the name, the dependencies). Raises Refused for a refusal about
    the job as a whole, which no field's fix answers: another team's job (403), an ended one
    (409)."""
    try:
        with transaction.atomic():
            raise _JudgedOnly(_judge(user, job_id, changes, unreadable=unreadable).problems)
    except _JudgedOnly as judged:
        return judged.problems


def _judge(user: AbstractBaseUser, job_id: int, changes: dict[str, Any], *,
           unreadable: frozenset[str] = frozenset()) -> _Judged:
    """`update`'s checks, every one of them, under the job's row lock (inside the caller's
    transaction; a rename is written to the row for the cycles' walk, `_cycles`). Raises Refused
    for a refusal about the job as a whole (another team's, an ended one); the rest gathered in
    `Problems`. `unreadable`: see `refusals`."""
    # New dependencies are judged first: their upstream jobs are locked before this one, as a
    # transition locks them (services/dependencies/); errors wait for the state's 409.
    # A rename changes which singletons wait on the job: it runs after any other change of what
    # waits on what, as a change of dependencies does (judge takes the same lock).
    if "dependencies" in changes:
        deps = dependencies.judge(user, job_id, changes["dependencies"], name=changes.get("name"))
    else:
        deps = None
        if "name" in changes:
            dependencies.lock_changes()
    # Locked as _locked does (only the job's row), with the names the rules and the event say.
    job = (Job.objects.select_for_update(no_key=True, of=("self",))
           .select_related("team", "project", "priority_class").get(pk=job_id))
    who = _may_act(user, job)
    problems = Problems()
    if job.state in _RUNNING_STATES:
        _check_running_change(job, changes, who, problems, unreadable=unreadable)
        problems.invalid.update(_names_of_nothing(job, changes))
    elif job.state != JobState.PENDING:
        field_name = next(iter(changes), next(iter(sorted(unreadable)), "non_field_errors"))
        raise Refused(409, f"Job {job.pk} has already ended ({_state_words(job)}); nothing about it can change.",
                      {field_name: f"job {job.pk} has already ended ({_state_words(job)})"})
    before = {name: _value_of(job, name) for name in changes}
    resolved = None
    if job.state == JobState.PENDING:
        problems.invalid.update(deps.errors if deps is not None else {})
        if set(changes) - {"name", "dependencies"}:
            try:
                resolved = _judge_as_submit(user, job, changes, unreadable=unreadable)
            except Refused as refusal:
                if not refusal.errors:
                    raise  # a refusal naming no field stands alone
                problems.invalid = {**refusal.errors, **problems.invalid}
        if not (deps is not None and deps.errors) and not unreadable & {"name", "dependencies"}:
            problems.invalid.update(_cycles(job, changes, deps, before))
    return _Judged(job, deps, resolved, before, problems)


def _new_eta_stay(job_id: int) -> dict[str, Any] | None:
    """Start a new stay in the queue for the ETA record: the job's place keeps its position but
    forgets its ETA and the first ETA told, so the next cycle tells both anew for the request as
    it is now. The ETA goes too: a cycle leaves a place whose position, ETA and numbers it
    would write unchanged alone (services/cycle._write_places), and an unchanged ETA would
    then never be told as this stay's first. What the event records (the first ETA told in
    the stay now ended); None for a job with no place (held, or not ranked yet: its next stay
    starts afresh anyway). Two queries."""
    was = PendingPlace.objects.filter(job_id=job_id).values_list("first_eta", flat=True).first()
    if not PendingPlace.objects.filter(job_id=job_id).update(eta=None, first_eta=None, first_eta_at=None):
        return None
    return {"new": True, "first_eta_was": was.isoformat().replace("+00:00", "Z") if was is not None else None}


def _cycles(job: Job, changes: dict[str, Any], deps: dependencies.Replacement | None,
            before: dict[str, Any]) -> dict[str, str]:
    """The cycles a waiting job's rename or new dependencies would close (services/dependencies
    .cycle_errors), judged with its new name written in this transaction first (a refusal rolls
    it back with the rest): a rename changes which singletons wait on it, and, a singleton, which
    jobs it waits on. None for a change of neither."""
    renamed = "name" in changes and changes["name"] != job.name
    new_deps = deps is not None and deps.text != before["dependencies"]
    if not renamed and not new_deps:
        return {}
    if renamed:
        Job.objects.filter(pk=job.pk).update(name=changes["name"])
    return dependencies.cycle_errors(job.pk, deps if new_deps else None,
                                     renamed=changes["name"] if renamed else None)


def _check_running_change(job: Job, changes: dict[str, Any], who: access.Access, problems: Problems, *,
                          unreadable: frozenset[str] = frozenset()) -> None:
    """A running job keeps its shape, project and class: each such field is refused (409)
    naming it and the state, one that could not be read too (its value does not matter); a
    raised runtime limit is for admins (403); all of them added to `problems`."""
    state = _state_words(job)
    fixed = {name: (f"job {job.pk} is {state}: {name} changes only while it waits; to run it with another "
                    f"{name}, cancel it and resubmit")
             for name in (*changes, *sorted(unreadable - set(changes))) if name not in CHANGEABLE_WHILE_RUNNING}
    if fixed:
        problems.conflicts.update(fixed)
        problems.sentences.append(f"Job {job.pk} is {state}: only its name and runtime limit can change now, not "
                                  f"{', '.join(map(field_words, fixed))}.")
    if "runtime_limit_s" not in changes:
        return
    limit = changes["runtime_limit_s"]
    if limit is None:
        problems.invalid["runtime_limit_s"] = "give the new limit in seconds"
    elif limit > job.runtime_limit_s:
        if not who.is_admin:
            problems.forbidden["runtime_limit_s"] = "only an admin may raise a running job's runtime limit"
            problems.sentences.append(
                f"Job {job.pk} is {state}: its runtime limit may be lowered, but only an admin may raise it "
                f"({_words('runtime_limit_s', job.runtime_limit_s)} now, {_words('runtime_limit_s', limit)} asked).")
        elif problem := job_service.runtime_limit_problem(limit, job.priority_class):
            problems.invalid["runtime_limit_s"] = problem


def _names_of_nothing(job: Job, changes: dict[str, Any]) -> dict[str, str]:
    """A running job's change that names what does not exist (a GPU type, a priority class, its
    team's project), each in the submit's words: an invalid value (400) whatever the job's state,
    said before the state's conflict on the same field. The 409 alone said only that the field
    changes while the job waits, and the researcher resent the same unknown type once it had
    ended (found 6 Dec). A waiting job's change has them judged as a submit (_judge_as_submit)."""
    problems: dict[str, str] = {}
    if changes.get("gpu_types"):
        known = GpuType.objects.values_list("name", flat=True)
        if problem := job_service.unknown_gpu_types_problem(changes["gpu_types"], known):
            problems["gpu_types"] = problem
    name = changes.get("priority_class")
    if name and not PriorityClass.objects.filter(name=name).exists():
        problems["priority_class"] = job_service.unknown_class_problem(name)
    project = changes.get("project")
    if project and not Project.objects.filter(team_id=job.team_id, name=project).exists():
        problems["project"] = job_service.unknown_project_problem(job.team.name, project)
    return problems


def _judge_as_submit(user: AbstractBaseUser, job: Job, changes: dict[str, Any], *,
                     unreadable: frozenset[str] = frozenset()) -> Any:
    """The changed job judged by the submit's rules, all at once (services.jobs._judged: names,
    defaults, the class's maximum runtime, the shape's cross-field rules, the fleet's
    capability): 400 naming each field at fault, in the submit's words. `unreadable`: see
    `refusals` (the rules hanging on those fields are left out)."""
    req = _as_submitted(job, changes)
    shape_known = not unreadable & {*SHAPE_FIELDS, "gpu_type"}
    resolved, _, _, errors = job_service._judged(user, req, lock=False, shape_known=shape_known)
    if "priority_class" in unreadable:
        errors.pop("runtime_limit_s", None)  # judged against the job's own class, which the change replaces
    if "priority_class" not in changes and errors.get("priority_class", "").startswith(job_service.CLASS_NOT_THE_TEAMS):
        errors.pop("priority_class")  # a class its team was denied since: kept, not asked for
    if errors:
        raise Refused(400, "Invalid change.", _kept_fields_said(job, changes, errors))
    return resolved


#: The shape's fields a change may leave as they are while changing another one they are judged
#: against, and the `qm update` flag that changes each (`none` clears it: null in the API).
_KEPT_SHAPE_FLAGS = {"gpus_per_node": "--gpus-per-node", "min_gpus": "--min-gpus", "max_gpus": "--max-gpus"}


def _kept_fields_said(job: Job, changes: dict[str, Any], errors: dict[str, str]) -> dict[str, str]:
    """The submit's words for a shape rule broken by a field this change keeps, said for a
    change: `qm update 316 --gpus 4` of a job submitted with 8 GPUs per node was refused with
    "gpus_per_node 8 is more than gpus 4: give at most 4, or leave it out", and nothing a
    researcher could leave out of the command: the 8 is the job's, kept from its submit. Now the
    sentence says so and how to change it in the same update."""
    said = dict(errors)
    for name, message in errors.items():
        flag = _KEPT_SHAPE_FLAGS.get(name)
        value = getattr(job, name) if flag is not None and name not in changes else None
        if value is None:  # changed here, or a bound the job lacks: the submit's words fit
            continue
        said[name] = (f"{message.split(': give ')[0]}; {name} {value} is the job's own, which this change keeps: "
                      f"change it in the same update ({name}: a number, or null to clear it; "
                      f"qm update {job.pk} {flag} N|none)")
    return said


def _apply(job: Job, diff: dict[str, tuple[Any, Any]], resolved: Any) -> None:
    for name, (_, new) in diff.items():
        if name == "dependencies":
            continue  # rows of their own (dependencies.replace)
        if name == "project":
            job.project = resolved.project if resolved is not None else None
        elif name == "priority_class":
            job.priority_class = resolved.priority_class
        elif name == "gpu_types":
            job.gpu_types = list(dict.fromkeys(new or ()))
        else:
            setattr(job, name, new)
