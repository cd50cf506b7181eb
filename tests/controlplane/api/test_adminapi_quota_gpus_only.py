"""A quota counts GPUs per team and type. It once also stored `nominal_cpus` and
`nominal_memory_gb`, which the API and the admin took, showed and audited while the scheduler
never enforced them: an admin who set a CPU quota of 64 saw it recorded and got none. Those
fields are gone (migration 0033); a client still sending them is refused naming each, and
nothing is written."""

from __future__ import annotations

import pytest

from controlplane.models import Event, Quota
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_cpu_or_memory_quota_is_refused_as_unknown_and_nothing_written(fleet, admin) -> None:
    solo = f.make_team("solo")

    r = admin.post(f"{J}/quotas/", {"team": "solo", "gpu_type": "H100-80GB", "nominal_gpus": 8,
                                    "nominal_cpus": 64, "nominal_memory_gb": 512}, format="json")

    assert r.status_code == 400, r.json()
    errors = r.json()["errors"]
    assert set(errors) == {"nominal_cpus", "nominal_memory_gb"}
    assert errors["nominal_cpus"][0].startswith("Unknown field. Accepted fields: ")
    assert "nominal_gpus" in errors["nominal_cpus"][0]
    assert not Quota.objects.filter(team=solo).exists()
    assert not Event.objects.filter(reason="QuotaCreated").exists()


def test_a_quota_reads_and_audits_its_gpu_figures_only(fleet, admin) -> None:
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)

    r = admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": quota.nominal_gpus + 1}, format="json")

    assert r.status_code == 200, r.json()
    assert not {"nominal_cpus", "nominal_memory_gb"} & set(r.json())
    event = Event.objects.get(reason="QuotaChanged")
    assert set(event.data["after"]) == {"id", "team", "gpu_type", "nominal_gpus", "borrowing_limit", "lending_limit"}
