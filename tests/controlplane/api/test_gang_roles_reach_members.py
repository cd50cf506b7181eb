"""A heterogeneous gang's members must know their role: every GPU of the allocation records the
role of the member it serves (the engine's placement), so the agent can tell each process what
to run as. Before, the allocation kept only node and GPU index, and a learner and a rollout
worker of the same shape could not tell each other apart."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Job
from controlplane.services.cycle import run_cycle
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

LEARNER = {"name": "learner", "count": 1, "gpus_per_member": 8, "gpu_type": "H100-80GB"}
ROLLOUT = {"name": "rollout", "count": 4, "gpus_per_member": 1, "gpu_types": ["A100-40GB"]}
GANG = {"name": "rlhf", "gpus": 12, "roles": [LEARNER, ROLLOUT], "command": "true"}


def run_gang(fleet: Fleet, alice: APIClient) -> Job:
    f.make_quota(fleet.ml, fleet.a100, 8)
    response = alice.post("/api/v1/jobs/", GANG, format="json")
    assert response.status_code == 201, response.json()
    run_cycle("test")
    job = Job.objects.get(pk=response.json()["id"])
    assert job.state == JobState.RUNNING, job.pending_code
    return job


@pytest.mark.django_db
def test_each_gpu_of_a_heterogeneous_gang_records_its_members_role(fleet: Fleet, alice: APIClient) -> None:
    job = run_gang(fleet, alice)
    held = AllocationGpu.objects.filter(allocation__job=job, live=True)
    by_role: dict[str, list[str]] = {}
    for role, gpu_type in held.values_list("role", "node__gpu_type__name"):
        by_role.setdefault(role, []).append(gpu_type)
    assert by_role == {"learner": ["H100-80GB"] * 8, "rollout": ["A100-40GB"] * 4}


@pytest.mark.django_db
def test_a_plain_gangs_gpus_have_no_role(fleet: Fleet, alice: APIClient) -> None:
    response = alice.post("/api/v1/jobs/", {"name": "plain", "gpus": 8, "command": "true"}, format="json")
    assert response.status_code == 201, response.json()
    run_cycle("test")
    roles = set(AllocationGpu.objects.filter(allocation__job_id=response.json()["id"]).values_list("role", flat=True))
    assert roles == {""}
