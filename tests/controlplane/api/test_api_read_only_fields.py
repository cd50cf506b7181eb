"""A read-only field sent with a value it does not have is refused (400 naming it), not
silently dropped: found when `POST cohorts/ {"name": "c2", "teams": ["vision"]}` answered 201
with `"teams": []` and the admin believed the team had moved. Sending back what a GET gave
(a read, changed, written back) still works."""

from __future__ import annotations

import pytest

from controlplane.models import Cohort, Node, Team

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_cohort_created_with_teams_is_refused_naming_the_field_and_the_way(fleet, admin) -> None:
    r = admin.post(f"{J}/cohorts/", {"name": "c2", "teams": ["vision"]}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["teams"] and "cohort" in r.json()["errors"]["teams"][0]
    assert not Cohort.objects.filter(name="c2").exists()
    assert Team.objects.get(name="vision").cohort.name == "all"


def test_a_cohort_changed_with_other_teams_is_refused(fleet, admin) -> None:
    cohort = Cohort.objects.get(name="all")

    r = admin.patch(f"{J}/cohorts/{cohort.pk}/", {"description": "x", "teams": ["ml"]}, format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["teams"]
    assert Cohort.objects.get(pk=cohort.pk).description == ""


def test_a_body_read_then_written_back_with_its_read_only_fields_is_accepted(fleet, admin) -> None:
    cohort = Cohort.objects.get(name="all")
    body = admin.get(f"{J}/cohorts/{cohort.pk}/").json()

    r = admin.put(f"{J}/cohorts/{cohort.pk}/", {**body, "description": "everyone"}, format="json")

    assert r.status_code == 200, r.json()
    assert Cohort.objects.get(pk=cohort.pk).description == "everyone"
    node = fleet.nodes[2]
    body = admin.get(f"{J}/nodes/{node.pk}/").json()
    r = admin.put(f"{J}/nodes/{node.pk}/", {**body, "pool": "h100-b"}, format="json")
    assert r.status_code == 200, r.json()
    assert Node.objects.get(pk=node.pk).pool == "h100-b"


def test_a_node_state_written_instead_of_cordoned_is_refused_naming_the_actions(fleet, admin) -> None:
    node = fleet.nodes[2]

    r = admin.patch(f"{J}/nodes/{node.pk}/", {"state": "down"}, format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["state"]
    assert "cordon" in r.json()["errors"]["state"][0]
    assert Node.objects.get(pk=node.pk).state == "ready"
