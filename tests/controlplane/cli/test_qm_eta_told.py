"""`qm explain` says beside a waiting job's ETA how far ETAs held lately (explain's `eta_record`), and
`qm status` of a started job the first ETA it was told and how far from it it started, as the
job's page does."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import Job
from frontend.templatetags.qm import utc
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _started(job: Job, *, told_min_before: float, wait_told_min: float) -> tuple:
    start = (timezone.now() - timedelta(minutes=5)).replace(microsecond=0)
    told = start + timedelta(minutes=told_min_before)
    told_at = told - timedelta(minutes=wait_told_min)
    Job.objects.filter(pk=job.pk).update(state="running", started_at=start, eta_told=told, eta_told_at=told_at)
    return told, told_at


def test_explain_says_how_far_etas_held_beside_the_eta(alice_qm, fleet) -> None:
    for before, wait in ((60, 120), (-20, 40)):
        _started(f.make_job(fleet.ml), told_min_before=before, wait_told_min=wait)
    waiting = f.make_job(fleet.ml, pending_code="InsufficientGpus", queue_position=1,
                         eta=timezone.now() + timedelta(hours=2))
    explained = alice_qm("explain", str(waiting.pk)).out
    assert re.search(r"^  etas lately:\s+at the latest, by runtime limits: of 2 jobs that waited with an ETA in the "
                     r"last 7 days, 50% started by the first one told, the median one after 150% of the wait told$",
                     explained, re.M), explained


def test_explain_without_a_record_says_nothing_more(alice_qm, fleet) -> None:
    waiting = f.make_job(fleet.ml, pending_code="InsufficientGpus", queue_position=1,
                         eta=timezone.now() + timedelta(hours=2))
    assert "etas lately" not in alice_qm("explain", str(waiting.pk)).out


def test_status_of_a_started_job_says_the_first_eta_told_and_how_far_from_it_it_started(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml)
    told, told_at = _started(job, told_min_before=90, wait_told_min=120)
    status = alice_qm("status", str(job.pk)).out
    assert re.search(rf"^eta told:\s+{utc(told)} \(told {utc(told_at)}\), started 90 min before it$", status, re.M), status
