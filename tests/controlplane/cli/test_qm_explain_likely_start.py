"""`qm explain` of a waiting job prints where its start likely lands by the fleet's ETA record,
as the API's explain gives it (`likely_start`: the CLI does not compute it) and the job's page
says it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _started(team, *, wait_min: float, wait_told_min: float) -> None:
    told_at = timezone.now() - timedelta(hours=3)
    job = f.make_job(team, state="running")
    Job.objects.filter(pk=job.pk).update(started_at=told_at + timedelta(minutes=wait_min),
                                         eta_told=told_at + timedelta(minutes=wait_told_min), eta_told_at=told_at)


def test_explain_prints_the_likely_start_the_api_gives(alice_qm, fleet) -> None:
    for wait in (30, 60, 150):  # of 120 told: shares 0.25, 0.5, 1.25
        _started(fleet.ml, wait_min=wait, wait_told_min=120)
    waiting = f.make_job(fleet.ml, pending_code="InsufficientGpus", queue_position=1,
                         eta=timezone.now() + timedelta(hours=4))
    explained = alice_qm("explain", str(waiting.pk)).out
    line = re.search(r"^  likely start:\s+about (\S+ \S+ UTC) \(in (\S+)\), at the median 50% of the wait told "
                     r"that 3 jobs had in the last 7 days$", explained, re.M)
    assert line, explained
    assert line.group(2) in ("2h", "1h59m"), explained  # halfway to its ETA 4 h away


def test_explain_says_no_likely_start_without_a_record(alice_qm, fleet) -> None:
    waiting = f.make_job(fleet.ml, pending_code="InsufficientGpus", queue_position=1,
                         eta=timezone.now() + timedelta(hours=2))
    assert "likely start" not in alice_qm("explain", str(waiting.pk)).out
