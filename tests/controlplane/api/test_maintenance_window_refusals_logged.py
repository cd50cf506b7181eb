"""A refused maintenance-window request leaves a structured log line, `maintenance_window_refused`,
with who asked, what (create, change, cancel; the window), the status, the fields at fault and the
words said, and what was given. No Event: the product records no refused admin action as an Event
(a node action, a quota change, a hold refused leave none either: events say what changed), and a
refusal inside the admin's transaction would be rolled back with it. Found by the operator
journey (2 Dec): a refused window left no trace at all, so "who tried to take h100-1 out at noon?"
had no answer."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import Event, MaintenanceWindow
from controlplane.services import maintenance
from tests.controlplane.fleet_fixture import Fleet

URL = "/api/v1/maintenance-windows/"


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _refusals(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.msg for r in caplog.records
            if isinstance(r.msg, dict) and r.msg.get("event") == "maintenance_window_refused"]


def test_a_refused_create_is_logged_with_who_what_and_why(admin: APIClient, fleet: Fleet,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    events = Event.objects.count()
    start = timezone.now() - timedelta(hours=1)
    r = admin.post(URL, {"nodes": ["h100-1", "nope-9"], "start_at": _iso(start), "duration_s": 3 * 3600,
                         "reason": "firmware"}, format="json")

    assert r.status_code == 400, r.json()
    (line,) = _refusals(caplog)
    assert line["action"] == "create" and line["status"] == 400 and line["window"] is None
    assert line["user"] == "root"
    assert line["fields"] == sorted(r.json()["errors"]) == ["nodes", "start_at"]
    assert line["errors"]["nodes"] == r.json()["errors"]["nodes"][0]
    assert line["given"]["nodes"] == ["h100-1", "nope-9"] and line["given"]["reason"] == "firmware"
    assert line["given"]["start_at"] == start.astimezone(UTC).isoformat()
    assert not MaintenanceWindow.objects.exists() and Event.objects.count() == events


def test_a_refused_change_and_a_refused_cancel_are_logged(admin: APIClient, fleet: Fleet,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    root = fleet.users["admin"]
    now = timezone.now()
    live = maintenance.create(root, nodes=["h100-1"], start_at=now + timedelta(hours=1), duration_s=3600, reason="a")
    other = maintenance.create(root, nodes=["h100-2"], start_at=now + timedelta(hours=1), duration_s=3600, reason="b")
    ended = MaintenanceWindow.objects.create(start_at=now - timedelta(hours=3), end_at=now - timedelta(hours=2),
                                             reason="old", created_at=now - timedelta(days=1))
    caplog.set_level(logging.INFO)
    events = Event.objects.count()

    overlap = admin.patch(f"{URL}{live.pk}/", {"nodes": ["h100-1", "h100-2"]}, format="json")
    history = admin.patch(f"{URL}{ended.pk}/", {"reason": "new words"}, format="json")
    cancel = admin.post(f"{URL}{ended.pk}/cancel/")
    shape = admin.patch(f"{URL}{live.pk}/", {"duration_s": "long"}, format="json")

    assert [x.status_code for x in (overlap, history, cancel, shape)] == [400, 409, 409, 400]
    lines = _refusals(caplog)
    assert [(x["action"], x["window"], x["status"], x["fields"]) for x in lines] == [
        ("change", live.pk, 400, ["nodes"]),
        ("change", ended.pk, 409, []),
        ("cancel", ended.pk, 409, []),
        ("change", live.pk, 400, ["duration_s"]),
    ]
    assert f"window {other.pk}" in lines[0]["errors"]["nodes"]
    assert "it is history" in lines[1]["errors"]["detail"] and lines[1]["given"] == {"reason": "new words"}
    assert all(x["user"] == "root" for x in lines)
    # nothing changed, and no event says anything did
    assert Event.objects.count() == events
    live.refresh_from_db()
    assert sorted(n.name for n in live.nodes.all()) == ["h100-1"]


def test_an_accepted_request_logs_no_refusal(admin: APIClient, fleet: Fleet, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    r = admin.post(URL, {"nodes": ["h100-1"], "start_at": _iso(timezone.now() + timedelta(hours=1)),
                         "duration_s": 3600, "reason": "firmware"}, format="json")
    assert r.status_code == 201 and _refusals(caplog) == []


def test_a_refusal_on_the_admins_form_is_logged_too(browser: Any, fleet: Fleet,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    start = timezone.now() + timedelta(hours=2)
    r = browser.post("/admin/controlplane/maintenancewindow/add/", {
        "pool": "nope", "start_at_0": f"{start:%Y-%m-%d}", "start_at_1": f"{start:%H:%M:%S}",
        "end_at_0": f"{start:%Y-%m-%d}", "end_at_1": f"{start + timedelta(hours=1):%H:%M:%S}", "reason": "fw"})

    assert r.status_code == 200 and not MaintenanceWindow.objects.exists()  # the form again, with its errors
    (line,) = _refusals(caplog)
    assert (line["action"], line["user"], line["status"]) == ("create", "boss", 400)
    assert "pool" in line["fields"] and line["given"]["pool"] == "nope"
