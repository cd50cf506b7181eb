"""Jobs being stopped (state `preempting`) for each reason a stop has, on the shared small fleet:
an allocation releasing with its release reason, as transitions.signal_stop leaves it."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, AllocationGpu, Job
from controlplane.services import transitions
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

#: Job name → the release reason of its stop, and the label every view gives it.
STOPS = {
    "preempted": (transitions.RELEASE_PREEMPTED, "preempting"),
    "cancelled": (transitions.RELEASE_CANCELLED, "stopping: cancelled"),
    "timed-out": (transitions.RELEASE_RUNTIME_LIMIT, "stopping: runtime limit"),
    "resized": (transitions.RELEASE_RESIZED, "stopping: resize"),
    "gang-exit": ("GangMemberExited", "stopping: gang member exited"),
}


def make_stopping_jobs(fleet: Fleet) -> dict[str, Job]:
    """One stopping job per entry of STOPS (one GPU each on h100-1), plus a running one."""
    now = timezone.now()
    jobs = {}
    for generation, (name, (reason, _)) in enumerate(STOPS.items(), start=1):
        job = f.make_job(fleet.ml, name=name, gpus=1, state=JobState.PREEMPTING, started_at=now)
        allocation = Allocation.objects.create(
            job=job, generation=generation, epoch=1, created_at=now, started_at=now,
            state=AllocationState.RELEASING, release_reason=reason, release_deadline=now + timedelta(seconds=30),
        )
        AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[1], gpu_index=generation, live=True)
        jobs[name] = job
    running = f.make_job(fleet.ml, name="running", gpus=1, state=JobState.RUNNING, started_at=now)
    allocation = Allocation.objects.create(job=running, generation=100, epoch=1, created_at=now, started_at=now,
                                           state=AllocationState.ACTIVE)
    AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[1], gpu_index=0, live=True)
    jobs["running"] = running
    return jobs
