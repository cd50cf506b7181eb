"""A cordon or drain says what it did and which jobs it leaves running on the node, until when
by their runtime limits (a drained node is cordoned once they have ended): the API's answer
(`changed`, `detail`, `running_jobs`), the node.state event, `qm nodes drain` and the admin's
list action. Before, `qm nodes drain` printed "sim-000 is draining." whatever ran there (a
16-GPU gang spanning two nodes with 8 minutes left), and a repeated drain said the same."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, Job, Node
from controlplane.services import reconcile, transitions
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db(transaction=True)
J = "/api/v1"


def _bind(job: Job, *where: tuple[Node, list[int]]) -> None:
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=n.pk, gpu_indices=ix) for n, ix in where],
                             lease=lease, borrowed=False, at=timezone.now(), actor="test")


def _gang_and_single(fleet) -> tuple[Job, Job]:  # noqa: ANN001
    one, two = fleet.nodes[1], fleet.nodes[2]
    gang = f.make_job(fleet.ml, fleet.research, name="pretrain", gpus=16, runtime_limit_s=2 * 3600)
    _bind(gang, (one, list(range(8))), (two, list(range(8))))
    small = f.make_job(fleet.vision, fleet.research, name="notebook", gpus=2, runtime_limit_s=1800)
    _bind(small, (fleet.nodes[3], [0, 1]))
    return gang, small


def test_drain_names_the_jobs_it_leaves_running_and_until_when(fleet, admin) -> None:
    gang, _ = _gang_and_single(fleet)
    node = fleet.nodes[1]

    r = admin.post(f"{J}/nodes/{node.pk}/drain/")

    assert r.status_code == 200
    body = r.json()
    assert body["state"] == NodeState.DRAINING and body["changed"] is True
    ends = Job.objects.get(pk=gang.pk).allocations.get().created_at + timedelta(hours=2)
    # a time of another day says its date (nodes._clock): run after 22:00 UTC, the 2-hour limit
    # ends tomorrow, and the test failed on its own clock
    ends_utc = ends.astimezone(UTC)
    at = f"{ends_utc:%H:%M} UTC" if ends_utc.date() == timezone.now().astimezone(UTC).date() \
        else f"{ends_utc:%Y-%m-%d %H:%M} UTC"
    assert body["detail"] == (
        f"h100-1: ready → draining: no new work goes there; 1 job runs there until it ends (by {at} at the latest, "
        f"by its runtime limit): job {gang.pk} pretrain (8 GPUs here, also on h100-2; its runtime limit ends {at}); "
        "it becomes cordoned once the last has ended.")
    assert body["running_jobs"] == [{"id": gang.pk, "name": "pretrain", "team": "ml", "gpus": 8,
                                     "other_nodes": ["h100-2"], "stopping": False,
                                     "holds_until": body["running_jobs"][0]["holds_until"]}]
    assert body["running_jobs"][0]["holds_until"].startswith(f"{ends.astimezone(UTC):%Y-%m-%dT%H:%M}")
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE)
    assert event.data["running_jobs"] == [gang.pk]
    assert event.message.startswith("h100-1: ready → draining (drain by root); 1 job runs there until it ends")
    assert f"job {gang.pk} pretrain (8 GPUs here, also on h100-2" in event.message

    again = admin.post(f"{J}/nodes/{node.pk}/drain/").json()

    assert again["changed"] is False and again["detail"].startswith(
        "h100-1 is draining already: nothing changed; 1 job runs there until it ends")
    assert Event.objects.filter(node=node, kind=EventKind.NODE_STATE).count() == 1


def test_cordon_says_what_keeps_running_and_an_empty_drain_says_when_it_is_cordoned(fleet, admin) -> None:
    _, small = _gang_and_single(fleet)

    cordoned = admin.post(f"{J}/nodes/{fleet.nodes[3].pk}/cordon/").json()
    empty = admin.post(f"{J}/nodes/{fleet.nodes[4].pk}/drain/").json()
    back = admin.post(f"{J}/nodes/{fleet.nodes[3].pk}/uncordon/").json()

    assert cordoned["detail"].startswith(
        f"h100-3: ready → cordoned: no new work goes there; 1 job keeps running there: job {small.pk} notebook "
        "(2 GPUs here; its runtime limit ends ")
    assert [j["id"] for j in cordoned["running_jobs"]] == [small.pk]
    assert empty["detail"] == ("a100-0: ready → draining: no new work goes there; nothing runs there, so it becomes "
                               "cordoned at the next reconcile pass.")
    assert empty["running_jobs"] == []
    assert back["detail"] == "h100-3: cordoned → ready: it takes work again." and back["running_jobs"] == []


def test_an_away_node_says_how_it_returns(fleet, admin) -> None:
    node = fleet.nodes[2]
    Node.objects.filter(pk=node.pk).update(state=NodeState.DOWN)

    first = admin.post(f"{J}/nodes/{node.pk}/cordon/").json()
    second = admin.post(f"{J}/nodes/{node.pk}/cordon/").json()

    assert first["changed"] is True
    assert first["detail"] == "h100-2 is down; cordon recorded: it returns cordoned when its agent registers again."
    assert second["changed"] is False
    assert second["detail"] == "h100-2 is down, nothing changed: it returns cordoned when its agent registers again."
