"""A cycle stopping a job at its runtime limit while its agent reports the job's exit, on
PostgreSQL with two connections.

Every path that stops or settles an allocation locks the allocation row before its job's row
(services/agent_protocol.py, the lock order: lease → node → allocation → job → GPUs). Until
5 Dec the cycle's commit checked a runtime-limit kill against the job's current limit by locking
the job's row first (`cycle._limit_changed`) and only then the allocation (`signal_stop`): an
agent's exit report holding the allocation and waiting for the job met a cycle holding the job
and waiting for the allocation, and PostgreSQL broke the deadlock by aborting one of them (the
whole cycle's commit, or the agent's report: a 500). Now the cycle takes the allocation first,
waits for the report, and finds the job ended: its kill is stale, nothing else is lost."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

import scheduler_core as engine
from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, Event, Job
from controlplane.services import agent_protocol, cycle, transitions
from controlplane.services.snapshot import read_snapshot, scheduler_config
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread
from tests.controlplane.loop_fixtures import LoopFleet, bind, commit_planned, make_job, register_node

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_limit_kill_racing_the_jobs_exit_report_neither_deadlocks_nor_loses_either(fleet: LoopFleet) -> None:
    node, _ = register_node("limit-lock-order-0")
    job = make_job(fleet, name="at-its-limit", gpus=8, gpus_per_node=8, runtime_limit_s=60,
                   submitted_at=timezone.now() - timedelta(minutes=5))
    assert cycle.run_cycle("worker-1").binds == 1
    allocation = Allocation.objects.get(job=job)
    started = timezone.now() - timedelta(minutes=2)
    Allocation.objects.filter(pk=allocation.pk).update(started_at=started)
    Job.objects.filter(pk=job.pk).update(started_at=started)
    # The next cycle's read and plan: it stops the job at its limit.
    lease = cycle.acquire_lease("worker-1", timezone.now())
    assert lease is not None
    context = read_snapshot(timezone.now(), lease.epoch)
    plan = engine.schedule(context.snapshot, scheduler_config())
    assert [k.job_id for k in plan.kills] == [str(job.pk)]

    locked, go = threading.Event(), threading.Event()
    exited_at = timezone.now()

    def agent_reports_the_exit() -> int:
        # The report's transaction, as complete_releases runs it: the allocation row first ...
        with transaction.atomic():
            Allocation.objects.select_for_update(no_key=True).get(pk=allocation.pk)
            locked.set()
            assert go.wait(20)
            # ... then the job's row (complete_releases takes both, in that order).
            return transitions.complete_releases(
                [(allocation.pk, allocation.generation, 0, exited_at)],
                actor_of={allocation.pk: agent_protocol.actor_for(node)},
            )

    agent, agent_out = in_thread(agent_reports_the_exit)
    assert locked.wait(20)
    committer, cycle_out = in_thread(lambda: commit_planned(plan, context, lease))
    assert blocked_on_a_lock(), "the cycle's commit should wait for the report's allocation lock"
    go.set()
    agent.join(30)
    committer.join(30)

    assert "error" not in agent_out, agent_out.get("error")
    assert "error" not in cycle_out, cycle_out.get("error")
    assert agent_out["result"] == 1
    result = cycle_out["result"]
    assert result.led and result.stops == 0 and result.stale == 1
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.exit_code == 0
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.RELEASED
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_TIMED_OUT).exists()


def test_a_commit_stopping_two_jobs_and_a_report_of_both_exits_take_their_allocations_in_one_order(
        fleet: LoopFleet) -> None:
    """The commit's stops lock their allocations in id order, as a report of several exits
    (transitions.complete_releases) does. They were taken in the plan's order (its kills sorted
    by job id as text: job 100 before job 99), so a commit stopping jobs 99 and 100 and an agent
    reporting both exits each held one allocation and waited for the other's."""
    node, _ = register_node("limit-lock-order-1")
    started = timezone.now() - timedelta(minutes=2)
    allocations = []
    for pk in (99, 100):  # job 99's allocation first: the lower id
        job = make_job(fleet, name=f"at-its-limit-{pk}", gpus=4, runtime_limit_s=60, id=pk,
                       submitted_at=timezone.now() - timedelta(minutes=5))
        allocation = bind(job, {node: range(0, 4) if pk == 99 else range(4, 8)}, at=started)
        Allocation.objects.filter(pk=allocation.pk).update(started_at=started)
        Job.objects.filter(pk=pk).update(started_at=started)
        allocations.append(allocation)
    lease = cycle.acquire_lease("worker-1", timezone.now())
    assert lease is not None
    context = read_snapshot(timezone.now(), lease.epoch)
    plan = engine.schedule(context.snapshot, scheduler_config())
    assert [k.job_id for k in plan.kills] == ["100", "99"]

    locked, go = threading.Event(), threading.Event()
    exited_at = timezone.now()

    def agent_reports_both_exits() -> int:
        with transaction.atomic():
            # complete_releases locks the batch's allocations in id order: 99's first ...
            Allocation.objects.select_for_update(no_key=True).get(pk=allocations[0].pk)
            locked.set()
            assert go.wait(20)
            # ... then 100's, then the jobs.
            return transitions.complete_releases(
                [(a.pk, a.generation, 0, exited_at) for a in allocations],
                actor_of={a.pk: agent_protocol.actor_for(node) for a in allocations},
            )

    agent, agent_out = in_thread(agent_reports_both_exits)
    assert locked.wait(20)
    committer, cycle_out = in_thread(lambda: commit_planned(plan, context, lease))
    assert blocked_on_a_lock(), "the cycle's commit should wait for the report's allocation lock"
    go.set()
    agent.join(30)
    committer.join(30)

    assert "error" not in agent_out, agent_out.get("error")
    assert "error" not in cycle_out, cycle_out.get("error")
    assert agent_out["result"] == 2
    assert cycle_out["result"].stale == 2
    assert set(Job.objects.filter(pk__in=(99, 100)).values_list("state", flat=True)) == {JobState.SUCCEEDED}
