"""`metrics/queue/`'s running GPUs are the GPUs running jobs hold, as the fleet counts them.

Found in the demo: an elastic job asking 8 (4–16) ran on 16 GPUs; the queue figures said 75
GPUs were running while the nodes and `metrics/fragmentation/` held 83."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _hold(job: Job, placement: list[tuple[Node, int]], generation: int, state: str = AllocationState.ACTIVE) -> None:
    now = timezone.now()
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=now, state=state)
    AllocationGpu.objects.bulk_create(
        AllocationGpu(allocation=allocation, node=node, gpu_index=i) for node, n in placement for i in range(n)
    )


def test_running_gpus_are_the_gpus_running_jobs_hold(fleet, alice) -> None:
    grown = f.make_job(fleet.ml, gpus=8, min_gpus=4, max_gpus=16, state=JobState.RUNNING)
    _hold(grown, [(fleet.nodes[0], 8), (fleet.nodes[1], 8)], generation=1)
    shrunk = f.make_job(fleet.ml, gpus=8, min_gpus=2, max_gpus=8, state=JobState.RUNNING)
    _hold(shrunk, [(fleet.nodes[2], 2)], generation=2)
    stopping = f.make_job(fleet.vision, gpus=3, state=JobState.PREEMPTING)
    _hold(stopping, [(fleet.nodes[3], 3)], generation=3, state=AllocationState.RELEASING)
    f.make_job(fleet.vision, gpus=5, state=JobState.SUCCEEDED)

    queue = alice.get(f"{J}/metrics/queue/").json()
    fragmentation = alice.get(f"{J}/metrics/fragmentation/").json()

    assert queue["running_jobs"] == 3
    assert queue["running_gpus"] == 16 + 2 + 3 == fragmentation["allocated_gpus"]
