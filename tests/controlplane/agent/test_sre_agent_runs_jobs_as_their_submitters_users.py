"""`qm-agent --job-user user`: each run gets its submitter's own uid and its team's gid, as Slurm
runs a job as the user who submitted it, so one member's job cannot reach another member's
while the team still shares what it opens to its group (job_users.py). Real processes, real
user switches (the suite runs as root on this machine kind; elsewhere the tests that switch
users are skipped, saying why)."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from controlplane.agent.job_users import UID_CEILING, JobIdentity, JobUserError, JobUsers, checked
from controlplane.agent.members import Assignment, ProcessLauncher, ProcessMember
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import CHECKOUT, QM_AGENT, start_agent, stop_agent, wait_for
from tests.controlplane.agent.test_process_member import alive, assignment, wait_exit
from tests.controlplane.agent.test_sre_agent_runs_jobs_as_team_users import output
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching a job's user needs the agent to be root")
TEAMS = 300_000  # --job-uid-base: a team's gid is this + its id
USERS = 1_300_000  # --job-user-uid-base: a submitter's uid is this + their id
NODE = "gpu-u1"


def user_launcher(state_dir: Path) -> ProcessLauncher:
    return ProcessLauncher(state_dir, NODE, devices=None, cgroup_root="off",
                           job_users=checked("user", TEAMS, state_dir, user_uid_base=USERS))


def of_user(command: str, user_id: int | None, team_id: int, generation: int) -> Assignment:
    return dataclasses.replace(assignment(command, generation=generation), team_id=team_id, submitter_id=user_id)


def said(state_dir: Path, generation: int) -> str:
    return output(state_dir, generation, node=NODE)


def work(state_dir: Path, generation: int) -> Path:
    return state_dir / NODE / f"g{generation}" / "work"


def waited_for_file(path: Path) -> None:
    deadline = time.monotonic() + 5
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), path


@as_root
def test_a_job_runs_as_its_submitters_uid_with_its_teams_gid_and_no_other_group(state_dir: Path) -> None:
    member = user_launcher(state_dir).launch(of_user('id -u; id -g; id -G; echo "$HOME"; pwd', 7, 4, 11))

    assert wait_exit(member) == 0  # type: ignore[arg-type]

    own = work(state_dir, 11)
    assert said(state_dir, 11).split() == [str(USERS + 7), str(TEAMS + 4), str(TEAMS + 4), str(own), str(own)]
    # work/ is the job's HOME: its uid's alone (0700), its team's group so it may open it itself
    assert (own.stat().st_uid, own.stat().st_gid, stat.S_IMODE(own.stat().st_mode)) == (USERS + 7, TEAMS + 4, 0o700)
    run_dir = own.parent
    assert (run_dir.stat().st_uid, stat.S_IMODE(run_dir.stat().st_mode)) == (0, 0o711)
    assert stat.S_IMODE((run_dir / "rank0.log").stat().st_mode) == 0o600


@as_root
@pytest.mark.parametrize(("owner", "prier"), [(7, 8), (8, 7)], ids=["8-pries-at-7", "7-pries-at-8"])
def test_a_member_cannot_signal_or_read_the_environ_or_work_dir_of_another_members_job(
        state_dir: Path, owner: int, prier: int) -> None:
    launcher = user_launcher(state_dir)
    # umask 027: the file itself is open to the team's group; work/ (0700) is what keeps it
    other = launcher.launch(of_user("umask 027; echo private-weights > weights; exec sleep 60", owner, 4, 21))
    pid = other.procs[0].pid  # type: ignore[attr-defined]
    waited_for_file(work(state_dir, 21) / "weights")
    try:
        prying = launcher.launch(of_user(
            f"kill -TERM {pid}; echo kill=$?; cat /proc/{pid}/environ; echo env=$?; "
            f"ls {work(state_dir, 21)}; echo ls=$?; cat {work(state_dir, 21)}/weights; echo cat=$?; "
            f"cat {state_dir}/{NODE}/g21/rank0.log; echo log=$?", prier, 4, 22))
        assert wait_exit(prying) == 0  # type: ignore[arg-type]

        words = said(state_dir, 22)
        assert all(f"{what}=1" in words for what in ("kill", "env", "cat", "log")), words
        assert "ls=2" in words, words  # ls: cannot open directory: Permission denied
        assert "private-weights" not in words and "QM_GENERATION" not in words
        assert alive(pid)
    finally:
        other.kill()
        wait_exit(other)  # type: ignore[arg-type]


@as_root
def test_one_submitters_jobs_reach_each_other(state_dir: Path) -> None:
    launcher = user_launcher(state_dir)
    first = launcher.launch(of_user("echo my-weights > weights; exec sleep 60", 7, 4, 31))
    pid = first.procs[0].pid  # type: ignore[attr-defined]
    waited_for_file(work(state_dir, 31) / "weights")
    try:
        second = launcher.launch(of_user(
            f"kill -0 {pid}; echo kill=$?; tr '\\0' '\\n' < /proc/{pid}/environ | grep '^QM_GENERATION='; "
            f"cat {work(state_dir, 31)}/weights", 7, 4, 32))
        assert wait_exit(second) == 0  # type: ignore[arg-type]

        assert said(state_dir, 32).split() == ["kill=0", "QM_GENERATION=31", "my-weights"]
    finally:
        first.kill()
        wait_exit(first)  # type: ignore[arg-type]


@as_root
def test_what_a_member_opens_to_the_teams_group_another_member_reads_and_another_team_does_not(
        state_dir: Path) -> None:
    """The team's gid is why the mode gives jobs a group: sharing stays possible, on purpose."""
    datasets = state_dir / "datasets-team-4"
    datasets.mkdir()
    os.chown(datasets, 0, TEAMS + 4)
    os.chmod(datasets, 0o2770)  # set-group-id: what is written here stays the team's group
    launcher = user_launcher(state_dir)

    writer = launcher.launch(of_user(f"umask 027; echo shared-corpus > {datasets}/corpus", 7, 4, 41))
    assert wait_exit(writer) == 0  # type: ignore[arg-type]
    teammate = launcher.launch(of_user(f"cat {datasets}/corpus", 8, 4, 42))
    stranger = launcher.launch(of_user(f"cat {datasets}/corpus", 9, 5, 43))

    assert wait_exit(teammate) == 0 and said(state_dir, 42).strip() == "shared-corpus"  # type: ignore[arg-type]
    assert wait_exit(stranger) != 0  # type: ignore[arg-type]
    assert "Permission denied" in said(state_dir, 43) and "shared-corpus" not in said(state_dir, 43)


@as_root
def test_a_member_opens_their_own_work_dir_to_their_team_only_by_choice(state_dir: Path) -> None:
    launcher = user_launcher(state_dir)
    opener = launcher.launch(of_user("echo notes > notes; chmod g+rx,g-w . ; chmod g+r notes", 7, 4, 45))
    assert wait_exit(opener) == 0  # type: ignore[arg-type]

    teammate = launcher.launch(of_user(f"cat {work(state_dir, 45)}/notes", 8, 4, 46))

    assert wait_exit(teammate) == 0 and said(state_dir, 46).strip() == "notes"  # type: ignore[arg-type]


@as_root
def test_a_submitters_job_still_reports_progress_and_is_stopped_by_the_agent(state_dir: Path) -> None:
    member = user_launcher(state_dir).launch(of_user(
        """echo '{"steps": 5, "useful_tokens": 20480}' >> "$QM_PROGRESS_FILE"; trap 'exit 3' TERM; """
        "sleep 60 & wait", 7, 4, 47))
    assert isinstance(member, ProcessMember)
    deadline = time.monotonic() + 5
    while member.progress().steps != 5 and time.monotonic() < deadline:
        time.sleep(0.02)

    member.terminate()

    assert wait_exit(member) == 3
    assert member.progress().steps == 5
    assert member.progress_file == work(state_dir, 47) / "rank0.progress.jsonl"


@as_root
def test_a_run_sent_without_its_submitter_is_refused_not_run_as_the_agent(state_dir: Path) -> None:
    launcher = user_launcher(state_dir)

    with pytest.raises(JobUserError, match="no submitter"):
        launcher.launch(of_user("touch ran", None, 4, 61))

    assert not (state_dir / NODE / "g61" / "ran").exists()
    assert "no submitter" in (state_dir / NODE / "g61" / "error.txt").read_text()


@pytest.mark.parametrize("mode", ["team", "user"])
def test_a_teams_ids_stop_below_the_users_uids_in_either_mode(mode: str) -> None:
    """So a team's uid (team mode) or gid is never a user's uid, whichever mode a node runs."""
    users = JobUsers(mode, TEAMS, USERS, setpriv="/usr/bin/setpriv")
    last_team = USERS - TEAMS - 1

    identity = users.identity(last_team, 7)
    assert identity is not None and identity.gid == USERS - 1
    with pytest.raises(JobUserError, match="reaches --job-user-uid-base"):
        users.identity(last_team + 1, 7)


def test_a_submitters_uid_beyond_the_ceiling_is_refused() -> None:
    users = JobUsers("user", TEAMS, UID_CEILING - 10, setpriv="/usr/bin/setpriv")

    assert users.identity(4, 10) == JobIdentity(UID_CEILING, TEAMS + 4)
    with pytest.raises(JobUserError, match="beyond"):
        users.identity(4, 11)


@pytest.mark.parametrize(("mode", "user_base"), [("user", TEAMS), ("user", TEAMS - 1), ("team", TEAMS),
                                                 ("user", UID_CEILING + 1)])
def test_users_uids_must_start_above_the_teams_ids(mode: str, user_base: int) -> None:
    with pytest.raises(JobUserError, match="--job-user-uid-base .*above --job-uid-base"):
        checked(mode, TEAMS, Path(tempfile.gettempdir()), user_uid_base=user_base)


def test_submitters_users_need_root() -> None:
    with pytest.raises(JobUserError, match="--job-user user needs the agent to run as root"):
        checked("user", TEAMS, Path(tempfile.gettempdir()), euid=1000, user_uid_base=USERS)


def test_an_agent_whose_users_uids_would_meet_the_teams_ids_exits_2_saying_why(tmp_path: Path) -> None:
    done = subprocess.run([QM_AGENT, "--server", "http://127.0.0.1:9", "--name", "gpu-x", "--gpus", "1",
                           "--state-dir", str(tmp_path / "state"), "--job-user", "user", "--log-format", "console"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": CHECKOUT, "QM_AGENT_BOOTSTRAP_TOKEN": "x" * 32,
                               "QM_AGENT_JOB_UID_BASE": "2000000", "QM_AGENT_JOB_USER_UID_BASE": "1500000"})

    assert done.returncode == 2
    assert "cannot run jobs as asked" in done.stderr and "--job-user-uid-base 1500000" in done.stderr


@as_root
@pytest.mark.django_db(transaction=True)
def test_sre_a_real_agent_runs_each_submitters_jobs_as_their_own_uid_and_their_teams_gid(
        live_server: Any, state_dir: Path) -> None:
    """The control plane sends each run's submitter; `qm-agent --job-user user` runs two members'
    jobs of one team side by side on one node, each as its own uid, both with the team's gid."""
    ml = build_loop_fleet()
    ada, alan = (get_user_model().objects.create_user(username=name) for name in ("ada", "alan"))
    log = open(state_dir / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, "gpu-users", log, gpus=2,
                        options=("--job-user", "user", "--job-uid-base", str(TEAMS),
                                 "--job-user-uid-base", str(USERS)))
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-users", state=NodeState.READY).exists(), 20,
                 "the node to register")
        jobs = [make_job(ml, name=f"whoami-{user.username}", command="id -u > ids; id -g >> ids", submitter=user)
                for user in (ada, alan)]
        assert cycle.run_cycle("test").binds == 2
        wait_for(lambda: all(Job.objects.get(pk=j.pk).state == JobState.SUCCEEDED for j in jobs), 30,
                 "both jobs to succeed")

        for job in jobs:
            generation = Allocation.objects.get(job=job).generation
            ids = (state_dir / "gpu-users" / f"g{generation}" / "work" / "ids").read_text().split()
            assert ids == [str(USERS + job.submitter_id), str(TEAMS + job.team_id)]  # type: ignore[operator]
        assert ada.pk != alan.pk
    finally:
        stop_agent(agent)
        log.close()
