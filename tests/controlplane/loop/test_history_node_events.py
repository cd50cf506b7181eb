"""A node's history shows every job that ran on it, from its bind to its end.

Found by an SRE reading `GET events/?node=gpu-01` (what the node's page shows) after a 1-GPU job
was cancelled there: only `job.started` (from its agent's report) named the node. `job.bound`,
`job.cancelled`, `job.timed_out`, `job.preempting`, `allocation.released` and `job.finished`
carried no `node`, so the history showed jobs starting (sometimes) and never ending. Now an event
about an allocation that held GPUs on exactly one node carries that node, as fence events
already did; a gang's (several nodes) keeps `node` null, names its nodes in its words and lists
them in `data.nodes` (the fence events' key). `job.finished` of a runtime limit says `TimedOut`
whichever path settled it (it said `Timedout` in some, `TimedOut` in the fence's).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import EventKind, JobState, Role
from controlplane.models import Event, Job, Node
from controlplane.services import cycle, reconcile, transitions
from tests.controlplane import factories
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node

pytestmark = pytest.mark.django_db

ENDS = {EventKind.JOB_BOUND, EventKind.JOB_CANCELLED, EventKind.ALLOCATION_RELEASED, EventKind.JOB_FINISHED}


def _history(node: str) -> list[dict]:
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Token {factories.token_for(factories.make_user('root', role=Role.ADMIN))}")
    response = admin.get(f"/api/v1/events/?node={node}")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def _exited(token: str, node: str, generation: int, code: int) -> None:
    response = agent_client(token).post(f"/api/v1/agent/nodes/{node}/report", {"reports": [
        {"kind": "exited", "generation": generation, "exit_code": code, "at": timezone.now().isoformat()}
    ]}, format="json")
    assert response.status_code == 200, response.content


def _bulk_bind(job: Job, members: dict[Node, list[int]]) -> None:
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        bound, _ = transitions.bind_jobs(
            [transitions.BindRequest(job.pk, [transitions.GpuSet(n.pk, g) for n, g in members.items()], borrowed=False)],
            lease=lease, at=timezone.now(), actor="test", node_names={n.pk: n.name for n in members},
        )
    assert bound == 1


def test_a_one_gpu_job_cancelled_shows_its_bind_cancel_release_and_end_in_its_nodes_history(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet, name="one")
    allocation = bind(job, {node: [3]})
    assert transitions.cancel_job(job, "user:alice")

    _exited(token, "gpu-01", allocation.generation, -15)

    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    mine = [e for e in _history("gpu-01") if e["job"] == job.pk]
    assert {e["kind"] for e in mine} >= ENDS, [e["kind"] for e in mine]
    for event in Event.objects.filter(job=job, kind__in=ENDS):
        assert event.node_id == node.pk, event.kind
        assert event.data["nodes"] == ["gpu-01"], event.kind


def test_a_cycle_bound_job_stopped_at_its_limit_shows_in_its_nodes_history_and_ends_timed_out(fleet: LoopFleet) -> None:
    node, _ = register_node("gpu-02")
    job = make_job(fleet, name="limit", runtime_limit_s=60)
    assert cycle.run_cycle("test").binds == 1  # the cycle's bulk bind
    allocation = job.allocations.get()
    transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_RUNTIME_LIMIT,
                            grace_period_s=5, at=timezone.now(), actor="test", message="runtime limit")

    transitions.complete_release(allocation.pk, exit_code=-15, at=timezone.now(), actor="agent")

    kinds = {e["kind"] for e in _history("gpu-02") if e["job"] == job.pk}
    assert kinds >= {EventKind.JOB_BOUND, EventKind.JOB_TIMED_OUT, EventKind.ALLOCATION_RELEASED,
                     EventKind.JOB_FINISHED}, kinds
    assert Event.objects.get(job=job, kind=EventKind.JOB_FINISHED).reason == "TimedOut"


def test_a_preempted_job_shows_its_stop_and_requeue_in_its_nodes_history(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-03")
    job = make_job(fleet, name="victim")
    allocation = bind(job, {node: [0, 1]})
    transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                            grace_period_s=5, at=timezone.now(), actor="test", message="make room")

    _exited(token, "gpu-03", allocation.generation, -15)

    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    kinds = {e["kind"] for e in _history("gpu-03") if e["job"] == job.pk}
    assert kinds >= {EventKind.JOB_BOUND, EventKind.JOB_PREEMPTING, EventKind.ALLOCATION_RELEASED,
                     EventKind.JOB_PREEMPTED}, kinds


def test_a_gangs_events_carry_no_node_but_name_its_nodes_in_words_and_data(fleet: LoopFleet) -> None:
    a, token_a = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    job = make_job(fleet, gpus=4, gpus_per_node=2, name="gang")
    _bulk_bind(job, {a: [0, 1], b: [0, 1]})
    allocation = job.allocations.get()
    assert transitions.cancel_job(job, "user:alice")

    _exited(token_a, "gpu-a", allocation.generation, -15)
    _exited(token_b, "gpu-b", allocation.generation, -15)

    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    events = {e.kind: e for e in Event.objects.filter(job=job, kind__in=ENDS).exclude(reason="MemberExited")}
    assert set(events) == ENDS
    for kind, event in events.items():
        assert event.node_id is None, kind
        assert event.data["nodes"] == ["gpu-a", "gpu-b"], kind
        assert "gpu-a" in event.message and "gpu-b" in event.message, (kind, event.message)
    # Each node's history has what happened on it alone: its member's exit, whose data says
    # where as every allocation event does.
    assert [e["reason"] for e in _history("gpu-a") if e["job"] == job.pk] == ["MemberExited"]
    exit_a = Event.objects.get(job=job, reason="MemberExited", node=a)
    assert exit_a.data["nodes"] == ["gpu-a"]


@pytest.mark.parametrize("path", ["complete_release", "complete_releases", "fence"])
def test_a_runtime_limit_ends_the_job_timed_out_with_one_spelling_whatever_the_path(
    fleet: LoopFleet, path: str
) -> None:
    node, _ = register_node("gpu-04")
    job = make_job(fleet, name="limit")
    allocation = bind(job, {node: [0]})
    now = timezone.now()
    transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_RUNTIME_LIMIT,
                            grace_period_s=5, at=now, actor="test", message="runtime limit")

    if path == "complete_release":
        transitions.complete_release(allocation.pk, exit_code=-15, at=now, actor="agent")
    elif path == "complete_releases":
        transitions.complete_releases([(allocation.pk, allocation.generation, -15, now)], actor_of={})
    else:
        Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=now - timedelta(seconds=5))
        reconcile.expire_node(node.pk, now=now)

    assert Job.objects.get(pk=job.pk).state == JobState.TIMED_OUT
    finished = Event.objects.get(job=job, kind=EventKind.JOB_FINISHED)
    assert finished.reason == "TimedOut"
    assert finished.node_id == node.pk


def _release_queries(fleet: LoopFleet, jobs: int, gpus: int) -> int:
    node, _ = register_node(f"q-{jobs}-{gpus}")
    allocations = [bind(make_job(fleet, gpus=gpus, name=f"j{i}"), {node: list(range(i * gpus, (i + 1) * gpus))})
                   for i in range(jobs)]
    now = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        transitions.complete_releases([(a.pk, a.generation, 0, now) for a in allocations], actor_of={})
    assert Event.objects.filter(allocation__in=allocations, kind=EventKind.JOB_FINISHED, node=node).count() == jobs
    return len(queries)


def test_a_batch_of_exits_names_their_nodes_in_a_number_of_queries_that_does_not_grow(fleet: LoopFleet) -> None:
    """One query for the whole batch's nodes, not one per allocation or per GPU."""
    assert _release_queries(fleet, jobs=1, gpus=1) == _release_queries(fleet, jobs=8, gpus=1)
    assert _release_queries(fleet, jobs=1, gpus=1) == _release_queries(fleet, jobs=1, gpus=8)


def test_a_single_release_names_its_node_in_a_number_of_queries_that_does_not_grow_with_gpus(
    fleet: LoopFleet,
) -> None:
    counts = []
    for gpus in (1, 8):
        node, _ = register_node(f"s-{gpus}")
        allocation = bind(make_job(fleet, gpus=gpus, name=f"s{gpus}"), {node: list(range(gpus))})
        with CaptureQueriesContext(connection) as queries:
            transitions.complete_release(allocation.pk, exit_code=0, at=timezone.now(), actor="agent")
        assert Event.objects.get(allocation=allocation, kind=EventKind.ALLOCATION_RELEASED).node_id == node.pk
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
