"""`qm status JOB` of a running job said when it started but not where: no node was named
anywhere in qm (the job page says "on 16 GPUs of h100-0, h100-1"). It now says the GPUs it
holds and their nodes, from the API's explanation, as `qm explain` does."""

from __future__ import annotations

import pytest

from controlplane.models import AllocationGpu, Job
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.slow


def test_status_and_explain_of_a_running_job_name_its_nodes(alice_qm) -> None:
    assert alice_qm("submit", "--name", "wide", "--gpus", "16", "--gpu-type", "H100-80GB").code == 0
    run_cycle("test")
    job = Job.objects.get()
    nodes = sorted(set(AllocationGpu.objects.filter(allocation__job=job, live=True).values_list("node__name", flat=True)))

    status = alice_qm("status", str(job.pk))
    explained = alice_qm("explain", str(job.pk))

    line = next((line for line in status.out.splitlines() if line.startswith("running:")), None)
    assert line is not None, status.out
    assert line.rstrip().endswith(f"on 16 GPUs of {', '.join(nodes)}.")
    assert f"on 16 GPUs of {', '.join(nodes)}." in explained.out
