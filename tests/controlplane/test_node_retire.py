"""Retiring a node for good, and returning it to service (services/nodes.py).

Before, a node that had ever run a job could not leave the fleet: its DELETE was refused (its
history names it), and the documented workaround (moving it to a pool "retired") kept its GPUs
in the engine's snapshot, the fleet figures, /metrics and the accounting's capacity and idle
cost. Now `retire` takes it out of all of them (refused while jobs hold its GPUs: drain first),
and `return_to_service` brings it back, down until its agent registers.

Fleet (tests/controlplane/fleet_fixture.py): h100-0..3 (8 GPUs each, pool h100, h100-0 with an
agent token), a100-0..1 (pool a100).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Event, Node
from controlplane.services import fleet_capability, fleet_figures, nodes, reconcile, transitions
from controlplane.services.snapshot import read_snapshot
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, client_for

pytestmark = pytest.mark.django_db


def _run(fleet: Fleet, node: Node, gpus: list[int], name: str = "train") -> int:
    job = f.make_job(fleet.ml, fleet.research, name=name, gpus=len(gpus))
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        allocation = transitions.bind_job(job.pk, [transitions.GpuSet(node_id=node.pk, gpu_indices=gpus)],
                                          lease=lease, borrowed=False, at=timezone.now(), actor="test")
    assert allocation is not None
    return job.pk


def test_retiring_is_refused_while_jobs_hold_its_gpus_naming_them_and_saying_drain_first(fleet: Fleet) -> None:
    node = fleet.nodes[1]
    first = _run(fleet, node, [0, 1], "a")
    _run(fleet, node, [2], "b")

    with pytest.raises(nodes.NodeActionRefused) as refused:
        nodes.retire(node, fleet.users["admin"])

    words = str(refused.value)
    assert "node h100-1 still runs 2 jobs on 3 of its 8 GPUs" in words
    assert f"job {first} a (2 GPUs)" in words
    assert "drain it first (`qm nodes drain h100-1`" in words and f"POST nodes/{node.pk}/drain/" in words
    node.refresh_from_db()
    assert node.state == NodeState.READY and node.retired_at is None
    assert not Event.objects.filter(kind=EventKind.NODE_STATE, node=node).exists()


def test_retire_sets_the_state_the_time_the_wish_clears_the_agent_and_records_who(fleet: Fleet) -> None:
    node = fleet.nodes[0]  # has an agent token
    assert node.agent_token_hash
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() + timedelta(seconds=30))
    nodes.cordon(node, fleet.users["admin"])
    at = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)

    retired = nodes.retire(node, fleet.users["admin"], now=at)

    node.refresh_from_db()
    assert retired.state == node.state == NodeState.RETIRED
    assert node.retired_at == at and node.unschedulable
    assert node.agent_lease_expires_at is None and node.agent_token_hash == ""
    event = Event.objects.get(kind=EventKind.NODE_STATE, node=node, reason="Retired")
    assert event.actor == "user:root" and event.created_at == at
    assert event.message.startswith("h100-0: cordoned → retired by root; its 8 H100-80GB GPUs leave the fleet's")
    assert event.data["from"] == "cordoned" and event.data["to"] == "retired"

    # Again: nothing changes, nothing recorded.
    nodes.retire(node, fleet.users["admin"])
    assert Event.objects.filter(kind=EventKind.NODE_STATE, node=node, reason="Retired").count() == 1


def test_a_retired_node_cannot_be_cordoned_drained_or_uncordoned_only_returned(fleet: Fleet) -> None:
    node = nodes.retire(fleet.nodes[2], fleet.users["admin"])
    for verb in (nodes.cordon, nodes.drain, nodes.uncordon):
        with pytest.raises(nodes.NodeActionRefused, match=r"node h100-2 is retired \(since .* UTC\); it cannot be"):
            verb(node, fleet.users["admin"])
    with pytest.raises(nodes.NodeActionRefused, match="h100-3 is ready, not retired"):
        nodes.return_to_service(fleet.nodes[3], fleet.users["admin"])


def test_return_to_service_makes_it_down_until_its_agent_registers_and_clears_retired_at(fleet: Fleet) -> None:
    node = nodes.retire(fleet.nodes[2], fleet.users["admin"])

    back = nodes.return_to_service(node, fleet.users["admin"])

    node.refresh_from_db()
    assert back.state == node.state == NodeState.DOWN and node.retired_at is None
    assert node.unschedulable  # it comes back cordoned: an operator uncordons it
    event = Event.objects.get(kind=EventKind.NODE_STATE, node=node, reason="ReturnedToService")
    assert event.actor == "user:root"
    assert "retired → down, returned to service by root" in event.message
    assert "comes back cordoned" in event.message
    assert Node.objects.get(pk=node.pk).state == NodeState.DOWN


def test_retired_node_is_out_of_the_engines_snapshot(fleet: Fleet) -> None:
    nodes.retire(fleet.nodes[3], fleet.users["admin"])

    context = read_snapshot(timezone.now(), epoch=1)

    names = {n.name for n in context.snapshot.nodes}
    assert "h100-3" not in names and names == {"h100-0", "h100-1", "h100-2", "a100-0", "a100-1"}
    assert "h100-3" not in context.node_ids


def test_retired_node_is_out_of_the_fragmentation_figures_and_the_capability_check(fleet: Fleet) -> None:
    before = fleet_figures.fragmentation_figures()
    nodes.retire(fleet.nodes[3], fleet.users["admin"])
    nodes.retire(fleet.nodes[4], fleet.users["admin"])
    nodes.retire(fleet.nodes[5], fleet.users["admin"])  # the whole a100 pool

    after = fleet_figures.fragmentation_figures()

    assert before.total_gpus == 48 and after.total_gpus == 24
    assert [p.pool for p in after.pools] == ["h100"]
    assert after.pools[0].nodes == 3 and after.free_gpus == 24
    # A job asking for A100s can never run on this fleet any more (submission says so).
    shapes, _ = fleet_capability.fleet()
    assert sum(s.count for s in shapes if s.gpu_type.name == "A100-40GB") == 0


def test_retired_node_is_out_of_the_metrics_gauges(fleet: Fleet) -> None:
    nodes.retire(fleet.nodes[4], fleet.users["admin"])
    nodes.retire(fleet.nodes[5], fleet.users["admin"])
    nodes.retire(fleet.nodes[3], fleet.users["admin"])

    response = client_for(fleet, "admin").get("/metrics")
    assert response.status_code == 200
    series: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            series.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value

    capacity = {dict(k)["gpu_type"]: v for k, v in series["quartermaster_gpus_capacity"].items()}
    assert capacity == {"H100-80GB": 24}
    states = {dict(k)["pool"] + "/" + dict(k)["state"]: v for k, v in series["quartermaster_nodes"].items()}
    assert not any(k.startswith("a100/") for k in states)  # a pool of retired nodes only is gone
    assert not any(k.endswith("/retired") for k in states)
    assert states["h100/ready"] == 3
    assert sum(series["quartermaster_node_gpus"].values()) == 24


def test_retire_runs_after_a_concurrent_commit_and_a_later_bind_onto_it_is_refused(fleet: Fleet) -> None:
    """The bind of a cycle whose snapshot still had the node ready is dropped (the node is not
    ready any more), so a retired node never gets work behind the operator's back."""
    node = nodes.retire(fleet.nodes[1], fleet.users["admin"])
    job = f.make_job(fleet.ml, fleet.research, name="late", gpus=1)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        bound, stale = transitions.bind_jobs(
            [transitions.BindRequest(job_id=job.pk, gpus=[transitions.GpuSet(node_id=node.pk, gpu_indices=[0])],
                                     borrowed=False)],
            lease=lease, at=timezone.now(), actor="test", node_names={node.pk: node.name})
    assert (bound, stale) == (0, 1)
    job.refresh_from_db()
    assert job.state == JobState.PENDING
