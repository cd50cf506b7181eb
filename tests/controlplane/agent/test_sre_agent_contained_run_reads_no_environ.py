"""A run contained in its cgroup and run as a user of its own is stopped by its cgroup alone: the
agent no longer reads every process's environment on the node at each stop and exit.

Since 4 Dec (64b3050) a member's stop and end looked for the run's marker (QM_AGENT_NODE,
QM_GENERATION) in /proc/<pid>/environ of every process on the machine, so that what left the
run's session was stopped with it. Its cost grows with the node's processes: with 300-odd of them
(bench/true_jobs.py: 64 agents, their reapers, the control plane) about 8 ms of the agent's CPU
an exit, 7.5 of the agents' 12 CPU-seconds for 1,000 `/bin/true` jobs. A run in a cgroup whose
job is not root (`--job-user team` or `user`, a root agent's default) cannot leave that cgroup
(moving a process takes write access to the cgroups' `cgroup.procs`, root's), so the cgroup
holds every process it started, whatever its session or environment: its stop and end need
no scan. A run without a cgroup, or whose job runs as the agent's root, is still scanned.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controlplane.agent import members
from controlplane.agent.containment import find_cgroup_root
from controlplane.agent.job_users import checked
from controlplane.agent.members import ProcessLauncher
from tests.controlplane.agent.real_agent import wait_for
from tests.controlplane.agent.test_process_member import alive, kill_if_alive, wait_exit
from tests.controlplane.agent.test_sre_agent_runs_jobs_as_their_submitters_users import of_user

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="switching a job's user needs the agent to be root"),
    pytest.mark.skipif(find_cgroup_root("auto") is None, reason="no writable cgroup v2 hierarchy on this host"),
]

TEAMS, USERS = 310_000, 1_310_000
# A child in a session of its own that ignores SIGTERM, its pid written (whole) to `stray.pid`
# where the job works.
STRAY = "setsid sh -c 'trap \"\" TERM; echo $$ > stray.tmp; mv stray.tmp stray.pid; exec sleep 120' &"


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each time a member looks for its run's marker in every process's environment."""
    seen: list[str] = []
    real = members.marked_processes

    def counted(node_name: str, generations: set[int]) -> list[int]:
        seen.append(node_name)
        return real(node_name, generations)

    monkeypatch.setattr(members, "marked_processes", counted)
    return seen


def _stray(job_dir: Path) -> int:
    wait_for(lambda: (job_dir / "stray.pid").exists(), 30, "the stray to start", every=0.02)
    pid = int((job_dir / "stray.pid").read_text())
    assert alive(pid)
    return pid


def test_a_contained_run_of_its_submitter_ends_and_stops_without_reading_every_processs_environ(
        state_dir: Path, scans: list[str]) -> None:
    launcher = ProcessLauncher(state_dir, "gpu-cn1", devices=None, cgroup_root="auto",
                               job_users=checked("user", TEAMS, state_dir, user_uid_base=USERS))
    assert launcher.cgroups is not None
    ends = launcher.launch(of_user(f"{STRAY} sleep 0.3; exit 0", 7, 4, 21))
    stopped = launcher.launch(of_user(f"{STRAY} trap '' TERM; while :; do sleep 0.1; done", 7, 4, 22))
    strays = [_stray(state_dir / "gpu-cn1" / f"g{g}" / "work") for g in (21, 22)]
    try:
        assert wait_exit(ends) == 0  # type: ignore[arg-type]
        assert not alive(strays[0]), "reported gone while what it left in a session of its own ran"
        stopped.terminate()
        stopped.kill()
        assert wait_exit(stopped) < 0  # type: ignore[arg-type]
        assert not alive(strays[1])
    finally:
        for pid in strays:
            kill_if_alive(pid)
    assert scans == []


@pytest.mark.parametrize("how", ["as the agent's root", "without a cgroup"])
def test_a_run_that_could_leave_its_cgroup_or_has_none_is_still_looked_for_by_its_marker(
        state_dir: Path, scans: list[str], how: str) -> None:
    if how == "as the agent's root":
        launcher = ProcessLauncher(state_dir, "gpu-cn2", devices=None, cgroup_root="auto")
    else:
        launcher = ProcessLauncher(state_dir, "gpu-cn2", devices=None, cgroup_root="off",
                                   job_users=checked("user", TEAMS, state_dir, user_uid_base=USERS))
    member = launcher.launch(of_user("sleep 0.2; exit 0", 7, 4, 23))
    assert wait_exit(member) == 0  # type: ignore[arg-type]
    assert scans and set(scans) == {"gpu-cn2"}
