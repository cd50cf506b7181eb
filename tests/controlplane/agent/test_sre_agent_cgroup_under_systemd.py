"""Under systemd, the runs' cgroups go in the agent's own (delegated) cgroup, not beside the
system's slices (controlplane/agent/containment.py).

Found on 5 Dec: `--cgroup-root auto` took the top of the cgroup v2 mount, so an agent that
systemd started in `/system.slice/qm-agent.service` with `Delegate=yes` put its runs at
`/sys/fs/cgroup/qm-agent-…`, outside the subtree systemd gave it, in the part of the tree
systemd owns. Now `auto` takes the agent's own cgroup when it is writable, a plain domain
cgroup and gives its children no controller; else the mount's top as before. A run cgroup an
agent left behind is found by the next one wherever that one runs: the parent's path is
recorded in the state directory, and the mount's top is looked at too (an agent from before).

Real cgroups on this machine: a cgroup made under the writable cgroup v2 mount stands for the
service's (`…/qm-agent.service`), an agent process is started inside it as systemd starts one
(its first instruction already in it), and the job's processes are looked for in the cgroups
the kernel says they are in (/proc/<pid>/cgroup)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent import containment
from controlplane.agent.containment import CGROUP_V2_MOUNTS, PARENT_RECORD, RunCgroups, auto_root, joined_argv
from controlplane.agent.members import ProcessLauncher
from controlplane.choices import NodeState
from controlplane.models import Allocation, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import CHECKOUT, start_agent, stop_agent, wait_for
from tests.controlplane.agent.test_process_member import alive, assignment, kill_if_alive
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job

MOUNT = next((m for m in CGROUP_V2_MOUNTS if (m / "cgroup.procs").is_file() and os.access(m, os.W_OK)), None)

pytestmark = pytest.mark.skipif(MOUNT is None or containment.own_cgroup() != MOUNT,
                                reason="no writable cgroup v2 mount, or the tests do not run at its top")

# A child with an empty environment (no marker) in a session of its own, its pid written (whole)
# to `escaped.pid` in the run's directory: only the run's cgroup finds it.
ESCAPED = ("env -i setsid /bin/sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped.pid; exec sleep 120' &")


def _cgroup_of(pid: int) -> str:
    """The cgroup v2 path of `pid`, as the kernel says (relative to the hierarchy's root)."""
    return next(line[3:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if line.startswith("0::"))


def _remove_tree(cgroup: Path) -> None:
    """Kill whatever is in `cgroup`'s subtree and remove it, deepest first."""
    if not cgroup.exists():
        return
    for _ in range(250):
        if not containment.populated(cgroup):
            break
        containment.signal_all(cgroup, signal.SIGKILL)
        time.sleep(0.02)
    for inner, _, _ in os.walk(cgroup, topdown=False):
        try:
            os.rmdir(inner)
        except OSError:
            pass


@pytest.fixture
def service() -> Iterator[Path]:
    """A cgroup standing for a systemd service's (`Delegate=yes`): made under the mount, and
    emptied and removed with all below it after the test."""
    assert MOUNT is not None
    path = MOUNT / f"qm-test-{uuid.uuid4().hex[:8]}.service"
    path.mkdir()
    try:
        yield path
    finally:
        _remove_tree(path)
        assert not path.exists(), f"{path} could not be removed"


def _agent_in(cgroup: Path, state: Path, node: str, command: str | None) -> subprocess.Popen[str]:
    """An agent process (its launcher and reaper) started inside `cgroup`: it sweeps what a
    predecessor left, prints the pids killed, then launches `command` as run g7 (if any),
    prints its run cgroups' parent and its reaper's pid, and waits to be killed."""
    script = textwrap.dedent(f"""\
        import sys, time
        sys.path.insert(0, {CHECKOUT!r})
        from pathlib import Path
        from controlplane.agent.members import ProcessLauncher
        from tests.controlplane.agent.test_process_member import assignment
        launcher = ProcessLauncher(Path({str(state)!r}), {node!r}, devices=None)
        print(" ".join(map(str, launcher.sweep_leftovers())), flush=True)
        launcher.reaper.start()
        if {command!r} is not None:
            launcher.launch(assignment({command!r}))
        print(launcher.cgroups and launcher.cgroups.parent, flush=True)
        print(launcher.reaper._proc.pid, flush=True)
        time.sleep(60)
    """)
    return subprocess.Popen(joined_argv(cgroup, [sys.executable, "-c", script]), stdout=subprocess.PIPE, text=True,
                            start_new_session=True)


def _kill_agent(agent: subprocess.Popen[str]) -> None:
    if agent.poll() is None:
        os.killpg(agent.pid, signal.SIGKILL)
    agent.wait()


def _escaped(workdir: Path) -> int:
    wait_for(lambda: (workdir / "escaped.pid").exists(), 30, "the escaped child to start", every=0.02)
    pid = int((workdir / "escaped.pid").read_text())
    assert alive(pid)
    return pid


def _written_pid(pid_file: Path, timeout: float = 10) -> int:
    # `echo $$ > f` creates the file before it writes the line: wait for the whole line
    wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"), timeout, f"a pid in {pid_file.name}")
    return int(pid_file.read_text())


def test_an_agent_in_a_delegated_cgroup_puts_its_runs_under_it(service: Path, tmp_path: Path) -> None:
    agent = _agent_in(service, tmp_path, "gpu-sd", f"{ESCAPED} echo $$ > rank.pid; exec sleep 60")
    escaped = None
    try:
        assert agent.stdout is not None
        assert agent.stdout.readline() == "\n", "nothing to sweep"
        parent = Path(agent.stdout.readline().strip())
        reaper = int(agent.stdout.readline())
        assert parent == RunCgroups(service, "gpu-sd", tmp_path / "gpu-sd").parent
        escaped = _escaped(tmp_path / "gpu-sd" / "g7")
        rank = _written_pid(tmp_path / "gpu-sd" / "g7" / "rank.pid")

        inside = "/" + str(parent.relative_to(MOUNT)) + "/g7"  # type: ignore[arg-type]
        assert _cgroup_of(rank) == inside, "the rank runs in its run's cgroup, under the agent's own"
        assert _cgroup_of(escaped) == inside
        # the agent and its reaper stay in their own cgroup, above their runs' (no controller is
        # enabled there, so the kernel lets it hold processes and child cgroups both)
        assert {agent.pid, reaper} <= set(containment.pids(service)) - set(containment.pids(parent))
        assert (service / "cgroup.subtree_control").read_text().split() == []
        assert not (MOUNT / parent.name).exists(), "nothing at the mount's top"  # type: ignore[operator]
        assert (tmp_path / "gpu-sd" / PARENT_RECORD).read_text() == f"{parent}\n"

        _kill_agent(agent)  # kill -9 (its reaper, in a session of its own, lives on and acts)
        wait_for(lambda: not alive(escaped), 30, "the reaper to kill the escaped child", every=0.02)
        wait_for(lambda: not (parent / "g7").exists(), 30, "the reaper to remove the run's cgroup", every=0.02)
    finally:
        _kill_agent(agent)
        kill_if_alive(escaped)


def test_an_agent_in_a_threaded_cgroup_falls_back_to_the_mount_top(service: Path, tmp_path: Path) -> None:
    # a threaded cgroup's new children are "domain invalid": no process may join them
    threaded = service / "threaded"
    threaded.mkdir()
    (threaded / "cgroup.type").write_text("threaded")
    parent = RunCgroups(MOUNT, "gpu-th", tmp_path / "gpu-th").parent  # type: ignore[arg-type]
    agent = _agent_in(threaded, tmp_path, "gpu-th", "exec sleep 60")
    try:
        assert agent.stdout is not None
        agent.stdout.readline()
        assert Path(agent.stdout.readline().strip()) == parent
        wait_for(lambda: (parent / "g7").is_dir() and containment.pids(parent / "g7"), 30, "the run in its cgroup")
        _kill_agent(agent)
        wait_for(lambda: not (parent / "g7").exists(), 30, "the reaper to remove the run's cgroup", every=0.02)
    finally:
        _kill_agent(agent)
        _remove_tree(parent)


def test_why_auto_falls_back_is_said(service: Path) -> None:
    threaded = service / "threaded"
    threaded.mkdir()
    (threaded / "cgroup.type").write_text("threaded")
    probe = ("import sys; sys.path.insert(0, %r); from controlplane.agent.containment import auto_root; "
             "print(auto_root())" % CHECKOUT)
    said = subprocess.run(joined_argv(threaded, [sys.executable, "-c", probe]), capture_output=True, text=True,
                          check=True).stdout
    assert f"the agent's own cgroup {threaded} is a threaded cgroup, not a domain one" in said
    said = subprocess.run(joined_argv(service, [sys.executable, "-c", probe]), capture_output=True, text=True,
                          check=True).stdout
    # (its child made it a threaded domain: the runs could not go under it either)
    assert "is a domain threaded cgroup" in said
    assert auto_root() == (MOUNT, "the top of the cgroup v2 mount, the agent's own cgroup")


def test_an_agent_restarted_at_the_mount_top_sweeps_what_one_in_a_service_cgroup_left(service: Path,
                                                                                       tmp_path: Path) -> None:
    """Run under systemd, then by hand: the first agent's run cgroup is under the service's
    cgroup; the second runs at the mount's top, and finds it by the record."""
    agent = _agent_in(service, tmp_path, "gpu-mv", f"{ESCAPED} exec sleep 60")
    escaped = None
    try:
        assert agent.stdout is not None
        agent.stdout.readline()
        parent = Path(agent.stdout.readline().strip())
        reaper = int(agent.stdout.readline())
        escaped = _escaped(tmp_path / "gpu-mv" / "g7")
        os.kill(reaper, signal.SIGKILL)  # the reaper could not do its work (killed first)
        wait_for(lambda: not alive(reaper), 30, "the reaper's death", every=0.02)
        _kill_agent(agent)
        assert alive(escaped) and (parent / "g7").is_dir(), "left behind"

        launcher = ProcessLauncher(tmp_path, "gpu-mv", devices=None)
        assert launcher.cgroups is not None and launcher.cgroups.parent.parent == MOUNT
        assert escaped in launcher.sweep_leftovers()
        wait_for(lambda: not alive(escaped), 30, "the escaped child to die", every=0.02)
        assert not parent.exists(), "the old parent is removed once emptied"
        assert (tmp_path / "gpu-mv" / PARENT_RECORD).read_text() == f"{launcher.cgroups.parent}\n"
    finally:
        _kill_agent(agent)
        kill_if_alive(escaped)
        if "launcher" in locals():
            _remove_tree(launcher.cgroups.parent)  # type: ignore[union-attr]


def test_an_agent_in_a_service_cgroup_sweeps_what_an_agent_from_before_left_at_the_mount_top(
        service: Path, tmp_path: Path) -> None:
    """An agent from before 5 Dec (no record) left a run at the mount's top; the next one runs
    under systemd in the service's cgroup, and still finds it there by its name."""
    old = ProcessLauncher(tmp_path, "gpu-up", devices=None)
    assert old.cgroups is not None and old.cgroups.parent.parent == MOUNT
    member = old.launch(assignment(f"{ESCAPED} exit 0"))
    escaped = _escaped(tmp_path / "gpu-up" / "g7")
    agent = None
    try:
        member.procs[0].wait()  # type: ignore[attr-defined]  # the agent died before it looked
        (tmp_path / "gpu-up" / PARENT_RECORD).unlink()  # an agent from before wrote none
        agent = _agent_in(service, tmp_path, "gpu-up", None)
        assert agent.stdout is not None
        assert str(escaped) in agent.stdout.readline().split()
        assert Path(agent.stdout.readline().strip()).parent == service
        wait_for(lambda: not alive(escaped), 30, "the escaped child to die", every=0.02)
        assert not old.cgroups.parent.exists()
    finally:
        if agent is not None:
            _kill_agent(agent)
        kill_if_alive(escaped)
        _remove_tree(old.cgroups.parent)


@pytest.mark.django_db(transaction=True)
def test_a_real_qm_agent_in_a_service_cgroup_runs_its_job_under_it(live_server: Any, tmp_path: Path,
                                                                   state_dir: Path, submitter: Any,
                                                                   service: Path) -> None:
    fleet = build_loop_fleet()
    log_path = tmp_path / "agent.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    # A root service's default: each job as its submitter, working in its run's `work/`
    agent = start_agent(live_server.url, state_dir, "gpu-unit", log, gpus=1, cgroup=service)
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-unit", state=NodeState.READY).exists(), 60, "the node")
        assert _cgroup_of(agent.pid) == "/" + service.name
        job = make_job(fleet, gpus=1, command="echo $$ > rank.pid; exec sleep 60", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        generation = Allocation.objects.get(job=job).generation
        pid_file = state_dir / "gpu-unit" / f"g{generation}" / "work" / "rank.pid"
        parent = RunCgroups(service, "gpu-unit", state_dir / "gpu-unit").parent
        assert _cgroup_of(_written_pid(pid_file, 20)) == f"/{service.name}/{parent.name}/g{generation}"
    finally:
        stop_agent(agent)
        log.close()
    said = log_path.read_text()
    assert "each run's processes are contained in a cgroup of their own" in said
    assert f"{parent} (the agent's own cgroup)" in said


def test_an_agent_whose_own_cgroup_refuses_a_child_falls_back_to_the_mount_top(service: Path,
                                                                               tmp_path: Path) -> None:
    # a service cgroup that may have no descendants (an operator's limit): before, auto gave up
    # containment altogether ("cannot create …") although the mount's top would take the runs
    (service / "cgroup.max.descendants").write_text("0")
    parent = RunCgroups(MOUNT, "gpu-md", tmp_path / "gpu-md").parent  # type: ignore[arg-type]
    probe = ("import sys; sys.path.insert(0, %r); from pathlib import Path; "
             "from controlplane.agent.containment import RunCgroups; "
             "print(RunCgroups.open('auto', 'gpu-md', Path(%r))[1])" % (CHECKOUT, str(tmp_path / "gpu-md")))
    try:
        said = subprocess.run(joined_argv(service, [sys.executable, "-c", probe]), capture_output=True, text=True,
                              check=True).stdout
        assert said.startswith(f"{parent} (the top of the cgroup v2 mount: cannot create {service}/")
        assert parent.is_dir()
    finally:
        _remove_tree(parent)


def test_a_parent_recorded_outside_any_cgroup_hierarchy_is_never_swept(tmp_path: Path) -> None:
    # The state directory is its jobs' to change: a record naming a directory of the right name
    # outside the cgroup v2 mount, with a "run cgroup" in it whose cgroup.procs lists a process
    # of someone else's, never makes the agent kill that process.
    bystander = subprocess.Popen(["sleep", "60"])
    state = tmp_path / "gpu-rec-fake"
    fake = tmp_path / "elsewhere" / RunCgroups(MOUNT, "gpu-rec-fake", state).parent.name  # type: ignore[arg-type]
    (fake / "g1").mkdir(parents=True)
    (fake / "g1" / "cgroup.procs").write_text(f"{bystander.pid}\n")
    (fake / "g1" / "cgroup.controllers").write_text("")
    state.mkdir()
    (state / PARENT_RECORD).write_text(f"{fake}\n")
    launcher = ProcessLauncher(tmp_path, "gpu-rec-fake", devices=None)
    try:
        assert launcher.cgroups is not None and fake not in launcher.cgroups.elsewhere
        assert launcher.sweep_leftovers() == []
        assert bystander.poll() is None, "a process the record's directory listed was killed"
    finally:
        bystander.kill()
        bystander.wait()
        _remove_tree(launcher.cgroups.parent)  # type: ignore[union-attr]
