"""The line saying a rank's output was dropped on the node reaches the job's output even when
the control plane already holds the chunk the agent had in flight when it died
(controlplane/agent/logs.py).

Found on 5 Dec: an agent recovering a run whose in-flight chunk lay over bytes given back to
the disk (the rank printed past --max-rank-output-mib while the agent waited for the reply)
sent the "[qm-agent: N bytes … dropped on the node …]" line at the in-flight chunk's offset.
When the control plane had taken that chunk (only the reply was lost), it dropped the line as a
resend, and the job's output showed "[… N bytes never received …]" with no word of why. Now
the recovering agent sends a line for the in-flight bytes at that offset (dropped as a resend
exactly when the control plane holds them) and the line for what followed them at the offset
where nothing was ever sent. Real processes, the real agent loop and API on PostgreSQL; the
reply is lost after the server applied the contact (RecordingClient, a timeout on the way back)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.members import ProcessLauncher
from controlplane.agent.node import NodeAgent, NodeInventory
from controlplane.choices import NodeState
from controlplane.models import Allocation, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import wait_for
from tests.controlplane.agent.test_agent_output_cap import CAP, dropped, on_disk, received_bytes
from tests.controlplane.agent.test_agent_ships_logs import RecordingClient, drive, output
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job


def _agent(server: str, state: Path, client: RecordingClient) -> NodeAgent:
    """An agent of node `state.name`: each test its own name, since a sweep kills what carries
    its node's name and a run's generation (the runs of two tests side by side have the same)."""
    inventory = NodeInventory(name=state.name, gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64, memory_gb=512,
                              leaf_switch="leaf-1", spine="spine-1")
    launcher = ProcessLauncher(state.parent, state.name, devices=None, output_cap=CAP)
    return NodeAgent(inventory, client=client, launcher=launcher, bootstrap_token=BOOTSTRAP, interval_s=0.3,
                     sample_interval_s=5.0)


def _partitioned_until(agent: NodeAgent, condition: Any, what: str) -> None:
    """Run `agent`'s rounds cut off from the control plane (its members are polled, their files
    kept to the cap) until `condition()`."""
    agent.partitioned = True
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(min(agent.step(), 0.02))


def _second_agent_ships_the_rest(live_server: Any, tmp_path: Path, first: NodeAgent, job: Job) -> str:
    """The first agent died (its runs' processes are swept by the next, as at a real start):
    a new one ships what it left, then the job's output as the control plane holds it."""
    client = RecordingClient(live_server.url)
    second = _agent(live_server.url, tmp_path / first.name, client)
    launcher = second.launcher
    assert isinstance(launcher, ProcessLauncher)
    assert launcher.sweep_leftovers(), "the first agent's job was still running"
    second.recover_output(launcher.unshipped_output())
    drive(second, lambda: output(job).endswith("the last line\n") and not second.shipper.cursors, timeout=30)
    return output(job)


def _job(live_server: Any, tmp_path: Path, first: NodeAgent) -> tuple[Job, Path]:
    fleet = build_loop_fleet()
    drive(first, lambda: Node.objects.filter(name=first.name, state=NodeState.READY).exists())
    job = make_job(fleet, command=(
        f"echo start; while [ ! -e {tmp_path}/go1 ]; do sleep 0.02; done; yes '123456789' | head -c 100000; "
        f"while [ ! -e {tmp_path}/go2 ]; do sleep 0.02; done; yes '123456789' | head -c 3500000; "
        "echo 'the last line'; exec sleep 600"))
    assert cycle.run_cycle("test").binds == 1
    drive(first, lambda: output(job) == "start\n")
    generation = Allocation.objects.get(job=job).generation
    return job, tmp_path / first.name / f"g{generation}" / "rank0.log"


SIZE = len("start\n") + 100_000 + 3_500_000 + len("the last line\n")


def _kept_to_the_cap(rank_file: Path) -> bool:
    """The rank printed all, and the member gave back to the disk all but about its last CAP."""
    size, held = rank_file.stat().st_size, on_disk(rank_file)
    return size == SIZE and held <= CAP + CAP // 4 + 65536


@pytest.mark.django_db(transaction=True)
def test_the_dropped_line_survives_when_the_control_plane_took_the_chunk_in_flight(live_server: Any,
                                                                                   tmp_path: Path) -> None:
    client = RecordingClient(live_server.url)
    first = _agent(live_server.url, tmp_path / "gpu-inflight", client)
    job, rank_file = _job(live_server, tmp_path, first)

    # 100,000 bytes go out; the control plane stores them, and the reply is lost
    (tmp_path / "go1").touch()
    wait_for(lambda: rank_file.stat().st_size == len("start\n") + 100_000, 30, "the first 100,000 bytes")
    client.lose_replies = 1
    drive(first, lambda: client.lose_replies == 0)
    sent = client.bodies[-1]["logs"]
    assert sent[0]["offset"] == len("start\n")
    in_flight_end = sent[-1]["offset"] + sent[-1]["bytes"]
    assert output(job) == "start\n" + "123456789\n" * 10_000, "the control plane holds the chunk in flight"

    # cut off before the agent sends it again: the rank prints 3.5 MB, and the node gives back
    # all but its last CAP bytes, the ones in flight among them; then the agent dies
    (tmp_path / "go2").touch()
    _partitioned_until(first, lambda: _kept_to_the_cap(rank_file), "the burst, kept to the cap")

    text = _second_agent_ships_the_rest(live_server, tmp_path, first, job)
    assert "\ufffd" not in text
    assert dropped(text) == [(SIZE - CAP - in_flight_end, 0)], "the line saying what was dropped is there"
    assert text.startswith("start\n" + "123456789\n" * 10_000 + "\n[qm-agent: ")
    assert received_bytes(text) + SIZE - CAP - in_flight_end == SIZE
    assert text.endswith("123456789\n" * (CAP // 10 - 2) + "the last line\n")


@pytest.mark.django_db(transaction=True)
def test_a_dropped_line_in_flight_that_was_taken_is_not_said_twice(live_server: Any, tmp_path: Path) -> None:
    """The chunk in flight was the dropped line itself: its count stands, and the next agent
    says dropped only what came after it."""
    client = RecordingClient(live_server.url)
    first = _agent(live_server.url, tmp_path / "gpu-inflight-line", client)
    job, rank_file = _job(live_server, tmp_path, first)
    (tmp_path / "go1").touch()
    (tmp_path / "go2").touch()
    _partitioned_until(first, lambda: _kept_to_the_cap(rank_file), "the burst, kept to the cap")
    # back in touch: its first contact carries the line saying the oldest bytes were dropped;
    # the control plane stores it, and the reply is lost
    first.partitioned = False
    client.lose_replies = 1
    drive(first, lambda: client.lose_replies == 0)
    assert "bytes of rank 0's output dropped on the node" in client.bodies[-1]["logs"][0]["text"]
    taken = dropped(output(job))
    assert taken == [(SIZE - CAP - len("start\n"), 0)]
    # the rank prints nothing more; the agent dies
    text = _second_agent_ships_the_rest(live_server, tmp_path, first, job)
    assert "\ufffd" not in text
    assert dropped(text) == taken, "the dropped bytes are said once"
    assert received_bytes(text) + taken[0][0] == SIZE
    assert text.endswith("123456789\n" * (CAP // 10 - 2) + "the last line\n")
