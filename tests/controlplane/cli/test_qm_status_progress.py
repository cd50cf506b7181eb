"""`qm status JOB` says the job's progress as the job page's Progress does: the steps and useful
tokens its agents reported and its last checkpoint (when, and how long ago: what a preemption
now would lose). It said none of them: a researcher asking whether their run was getting
anywhere, or when it last saved, had to open the page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.cli import output
from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _field(out: str, name: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith(f"{name}:"))


def test_status_says_steps_tokens_and_the_last_checkpoint(alice_qm, fleet) -> None:  # noqa: ANN001
    now = timezone.now()
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="pretrain", state=JobState.RUNNING,
                     started_at=now - timedelta(hours=2))
    saved = now - timedelta(minutes=25)
    Job.objects.filter(pk=job.pk).update(steps=18_250, useful_tokens=1_203_000_000, last_checkpoint_at=saved)

    r = alice_qm("status", str(job.pk))

    assert r.code == 0, r.err
    assert _field(r.out, "progress") == "18,250 steps, 1,203,000,000 useful tokens"
    assert _field(r.out, "last checkpoint") == f"{output.utc_text(saved.isoformat())} (25 min ago)"


def test_a_job_that_never_reported_says_so(alice_qm, fleet) -> None:  # noqa: ANN001
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="fresh", state=JobState.RUNNING,
                     started_at=timezone.now() - timedelta(minutes=3))

    r = alice_qm("status", str(job.pk))

    assert r.code == 0, r.err
    assert _field(r.out, "progress") == "none reported yet"
    assert _field(r.out, "last checkpoint") == "none reported"


def test_a_job_that_never_ran_has_no_progress_line_to_read(alice_qm, fleet) -> None:  # noqa: ANN001
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="waiting")

    r = alice_qm("status", str(job.pk))

    assert r.code == 0, r.err
    assert _field(r.out, "progress") == "-" and _field(r.out, "last checkpoint") == "-"
