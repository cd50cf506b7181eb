"""Dependencies through real cycles: a pipeline preprocess → train → eval (afterok) runs in
order, each waiting out of line (WaitingForDependency) until the one before it succeeds; a
failure cancels the rest; the snapshot reads every waiting job's dependencies in a fixed
number of queries."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import DependencyCondition, JobHold, JobState
from controlplane.models import Allocation, Job, JobDependency
from controlplane.services import cycle, transitions
from controlplane.services.dependencies import NEVER_SATISFIED
from controlplane.services.snapshot import read_snapshot
from tests.controlplane.loop_fixtures import LoopFleet, make_job, register_node


def pipeline(fleet: LoopFleet) -> tuple[Job, Job, Job]:
    pre, train, evaluate = (make_job(fleet, gpus=2, name=n) for n in ("preprocess", "train", "eval"))
    JobDependency.objects.create(job=train, upstream=pre, condition=DependencyCondition.AFTER_OK)
    JobDependency.objects.create(job=evaluate, upstream=train, condition=DependencyCondition.AFTER_OK)
    return pre, train, evaluate


def finish(job: Job, exit_code: int) -> None:
    allocation = Allocation.objects.get(job=job, state="active")
    assert transitions.complete_release(allocation.pk, exit_code=exit_code, at=timezone.now(), actor="agent")


def reread(*jobs: Job) -> list[Job]:
    return [Job.objects.get(pk=j.pk) for j in jobs]


def test_an_afterok_pipeline_runs_in_order_through_real_cycles(fleet: LoopFleet) -> None:
    register_node("gpu-a")  # 8 GPUs: room for all three at once, so only the dependencies keep them apart
    pre, train, evaluate = pipeline(fleet)

    cycle.run_cycle("worker-1")
    pre, train, evaluate = reread(pre, train, evaluate)
    assert (pre.state, train.state, evaluate.state) == (JobState.RUNNING, JobState.PENDING, JobState.PENDING)
    assert train.pending_code == "WaitingForDependency"
    # The sentence says where the upstream stood in the cycle's snapshot (read before its bind).
    assert train.pending_message.startswith(f"Waits for job {pre.pk} to succeed (now pending)")
    cycle.run_cycle("worker-1")
    pre, train, evaluate = reread(pre, train, evaluate)
    assert train.state == JobState.PENDING
    assert train.pending_message == (f"Waits for job {pre.pk} to succeed (now running): until then it is not in "
                                     "the queue and holds nothing.")
    assert train.pending_would_start_if == f"job {pre.pk} succeeds"
    assert evaluate.pending_message.startswith(f"Waits for job {train.pk} to succeed (now pending)")

    finish(pre, 0)
    cycle.run_cycle("worker-1")
    cycle.run_cycle("worker-1")
    pre, train, evaluate = reread(pre, train, evaluate)
    assert (train.state, evaluate.state) == (JobState.RUNNING, JobState.PENDING)
    assert evaluate.pending_message.startswith(f"Waits for job {train.pk} to succeed (now running)")

    finish(train, 0)
    cycle.run_cycle("worker-1")
    assert reread(evaluate)[0].state == JobState.RUNNING


def test_a_failed_step_cancels_the_rest_of_the_pipeline(fleet: LoopFleet) -> None:
    register_node("gpu-a")
    pre, train, evaluate = pipeline(fleet)
    cycle.run_cycle("worker-1")

    finish(pre, 3)
    cycle.run_cycle("worker-1")

    train, evaluate = reread(train, evaluate)
    assert (train.state, evaluate.state) == (JobState.CANCELLED, JobState.CANCELLED)
    assert train.pending_code == evaluate.pending_code == NEVER_SATISFIED
    assert not Allocation.objects.filter(job__in=[train, evaluate]).exists()


def test_afternotok_runs_only_when_its_upstream_fails(fleet: LoopFleet) -> None:
    register_node("gpu-a")
    ok, bad = make_job(fleet, name="ok"), make_job(fleet, name="bad")
    after_ok = make_job(fleet, name="cleanup-ok")
    after_bad = make_job(fleet, name="cleanup-bad")
    JobDependency.objects.create(job=after_ok, upstream=ok, condition=DependencyCondition.AFTER_NOT_OK)
    JobDependency.objects.create(job=after_bad, upstream=bad, condition=DependencyCondition.AFTER_NOT_OK)
    cycle.run_cycle("worker-1")
    assert reread(after_ok, after_bad)[0].pending_code == "WaitingForDependency"

    finish(ok, 0)
    finish(bad, 1)
    cycle.run_cycle("worker-1")

    after_ok, after_bad = reread(after_ok, after_bad)
    assert (after_ok.state, after_bad.state) == (JobState.CANCELLED, JobState.RUNNING)


def test_after_starts_the_dependent_once_its_upstream_runs(fleet: LoopFleet) -> None:
    register_node("gpu-a")
    server, client = make_job(fleet, name="server"), make_job(fleet, name="client")
    JobDependency.objects.create(job=client, upstream=server, condition=DependencyCondition.AFTER)

    cycle.run_cycle("worker-1")  # binds the server; the client waited in this snapshot
    assert reread(client)[0].state == JobState.PENDING
    cycle.run_cycle("worker-1")
    assert reread(client)[0].state == JobState.RUNNING


def test_afterany_runs_after_its_upstream_is_cancelled(fleet: LoopFleet) -> None:
    register_node("gpu-a")
    big = make_job(fleet, gpus=64, name="never-fits")  # waits: more GPUs than the fleet has free
    report = make_job(fleet, name="report")
    JobDependency.objects.create(job=report, upstream=big, condition=DependencyCondition.AFTER_ANY)
    cycle.run_cycle("worker-1")
    assert reread(report)[0].state == JobState.PENDING

    transitions.cancel_job(big, "user:alice")
    cycle.run_cycle("worker-1")
    assert reread(report)[0].state == JobState.RUNNING


def test_a_dependent_says_when_its_upstream_can_never_run_or_is_held(fleet: LoopFleet) -> None:
    """The dependent of a job that can never run as asked, or of a held one, still waits (the
    upstream's owner may change or release it) but its sentence says why the wait may not end;
    before, it read "(now pending)" like any upstream in the queue."""
    register_node("gpu-a")  # one 8-GPU node
    impossible = make_job(fleet, gpus=8, name="impossible", gpu_types=["A100-40GB"])  # no such GPU here
    held = make_job(fleet, name="held", hold=JobHold.USER)
    after_impossible = make_job(fleet, name="after-impossible")
    after_held = make_job(fleet, name="after-held")
    JobDependency.objects.create(job=after_impossible, upstream=impossible, condition=DependencyCondition.AFTER_OK)
    JobDependency.objects.create(job=after_held, upstream=held, condition=DependencyCondition.AFTER_ANY)

    cycle.run_cycle("worker-1")  # the engine finds the upstream can never run
    cycle.run_cycle("worker-1")  # the next snapshot reads it so

    impossible, after_impossible, after_held = reread(impossible, after_impossible, after_held)
    assert impossible.pending_resolvable is False
    assert (after_impossible.state, after_held.state) == (JobState.PENDING, JobState.PENDING)
    assert after_impossible.pending_message.startswith(
        f"Waits for job {impossible.pk} to succeed (now pending, and it can never run as asked)")
    assert after_held.pending_message.startswith(f"Waits for job {held.pk} to end (now held)")


def test_the_snapshot_reads_dependencies_in_a_number_of_queries_that_does_not_grow(fleet: LoopFleet) -> None:
    register_node("gpu-a")
    upstream = make_job(fleet, gpus=64, name="up")
    JobDependency.objects.create(job=make_job(fleet, name="d0"), upstream=upstream)

    def waiting_specs() -> int:
        return sum(1 for spec in read_snapshot(timezone.now(), epoch=1).snapshot.pending if spec.waits_on)

    assert waiting_specs() == 1
    with CaptureQueriesContext(connection) as one:
        read_snapshot(timezone.now(), epoch=1)
    for i in range(1, 40):
        JobDependency.objects.create(job=make_job(fleet, name=f"d{i}"), upstream=upstream)
    assert waiting_specs() == 40
    with CaptureQueriesContext(connection) as forty:
        read_snapshot(timezone.now(), epoch=1)
    assert len(forty) == len(one), (len(one), len(forty))
