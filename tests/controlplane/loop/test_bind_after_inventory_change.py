"""A bind planned before the node's GPUs changed (a PATCH of nodes/{id}/, the admin's node page,
an agent registering with fewer GPUs or another type) is left out, as a bind onto a node cordoned
since the read is.

`gpu_count` cannot drop below a GPU a live allocation holds and `gpu_type` cannot change while
one is held (services/nodes.py): the change checks the live allocations. Until 5 Dec the
cycle's commit did not look at the node's GPUs again: a plan read with 8 GPUs of H100 bound a job
onto GPUs 4–7 of a node shrunk to 4 meanwhile (GPUs that are not there), or onto a node whose
GPUs had become another type than the job asked for. Now the commit binds only onto nodes whose
GPU type and count are still those the snapshot read (transitions.bind_jobs), and the changes
take the scheduler lease row first, as a cordon does, so a change and a commit are never
interleaved: the change either commits first (the bind is then stale) or sees the bind."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, GpuType, Job, Node
from controlplane.services import agent_protocol, reconcile
from tests.controlplane import factories as f
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    bind,
    commit_planned,
    inventory,
    make_job,
    plan_binding,
    register_node,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _admin() -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(f.make_user('inventory-admin', superuser=True))}")
    return client


def _half_taken(fleet: LoopFleet, name: str) -> tuple[Node, Job]:
    """A node whose GPUs 0–3 run a job, and a 4-GPU job the next cycle plans onto GPUs 4–7."""
    node, _ = register_node(name)
    bind(make_job(fleet, name="first", gpus=4), {node: [0, 1, 2, 3]})
    return node, make_job(fleet, name="second", gpus=4)


def test_a_bind_planned_before_the_node_shrank_is_left_out(fleet: LoopFleet) -> None:
    node, second = _half_taken(fleet, "inventory-shrink-0")
    plan, context, lease = plan_binding(second)
    assert plan.binds[0].placements[0].gpu_indices == (4, 5, 6, 7)

    r = _admin().patch(f"/api/v1/nodes/{node.pk}/", {"gpu_count": 4}, format="json")
    assert r.status_code == 200, r.json()  # nothing lives on GPUs 4-7 yet
    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (0, 1)
    assert Job.objects.get(pk=second.pk).state == JobState.PENDING
    assert not AllocationGpu.objects.filter(node=node, live=True, gpu_index__gte=4).exists()


def test_a_bind_planned_before_the_nodes_gpu_type_changed_is_left_out(fleet: LoopFleet) -> None:
    node, token = register_node("inventory-type-0")
    job = make_job(fleet, name="wants-h100", gpus=4)
    plan, context, lease = plan_binding(job)
    GpuType.objects.create(name="A100-80GB", memory_gb=80)

    # Its agent restarted with --gpu-type A100-80GB: since 6 Dec the one way a registered node's
    # type changes (an admin's PATCH to another type than its agent declared is refused).
    agent_protocol.register(node.name, inventory(gpu_type="A100-80GB"), token=token, running=[], now=timezone.now())
    assert Node.objects.get(pk=node.pk).gpu_type.name == "A100-80GB"
    result = commit_planned(plan, context, lease)

    assert (result.binds, result.stale) == (0, 1)
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


def test_a_shrink_waits_for_a_commit_in_progress_and_then_sees_its_bind(fleet: LoopFleet) -> None:
    node, second = _half_taken(fleet, "inventory-shrink-1")
    plan, context, lease = plan_binding(second)
    admin = _admin()
    with transaction.atomic():
        reconcile.lock_scheduler_lease()  # the cycle's commit holds the lease row ...
        shrinking, shrunk = in_thread(
            lambda: admin.patch(f"/api/v1/nodes/{node.pk}/", {"gpu_count": 4}, format="json"))
        assert blocked_on_a_lock(), "the change should wait for the commit's lease row"
        result = commit_planned(plan, context, lease)  # ... and binds GPUs 4-7 in it
        assert result.binds == 1
    shrinking.join(30)

    assert "error" not in shrunk, shrunk.get("error")
    r = shrunk["result"]
    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["gpu_count"], r.json()
    assert Node.objects.get(pk=node.pk).gpu_count == 8


def test_an_agent_registering_fewer_gpus_waits_for_a_commit_in_progress_too(fleet: LoopFleet) -> None:
    """Its agent still runs the first job (GPUs 0-3): nothing of its to settle, yet its new
    count is judged against the commit's bind."""
    node, second = _half_taken(fleet, "inventory-shrink-2")
    running = list(Allocation.objects.filter(gpus__node=node).values_list("generation", flat=True).distinct())
    plan, context, lease = plan_binding(second)
    with transaction.atomic():
        reconcile.lock_scheduler_lease()
        registering, registered = in_thread(lambda: agent_protocol.register(
            node.name, inventory(gpu_count=4), token=BOOTSTRAP, running=running, now=timezone.now()))
        assert blocked_on_a_lock(), "the registration should wait for the commit's lease row"
        assert commit_planned(plan, context, lease).binds == 1
    registering.join(30)

    assert "error" in registered and "gpu_count" in str(registered["error"]), registered
    assert Node.objects.get(pk=node.pk).gpu_count == 8


def test_the_admins_node_page_waits_for_a_commit_in_progress_too(fleet: LoopFleet) -> None:
    from django.test import Client

    node, second = _half_taken(fleet, "inventory-shrink-3")
    plan, context, lease = plan_binding(second)
    f.make_user("inventory-boss", superuser=True, password="inventory-boss")
    browser = Client()
    assert browser.login(username="inventory-boss", password="inventory-boss")
    path = f"/admin/controlplane/node/{node.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    form["gpu_count"] = 4
    with transaction.atomic():
        reconcile.lock_scheduler_lease()
        saving, saved = in_thread(lambda: browser.post(path, form))
        assert blocked_on_a_lock(), "the admin's save should wait for the commit's lease row"
        assert commit_planned(plan, context, lease).binds == 1
    saving.join(30)

    assert "error" not in saved, saved.get("error")
    r = saved["result"]
    assert r.status_code == 200, "the form was accepted"
    assert list(r.context["adminform"].form.errors) == ["gpu_count"]
    assert Node.objects.get(pk=node.pk).gpu_count == 8
