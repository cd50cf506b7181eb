"""What goes with a deleted user, team or node is in the audit trail: their notification hooks,
a node's place in maintenance windows.

Found 7 Dec: a hook is deleted with its owner (NotificationHook.user and .team are CASCADE).
Deleting a user on the admin's page, or a team through the API or the admin, recorded the user,
the team, their memberships, quotas and projects, but not the hooks that went with them: the
trail kept each hook's `NotificationHookCreated` and never said it stopped, so "where do the
fleet's job events go" read from it still named URLs nothing sends to. Now each is a
`NotificationHookDeleted` event saying why, and the team's DELETE answers it among what went.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.models import Event, NotificationHook
from controlplane.services import notifications
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _hook(user, team=None) -> NotificationHook:  # type: ignore[no-untyped-def]
    return notifications.create_hook(user, url="https://hooks.example.com/qm", events=["job.finished"], team=team,
                                     actor=f"user:{user.get_username()}")


def _hook_deletions() -> list[Event]:
    return list(Event.objects.filter(reason="NotificationHookDeleted").order_by("id"))


def test_a_users_hooks_deleted_with_them_on_the_admins_page_are_recorded(fleet) -> None:
    f.make_user("boss", superuser=True)
    boss = Client()
    assert boss.login(username="boss", password="boss")
    dora = f.make_user("dora")
    hook = _hook(dora)

    assert boss.post(f"/admin/auth/user/{dora.pk}/delete/", {"post": "yes"}).status_code == 302

    [event] = _hook_deletions()
    assert event.actor == "user:boss"
    assert event.message == (f"Notification hook {hook.pk} of dora deleted (it sent job.finished of dora's own jobs "
                             "to https://hooks.example.com/qm) (user dora deleted)"), event.message
    assert event.data["before"]["id"] == hook.pk
    assert not NotificationHook.objects.exists()


def test_a_users_hooks_deleted_with_them_in_a_shell_are_recorded(fleet) -> None:
    dora = f.make_user("dora")
    _hook(dora)

    get_user_model().objects.filter(username="dora").delete()

    [event] = _hook_deletions()
    assert event.actor.startswith("process:") and event.message.endswith("(user dora deleted)")


def test_a_teams_hooks_deleted_with_it_through_the_api_are_recorded_and_answered(fleet) -> None:
    team = f.make_team("tmpteam")
    tess = f.make_user("tess", team=team)
    hook = _hook(tess, team=team)
    admin = client_for(fleet, "admin")

    r = admin.delete(f"{J}/teams/{team.pk}/")

    assert r.status_code == 200, r.content
    assert (f"Notification hook {hook.pk} of tess, which sent job.finished of every job of team tmpteam to "
            "https://hooks.example.com/qm, is deleted") in r.json()["consequences"], r.json()
    [event] = _hook_deletions()
    assert event.actor == "user:root" and event.message.endswith("(team tmpteam deleted)"), event.message
    assert not NotificationHook.objects.exists()


# ----------------------------------------------------------------------------- a node's windows
# A maintenance window's nodes are a many-to-many list: a node deleted left every window it was
# in without a word (the window's `MaintenanceWindowCreated` still named it, and a window of that
# node alone now covered nothing).


def test_a_node_deleted_through_the_api_leaves_its_maintenance_windows_on_record(fleet) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from controlplane.services import maintenance

    root = fleet.users["admin"]
    window = maintenance.create(root, nodes=["h100-0", "h100-1"], start_at=timezone.now() + timedelta(hours=1),
                                duration_s=3600, reason="firmware")
    Event.objects.all().delete()
    node = fleet.nodes[0]
    assert node.name == "h100-0"

    r = client_for(fleet, "admin").delete(f"{J}/nodes/{node.pk}/")

    assert r.status_code == 200, r.content
    assert r.json()["consequences"] == [f"It leaves maintenance window {window.pk} (firmware), which keeps h100-1"]
    [changed] = Event.objects.filter(reason="MaintenanceWindowChanged")
    assert changed.actor == "user:root"
    assert changed.message == f"Maintenance window {window.pk} changed: nodes removed: h100-0 (node h100-0 deleted)"
    assert changed.data["after"]["nodes"] == ["h100-1"]
    assert list(window.nodes.values_list("name", flat=True)) == ["h100-1"]


def test_the_admins_node_delete_says_and_records_the_same(fleet) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from controlplane.services import maintenance

    window = maintenance.create(fleet.users["admin"], nodes=["h100-0"], start_at=timezone.now() + timedelta(hours=1),
                                duration_s=3600, reason="firmware")
    f.make_user("boss", superuser=True)
    boss = Client()
    assert boss.login(username="boss", password="boss")
    path = f"/admin/controlplane/node/{fleet.nodes[0].pk}/delete/"

    assert f"It leaves maintenance window {window.pk} (firmware), which then covers no node" in boss.get(path).content.decode()
    assert boss.post(path, {"post": "yes"}).status_code == 302

    [changed] = Event.objects.filter(reason="MaintenanceWindowChanged")
    assert changed.actor == "user:boss" and changed.message.endswith("nodes removed: h100-0 (node h100-0 deleted)")
