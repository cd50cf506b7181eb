"""Reconciliation: missed heartbeats → suspect; lease expiry → quarantine and fence; re-register."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node
from controlplane.services import agent_protocol, reconcile, transitions
from tests.controlplane.loop_fixtures import LoopFleet, bind, make_job, register_node


def test_a_node_silent_past_the_suspect_window_becomes_suspect_and_keeps_its_work(fleet: LoopFleet, settings) -> None:
    node, _ = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    later = timezone.now() + timedelta(seconds=settings.QM["SUSPECT_AFTER_S"] + 1)

    result = reconcile.reconcile_nodes(now=later)

    assert result.suspect == 1 and result.fenced == 0
    node.refresh_from_db()
    assert node.state == NodeState.SUSPECT
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.ACTIVE
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE, reason="MissedHeartbeats")
    assert "no new work" in event.message


def test_a_node_within_its_suspect_window_stays_ready(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-01")

    result = reconcile.reconcile_nodes(now=timezone.now() + timedelta(seconds=1))

    assert not result.found_work
    node.refresh_from_db()
    assert node.state == NodeState.READY


def test_fencing_lease_expiry_quarantines_the_node_and_fences_the_whole_gang_with_lost_work(fleet: LoopFleet, settings) -> None:
    a, _ = register_node("gpu-a")
    b, _ = register_node("gpu-b")
    job = make_job(fleet, gpus=16, gpus_per_node=8)
    allocation = bind(job, {a: range(8), b: range(8)})
    old_generation = allocation.generation
    Node.objects.filter(pk=a.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))

    result = reconcile.reconcile_nodes(now=timezone.now())

    assert result.quarantined == 1 and result.fenced == 1
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.state == NodeState.QUARANTINED and b.state == NodeState.READY
    allocation.refresh_from_db()
    assert allocation.state == AllocationState.FENCED and allocation.generation > old_generation
    assert not AllocationGpu.objects.filter(allocation=allocation, live=True).exists()
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.preemption_count == 0 and job.requeue_count == 1 and job.lost_gpu_seconds >= 0
    assert Event.objects.filter(kind=EventKind.ALLOCATION_FENCED, allocation=allocation, reason="NodeLeaseExpired").exists()


def test_reconcile_twice_fences_once(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-01")
    bind(make_job(fleet), {node: [0]})
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))

    first = reconcile.reconcile_nodes()
    second = reconcile.reconcile_nodes()

    assert first.fenced == 1 and not second.found_work
    assert Event.objects.filter(kind=EventKind.ALLOCATION_FENCED).count() == 1


def test_a_bind_that_lands_on_a_quarantined_node_is_fenced_on_the_next_pass(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-01")
    Node.objects.filter(pk=node.pk).update(state=NodeState.QUARANTINED)
    job = make_job(fleet)
    allocation = bind(job, {node: [3]})  # the scheduler read the node before it was quarantined

    result = reconcile.reconcile_nodes()

    assert result.fenced == 1
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.FENCED
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


def test_a_heartbeat_that_renewed_the_lease_after_the_read_wins_over_expiry(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    # The lease is valid at the time the pass runs, though a stale read thought it expired.
    quarantined, fenced = reconcile.expire_node(node.pk, now=timezone.now())

    assert (quarantined, fenced) == (0, 0)
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.ACTIVE


def test_a_cancelled_job_whose_node_stops_answering_ends_cancelled_not_requeued(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-01")
    job = make_job(fleet)
    bind(job, {node: [0]})
    transitions.cancel_job(job, "user:alice")
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))

    reconcile.reconcile_nodes()

    job.refresh_from_db()
    assert job.state == JobState.CANCELLED


def test_a_drained_node_with_nothing_left_becomes_cordoned(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    Node.objects.filter(pk=node.pk).update(state=NodeState.DRAINING, unschedulable=True)  # as an operator's drain

    assert reconcile.reconcile_nodes().cordoned == 0
    agent_protocol.apply_reports(
        node, [agent_protocol.Report("exited", allocation.generation, timezone.now(), exit_code=0)], now=timezone.now()
    )
    assert reconcile.reconcile_nodes().cordoned == 1

    node.refresh_from_db()
    assert node.state == NodeState.CORDONED
    assert Event.objects.filter(node=node, reason="Drained").exists()


def test_a_node_that_never_registered_an_agent_is_suspect(fleet: LoopFleet) -> None:
    node = Node.objects.create(name="no-agent", pool="h100", gpu_type=fleet.h100, gpu_count=8, cpus=8, memory_gb=64,
                               leaf_switch="l", spine="s")

    reconcile.reconcile_nodes()

    node.refresh_from_db()
    assert node.state == NodeState.SUSPECT
