"""A quota above the fleet's GPUs of its type: taken, and said.

Found in review: `PATCH quotas/3/ {"nominal_gpus": 500, "borrowing_limit":
500}` on a fleet of 96 H100s answered 200 with no word. A quota above the fleet is allowed
(capacity may be coming; Kueue allows it too), but the team can never hold it all, and
guarantees that add up past the fleet cannot all be honoured at once: every answer about the
quota says so (`warnings`), and so does the admin's save. The fleet counted is what the rest of
the product counts: every node not retired (services/quotas.fleet_gpus_by_type).

The fixture's fleet: 4 × 8 H100-80GB and 2 × 8 A100-40GB; ml and vision hold 16 H100 each."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.choices import NodeState
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_nominal_and_borrowing_limit_above_the_fleet_are_taken_and_said(fleet, admin) -> None:
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)

    r = admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 500, "borrowing_limit": 500}, format="json")

    assert r.status_code == 200, r.json()
    assert (r.json()["nominal_gpus"], r.json()["borrowing_limit"]) == (500, 500)
    assert r.json()["warnings"] == [
        "Nominal 500 is above the 32 H100-80GB GPUs the fleet has: the team can never hold it all until more come.",
        "Borrowing limit 500 is above the 32 H100-80GB GPUs the fleet has: the team can never borrow that many; "
        "until more come it limits nothing.",
        "All teams' nominal H100-80GB quotas add up to 516, above the 32 H100-80GB GPUs the fleet has: these "
        "guarantees cannot all be honoured at once.",
    ]
    # The other quotas of the type share in the overcommitment, and their answers say it too.
    vision = admin.get(f"{J}/quotas/{fleet.vision.quotas.get().pk}/").json()
    assert vision["warnings"] == [
        "All teams' nominal H100-80GB quotas add up to 516, above the 32 H100-80GB GPUs the fleet has: these "
        "guarantees cannot all be honoured at once."]


def test_a_quota_within_the_fleet_says_nothing(fleet, admin) -> None:
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)

    r = admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 16, "borrowing_limit": 16}, format="json")

    assert r.status_code == 200 and r.json()["warnings"] == [], r.json()
    # 16 + 16 = the fleet's 32: all guarantees can be honoured at once, said nothing of.
    assert all(q["warnings"] == [] for q in admin.get(f"{J}/quotas/").json()["results"])


def test_guarantees_adding_up_past_the_fleet_are_said_though_each_fits(fleet, admin) -> None:
    r = admin.patch(f"{J}/quotas/{fleet.vision.quotas.get().pk}/", {"nominal_gpus": 20}, format="json")

    assert r.status_code == 200 and r.json()["warnings"] == [
        "All teams' nominal H100-80GB quotas add up to 36, above the 32 H100-80GB GPUs the fleet has: these "
        "guarantees cannot all be honoured at once."], r.json()


def test_a_retired_node_is_not_counted_a_cordoned_one_is(fleet, admin) -> None:
    fleet.nodes[3].state = NodeState.RETIRED
    fleet.nodes[3].save(update_fields=["state"])
    fleet.nodes[2].state = NodeState.CORDONED
    fleet.nodes[2].save(update_fields=["state"])
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)

    r = admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 8}, format="json")

    # 8 + 16 = 24, the three H100 nodes left (the cordoned one may come back): nothing said.
    assert r.status_code == 200 and r.json()["warnings"] == [], r.json()
    r = admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 30}, format="json")
    assert r.json()["warnings"][0] == (
        "Nominal 30 is above the 24 H100-80GB GPUs the fleet has: the team can never hold it all until more come.")


def test_a_quota_on_a_type_the_fleet_has_none_of_is_said(fleet, admin) -> None:
    f.make_gpu_type("B200-192GB", 192)

    r = admin.post(f"{J}/quotas/", {"team": "ml", "gpu_type": "B200-192GB", "nominal_gpus": 8}, format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["warnings"] == [
        "Nominal 8 is above the 0 B200-192GB GPUs the fleet has: the team can never hold it all until more come.",
        "All teams' nominal B200-192GB quotas add up to 8, above the 0 B200-192GB GPUs the fleet has: these "
        "guarantees cannot all be honoured at once."]


def test_the_list_reads_the_fleet_once_however_many_quotas(fleet, admin) -> None:
    with CaptureQueriesContext(connection) as few:
        admin.get(f"{J}/quotas/")
    for n in range(6):
        f.make_quota(f.make_team(f"team-{n}"), fleet.a100, 4)
    with CaptureQueriesContext(connection) as many:
        r = admin.get(f"{J}/quotas/")
    assert r.json()["count"] == 8
    fleet_reads = [q["sql"] for q in many.captured_queries if "controlplane_node" in q["sql"]
                   and "gpu_count" in q["sql"]]
    assert len(fleet_reads) <= len([q for q in few.captured_queries if "controlplane_node" in q["sql"]
                                    and "gpu_count" in q["sql"]]), fleet_reads


def test_the_schema_documents_warnings_as_read_only(fleet, admin) -> None:
    schemas = admin.get("/api/schema/?format=json").json()["components"]["schemas"]
    warnings = schemas["Quota"]["properties"]["warnings"]

    assert warnings["readOnly"] is True and warnings["type"] == "array"
    assert "fleet" in warnings["description"]
    assert "warnings" not in schemas["PatchedQuotaRequest"]["properties"]


def _admin_save(browser: Any, quota: Any, **changes: Any) -> list[str]:
    path = f"/admin/controlplane/quota/{quota.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    form.update(changes)
    r = browser.post(path, form, follow=True)
    assert r.status_code == 200 and r.redirect_chain, r.content[:3000]
    return [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]


def test_the_admins_save_says_it(fleet, browser) -> None:
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)

    said = _admin_save(browser, quota, nominal_gpus=500, borrowing_limit=500)

    assert "Nominal 500 is above the 32 H100-80GB GPUs the fleet has: the team can never hold it all until more " \
           "come." in said, said
    assert any(m.startswith("Borrowing limit 500 is above the 32 H100-80GB GPUs") for m in said), said
    quota.refresh_from_db()
    assert quota.nominal_gpus == 500
    # A save within the fleet says none of it.
    said = _admin_save(browser, quota, nominal_gpus=16, borrowing_limit=8)
    assert not [m for m in said if "the fleet has" in m], said


def _team_page_save(browser: Any, team: Any, **row: Any) -> list[str]:
    """`team`'s admin page saved with its first quota row changed by `row`: the warnings said."""
    path = f"/admin/controlplane/team/{team.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    form.update({f"quotas-0-{name}": value for name, value in row.items()})
    r = browser.post(path, form, follow=True)
    assert r.status_code == 200 and r.redirect_chain, r.content[:3000]
    return [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]


def test_the_team_pages_quota_rows_say_it_as_the_quota_page_does(fleet, browser) -> None:
    """Found in the demo: serving's H100 nominal raised from 24 to 500 on its team page (the
    quota rows there) on a fleet of 96 was "changed successfully", with none of the words the
    quota page and the API give."""
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)

    said = _team_page_save(browser, fleet.ml, nominal_gpus=500, borrowing_limit=500)

    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.borrowing_limit) == (500, 500)
    assert said == [
        "Nominal 500 is above the 32 H100-80GB GPUs the fleet has: the team can never hold it all until more come.",
        "Borrowing limit 500 is above the 32 H100-80GB GPUs the fleet has: the team can never borrow that many; "
        "until more come it limits nothing.",
        "All teams' nominal H100-80GB quotas add up to 516, above the 32 H100-80GB GPUs the fleet has: these "
        "guarantees cannot all be honoured at once.",
    ], said
    # A row saved within the fleet, and a save that leaves the rows as they were, say none of it.
    assert not [m for m in _team_page_save(browser, fleet.ml, nominal_gpus=16, borrowing_limit=8)
                if "the fleet has" in m]
    assert not [m for m in _team_page_save(browser, fleet.ml) if "the fleet has" in m]
