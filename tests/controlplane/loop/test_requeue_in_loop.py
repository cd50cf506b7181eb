"""Requeueing end to end on PostgreSQL: real cycles, agents speaking the protocol (heartbeats
and reports over HTTP), users and an operator through the API.

An operator moves a job off a misbehaving node: cordon it, requeue the job. The job's processes
are told to stop with its class's grace period (the heartbeat carries the stop), its agent
confirms, and it goes back to the queue with the same id, requeue_count 1 and the work since its
last checkpoint lost. The next cycle binds it elsewhere under a new generation; the old
generation's reports are refused from then on. With hold it comes back held, the cycle leaves it
alone until it is released; an array's running tasks are requeued together."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import AllocationState, EventKind, JobHold, JobState, Role
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node
from controlplane.services import cycle, transitions
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, make_job, register_node

pytestmark = pytest.mark.django_db(transaction=True)


def _user(name: str, fleet: LoopFleet, **kw) -> APIClient:
    client = APIClient()
    user = f.make_user(name, **({"team": fleet.team} if "role" not in kw else {}), **kw)
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(user)}")
    return client


def _heartbeat(token: str, node: str) -> list[dict]:
    response = agent_client(token).post(f"/api/v1/agent/nodes/{node}/heartbeat", {}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["allocations"]


def _report(token: str, node: str, *reports: dict) -> dict:
    response = agent_client(token).post(f"/api/v1/agent/nodes/{node}/report", {"reports": list(reports)},
                                        format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _nodes_of(allocation: Allocation) -> set[str]:
    return set(AllocationGpu.objects.filter(allocation=allocation).values_list("node__name", flat=True))


def test_an_operator_cordons_a_bad_node_and_requeues_its_job_which_binds_elsewhere(fleet: LoopFleet) -> None:
    tokens = dict((node.name, token) for node, token in (register_node("gpu-0"), register_node("gpu-1")))
    alice = _user("alice", fleet)
    root = _user("root", fleet, role=Role.ADMIN)
    job = make_job(fleet, name="train", gpus=8, gpus_per_node=8, runtime_limit_s=8 * 3600)
    assert cycle.run_cycle("worker-1").binds == 1
    first = Allocation.objects.get(job=job)
    (bad,) = _nodes_of(first)
    good = ({"gpu-0", "gpu-1"} - {bad}).pop()
    # Its agent starts it and, 20 minutes later, reports a checkpoint taken 10 minutes ago.
    started = timezone.now() - timedelta(minutes=20)
    checkpoint = timezone.now() - timedelta(minutes=10)
    _report(tokens[bad], bad, {"kind": "started", "generation": first.generation, "at": started.isoformat()})
    Job.objects.filter(pk=job.pk).update(started_at=started)
    _report(tokens[bad], bad, {"kind": "progress", "generation": first.generation, "steps": 500,
                               "at": timezone.now().isoformat(),
                               "useful_tokens": 1000, "last_checkpoint_at": checkpoint.isoformat()})

    # The operator: cordon the bad node (no new work there), then requeue the job off it.
    bad_node = Node.objects.get(name=bad)
    assert root.post(f"/api/v1/nodes/{bad_node.pk}/cordon/").status_code == 200
    r = root.post(f"/api/v1/jobs/{job.pk}/requeue/", {"reason": f"{bad} throws XID 79"}, format="json")
    assert r.status_code == 200, r.content[:400]
    asked_at = timezone.now()

    # The agent learns of the stop at its next heartbeat, with the class's grace period.
    (desired,) = _heartbeat(tokens[bad], bad)
    assert desired["generation"] == first.generation and desired["state"] == AllocationState.RELEASING
    assert desired["release"]["reason"] == transitions.RELEASE_REQUEUED
    assert fleet.research.grace_period_s - 2 < desired["release"]["grace_remaining_s"] <= fleet.research.grace_period_s
    # The owner sees why it stops, as `qm status` and the page read it.
    explained = alice.get(f"/api/v1/jobs/{job.pk}/explain/").json()
    assert explained["state_label"] == "stopping: requeue" and f"Requeued by root: {bad} throws XID 79" in explained["reason"]
    # A cycle meanwhile neither binds it again nor touches the stop: its GPUs are still owned.
    assert cycle.run_cycle("worker-1").binds == 0
    assert AllocationGpu.objects.filter(allocation=first, live=True).count() == 8

    # SIGTERM's exit: the stop is confirmed, the job waits again.
    _report(tokens[bad], bad, {"kind": "exited", "generation": first.generation, "at": timezone.now().isoformat(),
                               "exit_code": 143})
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.requeue_count == 1 and job.preemption_count == 0
    lost = (asked_at - checkpoint).total_seconds() * 8
    assert job.lost_gpu_seconds == pytest.approx(lost, abs=8 * 5)  # 8 GPUs × the time since the checkpoint
    assert job.pending_message.startswith(f"Requeued by root: {bad} throws XID 79; ")
    assert Allocation.objects.get(pk=first.pk).state == AllocationState.RELEASED

    # The next cycle binds it again: elsewhere (the bad node is cordoned), under a new generation.
    assert cycle.run_cycle("worker-1").binds == 1
    second = Allocation.objects.filter(job=job).exclude(pk=first.pk).get()
    assert _nodes_of(second) == {good}
    assert second.generation > first.generation and second.state == AllocationState.ACTIVE
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.requeue_count == 1
    # The old run is fenced by its generation: its late reports change nothing.
    _report(tokens[bad], bad, {"kind": "progress", "generation": first.generation, "steps": 900,
                               "at": timezone.now().isoformat(),
                               "useful_tokens": 5000, "last_checkpoint_at": timezone.now().isoformat()})
    job.refresh_from_db()
    assert job.steps == 500
    assert [a["generation"] for a in _heartbeat(tokens[good], good)] == [second.generation]
    assert _heartbeat(tokens[bad], bad) == []
    # Its story, in order.
    kinds = list(Event.objects.filter(job=job).order_by("created_at", "id").values_list("kind", "reason"))
    assert kinds.index((EventKind.JOB_STOPPING, transitions.RELEASE_REQUEUED)) < kinds.index(
        (EventKind.JOB_REQUEUED, transitions.RELEASE_REQUEUED)) < [i for i, k in enumerate(kinds)
                                                                   if k[0] == EventKind.JOB_BOUND][1]
    # `qm history` and `qm status` read requeue_count from the API.
    assert alice.get(f"/api/v1/jobs/{job.pk}/").json()["requeue_count"] == 1


def test_requeue_with_hold_comes_back_held_and_runs_again_once_released(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-0")
    alice = _user("alice", fleet)
    job = make_job(fleet, name="sweep", gpus=4, runtime_limit_s=3600)
    assert cycle.run_cycle("worker-1").binds == 1
    first = Allocation.objects.get(job=job)
    _report(token, "gpu-0", {"kind": "started", "generation": first.generation, "at": timezone.now().isoformat()})

    r = alice.post(f"/api/v1/jobs/{job.pk}/requeue/", {"hold": True, "reason": "restart after the data fix"},
                   format="json")
    assert r.status_code == 200, r.content[:400]
    _report(token, "gpu-0", {"kind": "exited", "generation": first.generation, "at": timezone.now().isoformat(),
                             "exit_code": 143})
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.hold == JobHold.USER and job.requeue_count == 1
    assert job.hold_reason == "restart after the data fix"
    # Held: the cycles leave it out of line (its GPUs stay free), and say why.
    assert cycle.run_cycle("worker-1").binds == 0
    job.refresh_from_db()
    assert job.pending_code == "Held" and "alice" in job.pending_message
    assert not AllocationGpu.objects.filter(node=node, live=True).exists()

    assert alice.post(f"/api/v1/jobs/{job.pk}/release/").status_code == 200
    assert cycle.run_cycle("worker-1").binds == 1
    second = Allocation.objects.filter(job=job).exclude(pk=first.pk).get()
    assert second.generation > first.generation
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING


def test_an_arrays_running_tasks_are_requeued_together_and_the_others_counted(fleet: LoopFleet) -> None:
    register_node("gpu-0")
    alice = _user("alice", fleet)
    submitted = alice.post("/api/v1/job-arrays/", {"name": "sweep", "gpus": 4, "array": "0-2",
                                                   "runtime_limit_s": 3600}, format="json")
    assert submitted.status_code == 201, submitted.content[:400]
    array_id, ids = submitted.json()["array_id"], submitted.json()["job_ids"]
    assert cycle.run_cycle("worker-1").binds == 2  # two tasks of 4 GPUs fit on the 8-GPU node
    running = list(Job.objects.filter(pk__in=ids, state=JobState.RUNNING).values_list("pk", flat=True))
    waiting = set(ids) - set(running)
    assert len(running) == 2 and len(waiting) == 1

    r = alice.post(f"/api/v1/job-arrays/{array_id}/requeue/", {"hold": True}, format="json")

    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert sorted(body["requeued"]) == sorted(running) and body["not_running"] == 1 and body["stopping"] == 0
    assert body["detail"] == (f"Array {array_id} (sweep, 3 tasks): 2 stopping to be requeued held, 1 not running "
                              "(waiting or ended).")
    assert body["state_labels"] == {"pending": 1, "stopping: requeue held": 2}
    for allocation in Allocation.objects.filter(job_id__in=running):
        assert allocation.state == AllocationState.RELEASING
        assert allocation.release_reason == transitions.RELEASE_REQUEUED_HELD
        transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:gpu-0")
    assert set(Job.objects.filter(pk__in=running).values_list("state", "hold", "requeue_count")) == {
        (JobState.PENDING, JobHold.USER, 1)}
    # Again: none runs now, so nothing to requeue; every task counted.
    again = alice.post(f"/api/v1/job-arrays/{array_id}/requeue/").json()
    assert again["requeued"] == [] and again["not_running"] == 3
    # The waiting task, never held, binds now; the held ones wait for their release.
    assert cycle.run_cycle("worker-1").binds == 1
    assert Job.objects.get(pk=waiting.pop()).state == JobState.RUNNING


def test_a_gang_is_requeued_whole_once_every_member_has_stopped(fleet: LoopFleet) -> None:
    tokens = dict((node.name, token) for node, token in (register_node("gpu-0"), register_node("gpu-1")))
    alice = _user("alice", fleet)
    job = make_job(fleet, name="gang", gpus=16, gpus_per_node=8, runtime_limit_s=8 * 3600)
    assert cycle.run_cycle("worker-1").binds == 1
    first = Allocation.objects.get(job=job)
    started = timezone.now() - timedelta(minutes=30)
    for name, token in tokens.items():
        _report(token, name, {"kind": "started", "generation": first.generation, "at": started.isoformat()})
    Job.objects.filter(pk=job.pk).update(started_at=started)

    assert alice.post(f"/api/v1/jobs/{job.pk}/requeue/").status_code == 200
    asked_at = timezone.now()
    _report(tokens["gpu-0"], "gpu-0", {"kind": "exited", "generation": first.generation,
                                       "at": timezone.now().isoformat(), "exit_code": 143})
    job.refresh_from_db()
    assert job.state == JobState.PREEMPTING  # one member still stopping: nothing settled yet
    _report(tokens["gpu-1"], "gpu-1", {"kind": "exited", "generation": first.generation,
                                       "at": timezone.now().isoformat(), "exit_code": 143})

    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.requeue_count == 1
    # Both members' GPUs count, the one that confirmed first included: 16 GPUs × 30 minutes.
    assert job.lost_gpu_seconds == pytest.approx(16 * (asked_at - started).total_seconds(), rel=0.02)
    requeued = Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED)
    assert requeued.node is None and requeued.data["nodes"] == ["gpu-0", "gpu-1"]
    assert "(on gpu-0, gpu-1)" in requeued.message
    assert not AllocationGpu.objects.filter(allocation=first, live=True).exists()
    assert cycle.run_cycle("worker-1").binds == 1
    assert Allocation.objects.filter(job=job).exclude(pk=first.pk).get().generation > first.generation
