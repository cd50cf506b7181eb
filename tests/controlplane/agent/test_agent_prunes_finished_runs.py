"""A real agent removes a finished run's directory (its output files on the node) once all its
output was shipped and `--keep-output-s` has passed; before 5 Dec no run directory was ever
removed, so a node's disk filled with everything its jobs ever printed. A run still running,
one whose output is not all taken, and one never shipped (`--no-output`) stay."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.logs import RECORD_NAME, write_record
from controlplane.agent.main import parse_args
from controlplane.agent.members import ProcessLauncher
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, Node
from controlplane.services import cycle, job_logs
from tests.controlplane.agent.real_agent import QM_AGENT, wait_for
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job

DAY = 86400.0


def _run(root: Path, generation: int, *, done: bool | None, ended_ago: float, now: float) -> Path:
    """A run's directory as a real agent leaves it: a rank's output and, unless `done` is None
    (never shipped), its shipping record, written `ended_ago` seconds before `now`."""
    workdir = root / f"g{generation}"
    workdir.mkdir(parents=True)
    (workdir / "rank0.log").write_bytes(b"x" * 1000)
    if done is not None:
        write_record(workdir / RECORD_NAME, generation, {} if done else {0: (500, 1000)}, done=done)
        os.utime(workdir / RECORD_NAME, (now - ended_ago, now - ended_ago))
    return workdir


def test_only_runs_shipped_whole_longer_ago_than_the_keep_and_not_running_are_removed(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-disk", devices=None)
    now = time.time()
    old = _run(launcher.root, 5, done=True, ended_ago=2 * DAY, now=now)
    recent = _run(launcher.root, 6, done=True, ended_ago=60, now=now)
    unshipped = _run(launcher.root, 7, done=False, ended_ago=2 * DAY, now=now)
    running = _run(launcher.root, 8, done=True, ended_ago=2 * DAY, now=now)
    never_shipped = _run(launcher.root, 9, done=None, ended_ago=2 * DAY, now=now)
    with_processes = _run(launcher.root, 10, done=True, ended_ago=2 * DAY, now=now)
    (with_processes / "pgids").write_text("4242\n")
    old_size = sum(f.stat().st_size for f in old.iterdir())

    removed, freed = launcher.prune_finished_runs(DAY, running={8}, now=now)

    assert (removed, not old.exists()) == ([5], True)
    assert freed == old_size > 1000  # its output and its record
    assert all(d.exists() for d in (recent, unshipped, running, never_shipped, with_processes))
    assert launcher.prune_finished_runs(0, running={8}, now=now)[0] == [6]


def test_the_keep_is_three_days_unless_told_and_a_negative_one_is_refused(capsys: Any, monkeypatch: Any) -> None:
    assert parse_args([]).keep_output_s == 3 * DAY
    monkeypatch.setenv("QM_AGENT_KEEP_OUTPUT_S", "0")
    assert parse_args([]).keep_output_s == 0
    with pytest.raises(SystemExit) as refused:
        parse_args(["--keep-output-s", "-1"])
    assert refused.value.code == 2
    assert "--keep-output-s" in capsys.readouterr().err


@pytest.mark.django_db(transaction=True)
def test_a_real_agent_removes_a_finished_runs_directory_once_its_output_is_shipped(live_server: Any, tmp_path: Path) -> None:
    fleet = build_loop_fleet()
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = subprocess.Popen(
        [QM_AGENT, "--server", live_server.url, "--name", "gpu-disk", "--gpus", "2", "--gpu-type", "H100-80GB",
         "--pool", "h100", "--leaf-switch", "leaf-1", "--spine", "spine-1", "--state-dir", str(tmp_path / "state"),
         "--interval", "0.5", "--no-wake", "--log-format", "console", "--keep-output-s", "0"],
        env={**os.environ, "QM_AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-disk", state=NodeState.READY).exists(), 20, "the node")
        job = make_job(fleet, gpus=2, command="seq 1 2000; echo \"rank $RANK done\"")
        assert cycle.run_cycle("test").binds == 1
        workdir = tmp_path / "state" / "gpu-disk" / f"g{Allocation.objects.get(job=job).generation}"
        wait_for(lambda: workdir.exists(), 10, "the run's directory")
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 30, "the job to end")

        wait_for(lambda: not workdir.exists(), 15, "the run's directory to be removed")
        # Removed only after its output was all taken: the control plane holds every line.
        for rank in (0, 1):
            text = job_logs.read(Job.objects.get(pk=job.pk), rank=rank, tail_bytes=job_logs.keep_bytes()).text
            assert text == "".join(f"{i}\n" for i in range(1, 2001)) + f"rank {rank} done\n"
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(timeout=20)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
        log.close()
    assert "removed finished runs' directories" in (tmp_path / "agent.log").read_text()
