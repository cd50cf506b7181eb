"""Elastic growth in the loop, where a resize stops the job and binds it again: the size the
engine grows a job to must be the size its next bind gives it, or the job restarts every cycle.
Found on the demo: an elastic 2..8 job running 4 GPUs was grown to 4 + 4 on two nodes, stopped,
bound again at 4 (a job of a node's GPUs takes a whole node, and none was free), and grown again:
888 events in 12 minutes and no progress."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import Allocation, Cohort, Event, GpuType, Job, Node, PriorityClass, Quota, Team
from controlplane.services import cycle, transitions

pytestmark = pytest.mark.django_db


@pytest.fixture
def team() -> Team:
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    for i in range(2):
        Node.objects.create(name=f"n{i}", pool="h100", gpu_type=h100, gpu_count=8, cpus=96, memory_gb=1024,
                            leaf_switch="leaf-0", spine="spine-0")
    batch = PriorityClass.objects.create(name="batch", value=100, grace_period_s=30, min_runtime_s=0)
    team = Team.objects.create(name="ml", cohort=Cohort.objects.create(name="all"), default_priority_class=batch)
    Quota.objects.create(team=team, gpu_type=h100, nominal_gpus=16)
    return team


def _submit(team: Team, name: str, gpus: int, **shape: object) -> Job:
    at = timezone.now() - timedelta(minutes=1)
    return Job.objects.create(team=team, name=name, priority_class=team.default_priority_class, gpus=gpus,
                              runtime_limit_s=8 * 3600, submitted_at=at, state_changed_at=at, **shape)


def _live(job: Job) -> Allocation:
    return Allocation.objects.get(job=job, state__in=(AllocationState.ACTIVE, AllocationState.RELEASING))


def test_an_elastic_job_is_not_grown_into_a_shape_its_next_bind_cannot_give(team: Team) -> None:
    # n0 and n1 each half used: 8 GPUs free, no whole node (the other node cordoned while
    # each half is bound, as packing would put both halves on one node).
    for name, other in (("x", "n1"), ("y", "n0")):
        Node.objects.filter(name=other).update(state=NodeState.CORDONED)
        _submit(team, name, 4)
        assert cycle.run_cycle("w").binds == 1
        Node.objects.filter(name=other).update(state=NodeState.READY)
    elastic = _submit(team, "e", 4, min_gpus=2, max_gpus=8)
    assert cycle.run_cycle("w").binds == 1
    first = _live(elastic)
    for _ in range(3):
        result = cycle.run_cycle("w")
        assert result.resizes == 0, "grown to 4 + 4 on two nodes: its next bind would start it at 4 again"
    assert _live(elastic).pk == first.pk and _live(elastic).state == AllocationState.ACTIVE


def test_a_grown_job_is_bound_again_at_the_size_it_was_grown_to(team: Team) -> None:
    small = _submit(team, "x", 4)
    _submit(team, "filler", 8)
    assert cycle.run_cycle("w").binds == 2  # x on half a node, filler on the other node
    elastic = _submit(team, "e", 4, min_gpus=2, max_gpus=8)
    assert cycle.run_cycle("w").binds == 1  # e at 4 beside x
    assert Allocation.objects.get(job=elastic).gpus.count() == 4
    # x ends: n0's other half is free, and e, checkpointed a minute ago, grows in place.
    x_alloc = _live(small)
    transitions.complete_release(x_alloc.pk, exit_code=0, at=timezone.now(), actor="agent")
    Job.objects.filter(pk=elastic.pk).update(last_checkpoint_at=timezone.now() - timedelta(minutes=1))
    assert cycle.run_cycle("w").resizes == 1
    grown = _live(elastic)
    assert grown.release_reason == transitions.RELEASE_RESIZED
    message = Event.objects.get(allocation=grown, kind=EventKind.JOB_STOPPING).message  # a resize: no preemption
    assert "Grows from 4 to 8 GPUs" in message and "a restart costs it" in message
    transitions.complete_release(grown.pk, exit_code=None, at=timezone.now(), actor="agent")
    assert Job.objects.get(pk=elastic.pk).state == JobState.PENDING
    assert cycle.run_cycle("w").binds == 1
    again = _live(elastic)
    assert again.gpus.count() == 8 and again.state == AllocationState.ACTIVE
    assert cycle.run_cycle("w").resizes == 0
