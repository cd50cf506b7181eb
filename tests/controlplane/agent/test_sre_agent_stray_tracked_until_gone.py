"""A process of a run that left its session, once found by the run's marker, keeps its member
from ending until it is a zombie or gone, even when its environment no longer shows the marker.

A SIGKILLed process drops its memory before its open files (the GPU's among them), and in between
/proc/PID/environ reads empty: the marker scan (`members.marked_processes`) no longer finds it.
Until 9c891b7 (6 Dec) each scan stood alone, so a stray caught in that window made its member
report over, and its GPUs go to the next owner, while it still held them
(`test_a_stop_reaches_a_process_in_its_own_session_that_ignores_sigterm` failed once so under the
whole suite's load). The window is too short to hit at will, so these strays, real processes in
sessions of their own, lose their marker as they please: on SIGUSR1 each writes zeros over its
own environment strings (what /proc/PID/environ reads: its stack between env_start and env_end)
and stays alive, as a process does that rewrites that area for its title (`setproctitle`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.agent.containment import find_cgroup_root
from controlplane.agent.members import ProcessLauncher, ProcessMember, marked_processes
from tests.controlplane.agent.real_agent import wait_for
from tests.controlplane.agent.test_process_member import alive, assignment, kill_if_alive, wait_exit

# Ignores SIGTERM; on SIGUSR1 zeroes its environment strings in place and says so in `wiped`.
STRAY_SCRIPT = textwrap.dedent("""\
    import ctypes, os, signal, time

    def wipe(*_):
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rfind(b")") + 2:].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (proc(5): 50, 51)
        ctypes.memset(start, 0, end - start)
        open("wiped.tmp", "w").close()
        os.rename("wiped.tmp", "wiped")

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, wipe)
    with open("stray.tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename("stray.tmp", "stray.pid")
    while True:
        time.sleep(1)
""")
STUBBORN = "trap '' TERM; while :; do sleep 0.1; done"
PR_SET_CHILD_SUBREAPER = 36


def stray_command(workdir: Path, then: str) -> str:
    (workdir / "stray.py").write_text(STRAY_SCRIPT)
    return f"setsid {sys.executable} stray.py & {then}"


def started_stray(workdir: Path) -> int:
    wait_for(lambda: (workdir / "stray.pid").exists(), 30, "the stray to start", every=0.02)
    pid = int((workdir / "stray.pid").read_text())
    assert alive(pid)
    return pid


def lose_marker(workdir: Path, pid: int, node: str) -> None:
    """The stray zeroes its environment and lives on: the marker scan no longer finds it."""
    os.kill(pid, signal.SIGUSR1)
    wait_for(lambda: (workdir / "wiped").exists(), 30, "the stray to zero its environment", every=0.02)
    assert Path(f"/proc/{pid}/environ").read_bytes().strip(b"\0") == b""
    assert pid not in marked_processes(node, {7})
    assert alive(pid)


def test_a_stray_seen_once_keeps_its_member_from_ending_after_its_marker_reads_gone(tmp_path: Path) -> None:
    member = ProcessMember(assignment(stray_command(tmp_path, STUBBORN)), workdir=tmp_path, node_name="gpu-stray1",
                           devices=None)
    stray = started_stray(tmp_path)
    try:
        member.terminate()  # the stop's SIGTERM: the scan finds the stray, which ignores it
        lose_marker(tmp_path, stray, "gpu-stray1")

        member.kill()  # the grace is over: the shells die; the stray reads as one in mid-death
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            code = member.poll()
            assert code is None or not alive(stray), \
                "the member was reported over while a process that carried its marker still ran"
            time.sleep(0.02)
        kill_if_alive(stray)  # its death completes (whoever sent the SIGKILL)
        assert wait_exit(member) == -signal.SIGKILL
        assert not alive(stray)
    finally:
        kill_if_alive(stray)


def test_a_stray_seen_once_is_killed_with_its_member_after_its_marker_reads_gone(tmp_path: Path) -> None:
    """Not only waited for: a stray that rewrote its environment while alive is signalled with its
    member. After 9c891b7 (6 Dec) it was waited for and never signalled, so its member never
    ended: its GPUs held, the stop never done, until someone killed the process by hand."""
    member = ProcessMember(assignment(stray_command(tmp_path, STUBBORN)), workdir=tmp_path, node_name="gpu-stray3",
                           devices=None)
    stray = started_stray(tmp_path)
    try:
        member.terminate()
        lose_marker(tmp_path, stray, "gpu-stray3")

        member.kill()
        assert wait_exit(member, timeout=10) == -signal.SIGKILL
        assert not alive(stray)
    finally:
        kill_if_alive(stray)


@pytest.fixture
def subreaper() -> Iterator[None]:
    """This process adopts the orphans its descendants leave (the stray, once its job's shell is
    gone), so the test reaps the stray and frees its pid at once: pid 1 here reaps when it likes."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


class Reuser:
    """`sleep 60` started with a chosen pid: an unrelated process (this test's child)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode


def started_at_pid(pid: int, within_s: float = 30) -> Reuser:
    """`sleep 60` started with `pid`: the kernel's next pid set to the one before (root only),
    then spawned at once. Every process or thread started on the machine in between takes a pid
    first (a whole suite's browsers start threads by the thousand), so it is tried again until
    one lands, for up to `within_s`; 50 tries with subprocess.Popen's slower start all lost once."""
    sleep = "/bin/sleep" if os.path.exists("/bin/sleep") else "/usr/bin/sleep"
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except PermissionError:  # root without CAP_SYS_ADMIN over this pid namespace (a container)
            pytest.skip("this process may not choose the next pid (ns_last_pid)")
        spawned = Reuser(os.posix_spawn(sleep, ["sleep", "60"], os.environ))
        if spawned.pid == pid:
            return spawned
        spawned.kill()
        spawned.wait()
    raise AssertionError(f"no process could be started with pid {pid} within {within_s} s")


@pytest.mark.skipif(os.geteuid() != 0, reason="choosing the next pid (ns_last_pid) needs root")
def test_a_strays_pid_taken_by_an_unrelated_process_is_neither_waited_for_nor_signalled(
        tmp_path: Path, subreaper: None) -> None:
    member = ProcessMember(assignment(stray_command(tmp_path, STUBBORN)), workdir=tmp_path, node_name="gpu-stray2",
                           devices=None)
    stray = started_stray(tmp_path)
    reuser: Reuser | None = None
    try:
        member.terminate()
        lose_marker(tmp_path, stray, "gpu-stray2")
        member.kill()  # SIGKILL to the shells and the stray, tracked since the SIGTERM
        member.procs[0].wait()  # the shell is gone: the stray is this process's child now
        os.kill(stray, signal.SIGKILL)  # (already dead or dying: a zombie still takes it)
        assert os.waitpid(stray, 0)[0] == stray  # reaped: its pid is free
        reuser = started_at_pid(stray)

        assert wait_exit(member, timeout=10) == -signal.SIGKILL, \
            "the member waited on an unrelated process that took its stray's pid"
        assert reuser.poll() is None, "the member signalled an unrelated process that took its stray's pid"
    finally:
        kill_if_alive(stray if reuser is None else None)
        if reuser is not None:
            reuser.kill()
            reuser.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="choosing the next pid (ns_last_pid) needs root")
@pytest.mark.skipif(find_cgroup_root("auto") is None, reason="no writable cgroup v2 hierarchy on this host")
def test_a_pid_that_left_the_runs_cgroup_and_was_reused_does_not_keep_the_member_from_ending(tmp_path: Path) -> None:
    """What was in the run's cgroup is found there again at each look, not tracked by pid: a
    process of the cgroup that carried no marker (`env -i`) had no start time to check, and from
    9c891b7 (6 Dec) an unrelated process given its pid later kept the member from ending for
    as long as it lived."""
    launcher = ProcessLauncher(tmp_path, "gpu-stray4", devices=None)
    assert launcher.cgroups is not None
    command = ("trap '' TERM; env -i sleep 60 & echo $! > child.tmp; mv child.tmp child.pid; wait; "
               + STUBBORN)
    member = launcher.launch(assignment(command))
    workdir = tmp_path / "gpu-stray4" / "g7"
    wait_for(lambda: (workdir / "child.pid").exists(), 30, "the child to start", every=0.02)
    child = int((workdir / "child.pid").read_text())
    reuser: Reuser | None = None
    try:
        member.terminate()  # the child, deaf to it, is seen in the cgroup
        os.kill(child, signal.SIGKILL)  # and dies: its shell reaps it
        wait_for(lambda: not Path(f"/proc/{child}").exists(), 30, "the child to be reaped", every=0.02)
        reuser = started_at_pid(child)

        member.kill()
        assert wait_exit(member, timeout=10) == -signal.SIGKILL, \
            "the member waited on an unrelated process that took the pid of one of its cgroup's"
        assert reuser.poll() is None
    finally:
        kill_if_alive(child if reuser is None else None)
        if reuser is not None:
            reuser.kill()
            reuser.wait()
