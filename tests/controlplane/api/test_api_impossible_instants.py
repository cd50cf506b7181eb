"""A time written as ISO 8601 that no calendar has (month 13, 30 February, hour 99) or with an
offset of a day or more is a 400 on its field, nothing written, on every field that takes an
instant with its zone (price rates' `effective_from`, maintenance windows' `start_at` and
`end_at`).

Found by the API audit (4 Dec): `POST maintenance-windows/ {"start_at": "2026-13-45T99:99:99Z",
…}` and `POST price-rates/ {"effective_from": "2026-12-04T10:00:00+99:00", …}` answered 500 with
the HTML error page: the zone check (`ZonedDateTimeField`) called Django's `parse_datetime`, which
raises ValueError for such a text instead of answering None, before DRF's own parse (which
catches it) ever saw it. Text that is not ISO 8601 at all ("garbage") was already a 400."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import Event, MaintenanceWindow, PriceRate

pytestmark = pytest.mark.django_db
J = "/api/v1"

IMPOSSIBLE = {
    "month 13": ("2026-13-01T00:00:00Z", "month must be in 1..12"),
    "30 February": ("2027-02-30T00:00:00Z", "day is out of range for month"),
    "hour 99": ("2027-01-01T99:00:00Z", "hour must be in 0..23"),
    "offset of 99 hours": ("2027-01-01T10:00:00+99:00", "offset must lie between -23:59 and +23:59"),
}


def _future() -> str:
    return (timezone.now() + timedelta(hours=1)).astimezone(UTC).isoformat().replace("+00:00", "Z")


def _refused_on(r: Any, field: str, text: str, words: str) -> None:
    assert r.status_code == 400, (r.status_code, r.content[:300])
    body = r.json()
    assert list(body["errors"]) == [field], body
    said = body["errors"][field][0]
    assert f"'{text}' is no time" in said and words in said, said
    assert field in body["detail"]


@pytest.mark.parametrize(("text", "words"), IMPOSSIBLE.values(), ids=IMPOSSIBLE.keys())
def test_a_price_rate_from_an_impossible_time_is_refused_on_effective_from(fleet, admin, text, words) -> None:
    r = admin.post(f"{J}/price-rates/", {"gpu_type": "A100-40GB", "capacity_tier": "spot",
                                         "usd_per_gpu_hour": "0.9000", "effective_from": text}, format="json")

    _refused_on(r, "effective_from", text, words)
    assert not PriceRate.objects.filter(gpu_type=fleet.a100).exists()


@pytest.mark.parametrize(("text", "words"), IMPOSSIBLE.values(), ids=IMPOSSIBLE.keys())
def test_a_price_rate_moved_to_an_impossible_time_is_refused_and_kept(fleet, admin, text, words) -> None:
    rate = PriceRate.objects.get(gpu_type=fleet.h100)
    before = rate.effective_from

    r = admin.patch(f"{J}/price-rates/{rate.pk}/", {"effective_from": text}, format="json")

    _refused_on(r, "effective_from", text, words)
    rate.refresh_from_db()
    assert rate.effective_from == before


@pytest.mark.parametrize("field", ["start_at", "end_at"])
@pytest.mark.parametrize(("text", "words"), IMPOSSIBLE.values(), ids=IMPOSSIBLE.keys())
def test_a_maintenance_window_at_an_impossible_time_is_refused_on_the_field(fleet, admin, field, text, words) -> None:
    body = {"nodes": ["h100-1"], "start_at": _future(), "end_at": None, "reason": "firmware upgrade"}
    body[field] = text
    if field == "start_at":
        body.pop("end_at")
        body["duration_s"] = 3600

    r = admin.post(f"{J}/maintenance-windows/", body, format="json")

    _refused_on(r, field, text, words)
    assert not MaintenanceWindow.objects.exists()
    assert not Event.objects.filter(reason="MaintenanceWindowCreated").exists()


@pytest.mark.parametrize(("text", "words"), IMPOSSIBLE.values(), ids=IMPOSSIBLE.keys())
def test_a_maintenance_window_moved_to_an_impossible_time_is_refused_and_kept(fleet, admin, text, words) -> None:
    made = admin.post(f"{J}/maintenance-windows/", {"nodes": ["h100-1"], "start_at": _future(), "duration_s": 3600,
                                                    "reason": "firmware upgrade"}, format="json")
    assert made.status_code == 201, made.json()
    window = MaintenanceWindow.objects.get(pk=made.json()["id"])

    r = admin.patch(f"{J}/maintenance-windows/{window.pk}/", {"start_at": text}, format="json")

    _refused_on(r, "start_at", text, words)
    kept = MaintenanceWindow.objects.get(pk=window.pk)
    assert (kept.start_at, kept.end_at) == (window.start_at, window.end_at)


def test_a_possible_time_with_a_large_offset_is_still_taken(fleet, admin) -> None:
    r = admin.post(f"{J}/price-rates/", {"gpu_type": "A100-40GB", "capacity_tier": "spot",
                                         "usd_per_gpu_hour": "0.9000", "effective_from": "2027-01-01T00:00:00+14:00"},
                   format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["effective_from"] == "2026-12-31T10:00:00Z"
