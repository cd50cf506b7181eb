"""`qm explain` of a waiting job prints where its start likely lands by the ETA record of jobs of
its size, as the API's explain gives it (`likely_start`: the CLI does not compute it) and the
job's page says it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _started(team, *, shares: list[float], gpus: int, wait_told_min: float = 120) -> None:
    told_at = timezone.now() - timedelta(hours=3)
    pc = team.default_priority_class or f.make_priority_class()
    Job.objects.bulk_create(
        Job(team=team, priority_class=pc, name=f"ran-{gpus}-{i}", gpus=gpus, runtime_limit_s=3600, state="running",
            submitted_at=told_at, state_changed_at=told_at, started_at=told_at + timedelta(minutes=share * wait_told_min),
            eta_told=told_at + timedelta(minutes=wait_told_min), eta_told_at=told_at)
        for i, share in enumerate(shares))


def test_explain_prints_the_likely_start_of_jobs_of_its_size(alice_qm, fleet) -> None:
    _started(fleet.ml, shares=[0.05] * 30, gpus=1)  # small jobs start almost at once
    _started(fleet.ml, shares=[0.25] * 10 + [0.5, 0.5] + [1.25] * 10, gpus=16)  # the fleet's nodes hold 8
    waiting = f.make_job(fleet.ml, gpus=16, pending_code="InsufficientGpus", queue_position=1,
                         eta=timezone.now() + timedelta(hours=4))
    explained = alice_qm("explain", str(waiting.pk)).out
    line = re.search(r"^  likely start:\s+about (\S+ \S+ UTC) \(in (\S+)\), at the median 50% of the wait told "
                     r"that 22 jobs of 8\+ GPUs had in the last 7 days$", explained, re.M)
    assert line, explained
    assert line.group(2) in ("2h", "1h59m"), explained  # halfway to its ETA 4 h away


def test_explain_says_no_likely_start_without_a_record_of_its_size(alice_qm, fleet) -> None:
    _started(fleet.ml, shares=[0.05] * 30, gpus=1)  # only small jobs judged
    waiting = f.make_job(fleet.ml, gpus=16, pending_code="InsufficientGpus", queue_position=1,
                         eta=timezone.now() + timedelta(hours=2))
    assert "likely start" not in alice_qm("explain", str(waiting.pk)).out
