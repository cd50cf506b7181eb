"""A user deleted leaves an event on each maintenance window they created or cancelled.

Found 7 Dec: `MaintenanceWindow.created_by` and `cancelled_by` are SET_NULL (the only other
foreign keys to the user that a deletion empties, beside a job's submitter and holder), so
deleting a user emptied them on every window of theirs and the trail said nothing: the
window's `MaintenanceWindowCreated` still named dora, the API then answered `"created_by":
null`, with nothing saying since when or who removed her. Now the user's deletion records one
`config.changed` event per such window (reason `MaintenanceWindowChanged`, the window's record
before and after, which name its creator and canceller), with the same actor as the
`UserDeleted` event, in the deletion's transaction, written in bulk whatever their number.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, MaintenanceWindow, Node
from controlplane.services import maintenance
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
SHELL = "manage.py shell, run as OS user ops: no page or command said who)"  # conftest's in_a_shell




def _window(user, nodes: list[str], hours: int, reason: str) -> MaintenanceWindow:  # type: ignore[no-untyped-def]
    return maintenance.create(user, nodes=nodes, start_at=timezone.now() + timedelta(hours=hours),
                              duration_s=3600, reason=reason)


def _losing_user(window: MaintenanceWindow) -> list[Event]:
    return list(Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="MaintenanceWindowChanged",
                                     data__after__id=window.pk).order_by("id"))


def test_a_creator_deleted_on_the_admins_page_is_an_event_on_each_of_their_windows(fleet, boss) -> None:
    dora = f.make_user("dora", superuser=True)
    firmware = _window(dora, ["h100-0", "h100-1"], 2, "firmware")
    cables = _window(dora, ["a100-0"], 3, "cables")
    others = _window(fleet.users["admin"], ["h100-2"], 2, "fans")
    [created] = Event.objects.filter(reason="MaintenanceWindowCreated", data__after__id=firmware.pk)
    assert created.data["after"]["created_by"] == "dora" and created.data["after"]["cancelled_by"] is None

    assert boss.post(f"/admin/auth/user/{dora.pk}/delete/", {"post": "yes"}).status_code == 302

    [deleted] = Event.objects.filter(reason="UserDeleted")
    for window, nodes in ((firmware, ["h100-0", "h100-1"]), (cables, ["a100-0"])):
        [event] = _losing_user(window)
        assert event.actor == deleted.actor == "user:boss"
        assert event.message == f"Maintenance window {window.pk} ({window.reason}): its creator dora was deleted by boss"
        assert event.data["model"] == "maintenancewindow" and event.data["user"] == "dora"
        assert event.data["before"] == {**event.data["after"], "created_by": "dora"}
        assert event.data["after"]["created_by"] is None and event.data["after"]["nodes"] == nodes
        window.refresh_from_db()
        assert window.created_by_id is None and window.cancelled_at is None
    assert _losing_user(others) == []
    # The nodes' maintenance is unchanged: nothing on their pages.
    assert not Event.objects.filter(node__isnull=False, actor="user:boss").exists()

    answer = client_for(fleet, "admin").get(f"/api/v1/maintenance-windows/{firmware.pk}/")
    assert answer.status_code == 200 and answer.json()["created_by"] is None
    listed = client_for(fleet, "admin").get("/api/v1/events/?kind=config.changed&reason=MaintenanceWindowChanged")
    assert listed.status_code == 200
    assert {e["message"] for e in listed.json()["results"]} == {
        f"Maintenance window {firmware.pk} (firmware): its creator dora was deleted by boss",
        f"Maintenance window {cables.pk} (cables): its creator dora was deleted by boss"}


def test_a_canceller_deleted_in_a_shell_is_an_event_on_each_window_they_cancelled(fleet, in_a_shell) -> None:
    dora = f.make_user("dora", superuser=True)
    root = fleet.users["admin"]
    theirs = _window(root, ["h100-0"], 2, "firmware")
    maintenance.cancel(theirs.pk, dora)
    own = _window(dora, ["h100-1"], 2, "cables")
    maintenance.cancel(own.pk, dora)

    get_user_model().objects.filter(username="dora").delete()  # a queryset's delete too

    said = f" (process {os.getpid()}, {SHELL}"
    [cancelled] = _losing_user(theirs)
    assert cancelled.actor == "process:ops"
    assert cancelled.message == f"Maintenance window {theirs.pk} (firmware): its canceller dora was deleted by " \
                                f"process:ops{said}", cancelled.message
    assert (cancelled.data["before"]["created_by"], cancelled.data["after"]["created_by"]) == ("root", "root")
    assert (cancelled.data["before"]["cancelled_by"], cancelled.data["after"]["cancelled_by"]) == ("dora", None)
    assert cancelled.data["process"] == "manage.py shell" and cancelled.data["os_user"] == "ops"
    [both] = _losing_user(own)
    assert both.message == f"Maintenance window {own.pk} (cables): its creator and canceller dora was deleted by " \
                           f"process:ops{said}", both.message
    assert (both.data["after"]["created_by"], both.data["after"]["cancelled_by"]) == (None, None)
    theirs.refresh_from_db()
    assert theirs.created_by_id == root.pk and theirs.cancelled_by_id is None and theirs.cancelled_at is not None


def _windows_of(user, count: int) -> None:  # type: ignore[no-untyped-def]
    """``count`` ended windows by ``user``, on two nodes each (history, never checked for overlap)."""
    start = timezone.now() - timedelta(days=400)
    windows = MaintenanceWindow.objects.bulk_create([
        MaintenanceWindow(start_at=start + timedelta(hours=2 * i), end_at=start + timedelta(hours=2 * i + 1),
                          reason=f"w{i}", created_by=user, created_at=start, cancelled_by=user if i % 2 else None,
                          cancelled_at=start if i % 2 else None)
        for i in range(count)])
    through = MaintenanceWindow.nodes.through
    nodes = list(Node.objects.filter(name__in=["h100-0", "h100-1"]).values_list("pk", flat=True))
    through.objects.bulk_create([through(maintenancewindow_id=w.pk, node_id=n) for w in windows for n in nodes])


def test_the_windows_events_are_written_in_bulk_whatever_their_number(fleet, in_a_shell) -> None:
    few, many = f.make_user("few"), f.make_user("many")
    _windows_of(few, 3)
    _windows_of(many, 600)

    with CaptureQueriesContext(connection) as for_few:
        few.delete()
    with CaptureQueriesContext(connection) as for_many:
        many.delete()

    assert len(for_many.captured_queries) == len(for_few.captured_queries), [
        q["sql"][:120] for q in for_many.captured_queries]
    events = Event.objects.filter(reason="MaintenanceWindowChanged")
    assert events.count() == 603
    assert all(e.data["before"]["nodes"] == ["h100-0", "h100-1"] for e in events)
    assert not MaintenanceWindow.objects.filter(created_by__isnull=False).exists()


def test_the_window_event_is_in_the_deletions_transaction_and_goes_with_its_rollback(fleet, in_a_shell) -> None:
    dora = f.make_user("dora")
    window = _window(dora, ["h100-0"], 2, "firmware")
    pk = dora.pk

    with pytest.raises(RuntimeError), transaction.atomic():
        dora.delete()
        assert len(_losing_user(window)) == 1
        raise RuntimeError("the script failed after the delete")

    assert _losing_user(window) == []
    window.refresh_from_db()
    assert window.created_by_id == pk
