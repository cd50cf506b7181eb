"""What a real `qm-agent`'s job processes see: their allocation's GPUs only, their run's
generation, their own working directory, and none of the agent's secrets.

Found on the SRE audit of real-process mode (4 Dec): the agent started its jobs with its own
environment underneath the job's, so every job on a node read QM_AGENT_BOOTSTRAP_TOKEN, the
secret that registers any node of the fleet (docs/operations.md, *Registration*): a user's
`env` in a job was enough to take it. The agent now drops its secrets from what it passes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, AllocationGpu, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import start_agent, stop_agent, wait_for
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job


def _environ(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_bytes().decode().split("\0") if "=" in line)


@pytest.mark.django_db(transaction=True)
def test_sre_each_job_sees_only_its_own_gpus_generation_and_directory_and_never_the_bootstrap_secret(
        live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any) -> None:
    fleet = build_loop_fleet()
    state = state_dir
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state, "gpu-env", log, gpus=4, options=())
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-env", state=NodeState.READY).exists(), 60, "the node to register")
        # The whole environment, NUL-separated as /proc has it, and the working directory.
        command = "env -0 > env.$LOCAL_RANK; pwd > pwd.$LOCAL_RANK"
        jobs = [make_job(fleet, gpus=2, name=f"env-{i}", command=command, submitter=submitter) for i in range(2)]
        assert cycle.run_cycle("test").binds == 2
        wait_for(lambda: all(Job.objects.get(pk=j.pk).state == JobState.SUCCEEDED for j in jobs), 60,
              "both jobs to succeed")

        seen: list[set[str]] = []
        for job in jobs:
            allocation = Allocation.objects.get(job=job)
            gpus = sorted(AllocationGpu.objects.filter(allocation=allocation).values_list("gpu_index", flat=True))
            # its own: run as its submitter (a root agent's default), `work/` in its run's directory
            workdir = state / "gpu-env" / f"g{allocation.generation}" / "work"
            for local_rank in (0, 1):
                env = _environ(workdir / f"env.{local_rank}")
                assert "QM_AGENT_BOOTSTRAP_TOKEN" not in env
                assert BOOTSTRAP not in env.values()
                assert env["CUDA_VISIBLE_DEVICES"] == ",".join(str(g) for g in gpus)
                assert env["QM_GENERATION"] == str(allocation.generation)
                assert env["QM_JOB_ID"] == str(job.pk)
                assert env["QM_AGENT_NODE"] == "gpu-env"
                assert env["LOCAL_RANK"] == str(local_rank) and env["WORLD_SIZE"] == "2"
                assert (workdir / f"pwd.{local_rank}").read_text().strip() == str(workdir.resolve())
            seen.append(set(env["CUDA_VISIBLE_DEVICES"].split(",")))
        assert not seen[0] & seen[1], "two jobs were given the same GPU"
    finally:
        stop_agent(agent)
        log.close()
