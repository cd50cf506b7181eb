"""An agent that cannot register says why and does not spin.

Found by running `qm-agent --simulate 16 --gpu-type H100-80GB` as docs/operations.md writes it:
- without QM_AGENT_BOOTSTRAP_TOKEN the process logged "no node token and no bootstrap secret"
  once per node and then ran on forever doing nothing (a service manager saw it "running");
- with a mistyped secret every node logged "token refused; stopping everything and registering
  again" and tried again twice a second, forever, and the server's answer told it to "register
  again with the bootstrap secret" — which it had just done.
Now the first exits 2 at once naming the variable; the second logs that the bootstrap secret was
refused and retries every 30 s.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.client import AgentClient
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import REGISTER_REFUSED_RETRY_S, NodeAgent, NodeInventory
from controlplane.models import Node
from tests.controlplane.agent.real_agent import CHECKOUT, QM_AGENT
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet


def _without_secret() -> dict[str, str]:
    # this checkout's code first: the venv's `qm-agent` may be another checkout's (real_agent.py)
    return {**{k: v for k, v in os.environ.items() if k != "QM_AGENT_BOOTSTRAP_TOKEN"}, "PYTHONPATH": CHECKOUT}


@pytest.mark.parametrize("how", [
    ["--simulate", "16", "--gpu-type", "H100-80GB"],
    ["--name", "gpu-07", "--gpus", "8", "--gpu-type", "H100-80GB", "--pool", "h100",
     "--leaf-switch", "leaf-3", "--spine", "spine-1"],
])
def test_an_agent_without_a_bootstrap_secret_or_a_stored_token_exits_2_naming_the_variable(
        state_dir: Path, how: list[str]) -> None:
    # `state_dir`, not tmp_path (0700): as root, the agent runs jobs as their submitters by
    # default, and refuses to start where they could not reach their directory
    started = time.monotonic()
    done = subprocess.run(
        [QM_AGENT, "--server", "http://127.0.0.1:9", "--state-dir", str(state_dir), "--log-format", "console", *how],
        env=_without_secret(), capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    said = done.stdout + done.stderr
    assert "cannot register" in said and "QM_AGENT_BOOTSTRAP_TOKEN" in said
    assert time.monotonic() - started < 30


def test_a_real_agent_with_a_stored_token_starts_without_the_bootstrap_secret(state_dir: Path) -> None:
    """The check is only for an agent that could never register: a stored node token is enough."""
    (state_dir / "gpu-07").mkdir()
    (state_dir / "gpu-07" / "token").write_text("a-node-token\n")
    agent = subprocess.Popen(
        [QM_AGENT, "--server", "http://127.0.0.1:9", "--state-dir", str(state_dir), "--name", "gpu-07", "--gpus", "8",
         "--gpu-type", "H100-80GB", "--pool", "h100", "--leaf-switch", "leaf-3", "--spine", "spine-1"],
        env=_without_secret(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            agent.wait(timeout=3)
    finally:
        agent.terminate()
        agent.wait(timeout=30)


class CountingClient(AgentClient):
    def __init__(self, server: str) -> None:
        super().__init__(server)
        self.registers = 0

    def register(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        self.registers += 1
        return super().register(token, body)


def _agent(server: str, secret: str) -> tuple[NodeAgent, CountingClient]:
    inventory = NodeInventory(name="sim-000", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64, memory_gb=512,
                              leaf_switch="leaf-1", spine="spine-1", simulated=True)
    client = CountingClient(server)
    return NodeAgent(inventory, client=client, launcher=SimulatedLauncher(), bootstrap_token=secret,
                     interval_s=0.2, sample_interval_s=0.3), client


@pytest.mark.django_db(transaction=True)
def test_a_refused_bootstrap_secret_is_said_and_retried_slowly(live_server: Any) -> None:
    build_loop_fleet()
    agent, client = _agent(live_server.url, "not-the-secret")

    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        agent.step()
        time.sleep(0.02)

    assert client.registers == 1, "a refused secret was tried again at once"
    assert not agent.registered
    assert agent.next_contact - time.monotonic() > REGISTER_REFUSED_RETRY_S - 5
    assert not Node.objects.filter(name="sim-000").exists()

    good, good_client = _agent(live_server.url, BOOTSTRAP)
    deadline = time.monotonic() + 60.0
    while not good.registered and time.monotonic() < deadline:
        good.step()
        time.sleep(0.02)
    assert good.registered and good_client.registers == 1
