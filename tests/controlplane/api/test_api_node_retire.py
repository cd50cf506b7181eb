"""POST nodes/{id}/retire/ and nodes/{id}/return/ (admins), and a retired node in the list.

A node that ran jobs could not leave the fleet (its DELETE is refused: history names it). Now
an admin retires it: 409 while jobs hold its GPUs (how many, and to drain it first), else 200
with state `retired` and `retired_at`. `return` brings it back (down until its agent
registers). A PATCH of `state` is refused naming the actions. The list keeps retired nodes and
filters them with ?state=.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, Node
from controlplane.services import reconcile, transitions
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _run_on(fleet, node: Node, gpus: list[int]) -> None:  # noqa: ANN001
    job = f.make_job(fleet.ml, fleet.research, name="busy", gpus=len(gpus))
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        assert transitions.bind_job(job.pk, [transitions.GpuSet(node_id=node.pk, gpu_indices=gpus)], lease=lease,
                                    borrowed=False, at=timezone.now(), actor="test") is not None


def test_retire_answers_the_retired_node_and_return_brings_it_back_down(fleet, admin) -> None:
    node = fleet.nodes[2]

    r = admin.post(f"{J}/nodes/{node.pk}/retire/")

    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["state"] == "retired" and body["retired_at"] is not None and body["unschedulable"] is True
    assert Event.objects.filter(kind=EventKind.NODE_STATE, node=node, reason="Retired", actor="user:root").exists()

    r = admin.post(f"{J}/nodes/{node.pk}/return/", {}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["state"] == "down" and r.json()["retired_at"] is None
    assert Node.objects.get(pk=node.pk).state == NodeState.DOWN


def test_retire_is_409_while_jobs_run_there_saying_how_many_and_to_drain_first(fleet, admin) -> None:
    node = fleet.nodes[1]
    _run_on(fleet, node, [0, 1, 2, 3])

    r = admin.post(f"{J}/nodes/{node.pk}/retire/")

    assert r.status_code == 409
    detail = r.json()["detail"]
    assert detail.startswith("node h100-1 still runs 1 job on 4 of its 8 GPUs (job ")
    assert "drain it first (`qm nodes drain h100-1`" in detail
    assert Node.objects.get(pk=node.pk).state == NodeState.READY


def test_retire_and_return_are_for_admins_only(fleet, alice, clients) -> None:
    node = fleet.nodes[2]
    assert alice.post(f"{J}/nodes/{node.pk}/retire/").status_code == 403
    assert clients["finance"].post(f"{J}/nodes/{node.pk}/retire/").status_code == 403
    assert alice.post(f"{J}/nodes/{node.pk}/return/").status_code == 403
    assert Node.objects.get(pk=node.pk).state == NodeState.READY


def test_return_of_a_node_that_is_not_retired_is_409(fleet, admin) -> None:
    r = admin.post(f"{J}/nodes/{fleet.nodes[2].pk}/return/")
    assert r.status_code == 409 and "is ready, not retired" in r.json()["detail"]


def test_cordon_of_a_retired_node_is_409_saying_to_return_it_first(fleet, admin) -> None:
    node = fleet.nodes[2]
    admin.post(f"{J}/nodes/{node.pk}/retire/")
    r = admin.post(f"{J}/nodes/{node.pk}/cordon/")
    assert r.status_code == 409
    assert f"return it to service first (POST nodes/{node.pk}/return/" in r.json()["detail"]


def test_patching_state_to_retired_is_refused_naming_the_action(fleet, admin) -> None:
    node = fleet.nodes[2]

    for field, value in (("state", "retired"), ("retired_at", "2026-11-30T08:00:00Z")):
        r = admin.patch(f"{J}/nodes/{node.pk}/", {field: value}, format="json")
        assert r.status_code == 400 and list(r.json()["errors"]) == [field]
        assert "retire (POST nodes/{id}/retire/)" in r.json()["errors"][field][0]
    assert Node.objects.get(pk=node.pk).state == NodeState.READY


def test_retire_takes_no_fields(fleet, admin) -> None:
    r = admin.post(f"{J}/nodes/{fleet.nodes[2].pk}/retire/", {"reason": "old"}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["reason"]
    assert Node.objects.get(pk=fleet.nodes[2].pk).state == NodeState.READY


def test_the_list_keeps_retired_nodes_and_filters_them_by_state(fleet, admin) -> None:
    admin.post(f"{J}/nodes/{fleet.nodes[2].pk}/retire/")
    admin.post(f"{J}/nodes/{fleet.nodes[5].pk}/retire/")

    every = admin.get(f"{J}/nodes/").json()
    retired = admin.get(f"{J}/nodes/", {"state": "retired"}).json()
    ready = admin.get(f"{J}/nodes/", {"state": "ready"}).json()

    assert every["count"] == 6
    assert sorted(n["name"] for n in retired["results"]) == ["a100-1", "h100-2"]
    assert all(n["retired_at"] for n in retired["results"])
    assert len(ready["results"]) == 4 and all(n["state"] == "ready" for n in ready["results"])


def test_the_retired_filter_lists_the_retired_nodes_or_the_fleet_without_them(fleet, admin) -> None:
    admin.post(f"{J}/nodes/{fleet.nodes[2].pk}/retire/")
    admin.post(f"{J}/nodes/{fleet.nodes[5].pk}/retire/")
    admin.post(f"{J}/nodes/{fleet.nodes[1].pk}/cordon/")

    retired = admin.get(f"{J}/nodes/", {"retired": "true"}).json()
    in_fleet = admin.get(f"{J}/nodes/", {"retired": "false"}).json()
    one_of_the_retired = admin.get(f"{J}/nodes/", {"retired": "true", "limit": 1}).json()
    cordoned_in_fleet = admin.get(f"{J}/nodes/", {"retired": "false", "state": "cordoned"}).json()

    assert sorted(n["name"] for n in retired["results"]) == ["a100-1", "h100-2"] and retired["count"] == 2
    assert in_fleet["count"] == 4 and all(n["state"] != "retired" for n in in_fleet["results"])
    assert one_of_the_retired["count"] == 2 and len(one_of_the_retired["results"]) == 1  # counted on the server
    assert [n["name"] for n in cordoned_in_fleet["results"]] == ["h100-1"]
    assert admin.get(f"{J}/nodes/").json()["count"] == 6  # unset: every node, as before


def test_a_retired_filter_that_is_not_a_boolean_is_a_400_naming_it(fleet, admin) -> None:
    r = admin.get(f"{J}/nodes/", {"retired": "maybe"})

    assert r.status_code == 400
    assert "retired" in r.json()["errors"] and "'maybe' is not true or false." in r.json()["errors"]["retired"][0]
