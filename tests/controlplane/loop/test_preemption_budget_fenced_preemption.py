"""A preemption spends its victim's preemption budget once, however its stop ends.

The scheduler preempts a job: its allocation is stopping under a grace period. The stop can end
three ways: the victim's agents confirm its processes exited (SIGTERM), they confirm it after
the grace period's SIGKILL, or the node stops answering first and reconcile fences the
allocation. Until 6 Dec the third way was settled as a plain fence (`job.requeued`,
`requeue_count` only): the job had lost its work to the scheduler's decision, yet its class's
preemption budget was not charged, so a job on a flaky node could be preempted beyond its
budget. Now each way settles as a preemption (`job.preempted`, `preemption_count` + 1) and a
late report of the other way changes nothing. End to end on PostgreSQL: real cycles, the agent
protocol and reconcile.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, Event, Job, Node, PriorityClass
from controlplane.services import cycle, reconcile, transitions
from controlplane.services.snapshot import read_snapshot
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, make_job, register_node

pytestmark = pytest.mark.django_db(transaction=True)


def _report(token: str, node: str, *reports: dict) -> dict:
    response = agent_client(token).post(f"/api/v1/agent/nodes/{node}/report", {"reports": list(reports)},
                                        format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _budget_of_one(fleet: LoopFleet) -> PriorityClass:
    """research: preemptible at once, grace 60 s, one preemption a day; prod may preempt it."""
    PriorityClass.objects.filter(pk=fleet.research.pk).update(min_runtime_s=0, grace_period_s=60, preemption_budget=1,
                                                               budget_window_s=86400)
    return PriorityClass.objects.create(name="prod", value=1000, preemptible=False)


def _running(job: Job, registered: list[tuple[Node, str]]) -> Allocation:
    """The job's live allocation, started by its agents 90 minutes ago."""
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    started = timezone.now() - timedelta(minutes=90)
    for node, token in registered:
        if allocation.gpus.filter(node=node).exists():
            _report(token, node.name, {"kind": "started", "generation": allocation.generation,
                                       "at": started.isoformat()})
    Allocation.objects.filter(pk=allocation.pk).update(started_at=started)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=started)
    return allocation


def _urgent(fleet: LoopFleet, prod: PriorityClass, name: str, gpus: int) -> Job:
    return Job.objects.create(team=fleet.team, name=name, priority_class=prod, gpus=gpus, gpus_per_node=8,
                              runtime_limit_s=3600, submitted_at=timezone.now(), state_changed_at=timezone.now())


def _preempted(fleet: LoopFleet, nodes: int) -> tuple[Job, Allocation, list[tuple[Node, str]]]:
    """A research job on ``nodes`` whole nodes, preempted by a prod job through a real cycle."""
    prod = _budget_of_one(fleet)
    registered = [register_node(f"gpu-{i}") for i in range(nodes)]
    victim = make_job(fleet, name="victim", gpus=8 * nodes, gpus_per_node=8, runtime_limit_s=8 * 3600,
                      submitted_at=timezone.now() - timedelta(hours=2))
    assert cycle.run_cycle("worker-1").binds == 1
    allocation = _running(victim, registered)
    _urgent(fleet, prod, "urgent", 8 * nodes)
    assert cycle.run_cycle("worker-1").stops == 1
    allocation.refresh_from_db()
    assert (allocation.state, allocation.release_reason) == (AllocationState.RELEASING, transitions.RELEASE_PREEMPTED)
    return victim, allocation, registered


def _lease_runs_out(node: Node) -> int:
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))
    return reconcile.reconcile_nodes(now=timezone.now()).fenced


def _confirm(allocation: Allocation, registered: list[tuple[Node, str]], exit_code: int) -> None:
    for node, token in registered:
        _report(token, node.name, {"kind": "exited", "generation": allocation.generation,
                                   "at": timezone.now().isoformat(), "exit_code": exit_code})


def _spent(job: Job) -> tuple[int, int, int]:
    """(preemption_count, requeue_count, job.preempted events)."""
    job.refresh_from_db()
    return job.preemption_count, job.requeue_count, Event.objects.filter(job=job, kind=EventKind.JOB_PREEMPTED).count()


def _preemptions_in_window(job: Job) -> int:
    (spec,) = [s for s in read_snapshot(timezone.now(), 1).snapshot.pending if s.id == str(job.pk)]
    return spec.preemptions_in_window


def test_a_preemption_fenced_before_its_victim_confirms_spends_the_preemption_budget(fleet: LoopFleet,
                                                                                    client) -> None:
    victim, allocation, [(node, token)] = _preempted(fleet, 1)

    assert _lease_runs_out(node) == 1

    victim.refresh_from_db()
    assert victim.state == JobState.PENDING
    assert _spent(victim) == (1, 1, 1)
    assert not Event.objects.filter(job=victim, kind=EventKind.JOB_REQUEUED).exists()
    preempted = Event.objects.get(job=victim, kind=EventKind.JOB_PREEMPTED)
    assert victim.last_preempted_at == preempted.created_at
    assert preempted.reason == transitions.RELEASE_PREEMPTED
    assert preempted.message.startswith("Requeued whole after being preempted (gpu-0 stopped answering before "
                                        "confirming the stop); lost ")
    assert preempted.data["fenced"] == reconcile.FENCE_LEASE_EXPIRED
    assert preempted.data["lost_gpu_seconds"] > 0
    # The fence itself is told as every fence is.
    assert Event.objects.get(allocation=allocation, kind=EventKind.ALLOCATION_FENCED).reason == \
        reconcile.FENCE_LEASE_EXPIRED
    assert _preemptions_in_window(victim) == 1
    # Its run says both: preempted, and fenced before it confirmed.
    client.force_login(f.make_user("root", superuser=True))
    (run,) = client.get(f"/api/v1/jobs/{victim.pk}/runs/").json()["results"]
    assert (run["state"], run["outcome"]) == ("fenced", "requeued")
    assert run["ended_how"] == "Preempted; requeued (fenced off gpu-0, which stopped answering before confirming the stop)"

    # The victim's agent comes back and confirms the stop it had been told of: the fenced
    # generation is settled already, nothing is counted again.
    _confirm(allocation, [(node, token)], exit_code=143)
    assert _spent(victim) == (1, 1, 1)


def test_a_gang_preempted_with_one_node_confirming_and_the_other_fenced_spends_it_once(fleet: LoopFleet) -> None:
    victim, allocation, registered = _preempted(fleet, 2)

    _confirm(allocation, registered[:1], exit_code=143)  # gpu-0's member stops: the gang is not settled yet
    assert _spent(victim) == (0, 0, 0)
    assert _lease_runs_out(registered[1][0]) == 1

    assert _spent(victim) == (1, 1, 1)
    assert "(gpu-1 stopped answering before confirming the stop)" in \
        Event.objects.get(job=victim, kind=EventKind.JOB_PREEMPTED).message


@pytest.mark.parametrize("exit_code", [143, 137], ids=["confirmed-at-sigterm", "killed-at-the-grace-deadline"])
def test_a_preemption_its_agents_confirm_is_not_counted_again_by_a_later_fence(fleet: LoopFleet,
                                                                               exit_code: int) -> None:
    victim, allocation, [(node, token)] = _preempted(fleet, 1)

    _confirm(allocation, [(node, token)], exit_code=exit_code)
    assert _spent(victim) == (1, 1, 1)
    assert _lease_runs_out(node) == 0  # the node goes quiet afterwards: nothing of the job is left to fence

    assert _spent(victim) == (1, 1, 1)
    assert _preemptions_in_window(victim) == 1


def test_a_job_whose_preemption_was_fenced_is_protected_by_its_spent_budget(fleet: LoopFleet, client) -> None:
    """The point of charging it: with a budget of one a day, the job once preempted (its node
    lost during the grace period) runs again and is not preempted a second time that day."""
    victim, _, [(node, _)] = _preempted(fleet, 1)
    assert _lease_runs_out(node) == 1
    registered = [register_node("gpu-1"), register_node("gpu-2")]
    assert cycle.run_cycle("worker-1").binds == 2  # the prod job and the victim, each on a node
    _running(victim, registered)

    second = _urgent(fleet, PriorityClass.objects.get(name="prod"), "urgent-2", 8)
    assert cycle.run_cycle("worker-1").stops == 0

    client.force_login(f.make_user("root", superuser=True))
    body = client.get(f"/api/v1/jobs/{second.pk}/explain/").json()
    assert body["reason_code"] == "PreemptionBudgetExhausted", body["reason"]
    assert f"job {victim.pk} was preempted 1 time in the last 24 h, its budget" in body["reason"]
    assert Job.objects.get(pk=victim.pk).state == JobState.RUNNING
