"""A priority class's preemption budget counts preemptions, not every requeue.

A job is also stopped and requeued whole when the scheduler resizes it and when it is fenced off
a node that failed. Before, each of those counted as a preemption: a job whose nodes failed
twice in a day (budget 2) became unpreemptible for that day, and its page said "Preempted 2
times". Now they count in `requeue_count` and the job page and `qm status` name them apart.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, Node
from controlplane.services import reconcile, transitions
from controlplane.services.snapshot import read_snapshot
from tests.controlplane.agent.test_agent_reports import at, report
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node

BUDGET = 2


@pytest.fixture
def budgeted(fleet: LoopFleet) -> LoopFleet:
    fleet.research.preemption_budget = BUDGET
    fleet.research.budget_window_s = 86400
    fleet.research.save()
    return fleet


def _fence_on(job: Job, name: str) -> None:
    """Bind ``job`` on a fresh node, let that node's lease expire, and reconcile: it is fenced."""
    node, _ = register_node(name)
    bind(job, {node: [0]}, at=timezone.now() - timedelta(minutes=5))
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert reconcile.reconcile_nodes(now=timezone.now()).fenced == 1


def _stop(job: Job, name: str, reason: str) -> None:
    """Bind ``job`` on a fresh node, signal it to stop for ``reason`` and confirm the exit as its
    agent does."""
    node, token = register_node(name)
    allocation = bind(job, {node: [0]}, at=timezone.now() - timedelta(minutes=5))
    transitions.signal_stop(allocation.pk, allocation.generation, reason=reason, grace_period_s=5,
                            at=timezone.now(), actor="test", message="stop")
    report(agent_client(token), name, {"kind": "exited", "generation": allocation.generation, "at": at(),
                                       "exit_code": -15})


def _spec(job: Job):
    (spec,) = [s for s in read_snapshot(timezone.now(), 1).snapshot.pending if s.id == str(job.pk)]
    return spec


def test_preemption_budget_ignores_fences(budgeted: LoopFleet) -> None:
    job = make_job(budgeted)
    for n in range(BUDGET + 1):
        _fence_on(job, f"gpu-{n}")

    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert (job.requeue_count, job.preemption_count, job.last_preempted_at) == (BUDGET + 1, 0, None)
    assert job.lost_gpu_seconds > 0
    assert Event.objects.filter(job=job, kind=EventKind.JOB_REQUEUED).count() == BUDGET + 1
    spec = _spec(job)
    assert spec.preemptions_in_window == 0 and spec.preemption_budget_frees_at is None


def test_preemption_budget_ignores_resizes(budgeted: LoopFleet) -> None:
    job = make_job(budgeted)
    for n in range(BUDGET):
        _stop(job, f"gpu-{n}", transitions.RELEASE_RESIZED)

    job.refresh_from_db()
    assert (job.requeue_count, job.preemption_count) == (BUDGET, 0)
    assert _spec(job).preemptions_in_window == 0


def test_preemption_budget_counts_preemptions_among_other_requeues(budgeted: LoopFleet) -> None:
    job = make_job(budgeted)
    _fence_on(job, "gpu-a")
    _stop(job, "gpu-b", transitions.RELEASE_PREEMPTED)
    _fence_on(job, "gpu-c")
    _stop(job, "gpu-d", transitions.RELEASE_PREEMPTED)

    job.refresh_from_db()
    assert (job.requeue_count, job.preemption_count) == (4, 2)
    preempted = Event.objects.filter(job=job, kind=EventKind.JOB_PREEMPTED).order_by("created_at")
    assert job.last_preempted_at == preempted.last().created_at
    spec = _spec(job)
    # At its budget: protected until the first counted preemption leaves the window, whatever
    # the fences between them.
    assert spec.preemptions_in_window == BUDGET
    first = preempted.first().created_at
    assert spec.preemption_budget_frees_at == pytest.approx((first + timedelta(days=1)).timestamp())


def test_job_page_and_api_name_preemptions_and_other_requeues_apart(budgeted: LoopFleet, client) -> None:
    from tests.controlplane import factories as f

    job = make_job(budgeted)
    _fence_on(job, "gpu-a")
    _stop(job, "gpu-b", transitions.RELEASE_PREEMPTED)
    _fence_on(job, "gpu-c")
    client.force_login(f.make_user("root", superuser=True))

    body = client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert (body["preemption_count"], body["requeue_count"]) == (1, 3)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Requeued off a lost node (2 times so far)" in page
    assert ("1 time; requeued 2 more times to resize, off a lost node or on request "
            "(not counted against its preemption budget)") in page


# ------------------------------------------------------------------------ migration 0015


@pytest.mark.django_db(transaction=True)
def test_migration_0015_recounts_preemptions_from_their_events() -> None:
    """Before 0015 every requeue added to `preemption_count`; after it, the count and the last
    time are the job's `job.preempted` events, and `requeue_count` keeps the old total.
    Reversing it gives back the old total and the last requeue's time."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("controlplane", "0014_token_cost_columns")], [("controlplane", "0015_requeue_count")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    now = timezone.now().replace(microsecond=0)
    pc = old.get_model("controlplane", "PriorityClass").objects.create(name="batch", value=100)
    team = old.get_model("controlplane", "Team").objects.create(name="ml", default_priority_class=pc)
    OldJob, OldEvent = old.get_model("controlplane", "Job"), old.get_model("controlplane", "Event")

    def job(name: str, count: int, last: timedelta | None):
        return OldJob.objects.create(team=team, priority_class=pc, name=name, gpus=1, runtime_limit_s=3600, submitted_at=now,
                                     state_changed_at=now, preemption_count=count,
                                     last_preempted_at=now - last if last is not None else None)

    fenced = job("fenced", 2, timedelta(minutes=1))
    mixed = job("mixed", 3, timedelta(minutes=1))
    job("never", 0, None)
    for kind, j, ago in [("job.requeued", fenced, 10), ("job.requeued", fenced, 1), ("job.preempted", mixed, 30),
                         ("job.resized", mixed, 20), ("job.requeued", mixed, 1)]:
        OldEvent.objects.create(created_at=now - timedelta(minutes=ago), kind=kind, actor="test", job=j)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        # the model as of 0015 (later migrations add columns the table does not have yet)
        AfterJob = executor.loader.project_state(after).apps.get_model("controlplane", "Job")
        got = {j.name: (j.preemption_count, j.last_preempted_at, j.requeue_count) for j in AfterJob.objects.all()}
        assert got == {"fenced": (0, None, 2), "mixed": (1, now - timedelta(minutes=30), 3), "never": (0, None, 0)}

        executor = MigrationExecutor(connection)
        executor.migrate(before)
        back = {j.name: (j.preemption_count, j.last_preempted_at) for j in OldJob.objects.all()}
        assert back == {"fenced": (2, now - timedelta(minutes=1)), "mixed": (3, now - timedelta(minutes=1)),
                        "never": (0, None)}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
