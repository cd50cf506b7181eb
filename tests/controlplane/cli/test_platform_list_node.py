"""`qm list --node NAME`: the jobs holding GPUs on a node now (as `squeue -w NAME`), what a
drain of that node waits for. Before, no `qm` command said which jobs run on a node."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_list_node_shows_the_jobs_on_that_node(alice_qm, fleet) -> None:
    node = fleet.nodes[1]
    on_it = f.make_job(fleet.ml, name="on-it", gpus=2, state=JobState.RUNNING, started_at=timezone.now())
    now = timezone.now()
    allocation = Allocation.objects.create(job=on_it, generation=1, epoch=1, created_at=now, started_at=now)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i) for i in range(2))
    f.make_job(fleet.ml, name="elsewhere", gpus=1, state=JobState.RUNNING, started_at=now)

    run = alice_qm("list", "--node", node.name)

    assert run.code == 0, run.err
    assert re.search(rf"^\s*{on_it.pk}\s+on-it\s", run.out, re.M), run.out
    assert "elsewhere" not in run.out

    # -w NODE, as squeue -w: the same list
    aliased = alice_qm("list", "-w", node.name)
    assert aliased.code == 0 and aliased.out.splitlines()[1:] == run.out.splitlines()[1:], aliased.out
    assert "-w NODE" in alice_qm("list", "--help").out

    empty = alice_qm("list", "--node", fleet.nodes[3].name)
    assert empty.code == 0 and "No jobs pending or running" in empty.out, empty.out
