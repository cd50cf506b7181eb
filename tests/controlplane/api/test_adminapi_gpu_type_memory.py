"""A GPU type's memory is 1 GB or more, and not absurd, through the API and the admin UI.

Found by QA as a platform engineer: `POST gpu-types/ {"name": "B200", "memory_gb": 0}` answered
201. Jobs match GPU types by memory (min_gpu_memory_gb), so a 0 GB type never matched a job
asking for any memory, and 2,000,000 GB matched every one; the admin's page took them too."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.models import Event, GpuType
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.mark.parametrize("memory_gb", [0, -1, 4097, 2_000_000])
def test_a_gpu_type_without_sensible_memory_is_refused_on_memory_gb(fleet, admin, memory_gb) -> None:
    r = admin.post(f"{J}/gpu-types/", {"name": "B200", "memory_gb": memory_gb}, format="json")

    assert r.status_code == 400, r.json()
    body = r.json()
    assert list(body["errors"]) == ["memory_gb"], body
    assert "GB" in body["errors"]["memory_gb"][0]
    assert not GpuType.objects.filter(name="B200").exists()
    assert not Event.objects.filter(reason="GpuTypeCreated").exists()


def test_zero_says_a_gpu_has_at_least_one_gb(fleet, admin) -> None:
    r = admin.post(f"{J}/gpu-types/", {"name": "B200", "memory_gb": 0}, format="json")

    assert "at least 1 GB" in r.json()["errors"]["memory_gb"][0], r.json()


def test_a_change_to_zero_is_refused_and_sensible_memory_passes(fleet, admin) -> None:
    r = admin.patch(f"{J}/gpu-types/{fleet.h100.pk}/", {"memory_gb": 0}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["memory_gb"], r.json()
    assert GpuType.objects.get(pk=fleet.h100.pk).memory_gb == 80

    for name, memory_gb in (("T4", 16), ("MI325X", 256), ("huge", 4096)):
        ok = admin.post(f"{J}/gpu-types/", {"name": name, "memory_gb": memory_gb}, format="json")
        assert ok.status_code == 201, ok.json()


def test_the_admin_ui_refuses_zero_on_the_field(fleet) -> None:
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")

    r = browser.post("/admin/controlplane/gputype/add/", {"name": "B200", "memory_gb": 0, "relative_throughput": 1})

    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert list(errors) == ["memory_gb"], errors
    assert "at least 1 GB" in errors["memory_gb"][0]
    assert not GpuType.objects.filter(name="B200").exists()
