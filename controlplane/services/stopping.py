"""Why a stopping job stops, in words. The state stays `preempting` whatever stops a job; the
API's `state_label`, the job list, its timeline, the node page and `qm status` all say it with
these words, read from the release reason of the allocation being stopped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from django.db.models import Count, QuerySet

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job
from controlplane.services.agent_protocol import RELEASE_GANG_MEMBER_EXITED, RELEASE_GANG_MEMBER_FAILED
from controlplane.services.transitions import (
    RELEASE_CANCELLED,
    RELEASE_PREEMPTED,
    RELEASE_REQUEUED,
    RELEASE_REQUEUED_HELD,
    RELEASE_RESIZED,
    RELEASE_RUNTIME_LIMIT,
)

#: The stops that put the job back in the queue (a preemption, a resize, a requeue someone asked
#: for): their notice (`job.preempting` for a preemption, `job.stopping` for the others, every one
#: `job.preempting` before migration 0032) is the one a job's "last preemption" shows, headed by
#: what it was. The other stops noticed so end the job (a gang member that exited or failed: the
#: rest of the gang is stopped), and a succeeded gang job's page and `qm status` showed
#: "Preempted" with "The gang member on h100-01 exited with code 0".
REQUEUEING_STOPS = frozenset({RELEASE_PREEMPTED, RELEASE_RESIZED, RELEASE_REQUEUED, RELEASE_REQUEUED_HELD})

#: What a stopping job is doing, by the release reason of the stop under it.
STOPPING_LABELS = {
    RELEASE_PREEMPTED: "preempting",
    RELEASE_RESIZED: "stopping: resize",
    RELEASE_REQUEUED: "stopping: requeue",
    RELEASE_REQUEUED_HELD: "stopping: requeue held",
    RELEASE_CANCELLED: "stopping: cancelled",
    RELEASE_RUNTIME_LIMIT: "stopping: runtime limit",
    RELEASE_GANG_MEMBER_EXITED: "stopping: gang member exited",
    RELEASE_GANG_MEMBER_FAILED: "stopping: gang member failed",
}


def stopping_label(release_reason: str | None) -> str:
    """A stopping job's label from its stop's release reason ("stopping" when none is known)."""
    return STOPPING_LABELS.get(release_reason or "", "stopping")


def stop_reason(job: Job) -> str:
    """The release reason of the stop under a stopping job: attached to a page's jobs by
    attach_gpus_held, otherwise read (its latest releasing allocation); "" when none."""
    reason = getattr(job, "stop_reason", None)
    if reason is None:
        reason = (
            job.allocations.filter(state=AllocationState.RELEASING).order_by("-generation")
            .values_list("release_reason", flat=True).first()
        ) or ""
    return str(reason)


def attach_stop_reasons(jobs: Sequence[Job]) -> None:
    """Set `stop_reason` on the stopping jobs among `jobs`: one query, none without such a job
    (a list that does not call attach_gpus_held)."""
    stopping = [job for job in jobs if job.state == JobState.PREEMPTING]
    reasons = stop_reasons([job.pk for job in stopping])
    for job in stopping:
        job.stop_reason = reasons.get(job.pk, "")  # type: ignore[attr-defined]


def stop_reasons(job_ids: Sequence[int]) -> dict[int, str]:
    """The release reason of the stop under each of these (stopping) jobs: one query, none for
    no job."""
    if not job_ids:
        return {}
    return dict(
        Allocation.objects.filter(job_id__in=list(job_ids), state=AllocationState.RELEASING)
        .order_by("job_id", "generation").values_list("job_id", "release_reason")
    )  # the latest generation of each job last: it wins


def state_label(job: Job) -> str:
    """`state`, said as what the job is doing: a stopping job names why it stops."""
    return stopping_label(stop_reason(job)) if job.state == JobState.PREEMPTING else str(job.state)


#: The order totals list a stopping job's labels in: as STOPPING_LABELS, then one with no reason.
_LABEL_ORDER = [*STOPPING_LABELS.values(), "stopping"]


def label_totals(jobs: QuerySet[Job]) -> list[tuple[str, str, int]]:
    """How many of `jobs` (an array's tasks) are in each state, said as state_label: (state,
    label, count) in the states' order, a stopping state split by why it stops. One query, two
    when some job is stopping."""
    counts = dict(jobs.order_by().values_list("state").annotate(n=Count("id")))
    reasons: dict[int, str] = {}
    if counts.get(JobState.PREEMPTING):
        reasons = dict(
            Allocation.objects.filter(job__in=jobs.filter(state=JobState.PREEMPTING).values("pk"),
                                      state=AllocationState.RELEASING)
            .order_by("job_id", "generation").values_list("job_id", "release_reason")
        )  # the latest generation of each job last: it wins
    return totals_by_label(counts, reasons)


def totals_by_label(counts: Mapping[str, int], reasons: Mapping[int, str]) -> list[tuple[str, str, int]]:
    """(state, label, count) from counts per state and the stop reasons of the stopping jobs
    among them (stop_reasons); a stopping job without a releasing allocation is "stopping"."""
    totals: list[tuple[str, str, int]] = []
    for state in JobState.values:
        n = counts.get(state, 0)
        if not n:
            continue
        if state != JobState.PREEMPTING:
            totals.append((state, state, n))
            continue
        labels = Counter(stopping_label(reason) for reason in reasons.values())
        labels["stopping"] += max(0, n - sum(labels.values()))
        totals.extend((state, label, labels[label]) for label in _LABEL_ORDER if labels[label])
    return totals
