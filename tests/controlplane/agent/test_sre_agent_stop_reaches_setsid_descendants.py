"""A job's processes that left its session (`setsid`, a daemon's double fork) are stopped with it.

Found on the SRE audit of real-process mode (4 Dec): the agent signalled a job's process groups
only. A job whose command started `setsid python serve.py &` (or any daemon that double-forks
into a session of its own) kept that process through a cancel, a preemption, its runtime limit
and its own exit: the agent reported the member gone the moment its shells were, the control
plane released the allocation and handed the GPUs to the next job while the old owner's
process still ran on them, a breach of the fencing guarantee (docs/operations.md, "no GPU is
handed to a new owner while a process of an older owner … may still run on it"). The reaper
(agent killed) and a restarted agent's sweep missed it the same way. Now every process carrying
the run's marker (QM_AGENT_NODE and QM_GENERATION, inherited whatever its session) is signalled
with the member, and the member is reported gone only once none of them lives.

(Each test its own node name: a run that ends kills what carries its node's name and its
generation, 7 in these tests, and tests side by side on two workers killed each other's.)
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.members import ProcessLauncher, ProcessMember
from controlplane.choices import AllocationState, JobState, NodeState
from controlplane.models import Allocation, Job, Node
from controlplane.services import cycle, transitions
from tests.controlplane.agent.real_agent import start_agent, stop_agent, wait_for
from tests.controlplane.agent.test_process_member import alive, assignment, kill_if_alive, wait_exit
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job

# A child in a session of its own that ignores SIGTERM, its pid written (whole) to `stray.pid`.
STRAY = "setsid sh -c 'trap \"\" TERM; echo $$ > stray.tmp; mv stray.tmp stray.pid; exec sleep 120' &"


def _stray(workdir: Path) -> int:
    wait_for(lambda: (workdir / "stray.pid").exists(), 30, "the stray to start", every=0.02)
    pid = int((workdir / "stray.pid").read_text())
    assert alive(pid)
    return pid


def test_a_job_that_exits_is_not_gone_until_what_it_started_in_its_own_session_is(tmp_path: Path) -> None:
    member = ProcessMember(assignment(f"{STRAY} sleep 0.3; exit 0"), workdir=tmp_path, node_name="gpu-s1",
                           devices=None)
    stray = _stray(tmp_path)
    try:
        assert wait_exit(member) == 0
        assert not alive(stray), "the member was reported gone while a process it started still ran"
    finally:
        kill_if_alive(stray)


def test_a_stop_reaches_a_process_in_its_own_session_that_ignores_sigterm(tmp_path: Path) -> None:
    stubborn = "trap '' TERM; while :; do sleep 0.1; done"
    member = ProcessMember(assignment(f"{STRAY} {stubborn}"), workdir=tmp_path, node_name="gpu-s2", devices=None)
    stray = _stray(tmp_path)
    try:
        member.terminate()
        time.sleep(0.3)
        assert alive(stray), "it ignores SIGTERM: only the SIGKILL after the grace ends it"
        member.kill()
        assert wait_exit(member) == -signal.SIGKILL
        assert not alive(stray)
    finally:
        kill_if_alive(stray)


def test_a_restarted_agent_kills_what_its_predecessor_left_in_a_session_of_its_own(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-s3", devices=None)
    member = launcher.launch(assignment(f"{STRAY} exit 0"))
    stray = _stray(tmp_path / "gpu-s3" / "g7")
    try:
        member.procs[0].wait()  # type: ignore[attr-defined]  # the agent died before it looked

        assert stray in ProcessLauncher(tmp_path, "gpu-s3", devices=None).sweep_leftovers()
        wait_for(lambda: not alive(stray), 30, "the stray to die", every=0.02)
    finally:
        kill_if_alive(stray)


def agent_running(state: Path, node: str, command: str) -> subprocess.Popen[str]:
    """An agent process (its launcher and reaper) that started `command` as run g7, then
    printed its run cgroups' parent ("None" without) and waits to be killed."""
    script = textwrap.dedent(f"""\
        import sys, time
        sys.path.insert(0, {str(Path.cwd())!r})
        from pathlib import Path
        from controlplane.agent.members import ProcessLauncher
        from tests.controlplane.agent.test_process_member import assignment
        launcher = ProcessLauncher(Path({str(state)!r}), {node!r}, devices=None)
        launcher.reaper.start()
        m = launcher.launch(assignment({command!r}))
        print(launcher.cgroups and launcher.cgroups.parent, flush=True)
        time.sleep(60)
    """)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


def test_kill_9_of_the_agent_kills_what_its_jobs_started_in_a_session_of_their_own(tmp_path: Path) -> None:
    agent = agent_running(tmp_path, "gpu-s4", STRAY + " exec sleep 60")
    stray = None
    try:
        assert agent.stdout is not None and agent.stdout.readline()
        stray = _stray(tmp_path / "gpu-s4" / "g7")

        agent.kill()
        agent.wait()

        wait_for(lambda: not alive(stray), 30, "the reaper to kill the stray", every=0.02)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        kill_if_alive(stray)


@pytest.mark.django_db(transaction=True)
def test_sre_a_cancelled_jobs_gpus_are_freed_only_after_its_setsid_child_is_dead(
        live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any) -> None:
    fleet = build_loop_fleet(grace_period_s=1)
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, "gpu-sre", log, gpus=1)
    stray = None
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-sre", state=NodeState.READY).exists(), 60, "the node to register", every=0.02)
        job = make_job(fleet, gpus=1, command=f"{STRAY} exec sleep 120", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        # (run as its submitter, the root agent's default, the job works in its run's `work/`)
        workdir = state_dir / "gpu-sre" / f"g{Allocation.objects.get(job=job).generation}" / "work"
        stray = _stray(workdir)

        transitions.cancel_job(Job.objects.get(pk=job.pk), "user:alice")
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.CANCELLED, 60, "the job to end cancelled", every=0.02)

        assert Allocation.objects.get(job=job).state == AllocationState.RELEASED
        assert not alive(stray), "the GPU was freed while a process of its old owner still ran"
    finally:
        stop_agent(agent)
        kill_if_alive(stray)
        log.close()
