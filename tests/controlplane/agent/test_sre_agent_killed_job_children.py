"""A job's whole process tree dies with its agent, not only the shell the agent started.

Found on the SRE drill (docs/operations.md, "kill -9 the agent"): a real `qm-agent` ran job 1
(`echo … >> $QM_PROGRESS_FILE; sleep 600`, two GPUs). After `kill -9` of the agent the two
`/bin/sh -c` processes died (PR_SET_PDEATHSIG), but their `sleep 600` children lived on,
re-parented to init, for as long as no new agent was started on the node — while the control
plane fenced the job 20 s later and started it again elsewhere. A training script run through
`torchrun`, a shell pipeline or any command that forks behaves like that `sleep`: the old run
kept its GPUs busy and kept writing next to the new one. Only a restarted agent's sweep killed
them. Now a small reaper process started with the agent's first job kills every process group
the agent recorded the moment the agent dies, however it dies.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.choices import JobState, NodeState
from controlplane.models import Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import start_agent, wait_for
from tests.controlplane.agent.test_process_member import alive
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job


@pytest.mark.django_db(transaction=True)
def test_sre_kill_9_of_a_real_agent_kills_the_children_of_its_jobs_too(live_server: Any, tmp_path: Path,
                                                                       state_dir: Path, submitter: Any) -> None:
    fleet = build_loop_fleet()
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, "gpu-sre-kill9", log)
    # run as its submitter (a root agent's default), the job writes in its run's `work/`
    written = state_dir / "gpu-sre-kill9"
    children: list[int] = []
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-sre-kill9", state=NodeState.READY).exists(), 60, "the node to register")
        job = make_job(fleet, gpus=2, command="sleep 120 & echo $! > child.$LOCAL_RANK; wait", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING
              and len(list(written.glob("g*/work/child.*"))) == 2
              and all(p.read_text().endswith("\n") for p in written.glob("g*/work/child.*")),
              60, "the job's processes to start")
        children = [int(p.read_text()) for p in written.glob("g*/work/child.*")]
        assert all(alive(pid) for pid in children)

        os.kill(agent.pid, signal.SIGKILL)
        agent.wait(timeout=10)

        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [pid for pid in children if alive(pid)]
        assert not survivors, f"the job's processes {survivors} outlived their agent"
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()
