"""A quota.changed event's message says what moved, so the audit trail reads without opening
each event's data.

Found reading /admin/controlplane/event/ (and `GET events/?kind=quota.changed`) after lowering
vision's quota from 40 to 16 on the demo: the line said "Quota of vision on H100-80GB changed:
nominal 16 GPUs" — the new figure only, the same words whether the nominal, the borrowing limit
or the lending limit had moved, and nothing for a deletion.
"""

from __future__ import annotations

import pytest

from controlplane.choices import EventKind
from controlplane.models import Event, Quota
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db


def _messages() -> list[str]:
    return list(Event.objects.filter(kind=EventKind.QUOTA_CHANGED).order_by("id").values_list("message", flat=True))


def test_a_change_in_the_admin_names_each_limit_that_moved_before_and_after(fleet, browser) -> None:
    quota = fleet.ml.quotas.get()
    r = browser.post(f"/admin/controlplane/quota/{quota.pk}/change/", {
        "team": quota.team_id, "gpu_type": quota.gpu_type_id, "nominal_gpus": 24, "borrowing_limit": 8,
        "lending_limit": "",
    })
    assert r.status_code == 302

    assert _messages() == ["Quota of ml on H100-80GB changed: nominal 16 → 24, borrowing limit none → 8"]


def test_created_changed_and_deleted_through_the_api_read_as_such(fleet) -> None:
    api = client_for(fleet, "admin")
    r = api.post("/api/v1/quotas/", {"team": "ml", "gpu_type": "A100-40GB", "nominal_gpus": 4, "lending_limit": 2},
                 format="json")
    assert r.status_code == 201, r.content
    pk = r.json()["id"]
    assert api.patch(f"/api/v1/quotas/{pk}/", {"lending_limit": None}, format="json").status_code == 200
    assert api.patch(f"/api/v1/quotas/{pk}/", {"nominal_gpus": 4}, format="json").status_code == 200
    assert api.delete(f"/api/v1/quotas/{pk}/").status_code == 204
    assert not Quota.objects.filter(pk=pk).exists()

    assert _messages() == [
        "Quota of ml on A100-40GB created: nominal 4, borrowing limit none, lending limit 2",
        "Quota of ml on A100-40GB changed: lending limit 2 → none",
        "Quota of ml on A100-40GB changed: saved unchanged",
        "Quota of ml on A100-40GB deleted: was nominal 4, borrowing limit none",
    ]
