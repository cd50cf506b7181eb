"""A node's GPU count cannot drop below the GPUs its live allocations hold, through the API or
the admin UI (the agent protocol already refused it).

Found in the demo: `PATCH nodes/16/ {"gpu_count": 2}` on a node whose jobs held GPUs 2 and 3
answered 200, and from then on every scheduling cycle failed ("running job '70' holds GPU
indices [2, 3] on node 'a100-04', which has GPUs 0..1"): one admin typo stopped scheduling for
the whole fleet until it was undone."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Node
from controlplane.services.cycle import run_cycle
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import BOOTSTRAP, register_node

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.fixture
def agents_may_register(settings) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


def _hold(fleet, node: Node, indices: list[int]) -> None:
    now = timezone.now()
    job = f.make_job(fleet.ml, gpus=len(indices), state=JobState.RUNNING, started_at=now)
    allocation = Allocation.objects.create(job=job, generation=1, epoch=1, created_at=now, started_at=now)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i) for i in indices)


def test_shrinking_a_node_below_its_held_gpus_is_refused_and_scheduling_goes_on(fleet, admin) -> None:
    node = fleet.nodes[1]
    _hold(fleet, node, [2, 3])

    r = admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_count": 2}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["gpu_count"] and "held by live allocations" in r.json()["detail"]
    assert Node.objects.get(pk=node.pk).gpu_count == 8
    run_cycle("test")  # the cycle still reads a consistent fleet


def test_a_node_may_shrink_to_just_above_its_held_gpus_or_when_nothing_is_held(fleet, admin) -> None:
    node = fleet.nodes[1]
    _hold(fleet, node, [2, 3])

    assert admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_count": 4}, format="json").status_code == 200
    assert admin.patch(f"{J}/nodes/{fleet.nodes[2].pk}/", {"gpu_count": 1}, format="json").status_code == 200


def test_the_admin_ui_refuses_the_same_shrink(fleet) -> None:
    node = fleet.nodes[1]
    _hold(fleet, node, [5])
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")
    page = browser.get(f"/admin/controlplane/node/{node.pk}/change/")
    data = {k: v for k, v in f.admin_change_form(page).items() if v is not False}

    r = browser.post(f"/admin/controlplane/node/{node.pk}/change/", {**data, "gpu_count": 4})

    assert r.status_code == 200 and "held by live allocations" in r.content.decode()
    assert Node.objects.get(pk=node.pk).gpu_count == 8
    r = browser.post(f"/admin/controlplane/node/{node.pk}/change/", {**data, "gpu_count": 6})
    assert r.status_code == 302 and Node.objects.get(pk=node.pk).gpu_count == 6


def test_a_node_does_not_get_more_gpus_than_its_agent_declared(fleet, admin, agents_may_register) -> None:
    """Found in the demo: `PATCH nodes/11/ {"gpu_count": 16}` on a node whose agent registered 8
    answered 200, and the next cycle bound an 8-GPU job to GPUs 8-15, which the node does not
    have (a real agent would start it on no device). The agent declares a node's GPUs at each
    registration; an admin may take some out of service (fewer), never add ones it lacks."""
    node, _ = register_node("h100-9", gpu_count=8)

    r = admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_count": 16}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["gpu_count"]
    said = r.json()["errors"]["gpu_count"][0]
    assert "h100-9's agent declared 8 GPUs when it registered" in said and "GPUs 8–15" in said, said
    assert Node.objects.get(pk=node.pk).gpu_count == 8
    # fewer is an admin's to choose (a GPU out of service), and back up to what was declared
    assert admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_count": 6}, format="json").status_code == 200
    assert admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_count": 8}, format="json").status_code == 200
    # a node no agent has registered yet is the admin's to describe
    unregistered = fleet.nodes[2]
    assert admin.patch(f"{J}/nodes/{unregistered.pk}/", {"gpu_count": 16}, format="json").status_code == 200


def test_the_admin_ui_refuses_gpus_the_agent_did_not_declare(fleet, agents_may_register) -> None:
    node, _ = register_node("h100-9", gpu_count=8)
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")
    page = browser.get(f"/admin/controlplane/node/{node.pk}/change/")
    data = {k: v for k, v in f.admin_change_form(page).items() if v is not False}

    r = browser.post(f"/admin/controlplane/node/{node.pk}/change/", {**data, "gpu_count": 9})

    assert r.status_code == 200 and "agent declared 8 GPUs" in r.content.decode()
    assert Node.objects.get(pk=node.pk).gpu_count == 8
