"""Slurm's singleton through real scheduling cycles: jobs of one submitter and name given it run
one at a time, in submission order, however much room the fleet has; a job of that name that
runs (singleton or not) or waits ahead holds one up, another submitter's or another name's does
not; the end of the job it waited for records an event and the next cycle starts it; a cycle's
bind never starts two of a name at once, even from a plan that would (the stale-bind guard);
the snapshot reads them in the same number of queries."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import scheduler_core as engine
from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, Event, Job
from controlplane.services import cycle, dependencies, dependency_text, holds, transitions
from controlplane.services.dependencies import waiting
from controlplane.services.snapshot import read_snapshot, scheduler_config
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, make_job, register_node


@pytest.fixture
def alice(fleet: LoopFleet) -> Any:
    return f.make_user("alice", team=fleet.team)


def singles(fleet: LoopFleet, user: Any, n: int, *, name: str = "train", gpus: int = 1) -> list[Job]:
    """`n` singletons of `user` named `name`, submitted a second apart."""
    at = timezone.now()
    return [make_job(fleet, gpus=gpus, name=name, submitter=user, singleton=True,
                     submitted_at=at + timedelta(seconds=i)) for i in range(n)]


def states(*jobs: Job) -> list[str]:
    return [Job.objects.get(pk=j.pk).state for j in jobs]


def finish(job: Job, exit_code: int = 0) -> None:
    allocation = Allocation.objects.get(job=job, state="active")
    assert transitions.complete_release(allocation.pk, exit_code=exit_code, at=timezone.now(), actor="agent")


def test_singletons_of_a_name_run_one_at_a_time_in_submission_order(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")  # 8 GPUs: room for all three at once
    first, second, third = singles(fleet, alice, 3)

    cycle.run_cycle("worker-1")
    cycle.run_cycle("worker-1")

    assert states(first, second, third) == [JobState.RUNNING, JobState.PENDING, JobState.PENDING]
    second, third = Job.objects.get(pk=second.pk), Job.objects.get(pk=third.pk)
    assert second.pending_code == "WaitingForDependency"
    assert second.pending_message == (f"Waits for job {first.pk} to end (now running; same name “train”, "
                                      "singleton): until then it is not in the queue and holds nothing.")
    # the third waits for the second, the one that goes before it
    assert third.pending_message.startswith(f"Waits for job {second.pk} to end (now pending; same name “train”")

    finish(first, 3)  # however it ends
    (event,) = Event.objects.filter(job=second, kind=EventKind.JOB_UPDATED, reason=dependencies.SATISFIED)
    assert event.message == (f"Job {first.pk} failed (exit 3): no other job named “train” of this submitter runs "
                             "or waits ahead of it now, so its singleton dependency is met; it waits on no other "
                             "job now")
    assert event.data == {"upstream": first.pk, "condition": "singleton", "upstream_state": "failed",
                          "waiting_on": 0}
    assert not Event.objects.filter(job=third, reason=dependencies.SATISFIED).exists()  # second is still ahead
    cycle.run_cycle("worker-1")
    cycle.run_cycle("worker-1")
    assert states(first, second, third) == [JobState.FAILED, JobState.RUNNING, JobState.PENDING]

    finish(second)
    cycle.run_cycle("worker-1")
    assert states(second, third) == [JobState.SUCCEEDED, JobState.RUNNING]


def test_tasks_submitted_together_run_one_at_a_time_in_id_order(fleet: LoopFleet, alice: Any) -> None:
    """A job array's tasks share their submit time: the id decides which is ahead."""
    register_node("gpu-a")
    at = timezone.now()
    tasks = [make_job(fleet, name="sweep", submitter=alice, singleton=True, submitted_at=at) for _ in range(3)]

    cycle.run_cycle("worker-1")

    assert states(*tasks) == [JobState.RUNNING, JobState.PENDING, JobState.PENDING]
    finish(tasks[0])
    cycle.run_cycle("worker-1")
    assert states(*tasks) == [JobState.SUCCEEDED, JobState.RUNNING, JobState.PENDING]


def test_a_running_job_of_the_name_holds_a_singleton_up_whoever_submitted_it_first(
    fleet: LoopFleet, alice: Any,
) -> None:
    """Slurm checks any job of the name that runs, singleton or not, submitted before or after."""
    register_node("gpu-a")
    (single,) = singles(fleet, alice, 1)
    later = make_job(fleet, name="train", submitter=alice, state=JobState.RUNNING,
                     submitted_at=single.submitted_at + timedelta(seconds=5))

    cycle.run_cycle("worker-1")

    assert states(single) == [JobState.PENDING]
    assert Job.objects.get(pk=single.pk).pending_message.startswith(f"Waits for job {later.pk} to end (now running")


def test_a_waiting_job_of_the_name_ahead_holds_it_up_and_a_later_one_does_not(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")
    at = timezone.now()
    ahead = make_job(fleet, gpus=16, name="train", submitter=alice, submitted_at=at)  # can never fit: waits
    single = make_job(fleet, name="train", submitter=alice, singleton=True, submitted_at=at + timedelta(seconds=1))
    behind_single = make_job(fleet, name="solo", submitter=alice, singleton=True, submitted_at=at)
    make_job(fleet, gpus=16, name="solo", submitter=alice, submitted_at=at + timedelta(seconds=1))  # after it

    cycle.run_cycle("worker-1")

    assert states(single, behind_single) == [JobState.PENDING, JobState.RUNNING]
    assert Job.objects.get(pk=single.pk).pending_message.startswith(f"Waits for job {ahead.pk} to end (now pending")


def test_another_submitters_or_another_names_jobs_do_not_hold_it_up(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")
    bob = f.make_user("bob", team=fleet.team)
    make_job(fleet, name="train", submitter=bob, state=JobState.RUNNING)
    make_job(fleet, name="eval", submitter=alice, state=JobState.RUNNING)
    (single,) = singles(fleet, alice, 1)
    (bobs,) = singles(fleet, bob, 1, name="eval")

    cycle.run_cycle("worker-1")

    assert states(single, bobs) == [JobState.RUNNING, JobState.RUNNING]


def test_the_bind_guard_never_starts_two_of_a_name_from_one_plan(fleet: LoopFleet, alice: Any) -> None:
    """`waiting_among`, the commit's stale-bind guard, on a batch whose plan was read before the
    singletons were: the earlier one may start, the later one waits; a job of the name that is
    not a singleton, bound with a singleton, starts and holds the singleton up."""
    first, second = singles(fleet, alice, 2)
    assert dependencies.waiting_among([first.pk, second.pk]) == {second.pk}

    plain = make_job(fleet, name="eval", submitter=alice, submitted_at=first.submitted_at + timedelta(seconds=9))
    (single,) = singles(fleet, alice, 1, name="eval")
    assert dependencies.waiting_among([plain.pk, single.pk]) == {single.pk}
    assert dependencies.waiting_among([single.pk]) == set()  # alone: the later plain job waits behind it



def test_a_bind_planned_before_two_jobs_were_made_singletons_starts_only_the_first(
    fleet: LoopFleet, alice: Any,
) -> None:
    """The commit of a plan read before a PATCH made two jobs of a name singletons (both planned
    to start): the guard drops the later one as stale; the earlier one starts."""
    register_node("gpu-a")
    at = timezone.now()
    a, b = (make_job(fleet, gpus=2, name="ckpt", submitter=alice, submitted_at=at + timedelta(seconds=i))
            for i in range(2))
    lease = cycle.acquire_lease("worker-1", timezone.now())
    assert lease is not None
    context = read_snapshot(timezone.now(), lease.epoch)
    plan = engine.schedule(context.snapshot, scheduler_config())
    assert sorted(bind.job_id for bind in plan.binds) == sorted([str(a.pk), str(b.pk)])

    for job in (a, b):
        holds.update(alice, job.pk, {"dependencies": dependency_text.Edit("+", [{"condition": "singleton"}])})
    result = cycle.commit_plan(plan, context, holder=lease.holder, epoch=lease.epoch, plan_ms=0.0,
                               started=time.perf_counter())

    assert (result.binds, result.stale) == (1, 1)
    assert states(a, b) == [JobState.RUNNING, JobState.PENDING]
    cycle.run_cycle("worker-1")
    assert Job.objects.get(pk=b.pk).pending_message.startswith(f"Waits for job {a.pk} to end (now running; ")


def test_a_cancelled_job_ahead_frees_the_singleton_with_an_event(fleet: LoopFleet, alice: Any) -> None:
    from controlplane.services import jobs

    first, second = singles(fleet, alice, 2)

    jobs.cancel_waiting(Job.objects.filter(pk=first.pk), "user:alice")

    (event,) = Event.objects.filter(job=second, reason=dependencies.SATISFIED)
    assert event.message.startswith(f"Job {first.pk} was cancelled: no other job named “train”")


def test_a_later_job_of_the_name_ending_is_no_event_for_a_singleton_it_never_held_up(
    fleet: LoopFleet, alice: Any,
) -> None:
    register_node("gpu-a")
    (single,) = singles(fleet, alice, 1, gpus=16)  # waits: too big for the node, nothing ahead of it
    later = make_job(fleet, name="train", submitter=alice, submitted_at=single.submitted_at + timedelta(seconds=1))
    from controlplane.services import jobs

    jobs.cancel_waiting(Job.objects.filter(pk=later.pk), "user:alice")

    assert not Event.objects.filter(job=single, reason=dependencies.SATISFIED).exists()


def test_the_snapshot_reads_singletons_in_the_same_number_of_queries(fleet: LoopFleet, alice: Any) -> None:
    register_node("gpu-a")
    make_job(fleet, name="train", submitter=alice, state=JobState.RUNNING)
    singles(fleet, alice, 1)
    with CaptureQueriesContext(connection) as none_yet:
        read_snapshot(timezone.now(), epoch=1)
    singles(fleet, alice, 40)
    with CaptureQueriesContext(connection) as forty:
        read = read_snapshot(timezone.now(), epoch=1)
    assert len(forty) == len(none_yet), (len(none_yet), len(forty))
    assert sum(1 for s in read.snapshot.pending if s.waits_on) == 41


def test_a_big_group_is_read_in_rows_that_grow_with_it_not_with_its_square(fleet: LoopFleet, alice: Any) -> None:
    """300 waiting singletons of one name (a job array's tasks): each waits on the one before it,
    one row each, and the first on the job of the name that runs."""
    running = make_job(fleet, name="sweep", submitter=alice, state=JobState.RUNNING)
    tasks = singles(fleet, alice, 300, name="sweep")

    rows = [r for r in waiting.waiting_rows() if r[2] == "singleton"]

    assert len(rows) == 300 + 299  # the running job holds up each; the one before each but the first
    waits = dependencies.waits()
    assert waits[tasks[0].pk] == [(running.pk, "afterany", "running; same name “sweep”, singleton")]
    assert [w[0] for w in waits[tasks[200].pk]] == [tasks[199].pk]  # the nearest one ahead, said


def test_a_cycle_through_an_earlier_singleton_that_is_not_the_nearest_is_refused(fleet: LoopFleet, alice: Any) -> None:
    """Q, P, S: singletons of one name in that order; Q given afterok on S would wait on S, which
    waits on P, which waits on Q."""
    q, p, s = singles(fleet, alice, 3, name="x")

    with pytest.raises(holds.Refused) as refusal:
        holds.update(alice, q.pk, {"dependencies": [{"job": s.pk}]})

    assert refusal.value.errors == {"dependencies.0.job": f"job {s.pk} waits on job {p.pk}, which waits on this job "
                                                          f"(job {q.pk}): a cycle, none of them could ever start"}
