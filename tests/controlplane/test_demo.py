"""The demo's moving parts: the seed is idempotent and the job stream submits real jobs."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from controlplane.demo_fleet import seed_demo_fleet
from controlplane.demo_stream import DemoJobStream
from controlplane.models import Job, Membership, Node, PriceRate, PriorityClass, Quota, Team

pytestmark = pytest.mark.django_db


def test_demo_seed_builds_the_documented_fleet_and_is_idempotent() -> None:
    seed_demo_fleet()
    seed_demo_fleet()
    assert Node.objects.filter(pool="h100").count() == 12
    assert Node.objects.filter(pool="a100").count() == 4
    assert set(Node.objects.filter(pool="h100").values_list("leaf_switch", flat=True)) == {"leaf-h1", "leaf-h2", "leaf-h3"}
    assert Team.objects.filter(cohort__name="shared-fleet").count() == 3
    assert PriorityClass.objects.count() == 4
    assert Quota.objects.count() == 6 and PriceRate.objects.count() == 6
    teams = dict(Membership.objects.values_list("user__username", "team__name"))
    assert teams["alice"] != teams["bob"] and teams["finn"] is None


def test_demo_job_stream_submits_pending_jobs_with_simulated_run_parameters() -> None:
    seed_demo_fleet()
    stream = DemoJobStream(seed=3, max_pending=5)
    submitted = [stream.step() for _ in range(8)]
    jobs = [j for j in submitted if j is not None]
    assert len(jobs) == 5, "the stream stops at max_pending"
    assert Job.objects.filter(state=JobState.PENDING).count() == 5
    for job in jobs:
        assert int(job.env["QM_SIM_DURATION_S"]) > 0
        assert job.runtime_limit_s >= int(job.env["QM_SIM_DURATION_S"])


def test_demo_nodes_wait_down_for_their_agents_and_register_for_the_first_time(settings) -> None:
    """Seeded ready, every demo node was marked suspect ("its agent never registered") seconds
    before its agent registered ("ReRegistered … was suspect"): two false events per node at
    every demo start. Seeded down, the reconciler leaves them alone and the first registration
    says so."""
    from django.utils import timezone

    from controlplane.choices import EventKind, NodeState
    from controlplane.models import Event
    from controlplane.services import agent_protocol, reconcile
    from tests.controlplane.loop_fixtures import BOOTSTRAP, inventory

    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}
    seed_demo_fleet(awaiting_agents=True)
    assert set(Node.objects.values_list("state", flat=True)) == {NodeState.DOWN}

    reconcile.reconcile_nodes()
    assert not Event.objects.filter(kind=EventKind.NODE_STATE).exists()

    node = Node.objects.get(name="h100-01")
    agent_protocol.register("h100-01", inventory(pool=node.pool, gpu_type=node.gpu_type.name, gpu_count=node.gpu_count,
                                                  cpus=node.cpus, memory_gb=node.memory_gb,
                                                  leaf_switch=node.leaf_switch, spine=node.spine),
                            token=BOOTSTRAP, running=[], now=timezone.now())
    node.refresh_from_db()
    assert node.state == NodeState.READY
    registered = Event.objects.get(kind=EventKind.NODE_REGISTERED, node=node)
    assert registered.reason == "Registered" and "its agent's first registration" in registered.message
    state = Event.objects.get(kind=EventKind.NODE_STATE, node=node)
    assert state.message == "h100-01: down → ready: its agent registered for the first time"
