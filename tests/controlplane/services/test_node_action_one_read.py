"""A cordon or drain reads the jobs on the node once (services/nodes.act): the same list names
them in the node.state event and in the answer. It read them twice, four queries where two do,
and the two could disagree when a job ended between them."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import EventKind, NodeState
from controlplane.models import AllocationGpu, Event, Job, Node
from controlplane.services import nodes, reconcile, transitions
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

GPUS_TABLE = AllocationGpu._meta.db_table


def _bind(job: Job, node: Node, indices: list[int]) -> None:
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=node.pk, gpu_indices=indices)],
                             lease=lease, borrowed=False, at=timezone.now(), actor="test")


def _reads_of_jobs_on_node(queries: list[dict[str, Any]]) -> int:
    return sum(1 for q in queries if q["sql"].lstrip().upper().startswith("SELECT") and f'"{GPUS_TABLE}"' in q["sql"])


@pytest.mark.parametrize("verb", ["cordon", "drain"])
def test_a_cordon_or_drain_reads_the_jobs_on_the_node_once_for_its_event_and_its_answer(fleet, verb) -> None:
    node = fleet.nodes[1]
    job = f.make_job(fleet.ml, fleet.research, name="pretrain", gpus=8)
    _bind(job, node, list(range(8)))
    boss = f.make_user("boss", superuser=True)

    with CaptureQueriesContext(connection) as queries:
        done = nodes.act(verb, node, boss, reason="XID 79")

    assert _reads_of_jobs_on_node(queries.captured_queries) == 2, [q["sql"] for q in queries.captured_queries]
    assert done.changed and [j.job_id for j in done.running_jobs] == [job.pk]
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE)
    assert event.data["running_jobs"] == [job.pk] and f"job {job.pk} pretrain" in event.message


def test_a_repeat_and_an_away_node_still_name_what_runs_there_from_one_read(fleet) -> None:
    node = fleet.nodes[1]
    job = f.make_job(fleet.ml, fleet.research, name="pretrain", gpus=8)
    _bind(job, node, list(range(8)))
    boss = f.make_user("boss", superuser=True)
    nodes.act("drain", node, boss)

    with CaptureQueriesContext(connection) as queries:
        again = nodes.act("drain", node, boss)
    assert _reads_of_jobs_on_node(queries.captured_queries) == 2
    assert not again.changed and [j.job_id for j in again.running_jobs] == [job.pk]
    assert "1 job runs there until it ends" in again.detail

    Node.objects.filter(pk=node.pk).update(state=NodeState.QUARANTINED, unschedulable=False)
    with CaptureQueriesContext(connection) as queries:
        away = nodes.act("cordon", node, boss)
    assert _reads_of_jobs_on_node(queries.captured_queries) == 2
    assert away.changed and [j.job_id for j in away.running_jobs] == [job.pk]
    assert "cordon recorded" in away.detail and "1 job keeps running there" in away.detail
