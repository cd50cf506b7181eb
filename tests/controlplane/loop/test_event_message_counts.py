"""Event messages agree with their numbers and say times as people do.

QA saw "Submitted by alice: 1 GPUs, priority class research, runtime limit 3600 s" and
"Bound to 1 GPUs (…)": the submit and both bind paths (one job, and a cycle's bulk bind) now
use the engine's sentence helpers, as the waiting reasons do. The submit's runtime limit is said
as qm and the job page say it (`1 h 30 min`, `sentences.span_words`); until 7 Dec it read
"60 min", "4.0 h", "90 s".
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event
from controlplane.services import jobs, reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, bind, register_node

pytestmark = pytest.mark.django_db


def _message(job_id: int, kind: str) -> str:
    return Event.objects.get(job_id=job_id, kind=kind).message


@pytest.mark.parametrize("gpus, limit_s, shape, limit", [
    (1, 3600, "1 GPU", "1 h"),
    (2, 4 * 3600, "2 GPUs", "4 h"),
    (1, 5400, "1 GPU", "1 h 30 min"),
    (1, 90, "1 GPU", "1 min 30 s"),
])
def test_the_submitted_event_counts_gpus_and_says_the_limit_in_words(
    fleet: LoopFleet, gpus: int, limit_s: int, shape: str, limit: str
) -> None:
    alice = f.make_user("alice", team=fleet.team)
    submitted = jobs.submit(alice, jobs.SubmitRequest(name="one", gpus=gpus, runtime_limit_s=limit_s))
    message = _message(submitted.job.pk, EventKind.JOB_SUBMITTED)
    assert message == f"Submitted by alice: {shape}, priority class research, runtime limit {limit}"


def test_a_single_bind_says_1_gpu(fleet: LoopFleet) -> None:
    node, _ = register_node("n1")
    alice = f.make_user("alice", team=fleet.team)
    job = jobs.submit(alice, jobs.SubmitRequest(name="one", gpus=1)).job
    allocation = bind(job, {node: [3]})
    assert _message(job.pk, EventKind.JOB_BOUND) == f"Bound to 1 GPU (n1:3), generation {allocation.generation}"


def test_a_cycles_bulk_bind_says_1_gpu_and_2_gpus(fleet: LoopFleet) -> None:
    node, _ = register_node("n1")
    alice = f.make_user("alice", team=fleet.team)
    one = jobs.submit(alice, jobs.SubmitRequest(name="one", gpus=1)).job
    two = jobs.submit(alice, jobs.SubmitRequest(name="two", gpus=2)).job
    requests: list[Any] = [
        transitions.BindRequest(job_id=one.pk, gpus=[transitions.GpuSet(node_id=node.pk, gpu_indices=[0])],
                                borrowed=False),
        transitions.BindRequest(job_id=two.pk, gpus=[transitions.GpuSet(node_id=node.pk, gpu_indices=[1, 2])],
                                borrowed=False),
    ]
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        bound, _ = transitions.bind_jobs(requests, lease=lease, at=timezone.now(), actor="test",
                                         node_names={node.pk: "n1"})
    assert bound == 2
    assert _message(one.pk, EventKind.JOB_BOUND).startswith("Bound to 1 GPU (n1:0), generation ")
    assert _message(two.pk, EventKind.JOB_BOUND).startswith("Bound to 2 GPUs (n1:1,2), generation ")
