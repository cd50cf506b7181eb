"""A run's cgroup is killed whole on a kernel without `cgroup.kill` (before 5.14) too
(controlplane/agent/containment.py, signal_all; the reaper's program in members.py).

There the agent reads the run's processes from `cgroup.procs` and SIGKILLs them one by one. A
process that is not yet killed can act on the death of one that is: found on 5 Dec, a job
whose supervisor (a later pid than its worker: it was started after it) starts the worker
again when it dies had the new worker outlive the kill. It was forked after the list was
read, so no SIGKILL reached it; the reaper (agent killed) left it running in the run's cgroup,
which could not be removed, and a GPU worker would have gone on with the node handed over.
The kill now freezes the cgroup first (`cgroup.freeze`, Linux ≥ 5.2): nothing in it forks
or exits until every process listed is killed.

This machine's kernel has `cgroup.kill`: QM_AGENT_NO_CGROUP_KILL=1 makes the agent (and its
reaper) kill as on one without. Real processes in the real cgroup v2 hierarchy.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from controlplane.agent import containment
from controlplane.agent.containment import RunCgroups, find_cgroup_root
from controlplane.agent.members import ProcessLauncher
from tests.controlplane.agent.real_agent import wait_for
from tests.controlplane.agent.test_process_member import assignment, wait_exit
from tests.controlplane.agent.test_sre_agent_stop_reaches_setsid_descendants import agent_running

pytestmark = pytest.mark.skipif(find_cgroup_root("auto") is None,
                                reason="no writable cgroup v2 hierarchy on this host")

IDLE = 1500  # processes between the worker and its supervisor in pid order: the kill's window

# The worker (`sleep`, holding the fifo's write end) first, then IDLE idle processes, then the
# supervisor: its `read` (a shell builtin, no process of its own) returns when the worker is
# gone, and it starts the worker again. It runs at nice -20 (a job running as root may), so it
# acts before the hundreds of processes dying with it are scheduled. All with an empty
# environment (no marker: only the cgroup finds them). `ready` once everything runs;
# `respawned` if a worker was started again.
RESPAWNING = (
    "mkfifo worker.fifo; "
    "env -i sleep 1000 > worker.fifo & "
    f"i=0; while [ $i -lt {IDLE} ]; do env -i sleep 1000 & i=$((i+1)); done; "
    "env -i nice -n -20 /bin/sh -c 'read line; sleep 1000 & echo > respawned; wait' < worker.fifo & "
    "touch ready; wait"
)


@pytest.fixture
def no_cgroup_kill(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(containment.NO_CGROUP_KILL_ENV, "1")


def _wait_for(condition: Callable[[], object], timeout: float, what: str, cgroup: Path, workdir: Path) -> None:
    try:
        wait_for(condition, timeout, what, every=0.02)
    except AssertionError as error:
        raise AssertionError(f"{error}; alive in the run's cgroup: {containment.pids(cgroup)[:5]}, "
                             f"the worker started again: {(workdir / 'respawned').exists()}") from None


def _kill_everything_in(cgroup: Path) -> None:
    """Clean up with the kernel's own cgroup.kill, whatever the code under test left."""
    if cgroup.exists():
        (cgroup / "cgroup.kill").write_text("1")
        wait_for(lambda: not containment.populated(cgroup), 30, "the cleanup kill", every=0.02)
        containment.remove(cgroup)


def test_one_sigkill_of_a_run_cgroup_leaves_nothing_a_dying_process_started(tmp_path: Path,
                                                                             no_cgroup_kill: None) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-old", devices=None)
    assert launcher.cgroups is not None
    cgroup = launcher.cgroups.parent / "g7"
    workdir = tmp_path / "gpu-old" / "g7"
    member = launcher.launch(assignment(RESPAWNING))
    try:
        wait_for(lambda: (workdir / "ready").exists(), 60, "the job's processes to start")
        assert len(containment.pids(cgroup)) > IDLE

        containment.signal_all(cgroup, signal.SIGKILL)  # what the agent does to end a run, once

        _wait_for(lambda: not containment.populated(cgroup), 30,
                  "every process of the run to be dead after one SIGKILL of its cgroup", cgroup, workdir)
        assert wait_exit(member) == -signal.SIGKILL
        assert not cgroup.exists()
    finally:
        _kill_everything_in(cgroup)
        wait_exit(member)


def test_the_reaper_of_an_agent_killed_9_leaves_nothing_a_dying_process_started(tmp_path: Path,
                                                                                no_cgroup_kill: None) -> None:
    root = find_cgroup_root("auto")
    assert root is not None
    cgroup = RunCgroups(root, "gpu-old", tmp_path / "gpu-old").parent / "g7"
    workdir = tmp_path / "gpu-old" / "g7"
    agent = agent_running(tmp_path, "gpu-old", RESPAWNING)  # its reaper inherits the setting
    try:
        assert agent.stdout is not None and agent.stdout.readline()
        wait_for(lambda: (workdir / "ready").exists(), 60, "the job's processes to start")

        agent.kill()
        agent.wait()

        _wait_for(lambda: not cgroup.exists(), 30, "the reaper to kill everything in the run's cgroup and remove it",
                  cgroup, workdir)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        _kill_everything_in(cgroup)


def test_the_setting_reaches_the_code(tmp_path: Path, no_cgroup_kill: None) -> None:
    # Without it the tests above would test cgroup.kill again: the fallback must really run.
    assert not containment.cgroup_kill_used()
    assert os.environ[containment.NO_CGROUP_KILL_ENV] == "1"
    done = subprocess.run(["/bin/sh", "-c", f'echo "${containment.NO_CGROUP_KILL_ENV}"'], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "1", "the agent's reaper, started as this process's child, inherits it"
