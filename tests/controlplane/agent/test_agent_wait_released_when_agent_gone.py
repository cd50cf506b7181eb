"""A wake-up long poll whose agent has gone gives its web thread back within about a second.

Each held wait (POST /api/v1/agent/nodes/wait) holds a gunicorn thread and one of the process's
QM_AGENT_MAX_WAITS places. Until 6 Dec the wait of an agent killed or restarted mid-wait held
both until its timeout (20 s by default, 30 s at most): the agent's new wait, or another
agent's, was answered 503 `waits_exhausted` meanwhile. Under gunicorn the wait now watches its
client socket (`_agent_gone` in controlplane/api/agent.py) and ends once the peer has closed it.

Real processes: gunicorn (one gthread worker, QM_AGENT_MAX_WAITS=1) on the test database and
Redis, and an agent process (the real AgentClient) killed with SIGKILL while its wait is held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.controlplane.loop.chaos_cluster import free_port
from tests.controlplane.loop.chaos_cluster import test_database_url as _test_database_url
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, build_loop_fleet, register_node

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


@pytest.fixture
def fleet(transactional_db: Any) -> LoopFleet:  # committed: gunicorn reads it from its own connections
    return build_loop_fleet()


@pytest.fixture
def web(fleet: LoopFleet, tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path, free_port()) as url:
        yield url


@contextmanager
def serving(tmp_path: Path, port: int, also: str | None = None) -> Iterator[str]:
    """gunicorn serving the test database: one worker, 4 threads, at most one wait held; at
    127.0.0.1:`port` (the URL yielded), and at `also`:`port` too if given. Its log: web.log."""
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "DJANGO_SETTINGS_MODULE": "controlplane.settings",
           "QM_AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP, "QM_AGENT_MAX_WAITS": "1", "QM_LOG_LEVEL": "WARNING",
           "PYTHONPATH": str(REPO)}
    if also:
        env["ALLOWED_HOSTS"] = ",".join(h for h in (env.get("ALLOWED_HOSTS", ""), also) if h)
    log = (tmp_path / "web.log").open("wb")
    binds = ["-b", f"127.0.0.1:{port}"] + (["-b", f"{also}:{port}"] if also else [])
    process = subprocess.Popen(
        [str(BIN / "gunicorn"), "controlplane.wsgi:application", *binds, "-w", "1",
         "-k", "gthread", "--threads", "4", "--graceful-timeout", "1"],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90  # gunicorn's start on a loaded machine
        while True:
            try:
                if requests.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline and process.poll() is None, (tmp_path / "web.log").read_text()[-3000:]
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _wait(url: str, item: dict[str, str], since: int | None, timeout_s: float) -> requests.Response:
    return requests.post(f"{url}/api/v1/agent/nodes/wait", json={"nodes": [item], "since": since,
                                                                  "timeout_s": timeout_s}, timeout=timeout_s + 10)


def _since(url: str, item: dict[str, str]) -> int:
    """The sequence number to wait from: now's. (Until 7 Dec the web process's listener, as it
    subscribed, ended every wait then held, so this also waited until a wait was held whole.)"""
    return int(_wait(url, item, None, 0).json()["seq"])


AGENT = """
import sys
from controlplane.agent.client import AgentClient
print("waiting", flush=True)
AgentClient(sys.argv[1]).wait([{"name": sys.argv[2], "token": sys.argv[3]}], int(sys.argv[4]), 25.0)
print("answered", flush=True)
"""


def test_a_killed_agents_wait_gives_its_place_back_at_once(web: str) -> None:
    _, token = register_node("gpu-01")
    item = {"name": "gpu-01", "token": token}
    since = _since(web, item)
    agent = subprocess.Popen([sys.executable, "-c", AGENT, web, "gpu-01", token, str(since)], cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None and agent.stdout.readline() == "waiting\n"
        time.sleep(1.5)  # its wait sent and held (a probe of ours before it would take the one place)
        held = _wait(web, item, since, 0.2)
        assert held.status_code == 503 and agent.poll() is None, held.text
        agent.kill()
        agent.wait()
        killed = time.monotonic()
        refused = 0
        while (answer := _wait(web, item, since, 0.2)).status_code == 503:
            assert answer.json()["code"] == "waits_exhausted"
            refused += 1
            assert time.monotonic() - killed < 10, f"still held {time.monotonic() - killed:.1f} s after its agent died"
            time.sleep(0.1)
        freed = time.monotonic() - killed
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()

    assert answer.status_code == 200 and answer.json()["woken"] == [], answer.text
    assert freed < 2.0, f"the place came back {freed:.2f} s after the agent died ({refused} waits refused meanwhile)"


def test_a_live_agents_wait_is_held_to_its_timeout(web: str) -> None:
    # The check must not take a connection that is still there for a gone one.
    _, token = register_node("gpu-01")
    item = {"name": "gpu-01", "token": token}
    since = _since(web, item)

    began = time.monotonic()
    answer = _wait(web, item, since, 2.5)
    held = time.monotonic() - began

    assert answer.status_code == 200 and answer.json()["woken"] == [], answer.text
    assert 2.4 < held < 6, held
