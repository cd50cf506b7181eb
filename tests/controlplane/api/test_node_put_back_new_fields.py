"""A node read from GET nodes/{id}/ and written back whole (PUT) still saves with the list's
read-only fields added on 2 Dec (maintenance_window, maintenance_ends_at, cordon_reason), null or
not; changing one is a 400 naming it. Their first version answered such a PUT 500 (a null
read-only field compared as an integer)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import Node
from controlplane.services import maintenance

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_node_in_a_window_and_drained_with_a_reason_is_written_back(fleet, admin) -> None:
    node = fleet.nodes[2]
    maintenance.create(fleet.users["admin"], nodes=[node.name], start_at=timezone.now(), duration_s=3600,
                       reason="PSU swap")
    admin.post(f"{J}/nodes/{node.pk}/drain/", {"reason": "PSU swap"}, format="json")
    body = admin.get(f"{J}/nodes/{node.pk}/").json()
    assert body["maintenance_window"] is not None and body["cordon_reason"] == "PSU swap"

    body["pool"] = "renamed"
    r = admin.put(f"{J}/nodes/{node.pk}/", body, format="json")

    assert r.status_code == 200, r.json()
    assert Node.objects.get(pk=node.pk).pool == "renamed" and r.json()["cordon_reason"] == "PSU swap"
    for field, value in (("maintenance_window", 999), ("cordon_reason", "other"),
                         ("maintenance_ends_at", (timezone.now() + timedelta(days=1)).isoformat())):
        r = admin.patch(f"{J}/nodes/{node.pk}/", {field: value}, format="json")
        assert r.status_code == 400 and list(r.json()["errors"]) == [field], r.json()
