"""maintenance-windows/: a start or end without a time zone is refused on its field, as price-rates/
refuses a naive effective_from and showback a naive window (one check: serializers.ZonedDateTimeField).
Until 2 Dec it was read as UTC without a word: an operator in New York typing 22:00 for tonight's
firmware upgrade took the nodes out five hours early, and stopped starting jobs there before that."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import MaintenanceWindow
from tests.controlplane.fleet_fixture import Fleet

URL = "/api/v1/maintenance-windows/"


def _later(hours: int) -> datetime:
    return (timezone.now() + timedelta(hours=hours)).astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@pytest.mark.parametrize("field", ["start_at", "end_at"])
def test_a_naive_time_is_a_400_naming_the_field_and_nothing_is_stored(admin: APIClient, fleet: Fleet, field: str,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    start, end = _later(2), _later(6)
    body = {"nodes": ["h100-1"], "reason": "firmware upgrade",
            "start_at": start.isoformat().replace("+00:00", "Z"), "end_at": end.isoformat()}
    naive = (start if field == "start_at" else end).strftime("%Y-%m-%dT%H:%M:%S")
    body[field] = naive
    with caplog.at_level(logging.INFO):
        r = admin.post(URL, body, format="json")
    assert r.status_code == 400, r.json()
    assert set(r.json()["errors"]) == {field}, r.json()
    said = " ".join(r.json()["errors"][field])
    assert f"'{naive}' has no time zone; add Z or an offset, e.g. {naive}Z or {naive}+00:00 for UTC" in said
    assert not MaintenanceWindow.objects.exists()
    assert "maintenance_window_refused" in caplog.text  # logged as every refusal is


def test_a_patch_moving_a_window_to_a_naive_time_is_refused_and_changes_nothing(admin: APIClient,
                                                                                fleet: Fleet) -> None:
    created = admin.post(URL, {"nodes": ["h100-1"], "start_at": _later(2).isoformat(), "duration_s": 3600,
                               "reason": "fw"}, format="json")
    assert created.status_code == 201, created.json()
    window = MaintenanceWindow.objects.get()
    naive = _later(3).strftime("%Y-%m-%dT%H:%M")
    r = admin.patch(f"{URL}{window.pk}/", {"start_at": naive}, format="json")
    assert r.status_code == 400 and set(r.json()["errors"]) == {"start_at"}, r.json()
    assert "has no time zone" in " ".join(r.json()["errors"]["start_at"])
    r = admin.patch(f"{URL}{window.pk}/", {"end_at": naive}, format="json")
    assert r.status_code == 400 and set(r.json()["errors"]) == {"end_at"}, r.json()
    assert "has no time zone" in " ".join(r.json()["errors"]["end_at"])
    window.refresh_from_db()
    assert (window.start_at, window.end_at) == (_later(2), _later(2) + timedelta(hours=1))


def test_an_offset_is_read_as_the_instant_it_names(admin: APIClient, fleet: Fleet) -> None:
    start = _later(5)
    local = start.astimezone(timezone.get_fixed_timezone(-300))  # New York in winter: 5 h behind
    r = admin.post(URL, {"nodes": ["h100-1"], "start_at": local.isoformat(), "end_at":
                         (start + timedelta(hours=2)).isoformat().replace("+00:00", "Z"), "reason": "fw"},
                   format="json")
    assert r.status_code == 201, r.json()
    assert MaintenanceWindow.objects.get().start_at == start and r.json()["duration_s"] == 7200
