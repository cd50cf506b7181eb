"""Configuration changes are part of the audit trail: a priority class, GPU type, price rate,
team, project, membership or node inventory created, changed or deleted, through the API or the
admin UI, is a config.changed event with before and after.

Found by QA: a priority class's value, a price, a node's gpu_count (8 → 4) or a team's members
could be changed through the API or /admin/ and leave no trace, while quota and cohort changes
were recorded. "Who made production 50, and when" had no answer."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import EventKind
from controlplane.models import Event, Membership, Node, PriorityClass, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import GENEROUS_THROTTLE_RATES, client_for

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.fixture(autouse=True)
def _test_settings(settings: Any) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": GENEROUS_THROTTLE_RATES}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _config_events(**kw: Any) -> list[Event]:
    return list(f.trail().filter(kind=EventKind.CONFIG_CHANGED, **kw).order_by("id"))


def test_a_priority_class_created_changed_and_deleted_through_the_api_is_recorded(fleet) -> None:
    admin = client_for(fleet, "admin")
    r = admin.post(f"{J}/priority-classes/", {"name": "urgent", "value": 500}, format="json")
    assert r.status_code == 201, r.content
    pk = r.json()["id"]
    assert admin.patch(f"{J}/priority-classes/{pk}/", {"value": 50}, format="json").status_code == 200
    assert admin.patch(f"{J}/priority-classes/{pk}/", {"value": 50}, format="json").status_code == 200
    assert admin.delete(f"{J}/priority-classes/{pk}/").status_code == 204

    created, changed, deleted = _config_events()  # the repeated PATCH changed nothing: no event
    assert [e.reason for e in (created, changed, deleted)] == [
        "PriorityClassCreated", "PriorityClassChanged", "PriorityClassDeleted"]
    assert changed.message == "Priority class urgent changed: value 500 → 50"
    assert changed.data["before"]["value"] == 500 and changed.data["after"]["value"] == 50
    assert deleted.data["after"] is None and deleted.data["before"]["name"] == "urgent"
    assert all(e.actor == "user:root" for e in (created, changed, deleted))


def test_a_node_inventory_change_through_the_api_is_recorded_on_the_node(fleet) -> None:
    admin = client_for(fleet, "admin")
    node = fleet.nodes[2]

    assert admin.patch(f"{J}/nodes/{node.pk}/", {"gpu_count": 4}, format="json").status_code == 200

    (event,) = _config_events(node=node)
    assert event.reason == "NodeChanged" and event.message == f"Node {node.name} changed: GPUs 8 → 4"


def test_a_team_renamed_through_the_api_is_recorded_under_its_old_and_new_name(fleet) -> None:
    admin = client_for(fleet, "admin")

    assert admin.patch(f"{J}/teams/{fleet.vision.pk}/", {"name": "sight"}, format="json").status_code == 200

    (event,) = _config_events(team=fleet.vision)
    assert event.message == "Team vision changed: name vision → sight"


def test_a_price_and_a_priority_class_changed_in_the_admin_are_recorded(fleet, browser) -> None:
    production = PriorityClass.objects.get(pk=fleet.production.pk)
    path = f"/admin/controlplane/priorityclass/{production.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    form["value"] = 7

    assert browser.post(path, form).status_code == 302

    (event,) = _config_events()
    assert event.reason == "PriorityClassChanged" and event.actor == "user:boss"
    assert event.message.endswith(f"value {production.value} → 7")


def test_a_membership_added_on_a_team_page_is_recorded(fleet, browser) -> None:
    newcomer = f.make_user("newcomer")
    team = Team.objects.get(pk=fleet.ml.pk)
    path = f"/admin/controlplane/team/{team.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    prefix = "memberships"
    total = int(form[f"{prefix}-TOTAL_FORMS"])
    form.update({f"{prefix}-TOTAL_FORMS": total + 1, f"{prefix}-{total}-user": newcomer.pk,
                 f"{prefix}-{total}-role": "member", f"{prefix}-{total}-team": team.pk})

    r = browser.post(path, form)

    assert r.status_code == 302, r.context["errors"] if r.context else r.content[:500]
    assert Membership.objects.filter(user=newcomer, team=team).exists()
    (event,) = _config_events(reason="MembershipCreated")
    assert event.team_id == team.pk and "newcomer" in event.message


def test_a_node_deleted_in_the_admin_leaves_its_record_in_the_trail(fleet, browser) -> None:
    spare = Node.objects.create(name="spare-01", pool="h100", gpu_type=fleet.nodes[0].gpu_type, gpu_count=8,
                                cpus=64, memory_gb=512, leaf_switch="leaf-9", spine="spine-9")

    r = browser.post(f"/admin/controlplane/node/{spare.pk}/delete/", {"post": "yes"})

    assert r.status_code == 302 and not Node.objects.filter(pk=spare.pk).exists()
    (event,) = _config_events(reason="NodeDeleted")
    assert event.node_id is None and event.data["before"]["gpu_count"] == 8 and "spare-01" in event.message


def test_the_node_page_has_no_input_for_the_operators_cordon(fleet, browser) -> None:
    """unschedulable is set by cordon, drain and uncordon (with their node.state events), not typed."""
    page = browser.get(f"/admin/controlplane/node/{fleet.nodes[0].pk}/change/")

    assert "unschedulable" not in page.context["adminform"].form.fields
    assert 'name="unschedulable"' not in page.content.decode()
