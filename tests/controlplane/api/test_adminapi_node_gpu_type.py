"""A node's GPU type cannot change while live allocations hold its GPUs, through the API or the
admin UI: the same rule (services/nodes.py) as a gpu_count below the GPUs held.

Found by QA as a platform engineer: `PATCH nodes/{id}/ {"gpu_type": "H100-80GB"}` on an A100 node
whose 8 GPUs an A100 job held answered 200. From then on the job, which asked for A100s, ran on
what the fleet called H100s: its GPUs counted against the team's H100 quota (held_gpus) and were
priced as H100s, and the A100 quota showed it holding nothing. The admin's node page took the
same change."""

from __future__ import annotations

import importlib

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node, Quota
from controlplane.services import quotas
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import BOOTSTRAP, register_node

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _hold(fleet, node: Node, indices: list[int], name: str = "a100-train") -> Job:
    now = timezone.now()
    job = f.make_job(fleet.ml, name=name, gpus=len(indices), gpu_types=[node.gpu_type.name],
                     state=JobState.RUNNING, started_at=now)
    allocation = Allocation.objects.create(job=job, generation=1, epoch=1, created_at=now, started_at=now)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i) for i in indices)
    return job


def test_a_node_whose_gpus_are_held_keeps_its_gpu_type_and_the_refusal_names_the_jobs(fleet, admin) -> None:
    node = fleet.nodes[4]  # a100-0
    job = _hold(fleet, node, list(range(8)))
    f.make_quota(fleet.ml, fleet.a100, 8)

    r = admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_type": "H100-80GB"}, format="json")

    assert r.status_code == 400, r.json()
    body = r.json()
    assert list(body["errors"]) == ["gpu_type"], body
    said = body["errors"]["gpu_type"][0]
    assert "A100-40GB" in said and "H100-80GB" in said, said
    assert f"job {job.pk} a100-train (8 GPUs)" in said, said
    assert "drain" in said and f"nodes/{node.pk}/drain/" in said, said
    stored = Node.objects.get(pk=node.pk)
    assert stored.gpu_type == fleet.a100
    assert not Event.objects.filter(reason="NodeChanged").exists()
    # the job's GPUs still count as A100s, against the A100 quota
    assert quotas.held_gpus(Quota.objects.get(team=fleet.ml, gpu_type=fleet.a100)) == 8
    assert quotas.held_gpus(Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)) == 0


def test_a_put_with_the_same_type_passes_and_a_free_node_may_change_type(fleet, admin) -> None:
    node = fleet.nodes[4]
    _hold(fleet, node, [0, 1])

    same = admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_type": "A100-40GB", "pool": "a100-new"}, format="json")
    assert same.status_code == 200, same.json()

    free = fleet.nodes[5]
    r = admin.patch(f"{J}/nodes/{free.pk}/", {"gpu_type": "H100-80GB"}, format="json")
    assert r.status_code == 200, r.json()
    assert Node.objects.get(pk=free.pk).gpu_type == fleet.h100


def test_a_finished_job_no_longer_holds_the_type(fleet, admin) -> None:
    node = fleet.nodes[4]
    job = _hold(fleet, node, [0, 1])
    AllocationGpu.objects.filter(allocation__job=job).update(live=False)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)

    r = admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_type": "H100-80GB"}, format="json")

    assert r.status_code == 200, r.json()


def test_both_fields_refused_together_name_each(fleet, admin) -> None:
    node = fleet.nodes[4]
    _hold(fleet, node, [6, 7])

    r = admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_type": "H100-80GB", "gpu_count": 4}, format="json")

    assert r.status_code == 400
    assert sorted(r.json()["errors"]) == ["gpu_count", "gpu_type"], r.json()
    assert Node.objects.get(pk=node.pk).gpu_count == 8


def test_the_admin_ui_refuses_the_same_change_on_the_field(fleet) -> None:
    node = fleet.nodes[4]
    job = _hold(fleet, node, list(range(8)))
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")
    page = browser.get(f"/admin/controlplane/node/{node.pk}/change/")
    data = {k: v for k, v in f.admin_change_form(page).items() if v is not False}

    r = browser.post(f"/admin/controlplane/node/{node.pk}/change/", {**data, "gpu_type": fleet.h100.pk})

    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert list(errors) == ["gpu_type"], errors
    assert f"job {job.pk} a100-train (8 GPUs)" in errors["gpu_type"][0]
    assert Node.objects.get(pk=node.pk).gpu_type == fleet.a100


@pytest.fixture
def agents_may_register(settings) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


def test_a_free_node_keeps_the_gpu_type_its_agent_declared(fleet, admin, agents_may_register) -> None:
    """Found by a fleet admin's review (6 Dec): `PATCH nodes/12/ {"gpu_type": "A100-40GB"}` on an
    idle H100 node whose agent had registered it as H100-80GB answered 200: jobs asking for A100s
    would be bound to its H100s (priced and counted as A100s) until the agent's next registration
    set H100-80GB again, undoing the edit. The agent names its GPUs' type (NVML, --gpu-type)."""
    node, _ = register_node("h100-9", gpu_type="H100-80GB")

    r = admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_type": "A100-40GB"}, format="json")

    assert r.status_code == 400, r.json()
    said = r.json()["errors"]["gpu_type"][0]
    assert said.startswith("h100-9's agent declared its GPUs H100-80GB when it registered (") and \
        "start its agent with --gpu-type A100-40GB" in said, said
    assert Node.objects.get(pk=node.pk).gpu_type == fleet.h100
    # an agent that names no type leaves it to the admin (at its last registration)
    register_node("h100-9", gpu_type=None)
    assert admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_type": "A100-40GB"}, format="json").status_code == 200


def test_the_guard_reads_what_the_node_keeps_not_the_trail(fleet, admin, agents_may_register) -> None:
    """7 Dec: the declared type and count were read from the node's last registration event, so
    the guard held only while that event's data said them. Now the registration keeps them on
    the node (agent_gpu_type, agent_gpu_count, agent_registered_at)."""
    node, _ = register_node("h100-9", gpu_type="H100-80GB", gpu_count=8)
    stored = Node.objects.get(pk=node.pk)
    assert (stored.agent_gpu_type, stored.agent_gpu_count) == ("H100-80GB", 8)
    Event.objects.filter(node=node, kind=EventKind.NODE_REGISTERED).delete()

    typed = admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_type": "A100-40GB"}, format="json")
    counted = admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_count": 16}, format="json")

    assert typed.status_code == 400 and "agent declared its GPUs H100-80GB" in typed.json()["errors"]["gpu_type"][0]
    assert counted.status_code == 400 and "agent declared 8 GPUs" in counted.json()["errors"]["gpu_count"][0]
    assert Node.objects.get(pk=node.pk).gpu_type == fleet.h100


def _fill_as_migration_0045() -> None:
    from django.apps import apps

    importlib.import_module("controlplane.migrations.0045_node_agent_declared").fill_from_registrations(apps, None)


def _as_before_6_dec(node: Node) -> None:
    """The node's registration events as they were written before 6 Dec: no declared type."""
    for event in Event.objects.filter(node=node, kind=EventKind.NODE_REGISTERED):
        event.data.pop("gpu_type_declared", None)
        Event.objects.filter(pk=event.pk).update(data=event.data)
    Node.objects.filter(pk=node.pk).update(agent_gpu_type="", agent_gpu_count=None, agent_registered_at=None)


def test_migration_0045_keeps_what_each_registration_said_of_the_agents_declaration(
        fleet, admin, agents_may_register) -> None:
    since, _ = register_node("h100-9", gpu_type="H100-80GB", gpu_count=8)  # since 6 Dec: the type in its data
    Node.objects.filter(pk=since.pk).update(agent_gpu_type="", agent_gpu_count=None, agent_registered_at=None)
    created, _ = register_node("h100-8", gpu_type="H100-80GB", gpu_count=4)  # an agent made it, before 6 Dec
    _as_before_6_dec(created)
    described = fleet.nodes[4]  # a100-0, described by an admin, then registered by its agent before 6 Dec
    register_node(described.name, gpu_type="A100-40GB", pool="a100")
    _as_before_6_dec(described)
    never = fleet.nodes[5]  # a100-1: no agent has registered it

    _fill_as_migration_0045()

    def kept(node: Node) -> tuple[str, int | None, bool]:
        n = Node.objects.get(pk=node.pk)
        return n.agent_gpu_type, n.agent_gpu_count, n.agent_registered_at is not None

    assert kept(since) == ("H100-80GB", 8, True)
    assert kept(created) == ("H100-80GB", 4, True)  # its creation had to name a type, and its line says it
    assert kept(described) == ("", 8, True)  # its agent may have named none: no type on record
    assert kept(never) == ("", None, False)
    assert Node.objects.get(pk=since.pk).agent_registered_at == Event.objects.filter(
        node=since, kind=EventKind.NODE_REGISTERED).latest("id").created_at
    refused = admin.patch(f"{J}/nodes/{created.pk}/", {"gpu_type": "A100-40GB"}, format="json")
    assert refused.status_code == 400, refused.json()
    assert "h100-8's agent declared its GPUs H100-80GB" in refused.json()["errors"]["gpu_type"][0]
    # no type on record: the admin's to change until its agent registers naming one
    assert admin.patch(f"{J}/nodes/{described.pk}/", {"gpu_type": "H100-80GB"}, format="json").status_code == 200
    assert admin.patch(f"{J}/nodes/{described.pk}/", {"gpu_count": 16}, format="json").status_code == 400
