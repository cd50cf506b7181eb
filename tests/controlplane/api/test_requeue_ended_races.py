"""Requeueing an ended job at the same moment as something else touches it, on two real
PostgreSQL connections: one side holds its transaction open on a thread, the other is seen
waiting on a row lock (`blocked_on_a_lock`), then the first commits and both finish.

- two requeues of one ended job: it goes back to the queue once (requeue_count + 1, one
  RequeuedAfterEnd event), the other is told it waits already (409), and a hold asked by the
  first is never undone by the second;
- a requeue of B (afterok:A) and A's failure: whichever locks A first, B never ends up waiting
  on a dependency that can never be met (refused, or cancelled by A's end as any waiting
  dependent is); and B's requeue waiting for A's own requeue finds A waiting again and goes;
- an array's requeue and a single task's requeue (or the scheduler binding it, or its exit):
  no task is requeued twice, and none is requeued from a state the array did not find it in;
- a user's stop (a requeue with hold, a cancel) and the reconciler fencing the job's node: the
  job is settled as the stop asked.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import AllocationState, DependencyCondition, EventKind, JobHold, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, JobDependency, Node, SchedulerLease
from controlplane.services import dependencies, reconcile, requeue, transitions
from controlplane.services.cycle import LEASE_NAME
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import build_fleet, client_for
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread

J = "/api/v1/jobs/"
_generation = iter(range(100, 10_000))


@pytest.fixture
def committed_fleet(transactional_db: Any, settings: Any) -> Any:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return build_fleet()


def _ended(fleet: Any, state: str = JobState.FAILED, *, exit_code: int | None = 3, **kw: Any) -> Job:
    """A job of team ml that ran once (its allocation released) and ended in `state`."""
    now = timezone.now()
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], state=state, started_at=now - timedelta(hours=1),
                     finished_at=now - timedelta(minutes=5), exit_code=exit_code, **kw)
    allocation = Allocation.objects.create(job=job, generation=next(_generation), epoch=1,
                                           created_at=now - timedelta(hours=1), started_at=now - timedelta(hours=1),
                                           released_at=now - timedelta(minutes=5), state=AllocationState.RELEASED)
    AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[1], gpu_index=0, live=False)
    return job


def _running(fleet: Any, gpu: int, **kw: Any) -> tuple[Job, Allocation]:
    """A running job of team ml on h100-2's GPU `gpu`, its allocation active."""
    now = timezone.now()
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], state=JobState.RUNNING, started_at=now, **kw)
    allocation = Allocation.objects.create(job=job, generation=next(_generation), epoch=1, created_at=now,
                                           started_at=now, state=AllocationState.ACTIVE)
    AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[2], gpu_index=gpu, live=True)
    return job, allocation


def _post(fleet: Any, url: str, body: dict[str, Any] | None = None) -> Callable[[], tuple[int, dict[str, Any]]]:
    def work() -> tuple[int, dict[str, Any]]:
        r = client_for(fleet, "owner").post(url, body or {}, format="json")
        return r.status_code, r.json()
    return work


def _first_holds_open(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any], threading.Event]:
    """Run `work` in a transaction on a thread and keep it open (its row locks held) until the
    returned event is set; returns once `work` has run."""
    done, go_on = threading.Event(), threading.Event()

    def run() -> Any:
        with transaction.atomic():
            result = work()
            done.set()
            assert go_on.wait(60)
        return result

    thread, out = in_thread(run)
    assert done.wait(60), out
    return thread, out, go_on


def _requeued_events(job: Job) -> list[Event]:
    return list(Event.objects.filter(job=job, kind=EventKind.JOB_REQUEUED).order_by("id"))


# ------------------------------------------------------------------ two requeues of one job


@pytest.mark.parametrize("hold", [False, True])
def test_two_requeues_of_one_ended_job_at_once_requeue_it_once(committed_fleet, hold) -> None:
    """The second waits for the first's lock on the job's row, then finds it waiting: 409, as a
    second requeue after the first says (a requeue is no toggle a retry may repeat: each one is a
    new run, counted). Never requeue_count + 2, two events, or the first's hold undone."""
    fleet = committed_fleet
    job = _ended(fleet)
    owner = fleet.users["owner"]

    first, first_out, go_on = _first_holds_open(lambda: requeue.requeue(owner, job.pk, hold=hold, reason="first"))
    second, second_out = in_thread(_post(fleet, f"{J}{job.pk}/requeue/", {"reason": "second"}))
    waited = blocked_on_a_lock()
    go_on.set()
    first.join(60)
    second.join(60)

    assert "error" not in first_out and "error" not in second_out, (first_out, second_out)
    job.refresh_from_db()
    assert (job.state, job.requeue_count) == (JobState.PENDING, 1)
    assert job.hold == (JobHold.USER if hold else JobHold.NONE)
    events = _requeued_events(job)
    assert len(events) == 1 and events[0].data["reason"] == "first", [e.data for e in events]
    assert events[0].reason == (transitions.REQUEUED_HELD_AFTER_END if hold else transitions.REQUEUED_AFTER_END)
    status, body = second_out["result"]
    assert status == 409, body
    held = f" It is held: release it when it may start (qm release {job.pk})." if hold else ""
    assert body["detail"] == f"Job {job.pk} is waiting already: only a running or ended job can be requeued.{held}"
    assert waited  # the second really waited on the first's row lock


# ------------------------------------------------------------- a dependent and its upstream


def _dependent_of(fleet: Any, upstream: Job, **kw: Any) -> Job:
    """B: afterok on `upstream`, not met, and ended (cancelled while it waited, by default)."""
    job = _ended(fleet, kw.pop("state", JobState.CANCELLED), exit_code=None, **kw)
    JobDependency.objects.create(job=job, upstream=upstream, condition=DependencyCondition.AFTER_OK)
    return job


def test_a_dependents_requeue_waiting_for_its_upstreams_failure_is_refused_naming_the_dependency(
    committed_fleet,
) -> None:
    """A's end (its agent's exit report) locks A first: B's requeue waits for it on A's row (FOR
    SHARE), then reads A failed and is refused, nothing written. Read without that lock, B would
    see A still running, go back to the queue, and wait for ever: A's end, which cancels a
    waiting dependent, had found B ended and left it."""
    fleet = committed_fleet
    a, a_run = _running(fleet, 0)
    b = _dependent_of(fleet, a)

    ender, end_out, go_on = _first_holds_open(
        lambda: transitions.complete_release(a_run.pk, exit_code=1, at=timezone.now(), actor="agent"))
    asker, asked = in_thread(_post(fleet, f"{J}{b.pk}/requeue/"))
    waited = blocked_on_a_lock()
    go_on.set()
    ender.join(60)
    asker.join(60)

    assert "error" not in end_out and "error" not in asked, (end_out, asked)
    assert Job.objects.get(pk=a.pk).state == JobState.FAILED
    b.refresh_from_db()
    assert (b.state, b.requeue_count) == (JobState.CANCELLED, 0)
    assert _requeued_events(b) == []
    status, body = asked["result"]
    assert status == 409, body
    assert body["errors"] == {"dependencies": [f"afterok:{a.pk} can never be met: job {a.pk} failed (exit 1), so "
                                               "afterok on it can never be met"]}
    assert waited


def test_an_upstream_failing_while_its_dependents_requeue_holds_it_cancels_the_dependent_again(committed_fleet) -> None:
    """B's requeue locks A first (FOR SHARE) and puts B back in the queue: A's end waits for that
    commit, then finds B waiting on an afterok it can never meet and cancels it, as any waiting
    dependent. B is never left pending on A failed."""
    fleet = committed_fleet
    owner = fleet.users["owner"]
    a, a_run = _running(fleet, 0)
    b = _dependent_of(fleet, a)

    asker, asked, go_on = _first_holds_open(lambda: requeue.requeue(owner, b.pk))
    ender, end_out = in_thread(
        lambda: transitions.complete_release(a_run.pk, exit_code=1, at=timezone.now(), actor="agent"))
    waited = blocked_on_a_lock()
    go_on.set()
    asker.join(60)
    ender.join(60)

    assert "error" not in end_out and "error" not in asked, (end_out, asked)
    assert asked["result"].changed and end_out["result"] is True
    assert Job.objects.get(pk=a.pk).state == JobState.FAILED
    b.refresh_from_db()
    assert (b.state, b.pending_code, b.requeue_count) == (JobState.CANCELLED, dependencies.NEVER_SATISFIED, 1)
    assert len(_requeued_events(b)) == 1
    cancelled = Event.objects.get(job=b, kind=EventKind.JOB_CANCELLED, reason=dependencies.NEVER_SATISFIED)
    assert cancelled.data["upstream"] == a.pk and cancelled.data["upstream_state"] == JobState.FAILED
    assert waited


def test_a_dependents_requeue_waiting_for_its_upstreams_own_requeue_finds_it_waiting_and_goes(committed_fleet) -> None:
    """A failed and B was cancelled for it; "requeue that upstream first", the refusal says, and
    someone does at the same moment as B's requeue: B's requeue waits for A's row, reads A
    waiting again (its afterok may be met now) and puts B back in the queue, waiting on A."""
    fleet = committed_fleet
    owner = fleet.users["owner"]
    a = _ended(fleet, JobState.FAILED, exit_code=1)
    b = _dependent_of(fleet, a, pending_code=dependencies.NEVER_SATISFIED)

    first, first_out, go_on = _first_holds_open(lambda: requeue.requeue(owner, a.pk))
    asker, asked = in_thread(_post(fleet, f"{J}{b.pk}/requeue/"))
    waited = blocked_on_a_lock()
    go_on.set()
    first.join(60)
    asker.join(60)

    assert "error" not in first_out and "error" not in asked, (first_out, asked)
    status, body = asked["result"]
    assert status == 200, body
    assert Job.objects.get(pk=a.pk).state == JobState.PENDING
    b.refresh_from_db()
    assert (b.state, b.requeue_count) == (JobState.PENDING, 1)
    assert dependencies.waiting_among([b.pk]) == {b.pk}  # on A, which may still succeed
    assert waited


# -------------------------------------------------------------------------- an array's tasks


def _array(n: int) -> dict[str, Any]:
    return {"array_id": uuid.uuid4(), "array_task_limit": n}


def test_an_array_requeue_and_a_single_tasks_requeue_at_once_requeue_the_task_once(committed_fleet) -> None:
    """The array's requeue of task 0 waits for the single requeue's lock on it, then finds it
    waiting: listed as not requeued, with why; task 1 goes back to the queue."""
    fleet = committed_fleet
    owner = fleet.users["owner"]
    common = _array(2)
    t0 = _ended(fleet, array_index=0, **common)
    t1 = _ended(fleet, array_index=1, **common)

    single, single_out, go_on = _first_holds_open(lambda: requeue.requeue(owner, t0.pk, reason="just this one"))
    whole, whole_out = in_thread(_post(fleet, f"/api/v1/job-arrays/{common['array_id']}/requeue/",
                                       {"states": ["failed"]}))
    waited = blocked_on_a_lock()
    go_on.set()
    single.join(60)
    whole.join(60)

    assert "error" not in single_out and "error" not in whole_out, (single_out, whole_out)
    status, body = whole_out["result"]
    assert status == 200, body
    assert body["rerun"] == [t1.pk] and body["requeued"] == []
    assert [(t["job"], t["state"]) for t in body["not_requeued"]] == [(t0.pk, "failed")]
    assert body["not_requeued"][0]["detail"] == (
        f"Job {t0.pk} was failed when the array's tasks were read and is pending now: it changed state "
        "meanwhile, so nothing was requeued.")
    for task in (t0, t1):
        task.refresh_from_db()
        assert (task.state, task.requeue_count, len(_requeued_events(task))) == (JobState.PENDING, 1, 1), task.pk
    assert _requeued_events(t0)[0].data["reason"] == "just this one"
    assert waited


def test_an_array_requeue_of_failed_tasks_leaves_one_requeued_and_bound_meanwhile_running(committed_fleet) -> None:
    """The array read tasks 0 and 1 failed; meanwhile both were requeued one by one and the
    scheduler bound task 1 (running again, a new generation). The array's requeue must not stop
    task 1 to requeue it a second time: it asked for failed tasks, and task 1 is no longer one."""
    fleet = committed_fleet
    owner = fleet.users["owner"]
    lease = SchedulerLease.objects.create(epoch=1)
    common = _array(2)
    t0 = _ended(fleet, array_index=0, **common)
    t1 = _ended(fleet, array_index=1, **common)

    def requeue_both_and_bind_one() -> Allocation | None:
        requeue.requeue(owner, t0.pk)
        requeue.requeue(owner, t1.pk)
        return transitions.bind_job(t1.pk, [transitions.GpuSet(fleet.nodes[3].pk, [0])],
                                    lease=SchedulerLease.objects.select_for_update().get(pk=lease.pk), borrowed=False,
                                    at=timezone.now(), actor="scheduler")

    other, other_out, go_on = _first_holds_open(requeue_both_and_bind_one)
    whole, whole_out = in_thread(_post(fleet, f"/api/v1/job-arrays/{common['array_id']}/requeue/",
                                       {"states": ["failed"]}))
    waited = blocked_on_a_lock()
    go_on.set()
    other.join(60)
    whole.join(60)

    assert "error" not in other_out and "error" not in whole_out, (other_out, whole_out)
    bound = other_out["result"]
    assert bound is not None
    status, body = whole_out["result"]
    assert status == 200, body
    assert body["rerun"] == [] and body["requeued"] == []
    assert [(t["job"], t["state"]) for t in body["not_requeued"]] == [(t0.pk, "failed"), (t1.pk, "failed")]
    assert body["not_requeued"][1]["detail"] == (
        f"Job {t1.pk} was failed when the array's tasks were read and is running now: it changed state "
        "meanwhile, so nothing was requeued.")
    t1.refresh_from_db()
    assert (t1.state, t1.requeue_count) == (JobState.RUNNING, 1)
    assert Allocation.objects.get(pk=bound.pk).state == AllocationState.ACTIVE
    assert not Event.objects.filter(job=t1, kind__in=(EventKind.JOB_PREEMPTING, EventKind.JOB_STOPPING)).exists()
    assert waited


def test_an_array_requeue_of_running_tasks_does_not_rerun_one_that_ended_meanwhile(committed_fleet) -> None:
    """The array read tasks 0 and 1 running; their exits are being settled meanwhile (the
    agents' reports hold task 0's allocation row, the array's stop of it waits). Both succeed.
    Asked for running tasks, the array's requeue must not put task 1 back in the queue from its
    success: both are listed as ended meanwhile (they were counted "already stopping"), neither
    requeued."""
    fleet = committed_fleet
    common = _array(2)
    t0, run0 = _running(fleet, 0, array_index=0, **common)
    t1, run1 = _running(fleet, 1, array_index=1, **common)

    def both_exit() -> None:
        for run in (run0, run1):
            assert transitions.complete_release(run.pk, exit_code=0, at=timezone.now(), actor="agent")

    exits, exits_out, go_on = _first_holds_open(both_exit)
    whole, whole_out = in_thread(_post(fleet, f"/api/v1/job-arrays/{common['array_id']}/requeue/"))
    waited = blocked_on_a_lock()
    go_on.set()
    exits.join(60)
    whole.join(60)

    assert "error" not in exits_out and "error" not in whole_out, (exits_out, whole_out)
    status, body = whole_out["result"]
    assert status == 200, body
    assert (body["requeued"], body["rerun"], body["not_requeued"], body["stopping"]) == ([], [], [], 0)
    assert body["ended_meanwhile"] == [t0.pk, t1.pk]
    assert body["detail"].endswith(": 0 stopping to be requeued, 2 ended meanwhile (left as they ended).")
    for task in (t0, t1):
        task.refresh_from_db()
        assert (task.state, task.requeue_count) == (JobState.SUCCEEDED, 0), task.pk
        assert _requeued_events(task) == []
    assert waited


def test_an_array_requeue_tells_a_task_that_ended_meanwhile_from_one_that_began_stopping(committed_fleet) -> None:
    """The array read tasks 0, 1 and 2 running; meanwhile (one transaction, holding their
    allocation rows) task 0 exits, the scheduler preempts task 1, and task 2 is left alone. By
    their turn: task 0 ended (listed as ended meanwhile, not "already stopping"), task 1 is
    stopping (counted so), task 2 stops to be requeued."""
    fleet = committed_fleet
    common = _array(3)
    t0, run0 = _running(fleet, 0, array_index=0, **common)
    t1, run1 = _running(fleet, 1, array_index=1, **common)
    t2, _ = _running(fleet, 2, array_index=2, **common)

    def exit_one_preempt_one() -> None:
        at = timezone.now()
        assert transitions.complete_release(run0.pk, exit_code=0, at=at, actor="agent")
        assert transitions.signal_stop(run1.pk, run1.generation, reason=transitions.RELEASE_PREEMPTED,
                                       grace_period_s=30, at=at, actor="scheduler", message="Preempted")

    other, other_out, go_on = _first_holds_open(exit_one_preempt_one)
    whole, whole_out = in_thread(_post(fleet, f"/api/v1/job-arrays/{common['array_id']}/requeue/"))
    waited = blocked_on_a_lock()
    go_on.set()
    other.join(60)
    whole.join(60)

    assert "error" not in other_out and "error" not in whole_out, (other_out, whole_out)
    status, body = whole_out["result"]
    assert status == 200, body
    assert (body["requeued"], body["ended_meanwhile"], body["stopping"], body["not_running"]) == (
        [t2.pk], [t0.pk], 1, 0)
    assert body["detail"].endswith(
        ": 1 stopping to be requeued, 1 already stopping, 1 ended meanwhile (left as it ended).")
    states = dict(Job.objects.filter(pk__in=[t0.pk, t1.pk, t2.pk]).values_list("pk", "state"))
    assert states == {t0.pk: JobState.SUCCEEDED, t1.pk: JobState.PREEMPTING, t2.pk: JobState.PREEMPTING}
    assert _requeued_events(t0) == [] and Job.objects.get(pk=t0.pk).requeue_count == 0
    assert waited


# ------------------------------------------------------------- a stop racing the reconciler


@pytest.mark.parametrize("stop", ["requeue held", "cancel"])
def test_a_stop_racing_the_fence_of_its_node_is_settled_as_asked(committed_fleet, stop) -> None:
    """A user's stop of a running job (a requeue with hold, or a cancel) commits while the
    reconciler fences its node, whose lease ran out: the fence waits for the stop's lock on the
    allocation, then settles the job as the stop asked (requeued held by its asker; cancelled),
    never as a plain fence's requeue read from the row before the stop (unheld, or a cancelled
    job back in the queue)."""
    fleet = committed_fleet
    owner = fleet.users["owner"]
    job, run = _running(fleet, 0)
    SchedulerLease.objects.create(name=LEASE_NAME, epoch=1, generation_counter=10_000)
    node = fleet.nodes[2]
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(minutes=1))

    def stop_it() -> Any:
        if stop == "cancel":
            return transitions.cancel_job(job, "user:alice")
        return requeue.requeue(owner, job.pk, hold=True, reason="bad node")

    stopper, stop_out, go_on = _first_holds_open(stop_it)
    fencer, fence_out = in_thread(lambda: reconcile.expire_node(node.pk, now=timezone.now()))
    waited = blocked_on_a_lock()
    go_on.set()
    stopper.join(60)
    fencer.join(60)

    assert "error" not in stop_out and "error" not in fence_out, (stop_out, fence_out)
    assert fence_out["result"] == (1, 1)  # quarantined, and the allocation fenced
    assert Allocation.objects.get(pk=run.pk).state == AllocationState.FENCED
    job.refresh_from_db()
    if stop == "cancel":
        assert (job.state, job.requeue_count) == (JobState.CANCELLED, 0)
        assert _requeued_events(job) == []
    else:
        assert (job.state, job.hold, job.held_by_id, job.requeue_count) == (JobState.PENDING, JobHold.USER, owner.pk, 1)
        (event,) = _requeued_events(job)
        assert event.reason == transitions.RELEASE_REQUEUED_HELD and event.data["requested_by"] == "alice"
    assert waited


def test_an_exit_racing_the_fence_of_its_node_ends_the_job_never_requeues_it(committed_fleet) -> None:
    """The job's agent reports its exit (0) while the reconciler fences its node: the fence waits
    for the exit's lock on the allocation, then finds it released and leaves it. Read unlocked,
    the fence matched the released row by its generation alone and requeued a job that had
    succeeded."""
    fleet = committed_fleet
    job, run = _running(fleet, 0)
    SchedulerLease.objects.create(name=LEASE_NAME, epoch=1, generation_counter=10_000)
    node = fleet.nodes[2]
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(minutes=1))

    exiter, exit_out, go_on = _first_holds_open(
        lambda: transitions.complete_release(run.pk, exit_code=0, at=timezone.now(), actor="agent"))
    fencer, fence_out = in_thread(lambda: reconcile.expire_node(node.pk, now=timezone.now()))
    waited = blocked_on_a_lock()
    go_on.set()
    exiter.join(60)
    fencer.join(60)

    assert "error" not in exit_out and "error" not in fence_out, (exit_out, fence_out)
    assert fence_out["result"] == (1, 0)  # quarantined, nothing left to fence
    assert Allocation.objects.get(pk=run.pk).state == AllocationState.RELEASED
    job.refresh_from_db()
    assert (job.state, job.exit_code, job.requeue_count) == (JobState.SUCCEEDED, 0, 0)
    assert _requeued_events(job) == []
    assert waited


def test_a_dependents_requeue_reads_its_dependencies_after_waiting_for_its_upstream(committed_fleet) -> None:
    """B (afterok:A, cancelled while it waited) is requeued while A is settled twice over in one
    transaction: A succeeds (B's afterok is met: kept, as a met condition is kept), is requeued,
    runs and fails. B's requeue waits for A's row, then must read its dependency as it is now,
    met, and go: read before the wait (not met yet) with A failed after it, it was refused as
    "can never be met", though it had been met."""
    fleet = committed_fleet
    owner = fleet.users["owner"]
    lease = SchedulerLease.objects.create(epoch=1, generation_counter=10_000)
    a, a_run = _running(fleet, 0)
    b = _dependent_of(fleet, a)

    def succeed_then_fail() -> None:
        assert transitions.complete_release(a_run.pk, exit_code=0, at=timezone.now(), actor="agent")
        requeue.requeue(owner, a.pk)
        again = transitions.bind_job(a.pk, [transitions.GpuSet(fleet.nodes[3].pk, [0])],
                                     lease=SchedulerLease.objects.select_for_update().get(pk=lease.pk), borrowed=False,
                                     at=timezone.now(), actor="scheduler")
        assert again is not None
        assert transitions.complete_release(again.pk, exit_code=1, at=timezone.now(), actor="agent")

    upstream, up_out, go_on = _first_holds_open(succeed_then_fail)
    asker, asked = in_thread(_post(fleet, f"{J}{b.pk}/requeue/"))
    waited = blocked_on_a_lock()
    go_on.set()
    upstream.join(60)
    asker.join(60)

    assert "error" not in up_out and "error" not in asked, (up_out, asked)
    assert Job.objects.get(pk=a.pk).state == JobState.FAILED
    assert JobDependency.objects.get(job=b).satisfied_at is not None
    status, body = asked["result"]
    assert status == 200, body
    b.refresh_from_db()
    assert (b.state, b.requeue_count) == (JobState.PENDING, 1)
    assert dependencies.waiting_among([b.pk]) == set()  # its afterok was met: it may start
    assert waited
