"""A quota's figures have a ceiling (1,000,000 GPUs), in the admin and the API alike.

Found on the demo: `PATCH quotas/1/ {"nominal_gpus": 99999999999999}` answered 200 (SQLite takes
any 64-bit integer). The accounting multiplies nominal GPUs by seconds into fixed-size decimal
columns: from the next hour on, every rollup failed ("CHECK constraint failed:
quota_rollup_parts_make_nominal") and `quartermaster_accounting_rolled_until_timestamp_seconds`
stood still, 25 minutes behind and growing, for the whole fleet. On PostgreSQL any nominal above
~1.16 billion GPUs overflows a day's row (20 digits, 6 after the point) the same way.
"""

from __future__ import annotations

import pytest

from controlplane.models import Quota
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db

CEILING = "is more than 1,000,000 GPUs, the most a quota may name"


@pytest.mark.parametrize("field", ["nominal_gpus", "borrowing_limit", "lending_limit"])
def test_the_api_refuses_a_figure_above_the_ceiling_naming_the_field(fleet, field) -> None:
    quota = fleet.ml.quotas.get()
    body = {field: 1_200_000_000}
    if field == "lending_limit":
        body["nominal_gpus"] = 1_000_000  # so only the ceiling is at fault

    r = client_for(fleet, "admin").patch(f"/api/v1/quotas/{quota.pk}/", body, format="json")

    assert r.status_code == 400, r.content
    # The API says it without the figure, at any size (test_quota_ceiling_said_at_any_size.py).
    assert r.json()["errors"] == {field: [f"This figure {CEILING}."]}
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 16


def test_the_ceiling_itself_is_accepted(fleet) -> None:
    quota = fleet.ml.quotas.get()
    r = client_for(fleet, "admin").patch(f"/api/v1/quotas/{quota.pk}/", {
        "nominal_gpus": 1_000_000, "borrowing_limit": 1_000_000, "lending_limit": 1_000_000}, format="json")
    assert r.status_code == 200, r.content


def test_the_admin_form_refuses_it_on_the_field(fleet, browser) -> None:
    quota = fleet.ml.quotas.get()
    r = browser.post(f"/admin/controlplane/quota/{quota.pk}/change/", {
        "team": quota.team_id, "gpu_type": quota.gpu_type_id, "nominal_gpus": 2_000_000_000, "borrowing_limit": "",
        "lending_limit": "",
    })

    assert r.status_code == 200
    assert dict(r.context["adminform"].form.errors) == {"nominal_gpus": [f"2000000000 {CEILING}"]}
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 16
