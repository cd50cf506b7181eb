"""`qm status` and `qm explain` of a running elastic job below its maximum say why the scheduler did
not grow it (the job's `growth_code` and `growth_note`, from the cycle); a job without a note has no
such line."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services import cycle

pytestmark = pytest.mark.slow


def test_status_and_explain_of_an_elastic_job_say_why_it_is_not_growing(alice_qm, fleet) -> None:
    at = timezone.now() - timedelta(minutes=1)
    job = Job.objects.create(team=fleet.ml, name="elastic", priority_class=fleet.research, gpus=8,
                             min_gpus=8, max_gpus=64, gpu_types=["H100-80GB"], runtime_limit_s=4 * 3600,
                             submitted_at=at, state_changed_at=at, submitter=fleet.users["owner"])
    plain = Job.objects.create(team=fleet.ml, name="plain", priority_class=fleet.research, gpus=8,
                               gpu_types=["A100-40GB"], runtime_limit_s=4 * 3600, submitted_at=at,
                               state_changed_at=at, submitter=fleet.users["owner"])
    cycle.run_cycle("w")
    cycle.run_cycle("w")
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.growth_code, "the fleet leaves it below its maximum"

    status = alice_qm("status", str(job.pk))
    assert status.code == 0, status.err
    line = next(line for line in status.out.splitlines() if line.startswith("not growing:"))
    assert line.split(":", 1)[1].strip() == f"{job.growth_code}: {job.growth_note}"
    other = alice_qm("status", str(plain.pk))
    assert "not growing" not in other.out

    explained = alice_qm("explain", str(job.pk))
    assert explained.code == 0, explained.err
    line = next(line for line in explained.out.splitlines() if line.strip().startswith("not growing:"))
    assert line.split(":", 1)[1].strip() == f"{job.growth_code}: {job.growth_note}"
    assert "not growing" not in alice_qm("explain", str(plain.pk)).out
