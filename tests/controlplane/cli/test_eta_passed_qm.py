"""`qm` says a passed ETA as passed, as the job's page does.

Before, with the scheduling loop stopped, `qm explain` printed "earliest start: 2026-11-30
02:10:00 UTC (in 0s)" for an ETA three minutes past, and `qm status` the bare time, as if the
job were starting; the page said "(now)"."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from frontend.templatetags.qm import utc
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_explain_and_status_say_a_passed_eta_passed(alice_qm, fleet) -> None:
    eta = timezone.now() - timedelta(minutes=3, seconds=10)
    job = f.make_job(fleet.ml, pending_code="WaitingForReservation", queue_position=1, eta=eta,
                     pending_message=f"Holds a reservation from t={round(eta.timestamp())}.")

    explained = alice_qm("explain", str(job.pk)).out
    status = alice_qm("status", str(job.pk)).out

    words = rf"was {utc(eta)}, passed 3 min ago: no scheduling cycle has run since"
    assert re.search(rf"^  latest start:\s+{words}$", explained, re.M), explained
    assert re.search(rf"^latest start:\s+{words}$", status, re.M), status
    assert "in 0s" not in explained


def test_a_future_eta_reads_as_before(alice_qm, fleet) -> None:
    eta = timezone.now() + timedelta(hours=2, seconds=30)
    job = f.make_job(fleet.ml, pending_code="WaitingForReservation", queue_position=1, eta=eta)
    explained = alice_qm("explain", str(job.pk)).out
    status = alice_qm("status", str(job.pk)).out
    assert re.search(rf"^  latest start:\s+{utc(eta)} \(in 2.0 h\)$", explained, re.M), explained
    assert re.search(rf"^latest start:\s+{utc(eta)}$", status, re.M), status
