"""A run the agent cannot launch, for whatever reason, is reported exited 126 with the reason,
leaves no process and no cgroup, and the agent goes on serving the node's other runs
(controlplane/agent/node.py, NodeAgent._launch).

Found on 5 Dec: `_launch` caught only OSError. A job whose env has a name with '=' in it (the
API refuses such a name; a job written by other means, the admin or a script on the ORM, still
reaches the agent with it, and the kernel's environment cannot hold it) makes subprocess raise ValueError
("illegal environment variable name") before a rank starts: it went up through the agent's
round and out of `qm-agent`, which exited with a traceback. Its reaper then killed every other
run on the node, the bad run stayed `running` on the control plane until the node's lease ran
out, and a restarted agent was given the next generation of the same job and died again.
Real `qm-agent`, real processes, the real cgroup v2 hierarchy where the host has one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.containment import RunCgroups, find_cgroup_root
from controlplane.agent.members import marked_processes
from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import start_agent, stop_agent, wait_for
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_env_cannot_be_given_to_a_process_fails_126_and_the_agent_serves_on(
        live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any) -> None:
    fleet = build_loop_fleet()
    state = state_dir
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state, "gpu-bad-env", log, gpus=4)
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-bad-env", state=NodeState.READY).exists(), 60, "the node")
        steady = make_job(fleet, gpus=2, name="steady", command="exec sleep 120", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        wait_for(lambda: Job.objects.get(pk=steady.pk).state == JobState.RUNNING, 60, "the steady job to run")
        steady_generation = Allocation.objects.get(job=steady).generation
        wait_for(lambda: marked_processes("gpu-bad-env", {steady_generation}), 30, "the steady job's process")
        steady_pids = marked_processes("gpu-bad-env", {steady_generation})

        bad = make_job(fleet, gpus=1, name="bad-env", command="echo never", env={"BAD=NAME": "1"},
                       submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        bad_generation = Allocation.objects.get(job=bad).generation
        wait_for(lambda: Job.objects.get(pk=bad.pk).state == JobState.FAILED, 60, "the bad job to fail")

        assert Job.objects.get(pk=bad.pk).exit_code == 126
        # its owner reads why in the job's history, not only the node's log
        finished = Event.objects.get(job=bad, kind=EventKind.JOB_FINISHED)
        assert finished.message.endswith(": launch failed: ValueError: illegal environment variable name"), \
            finished.message
        assert agent.poll() is None, "the agent died of a run it could not launch"
        assert marked_processes("gpu-bad-env", {bad_generation}) == []
        root = find_cgroup_root("auto")
        if root is not None:
            cgroup = RunCgroups(root, "gpu-bad-env", state / "gpu-bad-env").parent / f"g{bad_generation}"
            assert not cgroup.exists(), "the failed launch's cgroup was left behind"
        # the node's other run was not touched
        assert Job.objects.get(pk=steady.pk).state == JobState.RUNNING
        assert set(steady_pids) <= set(marked_processes("gpu-bad-env", {steady_generation})), "the other job's process died"

        # and the agent launches what comes next
        after = make_job(fleet, gpus=1, name="after", command="exit 0", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        wait_for(lambda: Job.objects.get(pk=after.pk).state == JobState.SUCCEEDED, 60, "the next job to succeed")
        assert agent.poll() is None
    finally:
        stop_agent(agent)
        log.close()
    text = (tmp_path / "agent.log").read_text()
    assert "could not launch" in text and "illegal environment variable name" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def test_a_json_log_line_with_an_error_carries_its_traceback(tmp_path: Path) -> None:
    # A launch error that is the agent's own (not an OSError or ValueError) is logged with its
    # traceback, as a simulated node's failed round is; before 5 Dec the JSON lines (the
    # default --log-format) said only "exc_info": true. In a process of its own: the logging
    # configuration is global.
    import json
    import subprocess
    import sys

    from tests.controlplane.agent.real_agent import CHECKOUT

    program = ("import structlog\n"
               "from controlplane.agent.main import configure_logging\n"
               "configure_logging('json', 'INFO')\n"
               "try:\n"
               "    len(7)\n"
               "except TypeError:\n"
               "    structlog.get_logger('qm.agent').error('could not launch', exc_info=True)\n")
    done = subprocess.run([sys.executable, "-c", program], cwd=CHECKOUT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stderr.strip().splitlines()[-1])
    assert line["event"] == "could not launch"
    assert "Traceback" in line["exception"] and "TypeError: object of type 'int' has no len()" in line["exception"]
