"""A GPU type in use keeps its name, through the API and the admin UI.

Found by a fleet admin's review (6 Dec): jobs ask for GPU types by name (`gpu_types`, a gang
role's `gpu_types`) and node agents register with the name (NVML's, or `--gpu-type`), while
quotas, prices and nodes point at the type's row. `PATCH gpu-types/2/ {"name": "A100-40G"}`
answered 200, and from the next cycle every job waiting for "A100-40GB" read "Can never run on
this fleet: it needs GPUs of type A100-40GB; the fleet has A100-40G (40 GB), H100-80GB", and each
A100 node's agent would have been refused at its next registration ("unknown GPU type"). Kueue
keeps a ResourceFlavor's name for the same reason. Now a rename is refused on `name` while a job
that has not ended asks for the type or a node not retired is of it; a type nothing uses yet (a
typo fixed before the first node registers) is renamed as before.
"""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.choices import JobState, NodeState
from controlplane.models import Event, GpuType, Node
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_type_waiting_jobs_ask_for_keeps_its_name(fleet, admin) -> None:
    spare = f.make_gpu_type("B200", 192)
    f.make_job(fleet.ml, gpu_types=["B200"])
    f.make_job(fleet.ml, gpu_types=["H100-80GB", "B200"], state=JobState.RUNNING)

    r = admin.patch(f"{J}/gpu-types/{spare.pk}/", {"name": "B200-192GB"}, format="json")

    assert r.status_code == 400, r.json()
    [said] = r.json()["errors"]["name"]
    assert said.startswith("2 jobs that have not ended ask for B200 by name"), said
    assert "could never run" in said, said
    assert GpuType.objects.get(pk=spare.pk).name == "B200"
    assert not Event.objects.filter(reason="GpuTypeChanged").exists()


def test_a_gang_role_asking_for_it_counts_too(fleet, admin) -> None:
    spare = f.make_gpu_type("B200", 192)
    f.make_job(fleet.ml, roles=[{"name": "learner", "gpus": 1, "gpu_types": ["B200"]}])

    r = admin.patch(f"{J}/gpu-types/{spare.pk}/", {"name": "B200-192GB"}, format="json")

    assert r.status_code == 400 and "1 job that has not ended asks for B200" in r.json()["errors"]["name"][0]


def test_a_type_nodes_register_with_keeps_its_name(fleet, admin) -> None:
    r = admin.patch(f"{J}/gpu-types/{fleet.a100.pk}/", {"name": "A100-40G"}, format="json")

    assert r.status_code == 400, r.json()
    [said] = r.json()["errors"]["name"]
    assert "2 nodes (a100-0, a100-1) are of type A100-40GB" in said, said
    assert "refused at their next registration" in said, said
    assert GpuType.objects.get(pk=fleet.a100.pk).name == "A100-40GB"
    Node.objects.filter(name="a100-1").update(state=NodeState.RETIRED)  # a retired node registers no more
    r = admin.patch(f"{J}/gpu-types/{fleet.a100.pk}/", {"name": "A100-40G"}, format="json")
    assert "1 node (a100-0) is of type A100-40GB" in r.json()["errors"]["name"][0], r.json()


def test_a_type_nothing_uses_is_renamed_and_ended_jobs_do_not_count(fleet, admin) -> None:
    spare = f.make_gpu_type("B20O", 192)  # the typo
    f.make_job(fleet.ml, gpu_types=["B20O"], state=JobState.SUCCEEDED)
    f.make_node(spare, name="b200-old", state=NodeState.RETIRED)

    r = admin.patch(f"{J}/gpu-types/{spare.pk}/", {"name": "B200", "memory_gb": 180}, format="json")

    assert r.status_code == 200, r.json()
    assert GpuType.objects.get(pk=spare.pk).name == "B200"
    # its other fields change whatever uses it
    r = admin.patch(f"{J}/gpu-types/{fleet.a100.pk}/", {"memory_gb": 40, "relative_throughput": 0.5}, format="json")
    assert r.status_code == 200, r.json()


def test_the_admin_form_refuses_it_on_the_name(fleet) -> None:
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")
    form = f.admin_change_form(browser.get(f"/admin/controlplane/gputype/{fleet.h100.pk}/change/"))
    form["name"] = "H100"

    r = browser.post(f"/admin/controlplane/gputype/{fleet.h100.pk}/change/", form)

    assert r.status_code == 200  # the form again, with the error
    errors = r.context["adminform"].form.errors
    assert "are of type H100-80GB" in errors["name"][0], errors
    assert Node.objects.filter(gpu_type__name="H100-80GB").count() == 4
