"""The API (and so `qm`) says the engine's times as UTC times, as the pages do: found in the
demo, where `qm explain` printed "Holds a reservation … from t=1795975864" and "Estimated start
t=1795982845", raw Unix seconds no reader can read."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.api.serializers import engine_times
from controlplane.choices import EventKind
from controlplane.models import Event
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"
RAW = "Estimated start t=1795989660 from runtime limits; by t=1795989720.5."
SAID = "Estimated start 2026-11-29 22:01:00 UTC from runtime limits; by 2026-11-29 22:02:00 UTC."


def test_engine_times_become_utc_times_and_other_numbers_stay() -> None:
    assert engine_times(RAW) == SAID
    assert engine_times("Estimated start t=3600 from runtime limits.") == "Estimated start t=3600 from runtime limits."
    assert engine_times("needs 16 GPUs; 8 are free") == "needs 16 GPUs; 8 are free"
    assert engine_times("") == ""
    # Beyond any calendar: left as written, never an error.
    assert engine_times("at t=99999999999999999999.") == "at t=99999999999999999999."


def test_a_waiting_jobs_reason_remedy_and_events_say_utc_times(fleet, alice) -> None:
    job = f.make_job(fleet.ml, gpus=8, pending_code="WaitingForReservation", pending_message=RAW,
                     pending_would_start_if="the reservation starts at t=1795989660", queue_position=1)
    Event.objects.create(kind=EventKind.JOB_PENDING, actor="scheduler", reason="WaitingForReservation", message=RAW,
                         job=job, team=fleet.ml, created_at=timezone.now())

    body = alice.get(f"{J}/jobs/{job.pk}/").json()
    listed = alice.get(f"{J}/jobs/").json()["results"][0]
    why = alice.get(f"{J}/jobs/{job.pk}/explain/").json()
    events = alice.get(f"{J}/jobs/{job.pk}/events/").json()["results"]
    audit = alice.get(f"{J}/events/", {"job": job.pk}).json()["results"]

    assert body["pending_message"] == listed["pending_message"] == why["reason"] == SAID
    assert body["pending_would_start_if"] == why["would_start_if"] == "the reservation starts at 2026-11-29 22:01:00 UTC"
    assert events[0]["message"] == audit[0]["message"] == SAID
