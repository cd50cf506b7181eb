"""Agents ship their jobs' output to the control plane (controlplane/agent/logs.py): real
processes printing real lines, a real agent (a `qm-agent` process, or NodeAgent in this process
when the test needs to see its requests), the real API on PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.client import AgentClient, Unreachable
from controlplane.agent.logs import (
    BURST_BYTES,
    CALL_BYTES,
    RANK_BYTES,
    Cursor,
    decode,
    split,
    whole_characters,
)
from controlplane.agent.members import ProcessLauncher, SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, JobLogChunk, Node
from controlplane.services import cycle, job_logs
from tests.controlplane.agent.real_agent import start_agent, stop_agent, wait_for
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job


def drive(agent: NodeAgent, until: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(min(agent.step(), 0.05))
        if until():
            return
    raise AssertionError("condition not reached in time")


def output(job: Job, rank: int = 0) -> str:
    return job_logs.read(Job.objects.get(pk=job.pk), rank=rank, tail_bytes=job_logs.keep_bytes()).text


class RecordingClient(AgentClient):
    """The real HTTP client, keeping every heartbeat/report body; `lose_replies` of those that
    carry output have their reply lost after the server applied them (a timeout on the way back)."""

    def __init__(self, server: str, lose_replies: int = 0) -> None:
        super().__init__(server)
        self.bodies: list[dict[str, Any]] = []
        self.lose_replies = lose_replies

    def _sent(self, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        if body.get("logs") and self.lose_replies:
            self.lose_replies -= 1
            raise Unreachable("reply lost on the way back (test)")
        return reply

    def heartbeat(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._sent(body, super().heartbeat(node, token, body))

    def report(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._sent(body, super().report(node, token, body))


def process_agent(server: str, state: Path, client: AgentClient, name: str = "gpu-logs") -> NodeAgent:
    inventory = NodeInventory(name=name, gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64, memory_gb=512,
                              leaf_switch="leaf-1", spine="spine-1")
    return NodeAgent(inventory, client=client, launcher=ProcessLauncher(state, name, devices=None),
                     bootstrap_token=BOOTSTRAP, interval_s=0.3, sample_interval_s=5.0)


# ------------------------------------------------------------------------ a real qm-agent


@pytest.mark.django_db(transaction=True)
def test_a_real_agent_ships_each_ranks_printed_lines_once_and_in_order(live_server: Any, tmp_path: Path,
                                                                      state_dir: Path, submitter: Any) -> None:
    fleet = build_loop_fleet()
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, "gpu-out", log)
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-out", state=NodeState.READY).exists(), 60, "the node")
        # Lines over several heartbeats, stderr too, and a character of two bytes at the end.
        job = make_job(fleet, gpus=2, command=(
            "for i in 1 2 3 4 5; do echo \"rank $RANK line $i\"; sleep 0.3; done; "
            "echo \"rank $RANK to stderr\" >&2; printf 'caf\\303\\251\\n'"), submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 60, "the job to end")

        for rank in (0, 1):
            expected = "".join(f"rank {rank} line {i}\n" for i in range(1, 6)) + f"rank {rank} to stderr\ncafé\n"
            assert output(job, rank) == expected
        # Shipped a little at a time: several chunks, merged into one row per rank.
        assert JobLogChunk.objects.filter(job=job).count() == 2
        generation = Allocation.objects.get(job=job).generation
        on_disk = (state_dir / "gpu-out" / f"g{generation}" / "rank1.log").read_bytes()
        assert on_disk.decode() == output(job, 1)
    finally:
        stop_agent(agent)
        log.close()


# ------------------------------------------------------------------------ the agent's requests


@pytest.mark.django_db(transaction=True)
def test_a_contact_whose_reply_was_lost_is_resent_unchanged_and_stored_once(live_server: Any, tmp_path: Path) -> None:
    fleet = build_loop_fleet()
    client = RecordingClient(live_server.url, lose_replies=2)
    agent = process_agent(live_server.url, tmp_path, client)
    drive(agent, lambda: Node.objects.filter(name="gpu-logs", state=NodeState.READY).exists())
    job = make_job(fleet, command="for i in $(seq 1 20); do echo \"step $i\"; sleep 0.05; done")
    cycle.run_cycle("test")

    drive(agent, lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED and not agent.shipper.cursors)

    sent = [c for body in client.bodies for c in body.get("logs", [])]
    offsets = [c["offset"] for c in sent]
    assert len(offsets) > len(set(offsets)), "no chunk was resent"
    # Each resent chunk went again exactly as first sent.
    first_of = {}
    for c in sent:
        assert first_of.setdefault(c["offset"], c) == c
    assert output(job) == "".join(f"step {i}\n" for i in range(1, 21))


@pytest.mark.django_db(transaction=True)
def test_a_contact_carries_chunks_of_64_KiB_at_most_256_KiB_a_rank_and_512_KiB_in_all_and_the_rest_follows(
    live_server: Any, tmp_path: Path
) -> None:
    fleet = build_loop_fleet()
    client = RecordingClient(live_server.url)
    agent = process_agent(live_server.url, tmp_path, client)
    drive(agent, lambda: Node.objects.filter(name="gpu-logs", state=NodeState.READY).exists())
    # Five ranks print 300,000 bytes each at once (lines of 10 bytes).
    job = make_job(fleet, gpus=5, command="yes '123456789' | head -c 300000")
    cycle.run_cycle("test")

    drive(agent, lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED and not agent.shipper.cursors,
          timeout=30)

    carrying = [body["logs"] for body in client.bodies if body.get("logs")]
    assert max(c["bytes"] for logs in carrying for c in logs) == RANK_BYTES
    assert max(sum(c["bytes"] for c in logs if c["rank"] == rank) for logs in carrying for rank in range(5)) == (
        BURST_BYTES)
    assert max(sum(c["bytes"] for c in logs) for logs in carrying) <= CALL_BYTES
    # the budget, not the ranks, stopped a contact: some carried fewer ranks than were printing
    assert any(len({c["rank"] for c in logs}) < 5 for logs in carrying[:2])
    for rank in range(5):
        assert output(job, rank) == "123456789\n" * 30_000


@pytest.mark.django_db(transaction=True)
def test_a_simulated_job_prints_what_a_training_script_would(live_server: Any) -> None:
    fleet = build_loop_fleet()
    inventory = NodeInventory(name="sim-out", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64,
                              memory_gb=512, leaf_switch="leaf-1", spine="spine-1", simulated=True)
    agent = NodeAgent(inventory, client=AgentClient(live_server.url), launcher=SimulatedLauncher(),
                      bootstrap_token=BOOTSTRAP, interval_s=0.2, sample_interval_s=0.5)
    drive(agent, lambda: Node.objects.filter(name="sim-out", state=NodeState.READY).exists())
    job = make_job(fleet, gpus=2, name="llm-sim", command="python train.py", env={
        "QM_SIM_DURATION_S": "1.0", "QM_SIM_STEPS_PER_S": "100", "QM_SIM_LOG_EVERY_S": "0.25"})
    cycle.run_cycle("test")

    drive(agent, lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED and not agent.shipper.cursors)

    lines = output(job).splitlines()
    assert lines[0].startswith(f"[sim] job {job.pk} (llm-sim), generation ") and lines[0].endswith(
        "rank 0 of 2: python train.py")
    assert lines[1].startswith("step 25 tokens 0 loss ") and len([x for x in lines if x.startswith("step ")]) == 4
    assert lines[-1] == "training finished: 100 steps"
    assert output(job, rank=1) == ""  # the other ranks print nothing, as most scripts'


# ------------------------------------------------------------------------ decoding and cutting


def test_a_chunk_never_cuts_a_character_in_two_while_the_process_writes() -> None:
    data = "é".encode() * 10 + b"\xe2\x82"  # the euro sign's first two bytes of three
    assert whole_characters(data) == 20
    assert whole_characters(b"ok\n") == 3
    assert whole_characters(b"\xff\xfe") == 2  # not UTF-8 at all: nothing to wait for

    written = bytearray(data)
    cursor = Cursor(7, 0, read=lambda offset, limit: bytes(written[offset:offset + limit]))
    (first,) = cursor.next_chunks()
    assert first.nbytes == 20 and first.text == "é" * 10
    cursor.pending, cursor.shipped = [], 20
    written += b"\xac\n"
    (second,) = cursor.next_chunks()
    assert second.text == "€\n" and second.offset == 20
    # Nor does a contact's split into chunks of 64 KiB: a character across a boundary goes whole
    # into the next chunk.
    data = b"a" * (RANK_BYTES - 1) + "é".encode() + b"b\n"
    chunks = split(7, 0, 0, data)
    assert [c.nbytes for c in chunks] == [RANK_BYTES - 1, 4] and chunks[1].text == "éb\n"
    assert split(7, 0, 0, data) == chunks  # the same bytes split the same way (a resend)


def test_undecodable_bytes_and_nul_read_as_the_replacement_character() -> None:
    assert decode(b"ok \xff\x00 done\n") == "ok \ufffd\ufffd done\n"


@pytest.mark.django_db(transaction=True)
def test_an_agent_told_no_output_ships_none(live_server: Any, monkeypatch: Any) -> None:
    from controlplane.agent.main import parse_args

    assert parse_args(["--no-output"]).no_output and not parse_args([]).no_output
    monkeypatch.setenv("QM_AGENT_NO_OUTPUT", "1")
    assert parse_args([]).no_output
    fleet = build_loop_fleet()
    inventory = NodeInventory(name="sim-quiet", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64,
                              memory_gb=512, leaf_switch="leaf-1", spine="spine-1", simulated=True)
    agent = NodeAgent(inventory, client=AgentClient(live_server.url), launcher=SimulatedLauncher(),
                      bootstrap_token=BOOTSTRAP, interval_s=0.2, sample_interval_s=0.5, ship_output=False)
    drive(agent, lambda: Node.objects.filter(name="sim-quiet", state=NodeState.READY).exists())
    job = make_job(fleet, env={"QM_SIM_DURATION_S": "0.6", "QM_SIM_LOG_EVERY_S": "0.1"})
    cycle.run_cycle("test")

    drive(agent, lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED)

    assert not JobLogChunk.objects.exists()
