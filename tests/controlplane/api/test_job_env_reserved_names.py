"""A job's env may not set a name Quartermaster sets for each process (QM_ROLE, RANK,
CUDA_VISIBLE_DEVICES, …, and an array task's QM_ARRAY_INDEX/QM_ARRAY_ID): a Slurm user's
`--env QM_ROLE=boss` was taken, then overwritten in a heterogeneous gang's processes and passed
through, as if Quartermaster had said it, in a plain gang's. The rule is the exact names the
agent and the submit set (agent.members.PROCESS_ENV_NAMES, services.jobs.RESERVED_ENV_NAMES),
not the `QM_` prefix: QM_LAUNCH and QM_SIM_* are a job's own to set."""

from __future__ import annotations

import pytest

from controlplane.agent.members import Assignment, rank_environment
from controlplane.api.serializers import JobSubmitSerializer, plain_submit_request
from controlplane.models import Job
from controlplane.services import jobs as job_service
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"
ARRAYS = "/api/v1/job-arrays/"


def _refused(client, path: str, body: dict[str, object]) -> dict[str, list[str]]:
    r = client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="k-" + str(sorted(body.get("env", {}))))
    assert r.status_code == 400, r.content
    return r.json()["errors"]


@pytest.mark.parametrize("name", ["QM_ROLE", "RANK", "CUDA_VISIBLE_DEVICES", "QM_PROGRESS_FILE", "QM_ARRAY_INDEX"])
def test_a_reserved_name_in_env_is_a_400_naming_env_and_the_name(fleet, alice, name) -> None:
    errors = _refused(alice, J, {"name": "x", "gpus": 1, "command": "true", "env": {"LR": "0.1", name: "7"}})

    assert errors == {"env": [f"env {name} is set by Quartermaster for each process; choose another name"]}
    assert not Job.objects.exists() and not f.trail().exists()


def test_several_reserved_names_are_named_together_and_an_array_is_refused_too(fleet, alice) -> None:
    errors = _refused(alice, ARRAYS, {"name": "sweep", "gpus": 1, "array": "0-3", "command": "true",
                                      "env": {"WORLD_SIZE": "8", "QM_ARRAY_ID": "x", "MASTER_ADDR": "h"}})

    assert errors == {"env": ["env MASTER_ADDR, QM_ARRAY_ID, WORLD_SIZE are set by Quartermaster for each process; "
                              "choose other names"]}
    assert not Job.objects.exists()


def test_the_jobs_own_qm_names_and_other_names_are_taken(fleet, alice) -> None:
    env = {"QM_LAUNCH": "per_node", "QM_SIM_DURATION_S": "5", "QM_ROLE_NAME": "x", "rank": "lower case is another name"}
    r = alice.post(J, {"name": "ok", "gpus": 1, "command": "true", "env": env}, format="json")

    assert r.status_code == 201, r.content
    assert Job.objects.get().env == env


def test_the_fast_path_and_submit_itself_refuse_as_the_serializer_does(fleet) -> None:
    body = {"name": "x", "gpus": 1, "env": {"QM_JOB_ID": "1"}}
    assert plain_submit_request(body, JobSubmitSerializer) is None  # the serializer then explains
    with pytest.raises(job_service.SubmitRejected) as refused:
        job_service.submit(fleet.users["owner"], job_service.SubmitRequest("x", 1, env={"QM_JOB_ID": "1"}))
    assert refused.value.errors == {"env": "env QM_JOB_ID is set by Quartermaster for each process; choose another name"}
    assert not Job.objects.exists()


@pytest.mark.parametrize("per_node", [False, True])
def test_every_name_the_agent_sets_is_reserved(per_node) -> None:
    """The list cannot fall behind the agent: each name rank_environment gives a process, for a
    plain gang and a heterogeneous one, per GPU and per node, is in it."""
    for roles in ((), ("learner", "rollout")):
        a = Assignment(generation=1, state="active", job_id=1, job_name="j", command="true", env={}, gpus=(0, 1),
                       ranks=(0, 1), world_size=2, nnodes=1, node_rank=0, master_addr="n", master_port=1,
                       checkpoint_interval_s=None, runtime_limit_s=None, release=None, roles=roles,
                       role_ranks=(0, 0) if roles else (), role_sizes=(("learner", 1), ("rollout", 1)) if roles else ())
        assert set(rank_environment(a, 0, per_node)) <= job_service.RESERVED_ENV_NAMES
