"""Where does my job run? The job page said "Running since … on 16 GPUs of h100-0, h100-1",
but the API's explanation (and so `qm explain`) said only "Running since 2026-11-30 01:55:38
UTC.", and nothing else in the API names the nodes: a researcher had to open the browser to
find the machines to look at. The explanation of a running job now names the GPUs it holds and
their nodes, as the page does, and says when it runs on borrowed capacity."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Job
from controlplane.services.cycle import run_cycle
from tests.controlplane.fleet_fixture import Fleet


@pytest.mark.django_db
def test_a_running_jobs_explanation_names_its_gpus_and_nodes(fleet: Fleet, alice: APIClient) -> None:
    job_id = alice.post("/api/v1/jobs/", {"name": "wide", "gpus": 16, "gpu_type": "H100-80GB"}, format="json").json()["id"]
    run_cycle("test")
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.RUNNING
    nodes = sorted(set(AllocationGpu.objects.filter(allocation__job=job, live=True).values_list("node__name", flat=True)))
    assert len(nodes) == 2

    reason = alice.get(f"/api/v1/jobs/{job_id}/explain/").json()["reason"]

    assert reason.startswith("Running since ")
    assert reason.endswith(f" on 16 GPUs of {', '.join(nodes)}.")


@pytest.mark.django_db
def test_one_gpu_is_said_as_one(fleet: Fleet, alice: APIClient) -> None:
    job_id = alice.post("/api/v1/jobs/", {"name": "small", "gpus": 1}, format="json").json()["id"]
    run_cycle("test")
    node = AllocationGpu.objects.get(allocation__job_id=job_id, live=True).node.name

    assert alice.get(f"/api/v1/jobs/{job_id}/explain/").json()["reason"].endswith(f" on 1 GPU of {node}.")
