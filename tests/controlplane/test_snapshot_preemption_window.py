"""A preemption budget counts the preemptions inside its window, each leaving the window on its
own (seed 000, "Preemption costs work": budget it). The job row keeps only a count and the time
of the last one; a job requeued more than once, its last requeue inside the window, has its
requeues' times read from their events.

Before, every preemption of such a job counted while its last one was inside the window: a job
preempted twice two days ago and once an hour ago was "preempted 3 times in the last 24 h" and
protected by a budget of 3 a day, though only one of them fell in the last 24 h.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, Job
from controlplane.services.snapshot import read_snapshot, to_seconds
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


def _requeued(job: Job, *ago: timedelta, kind: EventKind = EventKind.JOB_PREEMPTED) -> None:
    now = timezone.now()
    for a in ago:
        Event.objects.create(created_at=now - a, kind=kind, actor="scheduler@epoch:1", job=job, reason="Preempted")
    Job.objects.filter(pk=job.pk).update(preemption_count=len(ago), last_preempted_at=now - min(ago))


@pytest.fixture
def victim(fleet) -> Job:  # type: ignore[no-untyped-def]
    """A running ml job of a class allowing 3 preemptions per 24 h."""
    batch = f.make_priority_class("batch3", 50, preemption_budget=3, budget_window_s=86400)
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now - HOUR / 2, priority_class=batch)
    hold(job, [(fleet.nodes[1], 8)], now - HOUR / 2)
    return job


def _spec(job: Job) -> Any:
    snapshot = read_snapshot(timezone.now(), 1).snapshot
    [running] = [r for r in snapshot.running if r.spec.id == str(job.pk)]
    return running.spec


def test_preemptions_older_than_the_window_leave_the_budget_one_by_one(victim) -> None:
    _requeued(victim, 50 * HOUR, 49 * HOUR, HOUR)
    assert _spec(victim).preemptions_in_window == 1


def test_a_budget_spent_inside_the_window_frees_when_its_oldest_preemption_leaves(victim) -> None:
    _requeued(victim, 30 * HOUR, 5 * HOUR, 3 * HOUR, HOUR)
    spec = _spec(victim)
    assert spec.preemptions_in_window == 3
    oldest_inside = Event.objects.filter(job=victim).order_by("created_at")[1].created_at
    assert spec.preemption_budget_frees_at == pytest.approx(to_seconds(oldest_inside + timedelta(days=1)))


def test_fencing_requeues_count_as_the_job_row_counts_them(victim) -> None:
    _requeued(victim, 2 * HOUR, HOUR, kind=EventKind.JOB_REQUEUED)
    assert _spec(victim).preemptions_in_window == 2


def test_without_its_events_a_jobs_requeues_all_count_while_the_last_is_inside(victim) -> None:
    _requeued(victim, 50 * HOUR, 49 * HOUR, HOUR)
    Event.objects.filter(job=victim).delete()
    spec = _spec(victim)
    assert spec.preemptions_in_window == 3
    last = Job.objects.get(pk=victim.pk).last_preempted_at
    assert spec.preemption_budget_frees_at == pytest.approx(to_seconds(last + timedelta(days=1)))
