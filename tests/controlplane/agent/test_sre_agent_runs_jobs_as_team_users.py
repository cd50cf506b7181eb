"""`qm-agent --job-user team`: each team's jobs run as a Unix user of their own, so the kernel
keeps teams apart on a shared node (job_users.py). Real processes, real user switches (the
suite runs as root on this machine kind; elsewhere the tests that switch users are skipped,
saying why)."""

from __future__ import annotations

import dataclasses
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.job_users import DEFAULT_UID_BASE, JobUserError, checked
from controlplane.agent.logs import write_whole
from controlplane.agent.members import Assignment, ProcessLauncher, ProcessMember
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, Node, Quota, Team
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import CHECKOUT, QM_AGENT, start_agent, stop_agent, wait_for
from tests.controlplane.agent.test_process_member import alive, assignment, wait_exit
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching a job's user needs the agent to be root")
BASE = 300_000


def team_launcher(state_dir: Path, node: str = "gpu-t1") -> ProcessLauncher:
    return ProcessLauncher(state_dir, node, devices=None, cgroup_root="off",
                           job_users=checked("team", BASE, state_dir))


def of_team(command: str, team_id: int, generation: int) -> Assignment:
    return dataclasses.replace(assignment(command, generation=generation), team_id=team_id)


def output(state_dir: Path, generation: int, node: str = "gpu-t1") -> str:
    return (state_dir / node / f"g{generation}" / "rank0.log").read_text()


@as_root
def test_a_job_runs_as_its_teams_user_with_no_other_group(state_dir: Path) -> None:
    member = team_launcher(state_dir).launch(of_team('id -u; id -g; id -G; echo "$HOME"; pwd', 4, 11))

    assert wait_exit(member) == 0  # type: ignore[arg-type]

    work = state_dir / "gpu-t1" / "g11" / "work"
    assert output(state_dir, 11).split() == [str(BASE + 4), str(BASE + 4), str(BASE + 4), str(work), str(work)]
    assert (work.stat().st_uid, stat.S_IMODE(work.stat().st_mode)) == (BASE + 4, 0o700)
    run_dir = work.parent
    assert (run_dir.stat().st_uid, stat.S_IMODE(run_dir.stat().st_mode)) == (0, 0o711)
    assert stat.S_IMODE((run_dir / "rank0.log").stat().st_mode) == 0o600


@as_root
def test_a_job_cannot_read_its_nodes_token(state_dir: Path) -> None:
    launcher = team_launcher(state_dir)
    token = state_dir / "gpu-t1" / "token"
    write_whole(token, b"node-secret\n", mode=0o600)  # as the agent keeps it (main._save_token)

    member = launcher.launch(of_team(f"cat {token}", 4, 12))

    assert wait_exit(member) != 0  # type: ignore[arg-type]
    assert "Permission denied" in output(state_dir, 12) and "node-secret" not in output(state_dir, 12)


@as_root
def test_a_job_cannot_signal_or_read_another_teams_job(state_dir: Path) -> None:
    launcher = team_launcher(state_dir)
    other = launcher.launch(of_team("echo private-weights > weights; exec sleep 60", 5, 21))
    pid = other.procs[0].pid  # type: ignore[attr-defined]
    weights = state_dir / "gpu-t1" / "g21" / "work" / "weights"
    deadline = time.monotonic() + 60
    while not weights.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert weights.exists(), "the other team's job never wrote its file: the prying below would prove nothing"
        prying = launcher.launch(of_team(
            f"kill -TERM {pid}; echo kill=$?; cat {weights}; echo cat=$?; cat /proc/{pid}/environ; echo env=$?; "
            f"cat {state_dir}/gpu-t1/g21/rank0.log; echo log=$?", 4, 22))
        assert wait_exit(prying) == 0  # type: ignore[arg-type]

        said = output(state_dir, 22)
        assert "kill=1" in said and "cat=1" in said and "env=1" in said and "log=1" in said
        assert "private-weights" not in said and "QM_GENERATION" not in said
        assert alive(pid)
    finally:
        other.kill()
        wait_exit(other)  # type: ignore[arg-type]


@as_root
def test_jobs_of_one_team_share_its_user(state_dir: Path) -> None:
    launcher = team_launcher(state_dir)
    first = launcher.launch(of_team("exec sleep 60", 4, 31))
    pid = first.procs[0].pid  # type: ignore[attr-defined]
    try:
        second = launcher.launch(of_team(f"kill -0 {pid}; echo kill=$?", 4, 32))
        assert wait_exit(second) == 0  # type: ignore[arg-type]
        assert "kill=0" in output(state_dir, 32)
    finally:
        first.kill()
        wait_exit(first)  # type: ignore[arg-type]


@as_root
def test_the_agent_still_stops_reads_progress_of_and_cleans_up_a_team_users_job(state_dir: Path) -> None:
    launcher = team_launcher(state_dir)
    # the trap before the progress line: once the line is read, a SIGTERM finds the trap set
    # (the other way round, a loaded machine's SIGTERM could come between the two)
    member = launcher.launch(of_team(
        """trap 'exit 3' TERM; echo '{"steps": 5, "useful_tokens": 20480}' >> "$QM_PROGRESS_FILE"; """
        "sleep 60 & wait", 4, 41))
    assert isinstance(member, ProcessMember)
    deadline = time.monotonic() + 60
    while member.progress().steps != 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert member.progress().steps == 5

    member.terminate()

    assert wait_exit(member) == 3
    assert member.progress().steps == 5
    assert member.progress_file == state_dir / "gpu-t1" / "g41" / "work" / "rank0.progress.jsonl"


@as_root
def test_a_team_users_job_dies_with_its_agent(state_dir: Path) -> None:
    """setpriv sets the parent-death signal after the switch (a change of user clears it)."""
    script = (f"import dataclasses, sys, time\nsys.path.insert(0, {str(Path.cwd())!r})\n"
              "from pathlib import Path\n"
              "from controlplane.agent.job_users import checked\n"
              "from controlplane.agent.members import ProcessLauncher\n"
              "from tests.controlplane.agent.test_process_member import assignment\n"
              f"state = Path({str(state_dir)!r})\n"
              f"launcher = ProcessLauncher(state, 'gpu-t1', None, cgroup_root='off', job_users=checked('team', {BASE}, state))\n"
              "m = launcher.launch(dataclasses.replace(assignment('exec sleep 60', generation=51), team_id=4))\n"
              "print(m.procs[0].pid, flush=True)\ntime.sleep(60)\n")
    agent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    child = int(agent.stdout.readline())
    deadline = time.monotonic() + 60
    while Path(f"/proc/{child}/comm").read_text().strip() != "sleep" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert Path(f"/proc/{child}/comm").read_text().strip() == "sleep", "the job's command never started"
    assert os.stat(f"/proc/{child}").st_uid == BASE + 4

    agent.send_signal(signal.SIGKILL)
    agent.wait()

    deadline = time.monotonic() + 30
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


@as_root
def test_a_run_sent_without_its_team_is_refused_not_run_as_the_agent(state_dir: Path) -> None:
    launcher = team_launcher(state_dir)

    with pytest.raises(JobUserError, match="no team"):
        launcher.launch(assignment("touch ran", generation=61))

    assert not (state_dir / "gpu-t1" / "g61" / "ran").exists()
    assert "no team" in (state_dir / "gpu-t1" / "g61" / "error.txt").read_text()


def test_team_users_need_root() -> None:
    with pytest.raises(JobUserError, match="needs the agent to run as root"):
        checked("team", DEFAULT_UID_BASE, Path(tempfile.gettempdir()), euid=1000)


@as_root
def test_team_users_need_a_state_directory_others_can_pass_through(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)

    with pytest.raises(JobUserError, match="is mode 700"):
        checked("team", DEFAULT_UID_BASE, closed / "state")


@pytest.mark.parametrize(("mode", "base", "words"), [
    ("teams", DEFAULT_UID_BASE, "give one of agent, team"),
    ("team", 999, "give a uid from 1000"),
])
def test_a_job_user_setting_out_of_range_is_refused_naming_it(mode: str, base: int, words: str) -> None:
    with pytest.raises(JobUserError, match=words):
        checked(mode, base, Path(tempfile.gettempdir()))


def test_the_default_runs_jobs_as_the_agent(tmp_path: Path) -> None:
    member = ProcessLauncher(tmp_path, "gpu-a1", devices=None, cgroup_root="off",
                             job_users=checked("agent", DEFAULT_UID_BASE, tmp_path)).launch(
        of_team("id -u; pwd", 4, 71))

    assert wait_exit(member) == 0  # type: ignore[arg-type]
    assert (tmp_path / "gpu-a1" / "g71" / "rank0.log").read_text().split() == [
        str(os.geteuid()), str(tmp_path / "gpu-a1" / "g71")]


@as_root
@pytest.mark.django_db(transaction=True)
def test_sre_a_real_agent_runs_each_teams_jobs_as_that_teams_user(live_server: Any, state_dir: Path) -> None:
    """The control plane sends each run's team; `qm-agent --job-user team` runs it as that team's
    user, and both teams' jobs succeed side by side on one node."""
    ml = build_loop_fleet()
    vision = dataclasses.replace(ml, team=Team.objects.create(name="vision", cohort=ml.team.cohort,
                                                              default_priority_class=ml.research))
    Quota.objects.create(team=vision.team, gpu_type=ml.h100, nominal_gpus=100)
    log = open(state_dir / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, "gpu-teams", log, gpus=2,
                        options=("--job-user", "team", "--job-uid-base", str(BASE)))
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-teams", state=NodeState.READY).exists(), 60,
                 "the node to register")
        jobs = [make_job(fleet, name=f"whoami-{fleet.team.name}", command="id -u > uid") for fleet in (ml, vision)]
        assert cycle.run_cycle("test").binds == 2
        wait_for(lambda: all(Job.objects.get(pk=j.pk).state == JobState.SUCCEEDED for j in jobs), 60,
                 "both jobs to succeed")

        for job in jobs:
            generation = Allocation.objects.get(job=job).generation
            uid = (state_dir / "gpu-teams" / f"g{generation}" / "work" / "uid").read_text().strip()
            assert uid == str(BASE + job.team_id)
    finally:
        stop_agent(agent)
        log.close()


@as_root
def test_an_agent_that_cannot_run_jobs_as_their_team_exits_2_saying_why(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)

    done = subprocess.run([QM_AGENT, "--server", "http://127.0.0.1:9", "--name", "gpu-x", "--gpus", "1",
                           "--state-dir", str(closed / "state"), "--job-user", "team", "--log-format", "console"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": CHECKOUT, "QM_AGENT_BOOTSTRAP_TOKEN": "x" * 32})

    assert done.returncode == 2
    assert "cannot run jobs as asked" in done.stderr and "is mode 700" in done.stderr
