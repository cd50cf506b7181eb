"""Requeueing a running job at someone's request (Slurm's `scontrol requeue` and `requeuehold`).

A running job is stopped exactly as a preemption or a cancel stops it (transitions.signal_stop:
its processes get its priority class's grace period, SIGTERM then SIGKILL, its GPUs stay owned
until its agents confirm or its node is fenced). The stop's release reason says why
(`RELEASE_REQUEUED`, or `RELEASE_REQUEUED_HELD` with `hold`), and its notice, a job.preempting
event with that reason, says who asked and why. Once the old allocation is released (or
fenced), transitions.requeue_as_asked puts the job back in the queue with the same id:
`requeue_count` + 1, the work since its last checkpoint lost (as a preemption's requeue counts
it, not against the preemption budget), a job.requeued event (which webhooks subscribed to
`requeued` are told of), and held by whoever asked when `hold` was asked. Its next bind draws a
new generation, so nothing of its old run can act on its new GPUs.

Only a running job is requeued: a waiting job waits already; a job being stopped is left to the
stop under way (a preempted or resized job goes back to the queue by itself; a cancel, a runtime
limit or a gang member's exit ends it); an ended job's end is settled (its accounting, what its
dependents did) and is submitted again instead. Slurm also requeues a finished batch job; here
that would undo what its dependents were told, so it is refused.

Who may: the job's team (any member) and admins, the rule of cancel. A requeue with `hold` by an
admin is an admin's hold (only an admin releases it), as `qm hold` by an admin is.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from controlplane.choices import AllocationState, JobHold, JobState
from controlplane.models import Allocation, Job
from controlplane.services import access
from controlplane.services.holds import Outcome, Refused, reason_problem
from controlplane.services.transitions import (
    RELEASE_CANCELLED,
    RELEASE_PREEMPTED,
    RELEASE_REQUEUED,
    RELEASE_REQUEUED_HELD,
    RELEASE_RESIZED,
    RELEASE_RUNTIME_LIMIT,
    signal_stop,
)

log = structlog.get_logger(__name__)


def _stop_under(job: Job) -> Allocation | None:
    return job.allocations.filter(state=AllocationState.RELEASING).order_by("-generation").first()


def refusal(job: Job) -> str | None:
    """Why a requeue of this job would be refused (409), in one sentence saying what to do
    instead; None when it may be requeued (it runs)."""
    if job.state == JobState.RUNNING:
        return None
    pk = job.pk
    if job.state == JobState.PENDING:
        held = (f" It is held: release it when it may start (qm release {pk})." if job.hold else "")
        return f"Job {pk} is waiting already: only a running job can be requeued.{held}"
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
            return f"Job {pk} is already stopping: it is being cancelled and ends when its processes exit."
        if reason == RELEASE_RUNTIME_LIMIT:
            return (f"Job {pk} is already stopping at its runtime limit: it ends timed out when its processes exit; "
                    "submit it again to run it again.")
        return f"Job {pk} is already stopping: it ends when its processes exit."
    if job.state == JobState.UNSCHEDULABLE:
        return f"Job {pk} never ran: as asked, this fleet can never run it. Only a running job can be requeued."
    return (f"Job {pk} has already ended ({job.get_state_display().lower()}): only a running job can be requeued; "
            "to run it again, submit it again.")


def _words(by: str, reason: str) -> str:
    return f"Requeued by {by}" + (f": {reason}" if reason else "")


def requeue(user: AbstractBaseUser, job_id: int, *, hold: bool = False, reason: str = "") -> Outcome:
    """Stop a running job to requeue it (see the module's note); `hold`: it comes back held.
    Refused (400) for a reason that is not one line of text (as a hold's), 403 for a job of
    another team, 409 with why for a job that is not running. The stop, the job's state and the
    notice are written in one transaction, or nothing is."""
    at = timezone.now()
    problem = reason_problem(reason)
    if problem:
        raise Refused(400, f"reason: {problem}.", {"reason": problem})
    name = user.get_username()
    with transaction.atomic():
        # No lock on the job first: the stop is a compare-and-set on the allocation row, then the
        # job's (the lock order of every stop: allocation, then job). An exit or another stop
        # that gets there first leaves it no longer active: refused with where the job is now.
        job = Job.objects.select_related("priority_class").get(pk=job_id)
        who = access.access_of(user)
        if not who.may_submit_for(job.team_id):
            raise Refused(403, f"Job {job.pk} belongs to another team; only its team or an admin may requeue it.")
        refused = refusal(job)
        if refused is not None:
            raise Refused(409, refused)
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
            raise Refused(409, refusal(job) or f"Job {job.pk} changed state meanwhile; nothing was requeued. Try again.")
        job.refresh_from_db()
    log.info("job_requeue_asked", job=job.pk, user=name, hold=level, reason=reason)
    held = (" held (" + ("an admin's hold: only an admin releases it" if level == JobHold.ADMIN else
                         f"release it with qm release {job.pk}") + ")") if hold else ""
    return Outcome(job, True, f"Job {job.pk} is stopping to be requeued: its processes get {grace} s to exit, then it "
                              f"goes back to the queue{held} with the same id, from its last checkpoint.")


@dataclass(frozen=True)
class ArrayOutcome:
    """A requeue of every running task of an array: those now stopping to be requeued, and
    the others counted by why they were left (not running: waiting or ended; stopping already;
    another team's, for a member)."""

    requeued: list[int]
    not_running: int
    stopping: int
    refused: int


def requeue_array(user: AbstractBaseUser, job_ids: list[int], *, hold: bool = False, reason: str = "") -> ArrayOutcome:
    """Requeue each running task among `job_ids`, one by one as `requeue` does one (each its own
    transaction: a task that ends meanwhile is counted, the others still go). Tasks that do not
    run are counted, not refused: an array is usually partly running."""
    problem = reason_problem(reason)
    if problem:
        raise Refused(400, f"reason: {problem}.", {"reason": problem})
    requeued: list[int] = []
    not_running = stopping = refused = 0
    for pk, state in Job.objects.filter(pk__in=job_ids).order_by("array_index", "pk").values_list("pk", "state"):
        if state == JobState.PREEMPTING:
            stopping += 1
            continue
        if state != JobState.RUNNING:
            not_running += 1
            continue
        try:
            requeue(user, pk, hold=hold, reason=reason)
        except Refused as refusal_:
            if refusal_.status == 403:
                refused += 1
            else:  # it stopped or ended meanwhile
                stopping += 1
            continue
        requeued.append(pk)
    return ArrayOutcome(requeued, not_running, stopping, refused)
