"""`qm list` says when each waiting job is expected to start (START), as `squeue --start` does.

Found by QA as a platform engineer coming from Slurm: `qm list` showed a waiting job's queue
position (POS) and reason but not the engine's ETA, which the API gives on every job (`eta`);
the only way to see it was `qm explain`/`qm status`, one job at a time."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _row(out: str, job_id: int) -> str:
    line = next(line for line in out.splitlines() if re.match(rf"^\s*{job_id}\s", line))
    return line


def test_list_shows_each_waiting_jobs_expected_start(alice_qm, fleet) -> None:
    soon = f.make_job(fleet.ml, name="soon", pending_code="QuotaExceeded", queue_position=1,
                      eta=timezone.now() + timedelta(hours=2, seconds=30))
    passed = f.make_job(fleet.ml, name="passed", pending_code="WaitingForReservation", queue_position=2,
                        eta=timezone.now() - timedelta(minutes=3))
    unknown = f.make_job(fleet.ml, name="unknown", pending_code="CanNeverRun", queue_position=3)
    running = f.make_job(fleet.ml, name="running", state=JobState.RUNNING, started_at=timezone.now())

    run = alice_qm("list", "--sort", "queue_position")

    assert run.code == 0, run.err
    head = run.out.splitlines()[0]
    assert head.split() == ["ID", "NAME", "TEAM", "STATE", "GPUS", "PRIORITY", "AGE", "POS", "START", "REASON"], run.out
    start, end = head.index("START"), head.index("REASON")

    def cell(job_id: int) -> str:
        return _row(run.out, job_id)[start:end].strip()

    assert cell(soon.pk) == "in 2.0 h", run.out
    assert cell(passed.pk) == "passed", run.out
    assert cell(unknown.pk) == "-", run.out
    assert cell(running.pk) == "-", run.out
    assert "START passed: the expected start has passed and no scheduling cycle has run since." in run.out
