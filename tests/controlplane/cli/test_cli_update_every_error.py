"""`qm update` prints every field the change is refused for, at once: a malformed one and one
the change itself is refused for (a project the team lacks), each on a line of its own; and for
a running job, its shape and a raised limit, both in the server's sentence. Nothing changes."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_qm_update_prints_every_field_at_fault(alice_qm, fleet) -> None:
    assert alice_qm("submit", "--name", "train", "--gpus", "4").code == 0
    job = Job.objects.get(name="train")

    refused = alice_qm("update", str(job.pk), "--cpus-per-gpu", "-1", "--project", "nope")

    assert refused.code == 1, refused.err
    lines = refused.err.strip().splitlines()
    assert lines[0].endswith("Invalid request."), refused.err
    assert any(line.strip().startswith("cpus_per_gpu (--cpus-per-gpu -1): host CPUs per GPU: 0 (none asked for) or more")
               for line in lines), refused.err
    assert "  project (--project nope): team 'ml' has no project 'nope'" in lines, refused.err
    job_now = Job.objects.get(pk=job.pk)
    assert (job_now.cpus_per_gpu, job_now.project_id) == (job.cpus_per_gpu, job.project_id)

    running = f.make_job(fleet.ml, gpus=4, runtime_limit_s=4 * 3600, state=JobState.RUNNING,
                         started_at=timezone.now())

    refused = alice_qm("update", str(running.pk), "--gpus", "8", "--time", "8h")

    assert refused.code == 1, refused.err
    assert "only its name and runtime limit can change now, not GPUs." in refused.err, refused.err
    assert "its runtime limit may be lowered, but only an admin may raise it" in refused.err, refused.err
    assert Job.objects.get(pk=running.pk).runtime_limit_s == 4 * 3600
