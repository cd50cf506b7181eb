"""Requeueing a job at someone's request (Slurm's `scontrol requeue` and `requeuehold`): a running
job, or one that has ended.

A running job is stopped exactly as a preemption or a cancel stops it (transitions.signal_stop:
its processes get its priority class's grace period, SIGTERM then SIGKILL, its GPUs stay owned
until its agents confirm or its node is fenced). The stop's release reason says why
(`RELEASE_REQUEUED`, or `RELEASE_REQUEUED_HELD` with `hold`), and its notice, a job.stopping
event with that reason (a job.preempting before migration 0032), says who asked and why. Once
the old allocation is released (or fenced), transitions.requeue_as_asked puts the job back in
the queue with the same id:
`requeue_count` + 1, the work since its last checkpoint lost (as a preemption's requeue counts
it, not against the preemption budget), a job.requeued event (which webhooks subscribed to
`requeued` are told of), and held by whoever asked when `hold` was asked. Its next bind draws a
new generation, so nothing of its old run can act on its new GPUs.

An ended job (succeeded, failed, cancelled, timed out: Slurm requeues a finished batch job) goes
back to the queue at once (`_requeue_ended`), in one transaction: pending with the same id,
`requeue_count` + 1, its end (`finished_at`, `exit_code`) and start cleared for the new run as a
running job's requeue clears its start, nothing lost (its run had ended), a job.requeued event
saying who asked, from which end and why (data `from_state`), held as above with `hold`. Its
earlier runs stay as they were: their allocations (each run its own generation), output,
accounting and events. It is judged first, and refused with nothing written:
- 409 while its last allocation still holds GPUs (its processes are not yet confirmed gone nor
  its node fenced): it is requeued once it has ended for good;
- 409 naming the dependency when one it waits on can never be met any more (a job cancelled
  with `DependencyNeverSatisfied`, or an `afterok` whose upstream failed): it would wait for
  ever; requeue that upstream first;
- 400 naming each field at fault when the job, submitted again as it is, would be refused (its
  class's maximum runtime lowered below its limit, a GPU type gone from the fleet, a shape the
  fleet can no longer run): the submit's own rules, as a change of a waiting job is judged
  (services/holds.py).
Its dependents are left as they are (Slurm's): one whose condition was met keeps it; one that
was cancelled because this job failed stays cancelled (it may be requeued itself now that this
job waits again); one still waiting on this job is settled by this job's next end, as by any
end (services/dependencies.ended).

A waiting job waits already and is refused; a job being stopped is left to the stop under way
(a preempted or resized job goes back to the queue by itself; a cancel, a runtime limit or a
gang member's exit ends it, and it may be requeued then); a job that can never run is refused.

Who may: the job's team (any member) and admins, the rule of cancel. A requeue with `hold` by an
admin is an admin's hold (only an admin releases it), as `qm hold` by an admin is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from controlplane.choices import (
    LIVE_ALLOCATION_STATES,
    AllocationState,
    DependencyMode,
    EventKind,
    JobHold,
    JobState,
)
from controlplane.models import Allocation, Job, JobDependency, PendingPlace
from controlplane.services import access, dependencies, dependency_text, holds
from controlplane.services import jobs as job_service
from controlplane.services.hold_text import held_sentence, hold_label_of, reason_problem
from controlplane.services.holds import Outcome, Refused
from controlplane.services.transitions import (
    RELEASE_CANCELLED,
    RELEASE_PREEMPTED,
    RELEASE_REQUEUED,
    RELEASE_REQUEUED_HELD,
    RELEASE_RESIZED,
    RELEASE_RUNTIME_LIMIT,
    REQUEUED_AFTER_END,
    REQUEUED_HELD_AFTER_END,
    record_event,
    signal_stop,
)

log = structlog.get_logger(__name__)


def _stop_under(job: Job) -> Allocation | None:
    return job.allocations.filter(state=AllocationState.RELEASING).order_by("-generation").first()


#: The ends a job may be requeued from (Slurm requeues a finished batch job): not one that can never run.
ENDED_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT)


def refusal(job: Job) -> str | None:
    """Why a requeue of this job would be refused (409) for its state, in one sentence saying
    what to do instead; None when its state allows it (it runs, or it has ended: an ended job is
    judged further by `_requeue_ended`)."""
    if job.state == JobState.RUNNING:
        return None
    pk = job.pk
    if job.state == JobState.PENDING:
        held = (f" It is held: release it when it may start (qm release {pk})." if job.hold else "")
        return f"Job {pk} is waiting already: only a running or ended job can be requeued.{held}"
    if job.state == JobState.PREEMPTING:
        stop = _stop_under(job)
        reason = stop.release_reason if stop is not None else ""
        if reason == RELEASE_PREEMPTED:
            return (f"Job {pk} is already stopping: it is being preempted and goes back to the queue by itself when "
                    "its processes exit.")
        if reason == RELEASE_RESIZED:
            return (f"Job {pk} is already stopping: it is being stopped to resize and goes back to the queue by "
                    "itself when its processes exit.")
        if reason in (RELEASE_REQUEUED, RELEASE_REQUEUED_HELD):
            held = " held" if reason == RELEASE_REQUEUED_HELD else ""
            return (f"Job {pk} is already stopping to be requeued: it goes back to the queue{held} when its processes "
                    "exit.")
        if reason == RELEASE_CANCELLED:
            return (f"Job {pk} is already stopping: it is being cancelled and ends when its processes exit; requeue it "
                "then to run it again.")
        if reason == RELEASE_RUNTIME_LIMIT:
            return (f"Job {pk} is already stopping at its runtime limit: it ends timed out when its processes exit; "
                    "requeue it then to run it again.")
        return f"Job {pk} is already stopping: it ends when its processes exit."
    if job.state == JobState.UNSCHEDULABLE:
        return (f"Job {pk} never ran: as asked, this fleet can never run it, so requeueing it would not run it; "
                "change what it asks for and submit it again.")
    if job.state in ENDED_STATES:
        return None
    return f"Job {pk} is {job.state}: it cannot be requeued."


def moved(job: Job, expected: str) -> str:
    """Why an array's requeue left a task that changed state after the array's tasks were read
    (requeued or bound meanwhile, or ended while it ran)."""
    return (f"Job {job.pk} was {JobState(expected).label.lower()} when the array's tasks were read and is "
            f"{job.get_state_display().lower()} now: it changed state meanwhile, so nothing was requeued.")


def _words(by: str, reason: str) -> str:
    return f"Requeued by {by}" + (f": {reason}" if reason else "")


def requeue(user: AbstractBaseUser, job_id: int, *, hold: bool = False, reason: str = "",
            expected: str | None = None) -> Outcome:
    """Requeue a job (see the module's note); `hold`: it comes back held. A running job is
    stopped first; an ended one goes back to the queue at once. Refused (400) for a reason that
    is not one line of text (as a hold's), 403 for a job of another team, 409 with why for a job
    that waits or is stopping, and for an ended job as `_requeue_ended` says. Everything it
    writes is written in one transaction, or nothing is. `expected`: the state the caller read
    the job in (an array's requeue, `requeue_array`): refused (409, `moved`) when it is in
    another now, so a task is requeued from the state it was picked in or not at all."""
    at = timezone.now()
    problem = reason_problem(reason)
    if problem:
        raise Refused(400, f"reason: {problem}.", {"reason": problem})
    name = user.get_username()
    with transaction.atomic():
        # No lock on the job first: the stop is a compare-and-set on the allocation row, then the
        # job's (the lock order of every stop: allocation, then job). An exit or another stop
        # that gets there first leaves it no longer active: refused with where the job is now.
        # An ended job's requeue locks its rows itself (`_requeue_ended`).
        job = Job.objects.select_related("priority_class").get(pk=job_id)
        who = access.access_of(user)
        if not who.may_submit_for(job.team_id):
            raise Refused(403, f"Job {job.pk} belongs to another team; only its team or an admin may requeue it.")
        if expected is not None and job.state != expected:
            raise Refused(409, moved(job, expected))
        refused = refusal(job)
        if refused is not None:
            raise Refused(409, refused)
        if job.state in ENDED_STATES:
            ended = _requeue_ended(user, who, job.pk, hold=hold, reason=reason, at=at, expected=expected)
        else:
            ended = None
            grace = _stop_to_requeue(user, who, job, hold=hold, reason=reason, at=at)
    if ended is not None:
        log.info("job_requeued_after_end", job=job_id, user=name, hold=ended.job.hold, reason=reason)
        return ended
    job.refresh_from_db()
    level = (JobHold.ADMIN if who.is_admin else JobHold.USER) if hold else JobHold.NONE
    log.info("job_requeue_asked", job=job.pk, user=name, hold=level, reason=reason)
    held = (" held (" + ("an admin's hold: only an admin releases it" if level == JobHold.ADMIN else
                         f"release it with qm release {job.pk}") + ")") if hold else ""
    return Outcome(job, True, f"Job {job.pk} is stopping to be requeued: its processes get {grace} s to exit, then it "
                              f"goes back to the queue{held} with the same id, from its last checkpoint.")


def _stop_to_requeue(user: AbstractBaseUser, who: access.Access, job: Job, *, hold: bool, reason: str,
                     at: datetime) -> int:
    """Stop a running job to requeue it, in the caller's transaction; returns its grace period."""
    name = user.get_username()
    allocation = job.allocations.filter(state=AllocationState.ACTIVE).order_by("-generation").first()
    level = (JobHold.ADMIN if who.is_admin else JobHold.USER) if hold else JobHold.NONE
    grace = job.priority_class.grace_period_s
    then = ", then it comes back held until released" if hold else ", then it goes back to the queue"
    stopped = allocation is not None and signal_stop(
        allocation.pk, allocation.generation,
        reason=RELEASE_REQUEUED_HELD if hold else RELEASE_REQUEUED, grace_period_s=grace, at=at,
        actor=f"user:{name}", message=f"{_words(name, reason)}; its processes get {grace} s to exit{then}",
        data={"requested_by": name, "requested_by_id": user.pk, "reason": reason, "hold": level},
    )
    if not stopped:
        job.refresh_from_db()
        if job.state in ENDED_STATES:  # it ended between the read and the stop: requeue it from there
            raise Refused(409, f"Job {job.pk} ended ({job.get_state_display().lower()}) meanwhile; nothing was "
                               "requeued. Ask again to requeue it from its end.")
        raise Refused(409, refusal(job) or f"Job {job.pk} changed state meanwhile; nothing was requeued. Try again.")
    return grace


def _lock_upstream(job_id: int) -> list[tuple[int, str, Any, str, int | None]]:
    """The job's dependencies: (upstream id, condition, satisfied_at, upstream state, its exit
    code), the upstream rows locked FOR SHARE on PostgreSQL (in id order) as a submit locks them
    (services/dependencies/): an upstream's end waits for our commit and then finds this job
    waiting, or we wait for it and read its new state. The dependency rows are read after the
    lock, so a condition an end met while we waited is read met (read before, an upstream that
    succeeded and then failed again meanwhile looked never met). Never a dependency judged on a
    state that changes before we commit."""
    upstream = JobDependency.objects.filter(job_id=job_id).values("upstream_id")
    states = Job.objects.filter(pk__in=upstream).order_by("pk").values_list("pk", "state", "exit_code")
    if connection.vendor == "postgresql":
        sql, params = states.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"{sql} FOR SHARE", params)
            found = {pk: (state, code) for pk, state, code in cursor.fetchall()}
    else:
        found = {pk: (state, code) for pk, state, code in states}
    if not found:
        return []
    rows = JobDependency.objects.filter(job_id=job_id).order_by("upstream_id").values_list(
        "upstream_id", "condition", "satisfied_at")
    return [(u, c, at, *found[u]) for u, c, at in rows]


def _never_met(job: Job, rows: list[tuple[int, str, Any, str, int | None]]) -> tuple[str, str] | None:
    """(the dependency's text, why) when the job's dependencies can no longer be met: all-of,
    one unmet whose upstream ended otherwise; any-of (Slurm's `?`), none met and every one so.
    None when it may still start (or waits on nothing)."""
    unmet = [r for r in rows if r[2] is None]
    doomed = [r for r in unmet if dependencies.never_met(r[1], r[3])]
    if job.dependency_mode == DependencyMode.ANY:
        if not rows or len(doomed) < len(rows):
            return None
    elif not doomed:
        return None
    text = dependency_text.text_of(((u, c) for u, c, *_ in doomed), any_of=job.dependency_mode == DependencyMode.ANY)
    why = "; ".join(f"job {u} {dependencies.outcome(state, code)}, so {c} on it can never be met"
                    for u, c, _, state, code in doomed)
    return text, why


def _requeue_ended(user: AbstractBaseUser, who: access.Access, job_id: int, *, hold: bool, reason: str,
                   at: datetime, expected: str | None = None) -> Outcome:
    """Put an ended job back in the queue (see the module's note), in the caller's transaction.
    Locks its upstream jobs, then its own row (the order of a submit and of a change of a waiting
    job's dependencies: a transition locks the upstream, then its dependents). `expected`: as
    `requeue`'s, judged again under the lock."""
    name = user.get_username()
    rows = _lock_upstream(job_id)
    job = (Job.objects.select_for_update(no_key=True, of=("self",))
           .select_related("team", "project", "priority_class").get(pk=job_id))
    if expected is not None and job.state != expected:  # requeued, or requeued and run, meanwhile
        raise Refused(409, moved(job, expected))
    if job.state not in ENDED_STATES:  # requeued (or changed) by someone else meanwhile
        raise Refused(409, refusal(job) or f"Job {job.pk} changed state meanwhile; nothing was requeued.")
    was = job.get_state_display().lower()
    live = job.allocations.filter(state__in=LIVE_ALLOCATION_STATES).order_by("-generation").first()
    if live is not None:
        raise Refused(409, f"Job {job.pk} has ended ({was}) but is still stopping: generation {live.generation} "
                           "holds its GPUs until its agents confirm its processes are gone (or its node is fenced). "
                           "Requeue it once it has.")
    doomed = _never_met(job, rows)
    if doomed is not None:
        text, why = doomed
        raise Refused(409, f"Job {job.pk} cannot be requeued: {why}; it would wait for ever. Requeue that job first, "
                           "or submit this one again without that dependency.",
                      {"dependencies": f"{text} can never be met: {why}"})
    try:
        holds._judge_as_submit(user, job, {})
    except Refused as refused:
        if not refused.errors:
            raise
        said = "; ".join(f"{field}: {problem}" for field, problem in refused.errors.items())
        raise Refused(400, f"Job {job.pk} cannot be requeued as it was submitted: {said}. Submit it again as it may "
                           "run now.", refused.errors) from refused
    exit_code, finished_at = job.exit_code, job.finished_at
    last = job.allocations.order_by("-generation").values_list("generation", flat=True).first()
    level = (JobHold.ADMIN if who.is_admin else JobHold.USER) if hold else JobHold.NONE
    ended = dependencies.outcome(job.state, exit_code)
    ran = f" (its last run, generation {last}, is kept)" if last is not None else ""
    said = f"{_words(name, reason)} after it {ended}"
    Job.objects.filter(pk=job.pk).update(
        state=JobState.PENDING, state_changed_at=at, started_at=None, finished_at=None, exit_code=None,
        borrowed=False, requeue_count=F("requeue_count") + 1, pending_code="Requeued",
        pending_words=f"{said}; back in the queue with the same id, waiting for the next scheduling cycle"[:500],
        would_start_if_words="", pending_resolvable=True,
        hold=JobHold.NONE, held_at=None, held_by=None, hold_reason="",
    )
    PendingPlace.objects.filter(job_id=job.pk).delete()
    record_event(EventKind.JOB_REQUEUED, f"user:{name}", job=job, at=at,
                 reason=REQUEUED_HELD_AFTER_END if hold else REQUEUED_AFTER_END,
                 message=f"{said}: back in the queue with the same id{ran}",
                 data={"requested_by": name, "reason": reason, "hold": level, "from_state": job.state,
                       "exit_code": exit_code, "finished_at": finished_at.isoformat() if finished_at else None,
                       "generation": last})
    if hold:
        label = hold_label_of(level, name)
        message, would = held_sentence(label, reason)
        Job.objects.filter(pk=job.pk).update(
            hold=level, held_at=at, held_by_id=user.pk, hold_reason=reason, pending_code="Held",
            pending_words=message, would_start_if_words=would,
        )
        record_event(EventKind.JOB_HELD, f"user:{name}", job=job, at=at, reason="Held",
                     message=f"Held by {label}" + (f": {reason} —" if reason else ":")
                     + f" requeued held after it {ended}, out of the queue until released",
                     data={"hold": level, "held_by": name, "requeued": True, **({"reason": reason} if reason else {})})
    else:
        transaction.on_commit(job_service._request_cycle)
    job.refresh_from_db()
    held = (" held (" + ("an admin's hold: only an admin releases it" if level == JobHold.ADMIN else
                         f"release it with qm release {job.pk}") + ")") if hold else ""
    return Outcome(job, True, f"Job {job.pk} had {_had(ended)} and is back in the queue{held} with the same id; "
                              f"its earlier runs are kept.")


def _had(ended: str) -> str:
    """ "failed (exit 3)" → "failed (exit 3)"; "was cancelled" → "been cancelled" (after "had")."""
    return "been cancelled" if ended == "was cancelled" else ended


#: The task states an array's requeue may pick (`states`): running tasks (the default), and ended ones.
ARRAY_STATES = (JobState.RUNNING, *ENDED_STATES)


@dataclass(frozen=True)
class ArrayOutcome:
    """A requeue of an array's tasks in the states asked (running by default): the running ones
    now stopping to be requeued, the ended ones back in the queue (`rerun`), the ended ones
    refused with why (`not_requeued`: a dependency never met, no longer valid as a submit, still
    stopping), the running ones that ended between the read and their stop (`ended_meanwhile`:
    left as they ended, not rerun unasked), and the others counted by why they were left (in none
    of the states asked, or waiting again by the time they were reached; stopping already;
    another team's, for a member)."""

    requeued: list[int]
    not_running: int
    stopping: int
    refused: int
    rerun: list[int] = dataclasses.field(default_factory=list)
    not_requeued: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    ended_meanwhile: list[int] = dataclasses.field(default_factory=list)


def requeue_array(user: AbstractBaseUser, job_ids: list[int], *, hold: bool = False, reason: str = "",
                  states: Sequence[str] = (JobState.RUNNING,)) -> ArrayOutcome:
    """Requeue each task among `job_ids` whose state is one of `states` (running, and any of the
    end states: `ARRAY_STATES`), one by one as `requeue` does one (each its own transaction: a
    task that ends meanwhile is counted, the others still go), each from the state read here or
    not at all (`requeue`'s `expected`): a running task that ended meanwhile is counted, not
    rerun from its end; an ended one requeued meanwhile (by its own requeue, and perhaps bound
    again since) is listed in `not_requeued`, not requeued twice. Tasks in other states are counted,
    not refused: an array is usually partly running. `states` ["failed", "timed_out"] reruns a
    sweep's failed tasks and leaves its running ones alone."""
    problem = reason_problem(reason)
    if problem:
        raise Refused(400, f"reason: {problem}.", {"reason": problem})
    unknown = [str(state) for state in states if state not in ARRAY_STATES]
    if unknown or not states:
        problem = (f"{', '.join(unknown)} cannot be requeued" if unknown else "name at least one") + \
            f"; choose among {', '.join(ARRAY_STATES)}"
        raise Refused(400, f"states: {problem}.", {"states": problem})
    requeued: list[int] = []
    rerun: list[int] = []
    not_requeued: list[dict[str, Any]] = []
    ended_meanwhile: list[int] = []
    not_running = stopping = refused = 0
    for pk, state in Job.objects.filter(pk__in=job_ids).order_by("array_index", "pk").values_list("pk", "state"):
        if state == JobState.PREEMPTING:
            stopping += 1
            continue
        if state not in states:
            not_running += 1
            continue
        try:
            # From the state read here or not at all: a task requeued (and bound) by someone else
            # since is not requeued twice, one that ended since is not rerun unasked.
            requeue(user, pk, hold=hold, reason=reason, expected=state)
        except Refused as refusal_:
            if refusal_.status == 403:
                refused += 1
            elif state in ENDED_STATES:  # judged and refused: said task by task
                not_requeued.append({"job": pk, "state": state, "detail": refusal_.detail,
                                     "errors": refusal_.errors})
            else:  # read running; by its turn it ended, began stopping or waits again: said as it is now
                now = Job.objects.filter(pk=pk).values_list("state", flat=True).first()
                if now in ENDED_STATES:  # its exit was being settled: not "already stopping"
                    ended_meanwhile.append(pk)
                elif now == JobState.PENDING:
                    not_running += 1
                else:
                    stopping += 1
            continue
        (rerun if state in ENDED_STATES else requeued).append(pk)
    return ArrayOutcome(requeued, not_running, stopping, refused, rerun, not_requeued, ended_meanwhile)
