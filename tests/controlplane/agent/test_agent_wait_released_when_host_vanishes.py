"""A wake-up long poll whose agent's host vanished (no FIN: powered off, a network cut) gives its
web thread back about 8 s after its request, not at its timeout.

`_agent_gone` (controlplane/api/agent.py) sees an agent that closed its connection (killed,
restarted: test_agent_wait_released_when_agent_gone.py); one whose host went away sends
nothing, and until 6 Dec its wait held a gunicorn thread and one of the process's
QM_AGENT_MAX_WAITS places to its timeout (30 s at most). The wait's socket now has TCP
keepalive on it (probes after 5 s without traffic, every 1 s, 3 unanswered: gone), which the
kernel turns into an error on the socket that the same check sees.

Real processes and a real network: gunicorn (one gthread worker, QM_AGENT_MAX_WAITS=1), and an
agent process (the real AgentClient) on a host of its own, a network namespace joined to this one
by a veth pair, whose link is then cut (its end set down: nothing it sends or receives, no FIN,
no RST). Needs root (network namespaces); skipped where they cannot be made.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.controlplane.agent.test_agent_wait_released_when_agent_gone import _since, _wait, fleet, serving
from tests.controlplane.loop.chaos_cluster import free_port
from tests.controlplane.loop_fixtures import register_node

__all__ = ["fleet"]  # the fixture, used here by name

REPO = Path(__file__).resolve().parents[3]

# The agent's wait, its wall time printed once answered.
AGENT = """
import sys, time
from controlplane.agent.client import AgentClient
print("waiting", flush=True)
began = time.monotonic()
AgentClient(sys.argv[1]).wait([{"name": sys.argv[2], "token": sys.argv[3]}], int(sys.argv[4]), float(sys.argv[5]))
print(f"answered {time.monotonic() - began:.2f}", flush=True)
"""


@dataclass
class Host:
    namespace: str
    link: str  # its end of the veth pair
    ours: str  # the address of this end, where the web listens for it


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def host() -> Iterator[Host]:
    """A network namespace joined to this one by a veth pair, a /30 of 198.18.0.0/15 (RFC 2544's
    benchmarking range) chosen by this process's pid, so that runs side by side do not collide."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = str(os.getpid())
    namespace, ours_link, theirs_link = f"qm-vanish-{tag}", f"qv{tag}a", f"qv{tag}b"
    base = (os.getpid() % 32768) * 4
    prefix = f"198.{18 + (base >> 16)}.{(base >> 8) & 255}."
    ours, theirs = f"{prefix}{(base & 255) + 1}", f"{prefix}{(base & 255) + 2}"
    try:
        _ip("netns", "add", namespace)
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"no network namespace here: {error}")
    try:
        _ip("link", "add", ours_link, "type", "veth", "peer", "name", theirs_link)
        _ip("link", "set", theirs_link, "netns", namespace)
        _ip("addr", "add", f"{ours}/30", "dev", ours_link)
        _ip("link", "set", ours_link, "up")
        _ip("-n", namespace, "addr", "add", f"{theirs}/30", "dev", theirs_link)
        _ip("-n", namespace, "link", "set", theirs_link, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        yield Host(namespace, theirs_link, ours)
    finally:
        subprocess.run(["ip", "link", "del", ours_link], capture_output=True)  # both ends go
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


@pytest.fixture
def web(fleet: object, tmp_path: Path, host: Host) -> Iterator[tuple[str, str]]:
    """The web, at 127.0.0.1 for the test and at this end of the veth for the agent's host."""
    port = free_port()
    with serving(tmp_path, port, also=host.ours) as url:
        yield url, f"http://{host.ours}:{port}"


def _agent(host: Host, url: str, name: str, token: str, since: int, timeout_s: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        ["ip", "netns", "exec", host.namespace, sys.executable, "-c", AGENT, url, name, token, str(since),
         str(timeout_s)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "waiting\n"
    return process


def test_a_vanished_hosts_wait_gives_its_place_back_long_before_its_timeout(
        web: tuple[str, str], host: Host, tmp_path: Path) -> None:
    here, there = web
    _, token = register_node("gpu-01")
    item = {"name": "gpu-01", "token": token}
    since = _since(here, item)
    agent = _agent(host, there, "gpu-01", token, since, 30.0)  # the longest wait there is
    try:
        time.sleep(1.5)  # its wait sent and held (a probe of ours before it would take the one place)
        held = _wait(here, item, since, 0.2)
        assert held.status_code == 503 and agent.poll() is None, held.text
        _ip("-n", host.namespace, "link", "set", host.link, "down")
        cut = time.monotonic()
        refused = 0
        while (answer := _wait(here, item, since, 0.2)).status_code == 503:
            assert answer.json()["code"] == "waits_exhausted"
            refused += 1
            assert time.monotonic() - cut < 20, f"still held {time.monotonic() - cut:.1f} s after its host vanished"
            time.sleep(0.1)
        freed = time.monotonic() - cut
        assert agent.poll() is None, "the agent's process ended: it closed its connection, it did not vanish"
    finally:
        agent.kill()
        agent.wait()

    assert answer.status_code == 200 and answer.json()["woken"] == [], answer.text
    # its request went 1.5 s before the cut: 5 s idle, then 3 probes 1 s apart, then the 0.5 s
    # check (7.2 s measured at a load of 14 on 2 cores; until 6 Dec its timeout, 28.5 s after the cut)
    assert freed < 12, f"the place came back {freed:.2f} s after the host vanished ({refused} waits refused)"
    # nothing logged as an error for a peer that went away (gunicorn logs a write's ETIMEDOUT so)
    assert "Socket error" not in (tmp_path / "web.log").read_text()


def test_a_live_agent_across_the_network_is_held_to_its_timeout_past_the_probes(
        web: tuple[str, str], host: Host) -> None:
    # The probes are answered by a host that is there: its wait is not taken for a gone one.
    here, there = web
    _, token = register_node("gpu-01")
    item = {"name": "gpu-01", "token": token}
    since = _since(here, item)
    agent = _agent(host, there, "gpu-01", token, since, 12.0)  # past 5 s idle + 3 probes 1 s apart
    try:
        out, _ = agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 0, out
    held = float(out.split("answered ")[1])
    assert 11.9 < held < 16, held
