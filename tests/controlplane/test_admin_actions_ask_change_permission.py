"""The admin's list actions that change records ask the change permission, as the records'
own pages do: one who may only view nodes or maintenance windows (a staff operator given "Can
view node" or "Can view maintenance window" through a group, to read them beside the policy)
is not offered them, and a posted one does nothing.

Until 7 Dec they asked nothing: Django offers an action with no `allowed_permissions` to
whoever may see the list, so a view-only operator cordoned, drained and retired nodes and
cancelled maintenance windows (found with the users list's "Revoke API tokens", which had the
same hole)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Event, MaintenanceWindow, Node
from controlplane.services import maintenance
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _viewer(*codenames: str) -> Client:
    viewer = f.make_user("viewer")
    viewer.is_staff = True
    viewer.save()
    readers = Group.objects.create(name="readers")
    readers.permissions.add(*Permission.objects.filter(codename__in=codenames, content_type__app_label="controlplane"))
    viewer.groups.add(readers)
    client = Client()
    client.force_login(viewer)
    return client


def _run(client: Client, path: str, action: str, pks: list[Any], **extra: Any) -> str:
    answer = client.post(path, {"action": action, "_selected_action": pks, "index": 0, **extra}, follow=True)
    assert answer.status_code == 200
    return answer.content.decode()


@pytest.mark.parametrize("action", ["cordon", "drain", "retire", "uncordon"])
def test_one_who_may_only_view_nodes_is_not_offered_their_actions_and_changes_nothing(fleet, action) -> None:
    client = _viewer("view_node")
    node = fleet.nodes[1]
    if action == "uncordon":
        Node.objects.filter(pk=node.pk).update(state=NodeState.CORDONED, unschedulable=True)
    before = Node.objects.get(pk=node.pk).state

    listed = client.get("/admin/controlplane/node/")
    _run(client, "/admin/controlplane/node/", action, [node.pk], post="yes")

    assert Node.objects.get(pk=node.pk).state == before
    assert listed.status_code == 200 and f'value="{action}"' not in listed.content.decode()
    assert not Event.objects.filter(node=node).exists()


def test_one_who_may_only_view_windows_is_not_offered_the_cancel_and_cancels_nothing(fleet) -> None:
    start = timezone.now() + timedelta(hours=1)
    window = maintenance.create(f.make_user("boss", superuser=True), nodes=[fleet.nodes[1].name], pool=None,
                                start_at=start, end_at=start + timedelta(hours=2), reason="bios")
    client = _viewer("view_maintenancewindow")

    listed = client.get("/admin/controlplane/maintenancewindow/")
    _run(client, "/admin/controlplane/maintenancewindow/", "cancel_windows", [window.pk], post="yes")

    assert listed.status_code == 200 and 'value="cancel_windows"' not in listed.content.decode()
    assert MaintenanceWindow.objects.get(pk=window.pk).cancelled_at is None


def test_one_who_may_change_nodes_still_runs_them(fleet) -> None:
    client = _viewer("view_node", "change_node")
    node = fleet.nodes[1]

    said = _run(client, "/admin/controlplane/node/", "cordon", [node.pk])

    assert "Cordon: h100-1 (ready → cordoned)" in said
    assert Node.objects.get(pk=node.pk).state == NodeState.CORDONED
