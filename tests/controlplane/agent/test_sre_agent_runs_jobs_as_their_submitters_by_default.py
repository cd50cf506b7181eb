"""A `qm-agent` running as root runs each job as its submitter unless told otherwise.

Until 6 Dec `--job-user` defaulted to `agent` whatever the agent's user, and the usual agent is
a root systemd service (it needs root for cgroups): every job ran as root, could read or signal
every other team's jobs, read the node token and leave its cgroup. Now, when neither
`--job-user` nor QM_AGENT_JOB_USER gives a mode, a root agent (effective uid 0) takes `user`,
as Slurm runs a job as its submitter, and any other agent `agent` (it cannot switch user); the
start log says which and why, and a root agent told `agent` says once what that allows
(job_users.chosen_mode, main.run_real). Real `qm-agent` processes; the root ones are skipped,
saying why, where the suite does not run as root.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.job_users import AS_ROOT, DEFAULT_UID_BASE, DEFAULT_USER_UID_BASE, chosen_mode
from controlplane.agent.members import marked_processes
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import CHECKOUT, QM_AGENT, start_agent, stop_agent, wait_for
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the default for a root agent needs the agent to be root")
ROOT_DEFAULT = "default: the agent runs as root (effective uid 0)"


@pytest.mark.parametrize(("flag", "variable", "euid", "chosen"), [
    (None, None, 0, ("user", ROOT_DEFAULT)),
    (None, "", 0, ("user", ROOT_DEFAULT)),  # `QM_AGENT_JOB_USER=` in a unit's environment file
    (None, None, 1000, ("agent", "default: the agent runs as uid 1000, not root")),
    (None, "agent", 0, ("agent", "given: $QM_AGENT_JOB_USER")),
    (None, "team", 0, ("team", "given: $QM_AGENT_JOB_USER")),
    ("user", "agent", 0, ("user", "given: --job-user")),  # the flag over the variable
    ("agent", None, 0, ("agent", "given: --job-user")),
    ("user", None, 1000, ("user", "given: --job-user")),  # refused later, by checked(): not root
])
def test_the_mode_is_the_flags_else_the_variables_else_the_default_for_the_agents_uid(
        flag: str | None, variable: str | None, euid: int, chosen: tuple[str, str]) -> None:
    assert chosen_mode(flag, variable, euid) == chosen


def _start_lines(state_dir: Path, *flags: str, variable: str | None = None,
                 euid: int | None = None) -> subprocess.CompletedProcess[str]:
    """A real agent's start, to the line where it finds it cannot register (no bootstrap secret,
    no stored token: exit 2), which comes after it has chosen and said its jobs' user. With
    `euid`, the agent is told that is its effective uid (os.geteuid replaced before it runs)."""
    argv = ["--server", "http://127.0.0.1:9", "--name", "gpu-default", "--gpus", "1", "--gpu-type", "H100-80GB",
            "--state-dir", str(state_dir), "--cgroup-root", "off", "--log-format", "console", *flags]
    env = {k: v for k, v in os.environ.items() if k not in ("QM_AGENT_JOB_USER", "QM_AGENT_BOOTSTRAP_TOKEN")}
    env["PYTHONPATH"] = CHECKOUT  # this checkout's code (real_agent.py)
    if variable is not None:
        env["QM_AGENT_JOB_USER"] = variable
    if euid is None:
        command = [QM_AGENT, *argv]
    else:
        command = [sys.executable, "-c", textwrap.dedent(f"""\
            import os, sys
            os.geteuid = lambda: {euid}
            from controlplane.agent.main import main
            sys.exit(main({argv!r}))
            """)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@as_root
@pytest.mark.parametrize(("flags", "variable", "said", "chosen"), [
    ((), None, "jobs run as their submitter's user", ROOT_DEFAULT),
    ((), "", "jobs run as their submitter's user", ROOT_DEFAULT),
    ((), "team", "jobs run as their team's user", "given: $QM_AGENT_JOB_USER"),
    (("--job-user", "user"), "agent", "jobs run as their submitter's user", "given: --job-user"),
], ids=["default", "variable-empty", "variable-team", "flag-over-variable"])
def test_a_root_agents_start_says_its_jobs_user_and_why_and_warns_of_nothing(
        state_dir: Path, flags: tuple[str, ...], variable: str | None, said: str, chosen: str) -> None:
    done = _start_lines(state_dir, *flags, variable=variable)

    assert done.returncode == 2 and "cannot register" in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "jobs run as" in line]
    assert said in line and f"chosen='{chosen}'" in line, line
    assert "jobs run as root" not in done.stderr


@as_root
@pytest.mark.parametrize(("flags", "variable", "chosen"), [
    (("--job-user", "agent"), None, "given: --job-user"),
    ((), "agent", "given: $QM_AGENT_JOB_USER"),
], ids=["flag", "variable"])
def test_a_root_agent_told_to_run_jobs_as_itself_does_and_warns_once_what_that_allows(
        state_dir: Path, flags: tuple[str, ...], variable: str | None, chosen: str) -> None:
    done = _start_lines(state_dir, *flags, variable=variable)

    assert done.returncode == 2 and "cannot register" in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "jobs run as" in line and "[info" in line]
    assert "jobs run as the agent's user" in line and f"chosen='{chosen}'" in line, line
    (warning,) = [line for line in done.stderr.splitlines() if AS_ROOT in line]
    assert "[warning" in warning and f"chosen='{chosen}'" in warning
    assert "read the node token" in AS_ROOT and "leave its cgroup" in AS_ROOT


@as_root
def test_a_root_agent_that_cannot_run_jobs_as_their_submitters_by_default_exits_2_saying_how_to_choose(
        tmp_path: Path) -> None:
    # tmp_path is 0700: a submitter's job could not reach its directory under it. The agent does
    # not fall back to running jobs as root; it names the flag that would, for an operator who
    # means it.
    done = _start_lines(tmp_path / "state")

    assert done.returncode == 2
    assert "cannot run jobs as asked" in done.stderr and "is mode 700" in done.stderr, done.stderr
    assert f"chosen='{ROOT_DEFAULT}'" in done.stderr and "give --job-user agent" in done.stderr


def test_an_agent_not_root_runs_jobs_as_itself_by_default_and_says_so(state_dir: Path) -> None:
    done = _start_lines(state_dir, euid=1000)

    assert done.returncode == 2 and "cannot register" in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "jobs run as" in line]
    assert "jobs run as the agent's user" in line
    assert "chosen='default: the agent runs as uid 1000, not root'" in line


@pytest.mark.parametrize("mode", ["user", "team"])
def test_an_agent_not_root_asked_for_other_users_still_exits_2_saying_why(state_dir: Path, mode: str) -> None:
    done = _start_lines(state_dir, "--job-user", mode, euid=1000)

    assert done.returncode == 2
    assert "cannot run jobs as asked" in done.stderr
    assert f"--job-user {mode} needs the agent to run as root" in done.stderr
    assert "give --job-user agent" not in done.stderr, "it was given a mode: nothing defaulted to explain"


@as_root
@pytest.mark.django_db(transaction=True)
def test_sre_a_root_agent_without_the_flag_runs_a_job_as_its_submitters_uid(
        live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any, monkeypatch: Any) -> None:
    """A root `qm-agent` started as a systemd unit would be, with no --job-user: the job's
    process has its submitter's uid (1000000 + their id) and its team's gid (200000 + its id),
    real, effective, saved and file-system alike, and no other group, as the kernel says in
    /proc/PID/status; and `id -u` in the job says the same."""
    monkeypatch.delenv("QM_AGENT_JOB_USER", raising=False)
    fleet = build_loop_fleet()
    log_path = tmp_path / "agent.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, "gpu-default", log, gpus=1)
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-default", state=NodeState.READY).exists(), 60, "the node")
        job = make_job(fleet, gpus=1, command="id -u > uid; exec sleep 120", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING, 60, "the job to run")
        generation = Allocation.objects.get(job=job).generation
        wait_for(lambda: marked_processes("gpu-default", {generation}), 30, "the job's process")
        uid_file = state_dir / "gpu-default" / f"g{generation}" / "work" / "uid"
        wait_for(lambda: uid_file.exists() and uid_file.read_text().endswith("\n"), 30, "the job's `id -u`")

        uid, gid = DEFAULT_USER_UID_BASE + submitter.pk, DEFAULT_UID_BASE + fleet.team.pk
        for pid in marked_processes("gpu-default", {generation}):
            status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
            assert status["Uid"].split() == [str(uid)] * 4, (pid, status["Uid"])
            assert status["Gid"].split() == [str(gid)] * 4, (pid, status["Gid"])
            assert status["Groups"].split() == []
        assert uid_file.read_text() == f"{uid}\n"
    finally:
        stop_agent(agent)
        log.close()
    said = log_path.read_text()
    assert f"jobs run as their submitter's user chosen='{ROOT_DEFAULT}'" in said
    assert "jobs run as root" not in said
