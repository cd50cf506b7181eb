"""A quota's figures stop at the quota ceiling (1,000,000 GPUs) in the API as in the admin, in
one sentence at any size: 99999999999 was told "Ensure this value is less than or equal to
2147483647." (the integer column's bound), 2000000000 the ceiling; nothing is written."""

from __future__ import annotations

import pytest

from controlplane.models import Event, Quota
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"
SAID = "This figure is more than 1,000,000 GPUs, the most a quota may name."


@pytest.mark.parametrize("figure", [1_000_001, 2_000_000_000, 99_999_999_999, 1e30])
@pytest.mark.parametrize("field", ["nominal_gpus", "borrowing_limit", "lending_limit"])
def test_a_quota_figure_past_the_ceiling_is_told_the_ceiling_at_any_size(fleet, admin, field, figure) -> None:
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    before = (quota.nominal_gpus, quota.borrowing_limit, quota.lending_limit)

    r = admin.patch(f"{J}/quotas/{quota.pk}/", {field: figure}, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {field: [SAID]}
    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.borrowing_limit, quota.lending_limit) == before
    assert not Event.objects.filter(reason="QuotaChanged").exists()


def test_a_new_quota_at_the_ceiling_is_taken(fleet, admin) -> None:
    f.make_team("solo")

    r = admin.post(f"{J}/quotas/", {"team": "solo", "gpu_type": "H100-80GB", "nominal_gpus": 1_000_000},
                   format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["nominal_gpus"] == 1_000_000
