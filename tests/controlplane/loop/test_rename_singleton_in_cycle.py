"""A rename's reasons are the next cycle's: right after a waiting job is renamed, the singletons
of its old and new name whose wait it changed say what they wait for now, in the very words the
next scheduling cycle writes (so that cycle finds them unchanged and records no second event),
and a singleton it freed is ranked by that cycle like any job in line."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from controlplane.services import cycle, holds
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, make_job, register_node


def test_the_reasons_a_rename_writes_are_the_next_cycles(fleet: LoopFleet) -> None:
    alice = f.make_user("alice", team=fleet.team)
    register_node("gpu-a")  # 8 GPUs, all taken by the hog below: the rest wait for GPUs
    at = timezone.now()
    hog = make_job(fleet, gpus=8, name="hog", submitter=alice, submitted_at=at - timedelta(seconds=10))
    cycle.run_cycle("worker-1")
    assert Job.objects.get(pk=hog.pk).state == JobState.RUNNING
    y = make_job(fleet, name="m", submitter=alice, submitted_at=at)
    x = make_job(fleet, name="n", submitter=alice, submitted_at=at + timedelta(seconds=1))
    s = make_job(fleet, name="n", submitter=alice, singleton=True, submitted_at=at + timedelta(seconds=2))
    t = make_job(fleet, name="m", submitter=alice, singleton=True, submitted_at=at + timedelta(seconds=3))
    cycle.run_cycle("worker-1")
    s, t = Job.objects.get(pk=s.pk), Job.objects.get(pk=t.pk)
    assert s.pending_message.startswith(f"Waits for job {x.pk} to end (now pending; same name “n”")
    assert t.pending_message.startswith(f"Waits for job {y.pk} to end (now pending; same name “m”")

    outcome = holds.update(alice, x.pk, {"name": "m"})

    assert outcome.changed
    s, t = Job.objects.get(pk=s.pk), Job.objects.get(pk=t.pk)
    assert s.pending_code == "DependencySatisfied"
    assert t.pending_message == (f"Waits for job {x.pk} to end (now pending; same name “m”, singleton): until then "
                                 "it is not in the queue and holds nothing.")
    events_before = Event.objects.filter(job=t, kind=EventKind.JOB_PENDING).count()

    cycle.run_cycle("worker-1")

    t_after, s_after = Job.objects.get(pk=t.pk), Job.objects.get(pk=s.pk)
    assert (t_after.pending_code, t_after.pending_message, t_after.pending_would_start_if) == (
        t.pending_code, t.pending_message, t.pending_would_start_if)
    assert Event.objects.filter(job=t, kind=EventKind.JOB_PENDING).count() == events_before
    # the freed singleton is in line: the cycle ranks it and says it waits for GPUs like the rest
    assert s_after.state == JobState.PENDING and s_after.pending_code == Job.objects.get(pk=x.pk).pending_code
    assert s_after.queue_position is not None
