"""A node's CPUs and memory cannot drop below what its running jobs hold on it, through the API
or the admin UI, as its GPU type and count cannot.

Found by QA: `PATCH nodes/{id}/ {"cpus": 8}` on a node where a job held 4 GPUs × 16 CPUs
answered 200; the engine then saw -56 free CPUs there, and the node read fuller than full."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Node
from controlplane.services.cycle import run_cycle
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _hold(fleet, node: Node, gpus: int, *, cpus_per_gpu: int, memory_gb_per_gpu: int) -> None:
    now = timezone.now()
    job = f.make_job(fleet.ml, name="wide", gpus=gpus, state=JobState.RUNNING, started_at=now,
                     cpus_per_gpu=cpus_per_gpu, memory_gb_per_gpu=memory_gb_per_gpu)
    allocation = Allocation.objects.create(job=job, generation=1, epoch=1, created_at=now, started_at=now)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i) for i in range(gpus))


@pytest.mark.parametrize(("field", "below", "enough", "words"), [
    ("cpus", 63, 64, "its running jobs hold 64 CPUs on it (job"),
    ("memory_gb", 511, 512, "its running jobs hold 512 GB of memory on it (job"),
])
def test_host_resources_below_what_running_jobs_hold_are_refused_on_the_field(
        fleet, admin, field: str, below: int, enough: int, words: str) -> None:
    node = fleet.nodes[1]
    _hold(fleet, node, 4, cpus_per_gpu=16, memory_gb_per_gpu=128)
    before = getattr(node, field)

    r = admin.patch(f"{J}/nodes/{node.pk}/", {field: below}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == [field] and words in r.json()["errors"][field][0]
    assert "wide (4 GPUs)" in r.json()["errors"][field][0] and "drain it first" in r.json()["errors"][field][0]
    assert getattr(Node.objects.get(pk=node.pk), field) == before
    assert admin.patch(f"{J}/nodes/{node.pk}/", {field: enough}, format="json").status_code == 200
    run_cycle("test")  # the cycle reads a consistent fleet


def test_the_admin_ui_refuses_the_same_cut(fleet) -> None:
    node = fleet.nodes[1]
    _hold(fleet, node, 2, cpus_per_gpu=24, memory_gb_per_gpu=0)
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")
    page = browser.get(f"/admin/controlplane/node/{node.pk}/change/")
    data = {k: v for k, v in f.admin_change_form(page).items() if v is not False}

    r = browser.post(f"/admin/controlplane/node/{node.pk}/change/", {**data, "cpus": 32})

    assert r.status_code == 200 and "its running jobs hold 48 CPUs on it" in r.content.decode()
    assert Node.objects.get(pk=node.pk).cpus == 96
    r = browser.post(f"/admin/controlplane/node/{node.pk}/change/", {**data, "cpus": 48})
    assert r.status_code == 302 and Node.objects.get(pk=node.pk).cpus == 48
