"""What a job's output costs the node's disk. A real agent removes a finished run's directory (its output files on the node) once all its
output was shipped and `--keep-output-s` has passed; before 5 Dec no run directory was ever
removed, so a node's disk filled with everything its jobs ever printed. A run still running,
one whose output is not all taken, and one never shipped (`--no-output`) stay."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent import logs
from controlplane.agent.logs import KEEP_ON_NODE_BYTES, RECORD_NAME, RELEASE_STEP_BYTES, write_record
from controlplane.agent.main import parse_args
from controlplane.agent.members import ProcessLauncher
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, Node
from controlplane.services import cycle, job_logs
from tests.controlplane.agent.real_agent import start_agent, stop_agent, wait_for
from tests.controlplane.agent.test_agent_ships_logs import RecordingClient, drive, process_agent
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job

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
def test_a_real_agent_removes_a_finished_runs_directory_once_its_output_is_shipped(
        live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any) -> None:
    # (as root, the job runs as its submitter: its `work/` is theirs, and removed all the same)
    fleet = build_loop_fleet()
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, "gpu-disk", log, options=("--no-wake", "--keep-output-s", "0"))
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-disk", state=NodeState.READY).exists(), 60, "the node")
        job = make_job(fleet, gpus=2, command="seq 1 2000; echo \"rank $RANK done\"", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        workdir = state_dir / "gpu-disk" / f"g{Allocation.objects.get(job=job).generation}"
        wait_for(lambda: workdir.exists(), 30, "the run's directory")
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 60, "the job to end")

        wait_for(lambda: not workdir.exists(), 60, "the run's directory to be removed")
        # Removed only after its output was all taken: the control plane holds every line.
        for rank in (0, 1):
            text = job_logs.read(Job.objects.get(pk=job.pk), rank=rank, tail_bytes=job_logs.keep_bytes()).text
            assert text == "".join(f"{i}\n" for i in range(1, 2001)) + f"rank {rank} done\n"
    finally:
        stop_agent(agent)
        log.close()
    assert "removed finished runs' directories" in (tmp_path / "agent.log").read_text()


@pytest.mark.django_db(transaction=True)
def test_a_running_rank_gives_its_shipped_output_back_to_the_disk_but_its_last_part(
        live_server: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """A job printing for days once filled the node's disk while it ran: its rank file kept every
    byte although the control plane held them. Now the shipped bytes before its last 16 MiB are
    given back (a hole punched in the file): the file keeps its size and offsets, unsent bytes
    are never touched, and the control plane has every line it keeps. (The node keeps 16 MiB and
    gives back 64 MiB at a time; this test scales both down 16 times to ship 8 MiB, not 100.)"""
    keep, step = KEEP_ON_NODE_BYTES // 16, RELEASE_STEP_BYTES // 16
    monkeypatch.setattr(logs, "KEEP_ON_NODE_BYTES", keep)
    monkeypatch.setattr(logs, "RELEASE_STEP_BYTES", step)
    fleet = build_loop_fleet()
    client = RecordingClient(live_server.url)
    agent = process_agent(live_server.url, tmp_path, client, name="gpu-chatty")
    drive(agent, lambda: Node.objects.filter(name="gpu-chatty", state=NodeState.READY).exists())
    # 8 MiB of 1 KiB lines, then it waits, still running, until told to end.
    trigger = tmp_path / "end-now"
    job = make_job(fleet, command=(
        "head -c 1023 /dev/zero | tr '\\0' 'x' > line; echo >> line; "
        "for i in $(seq 1 8192); do cat line; done; "
        f"echo last words; while [ ! -e {trigger} ]; do sleep 0.05; done"))
    cycle.run_cycle("test")
    generation = Allocation.objects.get(job=job).generation
    rank_file = tmp_path / "gpu-chatty" / f"g{generation}" / "rank0.log"
    total = 8 * 1024 * 1024 + len("last words\n")

    drive(agent, lambda: rank_file.exists() and rank_file.stat().st_size == total
          and agent.shipper.cursors[(generation, 0)].shipped == total, timeout=60)

    on_disk = rank_file.stat().st_blocks * 512
    assert rank_file.stat().st_size == total
    assert keep <= on_disk <= keep + step + 256 * 1024, on_disk  # not the 8 MiB it printed
    with open(rank_file, "rb") as f:
        assert f.read(4096) == b"\0" * 4096  # given back: reads as NUL
        f.seek(total - keep)
        kept = f.read()
    assert kept.endswith(b"x" * 1023 + b"\nlast words\n") and b"\0" not in kept
    tail = job_logs.read(Job.objects.get(pk=job.pk), rank=0, tail_bytes=4096).text
    assert tail.endswith("x" * 1023 + "\nlast words\n") and "\0" not in tail
    trigger.touch()
    drive(agent, lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED)


# A run that never ran writes no output worth keeping, but its directory stays: a failed launch's
# rank files (what rank 0 printed before rank 1 failed), error.txt. Before 5 Dec none of them
# wrote `shipped.json`, which the pruning keys on, so their directories were never removed.
# Now each writes its record `done` when it fails, and goes `--keep-output-s` later.
def test_the_directories_of_runs_that_never_ran_are_removed_after_the_keep(tmp_path: Path) -> None:
    from controlplane.agent.members import marked_processes
    from tests.controlplane.agent.test_process_member import assignment, wait_exit

    launcher = ProcessLauncher(tmp_path, "gpu-disk", devices=None)
    try:
        with pytest.raises(ValueError, match="illegal environment variable name"):
            launcher.launch(assignment("echo never", env={"BAD=NAME": "1"}, generation=5))
        # rank 0 starts and prints, rank 1's output file cannot be opened
        (launcher.root / "g6" / "rank1.log").mkdir(parents=True)
        with pytest.raises(IsADirectoryError):
            launcher.launch(assignment("echo rank $RANK started; exec sleep 60", gpus=(0, 1), ranks=(0, 1),
                                       world_size=2, generation=6))
        assert wait_exit(launcher.launch(assignment("  ", generation=7))) == 127  # no command
        assert marked_processes("gpu-disk", {5, 6, 7}) == []
    finally:
        launcher.sweep_leftovers()
    dirs = [launcher.root / f"g{generation}" for generation in (5, 6, 7)]
    assert all(d.is_dir() for d in dirs)
    assert "illegal environment variable name" in (dirs[0] / "error.txt").read_text()
    assert "IsADirectoryError" in (dirs[1] / "error.txt").read_text()
    assert (dirs[2] / "error.txt").read_text() == "the job has no command to run\n"

    now = time.time()
    assert launcher.prune_finished_runs(DAY, running=set(), now=now)[0] == [], "removed before the keep"
    removed, freed = launcher.prune_finished_runs(DAY, running=set(), now=now + DAY + 1)
    assert sorted(removed) == [5, 6, 7] and freed > 0
    assert not any(d.exists() for d in dirs)


@pytest.mark.django_db(transaction=True)
def test_a_real_agent_removes_the_directory_of_a_run_it_could_not_launch(
        live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any) -> None:
    fleet = build_loop_fleet()
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, "gpu-disk-fail", log, options=("--no-wake", "--keep-output-s", "0"))
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-disk-fail", state=NodeState.READY).exists(), 60, "the node")
        job = make_job(fleet, gpus=2, command="echo never", env={"BAD=NAME": "1"}, submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        generation = Allocation.objects.get(job=job).generation
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.FAILED, 60, "the job to fail")

        wait_for(lambda: not (state_dir / "gpu-disk-fail" / f"g{generation}").exists(), 60,
                 "the failed launch's directory to be removed")
    finally:
        stop_agent(agent)
        log.close()
    text = (tmp_path / "agent.log").read_text()
    assert "could not launch" in text and f"generations=[{generation}]" in text, text[-3000:]
