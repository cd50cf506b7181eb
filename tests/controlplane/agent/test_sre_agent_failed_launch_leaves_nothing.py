"""A launch that fails part-way leaves nothing behind: the ranks it started are killed and the
run's cgroup is removed at once (controlplane/agent/members.py, ProcessMember._abandon_launch).

Found on 5 Dec: when rank 1 of a 2-rank run could not be spawned, the launch raised (the agent
reported the run exited 126), but rank 0 was already running in the run's cgroup; nothing
looked at it again until the next agent start swept it, and its GPUs were reported free. A
run whose first rank could not be spawned left its (empty) cgroup under the agent's parent
until that sweep too. Real processes and the real cgroup v2 hierarchy; a rank cannot be spawned
here because the path of its output file is taken by a directory (IsADirectoryError), as a
full or broken disk would make the open fail.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from controlplane.agent.containment import find_cgroup_root
from controlplane.agent.members import ProcessLauncher, marked_processes
from tests.controlplane.agent.test_process_member import assignment

pytestmark = pytest.mark.skipif(find_cgroup_root("auto") is None,
                                reason="no writable cgroup v2 hierarchy on this host")

TWO_RANKS = {"gpus": (0, 1), "ranks": (0, 1), "world_size": 2}


def _kill_generation_7(node: str) -> None:
    for pid in marked_processes(node, {7}):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_rank_1_failing_to_spawn_kills_rank_0_and_removes_the_runs_cgroup(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-fail", devices=None)
    assert launcher.cgroups is not None
    cgroup = launcher.cgroups.parent / "g7"
    (tmp_path / "gpu-fail" / "g7" / "rank1.log").mkdir(parents=True)
    try:
        # rank 0 and what it starts in a session of its own, both long-lived
        with pytest.raises(IsADirectoryError):
            launcher.launch(assignment("setsid sleep 60 & exec sleep 60", **TWO_RANKS))  # type: ignore[arg-type]

        assert marked_processes("gpu-fail", {7}) == [], "rank 0 of the failed launch is still running"
        assert not cgroup.exists(), "the failed launch's cgroup was left behind"
        assert not (tmp_path / "gpu-fail" / "g7" / "pgids").exists()
    finally:
        _kill_generation_7("gpu-fail")
        launcher.sweep_leftovers()


def test_the_first_rank_failing_to_spawn_removes_the_cgroup_made_for_it(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-fail", devices=None)
    assert launcher.cgroups is not None
    (tmp_path / "gpu-fail" / "g7" / "rank0.log").mkdir(parents=True)
    try:
        with pytest.raises(IsADirectoryError):
            launcher.launch(assignment("exec sleep 60"))

        assert not (launcher.cgroups.parent / "g7").exists(), "the cgroup made for the run was left behind"
    finally:
        launcher.sweep_leftovers()


def test_a_launch_after_a_failed_one_runs_in_a_fresh_cgroup(tmp_path: Path) -> None:
    # what the agent does next: the control plane requeues the job, perhaps onto this node again
    launcher = ProcessLauncher(tmp_path, "gpu-fail", devices=None)
    assert launcher.cgroups is not None
    (tmp_path / "gpu-fail" / "g7" / "rank1.log").mkdir(parents=True)
    with pytest.raises(IsADirectoryError):
        launcher.launch(assignment("exec sleep 60", **TWO_RANKS))  # type: ignore[arg-type]
    member = launcher.launch(assignment("exec sleep 60", generation=8))
    try:
        assert member.poll() is None
        assert [p.name for p in launcher.cgroups.runs()] == ["g8"]
    finally:
        member.kill()
        _kill_generation_7("gpu-fail")
        launcher.sweep_leftovers()


def test_a_launch_whose_process_record_cannot_be_written_kills_the_ranks_it_started(tmp_path: Path) -> None:
    # Every rank is running when the agent writes which process groups it started (`pgids`, for
    # the next agent's sweep): that write failing (a full disk; here a directory in its place)
    # failed the launch, reported 126, and before 5 Dec left both ranks running.
    launcher = ProcessLauncher(tmp_path, "gpu-fail", devices=None)
    assert launcher.cgroups is not None
    (tmp_path / "gpu-fail" / "g7" / "pgids").mkdir(parents=True)
    try:
        with pytest.raises(IsADirectoryError):
            launcher.launch(assignment("setsid sleep 60 & exec sleep 60", **TWO_RANKS))  # type: ignore[arg-type]

        assert marked_processes("gpu-fail", {7}) == [], "the ranks of the failed launch are still running"
        assert not (launcher.cgroups.parent / "g7").exists(), "the failed launch's cgroup was left behind"
    finally:
        _kill_generation_7("gpu-fail")
        (tmp_path / "gpu-fail" / "g7" / "pgids").rmdir()
        launcher.sweep_leftovers()
