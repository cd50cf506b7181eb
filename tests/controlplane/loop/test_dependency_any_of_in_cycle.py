"""Any-of dependencies (Slurm's `?`) through real scheduling cycles: the cycle keeps the job out
of line while none is met and says so as "any one of … or …" (the engine lists the waits joined
by "and"; the control plane, which decides any-of, words it), and starts it once one is met,
whatever became of the others."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, Event, Job, JobDependency
from controlplane.services import cycle, transitions
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, make_job, register_node


def finish(job: Job, exit_code: int = 0) -> None:
    allocation = Allocation.objects.get(job=job, state="active")
    assert transitions.complete_release(allocation.pk, exit_code=exit_code, at=timezone.now(), actor="agent")


def test_an_any_of_job_waits_for_one_and_starts_when_one_is_met(fleet: LoopFleet) -> None:
    alice = f.make_user("alice", team=fleet.team)
    register_node("gpu-a")  # 8 GPUs: room for all
    at = timezone.now()
    first = make_job(fleet, name="first", submitter=alice, submitted_at=at)
    second = make_job(fleet, name="second", submitter=alice, submitted_at=at + timedelta(seconds=1))
    cycle.run_cycle("worker-1")
    assert Job.objects.get(pk=first.pk).state == JobState.RUNNING
    job = make_job(fleet, name="eval", submitter=alice, dependency_mode="any", submitted_at=at + timedelta(seconds=2))
    JobDependency.objects.bulk_create([JobDependency(job=job, upstream=first, condition="afterok"),
                                       JobDependency(job=job, upstream=second, condition="afterok")])

    cycle.run_cycle("worker-1")

    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.pending_code == "WaitingForDependency"
    assert job.pending_message == (f"Waits for any one of job {first.pk} to succeed (now running) or job {second.pk} "
                                   "to succeed (now running): until then it is not in the queue and holds nothing.")
    assert job.pending_would_start_if == f"job {first.pk} succeeds or job {second.pk} succeeds"
    (said,) = Event.objects.filter(job=job, kind=EventKind.JOB_PENDING)
    assert said.message.startswith("Waits for any one of")

    finish(first, 3)  # failed: the other may still succeed
    cycle.run_cycle("worker-1")
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert job.pending_message.startswith(f"Waits for job {second.pk} to succeed (now running)")  # the one left

    finish(second)
    cycle.run_cycle("worker-1")
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
