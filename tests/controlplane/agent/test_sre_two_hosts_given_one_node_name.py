"""Two hosts given one node name: the second one's registration is refused while the first
one's agent serves the node (agent_protocol._refuse_another_host).

Until 8 Dec the second registered (the bootstrap secret may register any node), the first's
token was refused at its next heartbeat, it stopped its jobs and registered again with the
bootstrap secret, refusing the second's token in turn: the two took the node from each other
at every heartbeat, each registration fencing what the other had started, for as long as both
ran. The real API on PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, Event, Job, Node
from tests.controlplane.agent.test_sre_restarted_agent_takes_over_unstarted_work import (
    REGISTER,
    heartbeat,
    register,
    started,
)
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, agent_client, bind, make_job

FIRST, SECOND = "gpu-rack-a/1f0e2d", "gpu-rack-b/9c8b7a"


def _running_job(fleet: LoopFleet) -> tuple[str, Allocation]:
    token = register("gpu-07", host=FIRST)["token"]
    ran = bind(make_job(fleet, name="runs-on-the-first"), {Node.objects.get(name="gpu-07"): [0]})
    started(token, "gpu-07", ran.generation)
    return token, ran


def _registered_from(host: str) -> Any:
    body = {"name": "gpu-07", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96, "memory_gb": 1024,
            "leaf_switch": "leaf-1", "spine": "spine-1", "running": [], "launched": [], "host": host}
    return agent_client(BOOTSTRAP).post(REGISTER, body, format="json")


def test_sre_a_second_host_with_the_node_name_is_refused_while_the_first_serves_it(fleet: LoopFleet) -> None:
    token, ran = _running_job(fleet)
    registrations = Event.objects.filter(kind=EventKind.NODE_REGISTERED, node__name="gpu-07").count()

    response = _registered_from(SECOND)

    assert response.status_code == 409, response.content
    assert response.json()["code"] == "node_served_elsewhere"
    detail = response.json()["detail"]
    assert f"served by the agent on host '{FIRST}'" in detail and f"on host '{SECOND}'" in detail
    assert "--name" in detail
    assert 1 <= int(response["Retry-After"]) <= 21
    # Nothing changed: the first agent's job runs on, its token still opens the node.
    assert Allocation.objects.get(pk=ran.pk).state == AllocationState.ACTIVE
    assert Job.objects.get(pk=ran.job_id).state == JobState.RUNNING
    assert Event.objects.filter(kind=EventKind.NODE_REGISTERED, node__name="gpu-07").count() == registrations
    assert heartbeat(token, "gpu-07", running=[ran.generation])["reregister"] is False


def test_sre_the_same_host_registering_again_is_not_refused(fleet: LoopFleet) -> None:
    """Its state directory lost (no token): a restart, as before; what it ran is fenced."""
    _, ran = _running_job(fleet)

    response = _registered_from(FIRST)

    assert response.status_code in (200, 201), response.content
    assert Allocation.objects.get(pk=ran.pk).state == AllocationState.FENCED


def test_sre_another_host_takes_the_node_once_the_lease_has_ended(fleet: LoopFleet) -> None:
    """The first host is gone (its lease ran out, reconcile not yet run): the node's hardware
    moved to another host, which registers it."""
    _running_job(fleet)
    Node.objects.filter(name="gpu-07").update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))

    response = _registered_from(SECOND)

    assert response.status_code in (200, 201), response.content
    last = Event.objects.filter(kind=EventKind.NODE_REGISTERED, node__name="gpu-07").latest("id")
    assert last.data["host"] == SECOND


def test_sre_a_registrations_host_and_launched_are_checked_field_by_field(fleet: LoopFleet) -> None:
    for field, value in (("host", "rack\x00a"), ("host", "x" * 201), ("launched", [0]), ("launched", "7"),
                         ("launched", [2**63])):
        body = {"name": "gpu-08", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96,
                "memory_gb": 1024, "leaf_switch": "leaf-1", "spine": "spine-1", field: value}
        response = agent_client(BOOTSTRAP).post(REGISTER, body, format="json")
        assert response.status_code == 400, (field, value, response.content)
        assert any(name.split(".")[0] == field for name in response.json()["errors"]), (field, response.json())
    assert not Node.objects.filter(name="gpu-08").exists()
