"""A heterogeneous gang's members must know their role: every GPU of the allocation records the
role of the member it serves (the engine's placement), so the agent can tell each process what
to run as. Before, the allocation kept only node and GPU index, and a learner and a rollout
worker of the same shape could not tell each other apart. The agent's heartbeat now carries each
GPU's role, and each process gets QM_ROLE, QM_ROLE_RANK and QM_ROLE_WORLD_SIZE (QM_ROLES when
the job launches once per node)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.agent.members import Assignment, ProcessMember
from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Job, Node
from controlplane.services.agent_protocol import desired_allocations_many
from controlplane.services.cycle import run_cycle
from tests.controlplane import factories as f
from tests.controlplane.agent.test_process_member import wait_exit
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


def payloads(job: Job) -> dict[str, dict]:
    """node name → what its agent's heartbeat says of the job's allocation."""
    nodes = list(Node.objects.filter(allocation_gpus__allocation__job=job).distinct())
    desired = desired_allocations_many(nodes, timezone.now())
    return {n.name: next(a for a in desired[n.pk] if a["job"]["id"] == job.pk) for n in nodes}


@pytest.mark.django_db
def test_each_agent_is_told_the_role_and_role_rank_of_every_gpu(fleet: Fleet, alice: APIClient) -> None:
    job = run_gang(fleet, alice)
    sent = payloads(job)
    learner = [p for p in sent.values() if "learner" in p["roles"]]
    assert len(learner) == 1 and learner[0]["roles"] == ["learner"] * 8
    assert learner[0]["role_ranks"] == list(range(8))
    rollout_ranks = sorted(r for p in sent.values() for role, r in zip(p["roles"], p["role_ranks"], strict=True)
                           if role == "rollout")
    assert rollout_ranks == [0, 1, 2, 3]
    assert all(p["role_sizes"] == {"learner": 8, "rollout": 4} for p in sent.values())
    assert all(len(p["roles"]) == len(p["gpus"]) for p in sent.values())


@pytest.mark.django_db
def test_a_plain_gangs_heartbeat_says_nothing_of_roles(fleet: Fleet, alice: APIClient) -> None:
    response = alice.post("/api/v1/jobs/", {"name": "plain", "gpus": 8, "command": "true"}, format="json")
    run_cycle("test")
    for payload in payloads(Job.objects.get(pk=response.json()["id"])).values():
        assert "roles" not in payload


def payload(gpus: list[int], roles: list[str], role_ranks: list[int], env: dict[str, str]) -> dict:
    return {"generation": 9, "state": "active", "job": {"id": 5, "name": "rlhf", "command": "", "env": env},
            "gpus": gpus, "ranks": list(range(len(gpus))), "world_size": 12, "nnodes": 2, "node_rank": 0,
            "master_addr": "a", "master_port": 20009, "roles": roles, "role_ranks": role_ranks,
            "role_sizes": {"learner": 8, "rollout": 4}}


def test_each_process_learns_its_role_from_the_agent(tmp_path: Path) -> None:
    # A node holding the learner's last GPU and two rollout workers.
    data = payload([6, 7, 0], ["learner", "learner", "rollout"], [6, 7, 2], {})
    data["job"]["command"] = 'echo "$QM_ROLE $QM_ROLE_RANK $QM_ROLE_WORLD_SIZE" > role.$LOCAL_RANK'
    member = ProcessMember(Assignment.from_json(data), workdir=tmp_path, node_name="gpu-roles", devices=None)
    assert wait_exit(member) == 0
    said = [(tmp_path / f"role.{i}").read_text().split() for i in range(3)]
    assert said == [["learner", "6", "8"], ["learner", "7", "8"], ["rollout", "2", "4"]]


def test_a_per_node_launcher_learns_which_local_gpus_serve_which_role(tmp_path: Path) -> None:
    data = payload([6, 7, 0], ["learner", "learner", "rollout"], [6, 7, 2], {"QM_LAUNCH": "per_node"})
    data["job"]["command"] = 'echo "${QM_ROLES}|${QM_ROLE:-none}" > roles'
    member = ProcessMember(Assignment.from_json(data), workdir=tmp_path, node_name="gpu-roles", devices=None)
    assert wait_exit(member) == 0
    assert (tmp_path / "roles").read_text().strip() == "learner=0,1;rollout=2|none"
