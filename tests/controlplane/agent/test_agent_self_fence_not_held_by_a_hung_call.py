"""An agent's self-fence comes on time even while a heartbeat hangs on a control plane that took
the connection and never answers (a web worker stuck on a lock, a proxy holding the request).

The self-fence is the lease's promise (node.py, step 3): the agent kills its runs by `lease −
margin` after it last sent a heartbeat that was answered, so they are gone before the control
plane may fence them and run their jobs again elsewhere. The round is one thread, and a call
blocks it: until 8 Dec a heartbeat waited up to its read timeout (10 s) whatever was left of the
lease, and the self-fence came only after it, up to 10 s after the lease had run out on the
control plane, the job requeued and started elsewhere meanwhile. Now every call made while runs
are held gives up by the self-fence deadline (`AgentClient.within`).

A real HTTP client against a real socket that accepts and never answers; the registration from a
scripted control plane, with a 4 s lease.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.agent.client import AgentClient
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory
from tests.controlplane.agent.test_launch_journal import ScriptedControlPlane


@pytest.fixture
def hung_server() -> Iterator[str]:
    """http://127.0.0.1:PORT that accepts connections and reads requests, answering nothing."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    for connection in held:
        connection.close()
    listener.close()


class ShortLease(ScriptedControlPlane):
    def _reply(self) -> dict[str, Any]:
        return {**super()._reply(), "lease_s": 4.0, "heartbeat_interval_s": 0.5}


def test_a_hung_heartbeat_does_not_hold_the_self_fence_past_the_lease(hung_server: str) -> None:
    plane = ShortLease(given=[7])
    agent = NodeAgent(NodeInventory(name="gpu-hung", gpu_count=8, gpu_type="H100-80GB"), client=plane,  # type: ignore[arg-type]
                      launcher=SimulatedLauncher(), bootstrap_token="secret", sample_interval_s=60.0)
    deadline = time.monotonic() + 5
    while 7 not in agent.members and time.monotonic() < deadline:
        time.sleep(min(agent.step(), 0.05))
    assert 7 in agent.members
    # The control plane hangs from now on: each call is taken, and never answered.
    agent.client = AgentClient(hung_server)
    lease_ends = agent.lease_valid_until  # this agent's clock: sent + 4 s − 1 s

    killed_at = None
    while time.monotonic() < lease_ends + 15:
        time.sleep(min(agent.step(), 0.05))
        if agent.counters["self_fenced"]:
            killed_at = time.monotonic()
            break

    assert killed_at is not None, "never self-fenced"
    # Within a round of its deadline; the control plane's lease ends a second (the margin) later.
    assert killed_at - lease_ends < 0.5, f"self-fenced {killed_at - lease_ends:.1f} s after the lease"
    assert not agent.registered
    assert all(running.stop_kind == "lease" for running in agent.members.values())
