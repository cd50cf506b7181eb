"""Maintenance windows in the Django admin: added and changed through services/maintenance.py
(checked as the API checks them, refusals on their fields, recorded), cancelled by an action,
never deleted."""

from __future__ import annotations

import re
from datetime import UTC, timedelta

from django.test import Client
from django.utils import timezone

from controlplane.models import Event, MaintenanceWindow, Node
from controlplane.services import maintenance
from tests.controlplane.fleet_fixture import Fleet

URL = "/admin/controlplane/maintenancewindow/"


def _when(prefix: str, at) -> dict[str, str]:  # noqa: ANN001
    at = at.astimezone(UTC)
    return {f"{prefix}_0": at.strftime("%Y-%m-%d"), f"{prefix}_1": at.strftime("%H:%M:%S")}


def test_an_admin_adds_a_window_for_a_pool_and_it_is_recorded(browser: Client, fleet: Fleet) -> None:
    start = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    r = browser.post(f"{URL}add/", {"pool": "a100", "reason": "rack move", **_when("start_at", start),
                                    **_when("end_at", start + timedelta(hours=3)), "_save": "Save"})

    assert r.status_code == 302, r.content.decode()[:3000]
    window = MaintenanceWindow.objects.get()
    assert sorted(n.name for n in window.nodes.all()) == ["a100-0", "a100-1"]
    assert window.created_by.username == "boss" and window.start_at == start
    assert Event.objects.filter(reason="MaintenanceWindowCreated", actor="user:boss").count() == 1
    assert Event.objects.filter(reason="MaintenanceScheduled").count() == 2
    listed = re.sub(r"<[^>]+>", "", browser.get(URL).content.decode())  # the words, each name in its .nobr
    assert "rack move" in listed and "a100-0, a100-1" in listed and "Upcoming" in listed


def test_a_refusal_is_shown_on_its_field_and_nothing_is_written(browser: Client, fleet: Fleet) -> None:
    start = timezone.now() + timedelta(hours=2)
    node = Node.objects.get(name="h100-1")
    r = browser.post(f"{URL}add/", {"nodes": [node.pk], "reason": "fw", **_when("start_at", start),
                                    **_when("end_at", start + timedelta(days=20)), "_save": "Save"})

    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert "end_at" in errors and "a window lasts at most 14 d" in errors["end_at"][0]
    assert not MaintenanceWindow.objects.exists() and not Event.objects.filter(reason__startswith="Maint").exists()

    none = browser.post(f"{URL}add/", {"reason": "fw", **_when("start_at", start),
                                       **_when("end_at", start + timedelta(hours=1)), "_save": "Save"})
    assert none.status_code == 200 and "give at least one node" in none.context["adminform"].form.errors["nodes"][0]


def test_a_change_goes_through_the_service_and_cancel_keeps_the_window(browser: Client, fleet: Fleet) -> None:
    root = fleet.users["admin"]
    start = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    window = maintenance.create(root, nodes=["h100-1"], start_at=start, duration_s=3600, reason="fw")
    h100_1, h100_2 = Node.objects.get(name="h100-1"), Node.objects.get(name="h100-2")

    r = browser.post(f"{URL}{window.pk}/change/", {
        "nodes": [h100_1.pk, h100_2.pk], "reason": "fw and BIOS", **_when("start_at", start),
        **_when("end_at", start + timedelta(hours=2)), "_save": "Save"})

    assert r.status_code == 302, r.content.decode()[:3000]
    window.refresh_from_db()
    assert sorted(n.name for n in window.nodes.all()) == ["h100-1", "h100-2"]
    assert window.reason == "fw and BIOS" and window.end_at == start + timedelta(hours=2)
    changed = Event.objects.get(reason="MaintenanceWindowChanged")
    assert changed.actor == "user:boss" and "nodes added: h100-2" in changed.message

    acted = browser.post(URL, {"action": "cancel_windows", "_selected_action": [window.pk], "post": "yes"},
                         follow=True)
    assert "Cancelled maintenance window" in acted.content.decode()
    window.refresh_from_db()
    assert window.cancelled_at is not None and window.cancelled_by.username == "boss"
    assert browser.get(f"{URL}{window.pk}/delete/").status_code == 403
    # A cancelled window is history: the change page refuses a change on the form.
    again = browser.post(f"{URL}{window.pk}/change/", {
        "nodes": [h100_1.pk], "reason": "x", **_when("start_at", start), **_when("end_at", start + timedelta(hours=2)),
        "_save": "Save"})
    assert again.status_code == 200 and "was cancelled at" in again.content.decode()


def test_the_admin_form_refuses_a_past_start_and_an_overlap_on_their_fields(browser: Client, fleet: Fleet) -> None:
    root = fleet.users["admin"]
    start = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    first = maintenance.create(root, nodes=["h100-1"], start_at=start, duration_s=3600, reason="fw")
    node = Node.objects.get(name="h100-1")
    past = timezone.now() - timedelta(hours=1)

    early = browser.post(f"{URL}add/", {"nodes": [node.pk], "reason": "x", **_when("start_at", past),
                                        **_when("end_at", start), "_save": "Save"})
    over = browser.post(f"{URL}add/", {"nodes": [node.pk], "reason": "x", **_when("start_at", start),
                                       **_when("end_at", start + timedelta(minutes=30)), "_save": "Save"})

    assert early.status_code == 200
    assert "before now" in early.context["adminform"].form.errors["start_at"][0]
    assert over.status_code == 200
    assert (f"h100-1 is already in maintenance window {first.pk}"
            in over.context["adminform"].form.errors["nodes"][0])
    assert MaintenanceWindow.objects.count() == 1
    assert Event.objects.filter(reason="MaintenanceWindowCreated").count() == 1


def test_times_the_wrong_way_round_are_said_on_their_field_beside_another_fields_error(
        browser: Client, fleet: Fleet) -> None:
    """A node retired while the form was open (no longer a choice) and an end before the start:
    until 7 Dec the times were checked only when every other field was right, so the admin read the
    database's words, "Constraint “maintenance_window_ends_after_start” is violated.", above the form."""
    start = timezone.now() + timedelta(hours=2)
    node = Node.objects.get(name="h100-1")
    Node.objects.filter(pk=node.pk).update(state="retired", retired_at=timezone.now())
    r = browser.post(f"{URL}add/", {"nodes": [node.pk], "reason": "fw", **_when("start_at", start),
                                    **_when("end_at", start - timedelta(hours=1)), "_save": "Save"})

    assert r.status_code == 200
    form = r.context["adminform"].form
    assert "nodes" in form.errors and "not one of the available choices" in form.errors["nodes"][0]
    assert "a window ends after it begins" in form.errors["end_at"][0]
    assert form.non_field_errors() == []
    assert "Constraint" not in r.content.decode()
    assert not MaintenanceWindow.objects.exists()
