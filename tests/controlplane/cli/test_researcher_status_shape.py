"""`qm status JOB` left out part of what the job asked for: a job needing 45 GB of device memory
per GPU read "gpu types: any" (the page: "any, at least 45 GB each"), and neither its CPUs and
memory per GPU, its workload (a serving job's replicas are spread) nor its checkpoint interval
were said. They now are, as the job page's Shape says them."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def _field(out: str, name: str) -> str:
    line = next((line for line in out.splitlines() if line.startswith(f"{name}:")), None)
    assert line is not None, out
    return line.split(":", 1)[1].strip()


def test_status_says_the_whole_request(alice_qm) -> None:
    assert alice_qm("submit", "--name", "mem", "--gpus", "4", "--min-gpu-memory", "45", "--cpus-per-gpu", "8",
                    "--memory-per-gpu", "64", "--workload", "serving", "--checkpoint-every", "20m").code == 0
    out = alice_qm("status", str(Job.objects.get().pk)).out

    assert _field(out, "gpu types") == "any, at least 45 GB each"
    assert _field(out, "per gpu") == "8 CPUs, 64 GB memory"
    assert _field(out, "workload") == "serving"
    assert _field(out, "checkpoints") == "every 20 min"


def test_status_of_a_plain_job_says_the_defaults_plainly(alice_qm) -> None:
    assert alice_qm("submit", "--name", "plain", "--gpus", "1", "--gpu-type", "H100-80GB").code == 0
    out = alice_qm("status", str(Job.objects.get().pk)).out

    assert _field(out, "gpu types") == "H100-80GB"
    assert _field(out, "per gpu") == "-"
    assert _field(out, "workload") == "training"
    assert _field(out, "checkpoints") == "-"
