"""/api/v1/maintenance-windows/ refuses a window that starts in the past or overlaps another on
one of its nodes: a 400 naming the field (`start_at`, `nodes`) and the problem, nothing written.
The rules themselves: tests/controlplane/test_maintenance_window_rules.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import Event, MaintenanceWindow
from controlplane.services import maintenance
from tests.controlplane.fleet_fixture import Fleet

URL = "/api/v1/maintenance-windows/"


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _window(admin: APIClient, nodes: list[str], start: datetime, hours: float, reason: str = "fw") -> dict[str, Any]:
    r = admin.post(URL, {"nodes": nodes, "start_at": _iso(start), "duration_s": int(hours * 3600), "reason": reason},
                   format="json")
    assert r.status_code == 201, r.json()
    return r.json()


def _refused(r: Any, field: str) -> str:
    assert r.status_code == 400, r.json()
    assert set(r.json()["errors"]) == {field}, r.json()
    assert r.json()["detail"].startswith("Invalid request.")
    return " ".join(r.json()["errors"][field])


def test_a_window_starting_in_the_past_is_a_400_on_start_at(admin: APIClient, fleet: Fleet) -> None:
    hour_ago = timezone.now() - timedelta(hours=1)
    r = admin.post(URL, {"nodes": ["h100-1"], "start_at": _iso(hour_ago), "duration_s": 4 * 3600,
                         "reason": "firmware"}, format="json")

    words = _refused(r, "start_at")
    assert words.startswith(f"it starts at {maintenance.when(hour_ago)}, before now (")
    assert "a window starts now or later" in words and "start it now" in words
    assert not MaintenanceWindow.objects.exists()
    assert not Event.objects.filter(reason__startswith="Maintenance").exists()
    # Started a minute ago (clock skew): taken, active at once.
    assert _window(admin, ["h100-1"], timezone.now() - timedelta(minutes=1), 1)["state"] == "active"


def test_a_patch_may_not_move_a_start_into_the_past_and_a_begun_window_keeps_its_start(
        admin: APIClient, fleet: Fleet) -> None:
    now = timezone.now()
    upcoming = _window(admin, ["h100-1"], now + timedelta(hours=1), 2)
    active = _window(admin, ["h100-2"], now - timedelta(minutes=3), 2)

    back = admin.patch(f"{URL}{upcoming['id']}/", {"start_at": _iso(now - timedelta(hours=1))}, format="json")
    moved = admin.patch(f"{URL}{active['id']}/", {"start_at": _iso(now + timedelta(hours=1))}, format="json")
    longer = admin.patch(f"{URL}{active['id']}/", {"end_at": _iso(now + timedelta(hours=5))}, format="json")
    past = admin.patch(f"{URL}{active['id']}/", {"end_at": _iso(now - timedelta(minutes=1))}, format="json")

    assert "before now" in _refused(back, "start_at")
    assert "its start cannot move" in _refused(moved, "start_at")
    assert longer.status_code == 200 and longer.json()["end_at"] == _iso(now + timedelta(hours=5))
    assert "which is past" in _refused(past, "end_at")
    assert admin.get(f"{URL}{upcoming['id']}/").json()["start_at"] == upcoming["start_at"]
    assert Event.objects.filter(reason="MaintenanceWindowChanged").count() == 1


def test_an_overlapping_window_is_a_400_on_nodes_naming_the_other(admin: APIClient, fleet: Fleet) -> None:
    start = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    first = _window(admin, ["h100-1", "h100-2"], start, 4, reason="firmware upgrade")

    r = admin.post(URL, {"pool": "h100", "start_at": _iso(start + timedelta(hours=1)), "duration_s": 3600,
                         "reason": "cabling"}, format="json")

    words = _refused(r, "nodes")
    assert words.startswith(f"h100-1, h100-2 are already in maintenance window {first['id']} (firmware upgrade, "
                            f"from {maintenance.when(start)} to {maintenance.when(start + timedelta(hours=4))}, 4 h)")
    assert f"extend or change window {first['id']} instead" in words
    assert MaintenanceWindow.objects.count() == 1
    assert Event.objects.filter(reason="MaintenanceWindowCreated").count() == 1

    # Back to back, or on other nodes: fine. Moved onto the first one's nodes and time: refused.
    after = _window(admin, ["h100-1"], start + timedelta(hours=4), 1)
    other = _window(admin, ["h100-3"], start, 4)
    r = admin.patch(f"{URL}{other['id']}/", {"nodes": ["h100-3", "h100-2"]}, format="json")
    assert f"h100-2 is already in maintenance window {first['id']}" in _refused(r, "nodes")
    assert admin.get(f"{URL}{other['id']}/").json()["nodes"] == ["h100-3"]
    r = admin.patch(f"{URL}{after['id']}/", {"start_at": _iso(start + timedelta(hours=3))}, format="json")
    assert f"h100-1 is already in maintenance window {first['id']}" in _refused(r, "nodes")
    # Once the first is cancelled, its time is free.
    assert admin.post(f"{URL}{first['id']}/cancel/").status_code == 200
    assert admin.patch(f"{URL}{other['id']}/", {"nodes": ["h100-3", "h100-2"]}, format="json").status_code == 200


def test_a_duration_of_years_is_refused_by_the_windows_longest_not_a_bare_bound(admin: APIClient, fleet: Fleet) -> None:
    """`qm maint add -d 100000d` (8,640,000,000 s) was refused "Ensure this value is less than or
    equal to 2147483647.", a bound in seconds nobody typed, where `--end` a year on said the rule:
    a window lasts at most 14 d. Both now say the rule, on PATCH as on POST."""
    start = timezone.now() + timedelta(hours=1)
    for seconds in (100_000 * 86400, 10**30):
        words = _refused(admin.post(URL, {"nodes": ["h100-1"], "start_at": _iso(start), "duration_s": seconds,
                                          "reason": "firmware"}, format="json"), "duration_s")
        assert "2147483647" not in words, words
        assert "a window lasts at most 14 d" in words, words
    window = _window(admin, ["h100-1"], start, 1)
    words = _refused(admin.patch(f"{URL}{window['id']}/", {"duration_s": 100_000 * 86400}, format="json"), "duration_s")
    assert "a window lasts at most 14 d" in words, words
    assert MaintenanceWindow.objects.get().end_at == MaintenanceWindow.objects.get().start_at + timedelta(hours=1)
