"""Every time query filter of the API (events' after/before, the jobs list's submitted_, started_
and finished_ windows, price rates' effective_) reads a time by the one rule a maintenance
window's start_at reads it by (services/instants.instant_from_text): text that is no time, a
time without a zone and a time no calendar has are a 400 naming the parameter, in the same words,
with the form to send.

Found by the operator review (7 Dec): `events/?after=yesterday` answered Django's bare "Enter a
valid date/time.", and `events/?after=2026-12-07T01:00:00` was read as UTC where a maintenance
window refuses a time without a zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import EventKind
from controlplane.models import Event
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db
J = "/api/v1"

TIME_FILTERS = [
    ("events/", "after"), ("events/", "before"),
    ("jobs/", "submitted_after"), ("jobs/", "submitted_before"), ("jobs/", "started_after"),
    ("jobs/", "started_before"), ("jobs/", "finished_after"), ("jobs/", "finished_before"),
    ("jobs/history.csv", "finished_after"),
    ("price-rates/", "effective_after"), ("price-rates/", "effective_before"),
]
NOT_A_TIME = ("'yesterday' is not a time: give an RFC 3339 instant with its time zone, e.g. 2026-12-01T00:00:00Z "
              "or 2026-12-01T00:00:00-05:00")
NO_ZONE = ("'2026-12-07T01:00:00' has no time zone; add Z or an offset, e.g. 2026-12-07T01:00:00Z or "
           "2026-12-07T01:00:00+00:00 for UTC")


def _refused(client: APIClient, path: str, name: str, value: str) -> list[str]:
    r = client.get(f"{J}/{path}", {name: value}, HTTP_ACCEPT="application/json")
    assert r.status_code == 400, (r.status_code, r.content[:300])
    body = r.json()
    assert list(body["errors"]) == [name], body
    assert name in body["detail"], body
    return list(body["errors"][name])


@pytest.mark.parametrize(("path", "name"), TIME_FILTERS)
def test_text_that_is_no_time_is_refused_naming_the_parameter_and_the_form(admin: APIClient, fleet: Fleet,
                                                                           path: str, name: str) -> None:
    assert _refused(admin, path, name, "yesterday") == [NOT_A_TIME]


@pytest.mark.parametrize(("path", "name"), TIME_FILTERS)
def test_a_time_without_a_zone_is_refused_as_a_maintenance_window_refuses_it(admin: APIClient, fleet: Fleet,
                                                                             path: str, name: str) -> None:
    assert _refused(admin, path, name, "2026-12-07T01:00:00") == [NO_ZONE]


def test_the_words_are_a_maintenance_windows(admin: APIClient, fleet: Fleet) -> None:
    for start_at, said in (("yesterday", NOT_A_TIME), ("2026-12-07T01:00:00", NO_ZONE)):
        r = admin.post(f"{J}/maintenance-windows/", {"nodes": ["h100-1"], "start_at": start_at, "duration_s": 60,
                                                     "reason": "fw"}, format="json")
        assert r.status_code == 400 and r.json()["errors"] == {"start_at": [said]}, r.json()
        assert _refused(admin, "events/", "after", start_at) == [said]


def test_a_time_no_calendar_has_is_refused_in_the_same_words_as_a_window(admin: APIClient, fleet: Fleet) -> None:
    said = _refused(admin, "events/", "after", "2026-13-01T00:00:00Z")
    assert said == ["'2026-13-01T00:00:00Z' is no time: month must be in 1..12 (e.g. 2026-12-01T00:00:00Z)"]


def test_a_time_with_its_zone_still_filters_and_an_offset_typed_unencoded_reads_as_sent(admin: APIClient,
                                                                                       fleet: Fleet) -> None:
    now = timezone.now()
    Event.objects.all().delete()
    old = Event.objects.create(kind=EventKind.NODE_STATE, message="old", actor="system",
                               created_at=now - timedelta(hours=3))
    new = Event.objects.create(kind=EventKind.NODE_STATE, message="new", actor="system", created_at=now)
    edge = (now - timedelta(hours=1)).astimezone(UTC)

    def ids(query: str) -> list[int]:
        r = admin.get(f"{J}/events/?{query}")
        assert r.status_code == 200, r.content[:300]
        return [e["id"] for e in r.json()["results"]]

    assert ids(f"after={edge:%Y-%m-%dT%H:%M:%S}Z") == [new.pk]
    five = edge.astimezone(datetime.strptime("+0500", "%z").tzinfo)
    # `curl '…?after=…+05:00'`: the query string reads the '+' as a space; the instant is unambiguous
    assert ids(f"after={five:%Y-%m-%dT%H:%M:%S}+05:00") == [new.pk]
    assert ids(f"before={five:%Y-%m-%dT%H:%M:%S}%2B05:00") == [old.pk]
