"""A simulated agent that must stop (SIGTERM) while the control plane does not answer gives up
after its deadline, as a real agent does, and says so for each node it leaves without a goodbye:
"control plane unreachable at shutdown; its lease will expire and fence". Until 7 Dec the
`--simulate` process dropped such nodes silently: on the demo its log ended on "control plane
unreachable" lines, 22 s after SIGTERM, and nothing said the process had given up or that the
nodes' leases would fence their jobs (the real agent's loop has said it all along)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from structlog.testing import capture_logs

from controlplane.agent.client import AgentClient
from controlplane.agent.main import _drive
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet

GAVE_UP = "control plane unreachable at shutdown; its lease will expire and fence"


@pytest.mark.django_db(transaction=True)
def test_a_simulated_node_cut_off_at_shutdown_says_it_left_without_a_goodbye(live_server: Any) -> None:
    build_loop_fleet()
    inventory = NodeInventory(name="sim-000", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64, memory_gb=512,
                              leaf_switch="leaf-1", spine="spine-1", simulated=True)
    client = AgentClient(live_server.url)
    agent = NodeAgent(inventory, client=client, launcher=SimulatedLauncher(), bootstrap_token=BOOTSTRAP,
                      interval_s=0.2, sample_interval_s=0.3)
    deadline = time.monotonic() + 30.0
    while not agent.registered and time.monotonic() < deadline:
        agent.step()
        time.sleep(0.02)
    assert agent.registered

    agent.partitioned = True  # the control plane no longer answers it (SIGUSR1's drill)
    agent.shutdown(0.0)
    with capture_logs() as logs:
        driver = threading.Thread(target=_drive, args=([agent], threading.Event(), [time.monotonic() + 0.5], client, 64))
        driver.start()
        driver.join(timeout=10.0)

    client._session().close()  # its keep-alive connection held the live server's request thread
    assert not driver.is_alive() and not agent.done
    warned = [e for e in logs if e["log_level"] == "warning" and e["event"] == GAVE_UP]
    assert [e.get("node") for e in warned] == ["sim-000"], logs
