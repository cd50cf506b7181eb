"""An agent that starts after one that died ships the output its predecessor left unsent
(agent/logs.py: each run's `shipped.json`): the last lines a crashed job printed, the ones
that say why, reach the control plane, once and in order; then the run is forgotten.

Real `qm-agent` processes on real job processes and the real API on PostgreSQL; the agent is
cut off the network (SIGUSR1, as the chaos drills do) so that the tail is surely unsent when
it is killed with SIGKILL.

Each node its own name, used by no other file: a member's end, and an agent's sweep, kill every
process on the host carrying its node's name and its run's generation, and every worker's first
run is g1. Until 7 Dec the in-flight test's node was gpu-inflight, as is
test_agent_dropped_line_survives_restart.py's: side by side on two workers, each killed the
other's job (that file's first test timed out waiting for its job's first 100,000 bytes)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.agent.logs import RANK_BYTES, RECORD_NAME, read_record
from controlplane.agent.members import ProcessLauncher
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, JobLogChunk, Node
from controlplane.services import cycle, job_logs, reconcile, transitions
from tests.controlplane.agent.real_agent import start_agent, stop_agent
from tests.controlplane.agent.test_agent_ships_logs import (
    RecordingClient,
    drive,
    output,
    process_agent,
    wait_for,
)
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    agent_client,
    bind,
    build_loop_fleet,
    make_job,
    register_node,
)


@pytest.mark.django_db(transaction=True)
def test_a_new_agent_ships_the_tail_a_killed_agent_left_unsent(live_server: Any, tmp_path: Path, state_dir: Path,
                                                               submitter: Any) -> None:
    fleet = build_loop_fleet()
    state = state_dir
    trigger = state_dir / "crash-now"  # where the job, run as its submitter, can look (tmp_path is 0700)
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    first = start_agent(live_server.url, state, "gpu-crash", log)
    second = None
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-crash", state=NodeState.READY).exists(), 60, "the node")
        # Each rank says it started, waits, then prints its last words: 150,000 bytes of numbers
        # (more than a contact carries) and why it is about to fail; then it hangs.
        job = make_job(fleet, gpus=2, command=(
            f"echo \"rank $RANK starting\"; while [ ! -e {trigger} ]; do sleep 0.05; done; "
            "seq 1 30000 | head -c 150000; echo; "
            "echo \"rank $RANK: RuntimeError: CUDA error: an illegal memory access was encountered\" >&2; "
            "exec sleep 600"), submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        generation = Allocation.objects.get(job=job).generation
        for rank in (0, 1):
            wait_for(lambda rank=rank: output(job, rank) == f"rank {rank} starting\n", 60, f"rank {rank}'s first line")

        first.send_signal(signal.SIGUSR1)  # cut off: nothing more leaves the node
        wait_for(lambda: b"partitioned" in (tmp_path / "agent.log").read_bytes(), 30, "the partition")
        trigger.touch()
        workdir = state / "gpu-crash" / f"g{generation}"
        wait_for(lambda: all(b"illegal memory access" in (workdir / f"rank{r}.log").read_bytes() for r in (0, 1)),
                 30, "the last words on disk")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        on_disk = {r: (workdir / f"rank{r}.log").read_bytes() for r in (0, 1)}
        assert all(len(data) > 150_000 for data in on_disk.values())
        # The control plane has only the first lines; the record says so.
        assert output(job, 0) == "rank 0 starting\n" and output(job, 1) == "rank 1 starting\n"
        record = read_record(workdir / RECORD_NAME)
        assert record is not None and record[0] == generation and not record[2]
        assert {rank: shipped for rank, (shipped, _) in record[1].items()} == {0: 16, 1: 16}

        second = start_agent(live_server.url, state, "gpu-crash", log)

        for rank in (0, 1):
            wait_for(lambda rank=rank: output(job, rank).encode() == on_disk[rank], 60, f"rank {rank}'s tail")
        assert output(job, 1).endswith("rank 1: RuntimeError: CUDA error: an illegal memory access was encountered\n")
        # Shipped over several contacts (64 KiB a rank each), once: no byte twice, none missing.
        assert JobLogChunk.objects.filter(job=job, generation=generation, rank=0).count() >= 3
        read = job_logs.read(Job.objects.get(pk=job.pk), rank=0, generation=generation, offset=0)
        assert read.end_offset == len(on_disk[0]) and "never received" not in read.text
        # Then forgotten: marked done, so a third agent would ship none of it again.
        wait_for(lambda: (read_record(workdir / RECORD_NAME) or (0, {}, False))[2], 30, "the record marked done")
        assert ProcessLauncher(state, "gpu-crash", None).unshipped_output() == []
        assert b"shipping the output a previous agent left unsent" in (tmp_path / "agent.log").read_bytes()
    finally:
        for agent in (first, second):
            if agent is not None:
                stop_agent(agent)
        log.close()


@pytest.mark.django_db(transaction=True)
def test_the_chunk_in_flight_when_the_agent_died_is_sent_again_byte_for_byte(live_server: Any,
                                                                           tmp_path: Path) -> None:
    """The agent died after sending a chunk and before its reply (the record says `sent` past
    `shipped`): the next agent sends exactly those bytes again, the control plane keeps one copy,
    and the rest follows."""
    fleet = build_loop_fleet()
    client = RecordingClient(live_server.url)
    agent = process_agent(live_server.url, tmp_path, client, name="gpu-resend")
    drive(agent, lambda: Node.objects.filter(name="gpu-resend", state=NodeState.READY).exists())
    job = make_job(fleet, command="seq 1 120000; sleep 600")  # 808,894 bytes: several contacts' worth
    cycle.run_cycle("test")
    drive(agent, lambda: any(body.get("logs") for body in client.bodies))
    # The next contact carrying output is taken by the control plane, its reply lost: the agent
    # is then gone (its job too) before it hears back.
    client.lose_replies = 1
    drive(agent, lambda: client.lose_replies == 0)
    lost = client.bodies[-1]["logs"]
    for running in agent.members.values():
        running.member.kill()
    generation = Allocation.objects.get(job=job).generation
    record = read_record(tmp_path / "gpu-resend" / f"g{generation}" / RECORD_NAME)
    assert len(lost) > 1 and {c["rank"] for c in lost} == {0}
    assert record is not None and record[1][0] == (lost[0]["offset"], lost[-1]["offset"] + lost[-1]["bytes"])

    # A new agent of the same node, in a new process as after a crash.
    client2 = RecordingClient(live_server.url)
    launcher = ProcessLauncher(tmp_path, "gpu-resend", devices=None)
    launcher.sweep_leftovers()
    after = process_agent(live_server.url, tmp_path, client2, name="gpu-resend")
    after.launcher = launcher
    after.recover_output(launcher.unshipped_output())
    expected = "".join(f"{i}\n" for i in range(1, 120001))
    drive(after, lambda: output(job) == expected and not after.shipper.cursors, timeout=30)

    resent = [c for body in client2.bodies for c in body.get("logs", [])]
    assert resent[:len(lost)] == lost  # the same offsets, the same bytes
    assert max(c["bytes"] for c in resent) <= RANK_BYTES
    offsets = [c["offset"] for c in resent]
    assert offsets == sorted(set(offsets))  # then on from its end, each byte once
    assert json.loads((tmp_path / "gpu-resend" / f"g{generation}" / RECORD_NAME).read_text())["done"] is True


def test_a_broken_record_ships_nothing_and_says_so(tmp_path: Path) -> None:
    workdir = tmp_path / "gpu-x" / "g7"
    workdir.mkdir(parents=True)
    (workdir / "rank0.log").write_bytes(b"lines\n")
    launcher = ProcessLauncher(tmp_path, "gpu-x", devices=None)
    for broken in ("{", '{"generation": 7, "ranks": {"0": [5, 2]}}', '{"generation": 7}', "[]",
                   "[" * 100_000):  # (nested that deep: RecursionError, before 5 Dec out of qm-agent's start)
        (workdir / RECORD_NAME).write_text(broken)
        assert launcher.unshipped_output() == [], broken
    (workdir / RECORD_NAME).write_text('{"generation": 7, "ranks": {"0": [2, 4]}, "done": false}')
    (run,) = launcher.unshipped_output()
    assert run.generation == 7 and run.ranks == {0: (2, 4)} and run.read(0, 2, 4) == b"nes\n"


# ------------------------------------------------------------------------ the control plane's side


@pytest.mark.django_db
def test_output_of_an_ended_run_is_taken_and_a_stale_chunk_never_overwrites(settings: Any) -> None:
    """What a restarted agent sends: the output of a run that ended (requeued off the node when
    its agent registered again, or fenced), under that run's generation; a chunk for bytes
    already stored, even with other text, changes nothing."""
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}
    fleet = build_loop_fleet()
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    old = bind(job, {node: [0]}).generation
    client = agent_client(token)

    def ship(generation: int, offset: int, text: str) -> None:
        chunk = {"generation": generation, "rank": 0, "offset": offset, "bytes": len(text.encode()), "text": text}
        r = client.post("/api/v1/agent/nodes/gpu-01/heartbeat", {"logs": [chunk]}, format="json")
        assert r.status_code == 200, r.content

    ship(old, 0, "step 1\n")
    with transaction.atomic():  # the run is fenced off and the job runs again, elsewhere or here
        assert transitions.fence_allocation(Allocation.objects.get(job=job).pk, lease=reconcile.lock_scheduler_lease(),
                                            at=timezone.now(), actor="test", reason="test")
    job.refresh_from_db()
    new = bind(job, {node: [1]}).generation
    ship(new, 0, "second run\n")
    ship(old, 7, "Traceback: CUDA error\n")  # the old run's tail, from the next agent
    ship(old, 0, "STALE!\n")  # a chunk for bytes already stored, with other text
    ship(old, 7, "Traceback: other text\n")

    j = Job.objects.get(pk=job.pk)
    assert job_logs.read(j, generation=old).text == "step 1\nTraceback: CUDA error\n"
    assert job_logs.read(j, generation=new).text == "second run\n"
    assert j.state in (JobState.RUNNING, JobState.PENDING)
