"""Why a stopping job stops, in words. The state stays `preempting` whatever stops a job; the
API's `state_label`, the job list, its timeline, the node page and `qm status` all say it with
these words, read from the release reason of the allocation being stopped."""

from __future__ import annotations

from collections.abc import Sequence

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job
from controlplane.services.agent_protocol import RELEASE_GANG_MEMBER_EXITED, RELEASE_GANG_MEMBER_FAILED
from controlplane.services.transitions import (
    RELEASE_CANCELLED,
    RELEASE_PREEMPTED,
    RELEASE_RESIZED,
    RELEASE_RUNTIME_LIMIT,
)

#: What a stopping job is doing, by the release reason of the stop under it.
STOPPING_LABELS = {
    RELEASE_PREEMPTED: "preempting",
    RELEASE_RESIZED: "stopping: resize",
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
