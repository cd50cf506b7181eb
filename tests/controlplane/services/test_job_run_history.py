"""`job_runs.run_history`: a job's runs as the what-if replay reads them (frontend/whatif.py),
each told apart by how its requeue came about, from the allocation rows and requeue events the
real transitions write (tests/frontend/test_what_if_requeues.py shows the replay built on it)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, Job
from controlplane.services import reconcile, requeue, transitions
from controlplane.services.job_runs import (
    REQUEUE_ASKED,
    REQUEUE_ASKED_HELD,
    REQUEUED_BY_SCHEDULER,
    REQUEUED_OFF_A_LOST_NODE,
    Resubmission,
    RunSpan,
    run_history,
)
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet
from tests.controlplane.job_runs_story import bind_at

pytestmark = pytest.mark.django_db


def _running(fleet: Fleet, at) -> tuple[Job, Allocation]:
    job = f.make_job(fleet.ml, gpus=2, submitted_at=at, submitter=fleet.users["owner"])
    return job, bind_at(job, [(fleet.nodes[1], [0, 1], "")], at=at)


def test_a_preempted_run_is_the_schedulers_and_keeps_its_work_to_the_checkpoint(fleet: Fleet) -> None:
    t0 = timezone.now() - timedelta(hours=3)
    job, run = _running(fleet, t0)
    Job.objects.filter(pk=job.pk).update(last_checkpoint_at=t0 + timedelta(minutes=40))
    assert transitions.signal_stop(run.pk, run.generation, reason=transitions.RELEASE_PREEMPTED, grace_period_s=30,
                                   at=t0 + timedelta(hours=1), actor="scheduler", message="preempted")
    ended = t0 + timedelta(hours=1, seconds=30)
    assert transitions.complete_release(run.pk, exit_code=143, at=ended, actor="agent:test")

    (span,) = run_history([job.pk], until=timezone.now())[job.pk].runs

    # lost: 2 GPUs × (1 h 30 s - 40 min) = 2 × 1,230 s; kept: the 40 min to its checkpoint
    assert span == RunSpan(t0, ended, 2, REQUEUED_BY_SCHEDULER, ended, 2 * 1230.0)
    assert span.kept_s == pytest.approx(2400.0)


def test_a_run_fenced_off_a_lost_node_is_told_apart(fleet: Fleet) -> None:
    t0 = timezone.now() - timedelta(hours=2)
    job, run = _running(fleet, t0)
    fenced = t0 + timedelta(hours=1)
    with transaction.atomic():
        assert transitions.fence_allocation(run.pk, lease=reconcile.lock_scheduler_lease(), at=fenced, actor="test",
                                            reason="NodeLeaseExpired")

    (span,) = run_history([job.pk], until=timezone.now())[job.pk].runs

    assert (span.requeued, span.requeued_at, span.kept_s) == (REQUEUED_OFF_A_LOST_NODE, fenced, 0.0)


@pytest.mark.parametrize(("hold", "how"), [(False, REQUEUE_ASKED), (True, REQUEUE_ASKED_HELD)])
def test_a_requeue_someone_asked_for_while_it_ran_is_told_held_or_not(fleet: Fleet, hold: bool, how: str) -> None:
    t0 = timezone.now() - timedelta(hours=2)
    job, run = _running(fleet, t0)
    requeue.requeue(fleet.users["owner"], job.pk, hold=hold)
    gone = t0 + timedelta(hours=1)
    assert transitions.complete_release(run.pk, exit_code=143, at=gone, actor="agent:test")

    (span,) = run_history([job.pk], until=timezone.now())[job.pk].runs

    assert (span.requeued, span.requeued_at, span.ended_at) == (how, gone, gone)


def test_a_requeue_after_an_end_is_a_resubmission_and_the_run_before_it_ended_by_itself(fleet: Fleet) -> None:
    t0 = timezone.now() - timedelta(hours=2)
    job, run = _running(fleet, t0)
    assert transitions.complete_release(run.pk, exit_code=1, at=t0 + timedelta(hours=1), actor="agent:test")
    assert Job.objects.get(pk=job.pk).state == JobState.FAILED
    requeue.requeue(fleet.users["owner"], job.pk, hold=True)

    history = run_history([job.pk], until=timezone.now() + timedelta(seconds=1))[job.pk]

    assert history.runs == (RunSpan(t0, t0 + timedelta(hours=1), 2),)
    (again,) = history.resubmissions
    assert again == Resubmission(again.at, JobState.FAILED, True)


def test_what_came_after_the_time_asked_about_is_not_known_yet(fleet: Fleet) -> None:
    t0 = timezone.now() - timedelta(hours=3)
    job, run = _running(fleet, t0)
    assert transitions.signal_stop(run.pk, run.generation, reason=transitions.RELEASE_PREEMPTED, grace_period_s=30,
                                   at=t0 + timedelta(hours=2), actor="scheduler", message="preempted")
    assert transitions.complete_release(run.pk, exit_code=143, at=t0 + timedelta(hours=2), actor="agent:test")

    assert run_history([job.pk], until=t0 + timedelta(hours=1))[job.pk].runs == (RunSpan(t0, None, 2),)
    assert run_history([job.pk], until=t0) == {}
