"""A run's processes are contained in a cgroup: one that clears its environment and leaves its
session still ends with the run (controlplane/agent/containment.py).

(Each test its own node name: a run that ends kills what carries its node's name and its
generation, 7 in every test here, and tests side by side on two workers killed each other's.)

Found on 5 Dec: the agent found a process that left its run's session (`setsid`) by the marker
in its environment (QM_AGENT_NODE, QM_GENERATION). A job that started `env -i setsid …` gave its
child an empty environment: the child carried no marker, the member was reported gone while
it ran, its GPUs went to the next owner, and neither the reaper (agent killed) nor a restarted
agent's sweep found it. Where a writable cgroup v2 hierarchy exists (this machine has one at
/sys/fs/cgroup/unified), each rank's shell joins the run's cgroup before the job's command
runs, so the child is inside whatever it does to its session or environment.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from controlplane.agent import containment
from controlplane.agent.containment import ContainmentError, RunCgroups, find_cgroup_root
from controlplane.agent.members import ProcessLauncher
from tests.controlplane.agent.real_agent import wait_for
from tests.controlplane.agent.test_process_member import alive, assignment, kill_if_alive, wait_exit
from tests.controlplane.agent.test_sre_agent_stop_reaches_setsid_descendants import agent_running

pytestmark = pytest.mark.skipif(find_cgroup_root("auto") is None,
                                reason="no writable cgroup v2 hierarchy on this host")

# A child with an empty environment (no marker) in a session of its own that ignores SIGTERM,
# its pid written (whole) to `escaped.pid` in the run's directory.
ESCAPED = ("env -i setsid /bin/sh -c 'trap \"\" TERM; echo $$ > escaped.tmp; mv escaped.tmp escaped.pid; "
           "exec sleep 120' &")


def _escaped(workdir: Path) -> int:
    wait_for(lambda: (workdir / "escaped.pid").exists(), 30, "the escaped child to start", every=0.02)
    pid = int((workdir / "escaped.pid").read_text())
    assert alive(pid)
    assert b"QM_AGENT_NODE" not in Path(f"/proc/{pid}/environ").read_bytes(), "it carries no marker"
    return pid


def test_a_run_is_not_over_until_a_child_without_its_marker_is_dead(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-c1", devices=None)
    member = launcher.launch(assignment(f"{ESCAPED} sleep 0.3; exit 0"))
    escaped = _escaped(tmp_path / "gpu-c1" / "g7")
    try:
        cgroup = launcher.cgroups.parent / "g7"  # type: ignore[union-attr]
        assert escaped in containment.pids(cgroup)
        assert wait_exit(member) == 0
        assert not alive(escaped), "the member was reported gone while a process it started still ran"
        assert not cgroup.exists(), "the run's cgroup is removed once it is empty"
    finally:
        kill_if_alive(escaped)


def test_a_stop_kills_a_child_without_its_marker_that_ignores_sigterm(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-c2", devices=None)
    member = launcher.launch(assignment(f"{ESCAPED} trap '' TERM; while :; do sleep 0.1; done"))
    escaped = _escaped(tmp_path / "gpu-c2" / "g7")
    try:
        member.terminate()
        time.sleep(0.3)
        assert alive(escaped), "it ignores SIGTERM: only the SIGKILL after the grace ends it"
        member.kill()
        assert wait_exit(member) == -signal.SIGKILL
        assert not alive(escaped)
    finally:
        kill_if_alive(escaped)


def test_a_restarted_agent_kills_and_removes_what_its_predecessor_left_in_a_run_cgroup(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-c3", devices=None)
    member = launcher.launch(assignment(f"{ESCAPED} exit 0"))
    escaped = _escaped(tmp_path / "gpu-c3" / "g7")
    try:
        member.procs[0].wait()  # type: ignore[attr-defined]  # the agent died before it looked
        cgroup = launcher.cgroups.parent / "g7"  # type: ignore[union-attr]

        assert escaped in ProcessLauncher(tmp_path, "gpu-c3", devices=None).sweep_leftovers()
        wait_for(lambda: not alive(escaped), 30, "the escaped child to die", every=0.02)
        assert not cgroup.exists()
    finally:
        kill_if_alive(escaped)


def test_kill_9_of_the_agent_kills_what_its_run_cgroups_hold(tmp_path: Path) -> None:
    agent = agent_running(tmp_path, "gpu-c4", ESCAPED + " exec sleep 60")
    escaped = None
    try:
        assert agent.stdout is not None
        parent = Path(agent.stdout.readline().strip())
        escaped = _escaped(tmp_path / "gpu-c4" / "g7")

        agent.kill()
        agent.wait()

        wait_for(lambda: not alive(escaped), 30, "the reaper to kill the escaped child", every=0.02)
        wait_for(lambda: not (parent / "g7").exists(), 30, "the reaper to remove the run's cgroup", every=0.02)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        kill_if_alive(escaped)


def test_two_agents_of_one_name_in_different_state_directories_keep_apart(tmp_path: Path) -> None:
    # tests (and a host running two agents) may reuse a node name: a restart's sweep empties
    # only the run cgroups of its own state directory
    first = ProcessLauncher(tmp_path / "a", "gpu-c5", devices=None)
    other = ProcessLauncher(tmp_path / "b", "gpu-c5", devices=None)
    assert first.cgroups is not None and other.cgroups is not None
    assert first.cgroups.parent != other.cgroups.parent
    member = first.launch(assignment("exec sleep 30"))
    try:
        ProcessLauncher(tmp_path / "b", "gpu-c5", devices=None).sweep_leftovers()
        assert member.poll() is None, "another state directory's sweep killed this run"
    finally:
        member.kill()
        wait_exit(member)


def test_cgroup_root_off_and_a_bad_path() -> None:
    assert find_cgroup_root("off") is None
    with pytest.raises(ContainmentError, match="not a cgroup v2 directory"):
        find_cgroup_root("/tmp")
    assert RunCgroups.open("off", "gpu-c6", Path("/tmp")) == (None, "--cgroup-root off")


def test_without_containment_the_child_without_its_marker_outlives_the_run(tmp_path: Path) -> None:
    # what --cgroup-root off (or a host without cgroup v2) leaves: said in the log at start
    launcher = ProcessLauncher(tmp_path, "gpu-c7", devices=None, cgroup_root="off")
    member = launcher.launch(assignment(f"{ESCAPED} exit 0"))
    escaped = _escaped(tmp_path / "gpu-c7" / "g7")
    try:
        assert wait_exit(member) == 0
        assert alive(escaped)
    finally:
        kill_if_alive(escaped)


def test_qm_agent_given_a_cgroup_root_it_cannot_use_exits_2_saying_why(tmp_path: Path, state_dir: Path) -> None:
    from tests.controlplane.agent.real_agent import CHECKOUT, QM_AGENT

    # (`state_dir`: as root, jobs run as their submitters by default, and tmp_path, 0700, would
    # stop the agent before its cgroups; PYTHONPATH: this checkout's code, real_agent.py)
    done = subprocess.run([QM_AGENT, "--server", "http://127.0.0.1:9", "--state-dir", str(state_dir),
                           "--gpus", "1", "--gpu-type", "H100-80GB", "--cgroup-root", str(tmp_path)],
                          env={"PATH": "/usr/bin:/bin", "QM_AGENT_BOOTSTRAP_TOKEN": "x", "PYTHONPATH": CHECKOUT},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "cannot contain runs as asked" in done.stdout + done.stderr
    assert f"--cgroup-root {tmp_path}: not a cgroup v2 directory" in done.stdout + done.stderr


# A job that makes a cgroup of its own inside its run's (a container runtime, a job doing its
# own accounting; the agent runs jobs as its own user, root here) and moves itself into it:
# cgroup.procs lists only a cgroup's own processes, so before 5 Dec the run's cgroup read empty
# while that process lived, its run could be reported over before it was dead, the per-pid
# kill of a kernel without cgroup.kill never reached it, and the run's cgroup, no longer empty
# of directories, was never removed (by the member, a restarted agent or the reaper).
def _nested(cgroup: Path) -> str:
    inner = cgroup / "inner"
    return f'mkdir "{inner}"; echo $$ > "{inner}/cgroup.procs"; {ESCAPED}'


def test_a_process_in_a_cgroup_the_job_made_inside_its_run_counts_and_is_removed_with_it(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-c9", devices=None)
    assert launcher.cgroups is not None
    cgroup = launcher.cgroups.parent / "g7"
    member = launcher.launch(assignment(f"{_nested(cgroup)} sleep 0.3; exit 0"))
    escaped = _escaped(tmp_path / "gpu-c9" / "g7")
    try:
        assert escaped in containment.pids(cgroup), "a process in a cgroup inside the run's is the run's"
        assert containment.populated(cgroup)
        assert wait_exit(member) == 0
        assert not alive(escaped)
        assert not cgroup.exists(), "the run's cgroup and the one the job made in it are removed"
    finally:
        kill_if_alive(escaped)


def test_a_restarted_agent_removes_a_run_cgroup_holding_one_the_job_made(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-c10", devices=None)
    assert launcher.cgroups is not None
    cgroup = launcher.cgroups.parent / "g7"
    member = launcher.launch(assignment(f"{_nested(cgroup)} exit 0"))
    escaped = _escaped(tmp_path / "gpu-c10" / "g7")
    try:
        member.procs[0].wait()  # type: ignore[attr-defined]  # the agent died before it looked

        assert escaped in ProcessLauncher(tmp_path, "gpu-c10", devices=None).sweep_leftovers()
        wait_for(lambda: not alive(escaped), 30, "the escaped child to die", every=0.02)
        assert not cgroup.exists()
    finally:
        kill_if_alive(escaped)


def test_kill_9_of_the_agent_removes_a_run_cgroup_holding_one_the_job_made(tmp_path: Path) -> None:
    root = find_cgroup_root("auto")
    assert root is not None
    cgroup = RunCgroups(root, "gpu-c11", tmp_path / "gpu-c11").parent / "g7"
    agent = agent_running(tmp_path, "gpu-c11", _nested(cgroup) + " exec sleep 60")
    escaped = None
    try:
        assert agent.stdout is not None and agent.stdout.readline()
        escaped = _escaped(tmp_path / "gpu-c11" / "g7")
        assert (cgroup / "inner").is_dir()

        agent.kill()
        agent.wait()

        wait_for(lambda: not alive(escaped), 30, "the reaper to kill the escaped child", every=0.02)
        wait_for(lambda: not cgroup.exists(), 30, "the reaper to remove the run's cgroup", every=0.02)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        kill_if_alive(escaped)
