"""The schema types `events/?job=` as what the server takes: a whole number from 1 (it said
`number`, so a client generated from the schema could send 14.5, which the server refuses)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_the_events_job_filter_is_an_integer_in_the_schema(admin) -> None:
    schema = admin.get("/api/schema/", {"format": "json"}).json()
    job = next(p for p in schema["paths"]["/api/v1/events/"]["get"]["parameters"] if p["name"] == "job")

    assert job["schema"]["type"] == "integer" and job["schema"]["minimum"] == 1, job
    assert admin.get("/api/v1/events/", {"job": "1.5"}).status_code == 400
    assert admin.get("/api/v1/events/", {"job": "1"}).status_code == 200
