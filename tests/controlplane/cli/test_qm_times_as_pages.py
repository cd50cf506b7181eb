"""`qm` says times as the sentences beside them and the pages do: UTC, to the nearest second.

Seen on the demo: `qm explain 24` printed the reason "Holds a reservation … from 2026-11-30
03:14:21 UTC" over "earliest start: 2026-11-30T03:14:20.769399Z (in 3h53m)", a second apart
and in another format; `qm events 15` said the preemption at 23:19:01 where the job's page
said 23:19:02 (the event was written at 23:19:01.82; the CLI cut the fraction, the page rounds).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event
from frontend.templatetags.qm import utc
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_explain_and_status_say_the_eta_as_the_reason_does(alice_qm, fleet) -> None:
    # 10 s past the 2 h: "in 2.0 h", as the page says it (qm said "in 2h", and 30 s past "in 2h1m")
    eta = (timezone.now() + timedelta(hours=2, seconds=10)).replace(microsecond=769_399)
    job = f.make_job(fleet.ml, pending_code="WaitingForReservation", queue_position=2, eta=eta,
                     pending_message=f"Holds a reservation from t={round(eta.timestamp())}.")

    explained = alice_qm("explain", str(job.pk)).out
    status = alice_qm("status", str(job.pk)).out

    said = utc(eta)  # "2026-… HH:MM:SS UTC", rounded
    assert f"Holds a reservation from {said}." in explained
    assert re.search(rf"^  latest start:\s+{said} \(in 2.0 h\)$", explained, re.M), explained
    assert re.search(rf"^latest start:\s+{said}$", status, re.M), status
    assert re.search(rf"^submitted:\s+{utc(job.submitted_at)}$", status, re.M), status


def test_events_say_each_time_as_the_jobs_page_does(alice_qm, fleet, client) -> None:
    job = f.make_job(fleet.ml, state=JobState.CANCELLED, finished_at=timezone.now())
    at = datetime(2026, 11, 29, 23, 19, 1, 824_395, tzinfo=UTC)
    Event.objects.create(kind=EventKind.JOB_CANCELLED, actor="user:alice", reason="Cancelled", job=job, team=fleet.ml,
                         message="Cancelled by alice", created_at=at)

    out = alice_qm("events", str(job.pk)).out
    client.force_login(fleet.users["owner"])
    page = client.get(f"/jobs/{job.pk}/").content.decode()

    assert "2026-11-29 23:19:02 UTC" in page
    assert re.search(r"^2026-11-29 23:19:02\s+job\.cancelled\s+user:alice\s+Cancelled by alice$", out, re.M), out
