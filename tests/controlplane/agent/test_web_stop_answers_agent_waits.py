"""A web worker told to stop answers its agents' held waits at once, and exits as soon as its
other requests are done.

A held wake-up wait (POST /api/v1/agent/nodes/wait, up to 30 s) is a request in flight: gunicorn,
stopping a worker gracefully (SIGTERM: a deploy, `docker stop`, the old workers of a reload's
HUP), waits for it. Until 7 Dec a worker holding one lived on until the wait's timeout (or its
graceful timeout, or `docker stop`'s 10 s and then SIGKILL, cutting its other requests short).
Now the worker's SIGTERM answers every wait it holds (nothing woken: the agent waits again,
elsewhere) and any it is asked for afterwards at once (controlplane/gunicorn_conf.py,
`stop_holding_waits` in services/agent_wakeups.py).

Real processes: gunicorn started as docker-compose starts it (`-c python:controlplane.gunicorn_conf`,
one gthread worker, a 30 s graceful timeout) on the test database and Redis.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import requests

from tests.controlplane.agent.test_agent_wait_released_when_agent_gone import BIN, REPO, _since, _wait, fleet
from tests.controlplane.loop.chaos_cluster import free_port
from tests.controlplane.loop.chaos_cluster import test_database_url as _test_database_url
from tests.controlplane.loop_fixtures import BOOTSTRAP, register_node

__all__ = ["fleet"]  # the fixture, used here by name


def _gunicorn(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "DJANGO_SETTINGS_MODULE": "controlplane.settings",
           "QM_AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP, "QM_AGENT_MAX_WAITS": "2", "QM_LOG_LEVEL": "WARNING",
           "PYTHONPATH": str(REPO)}
    log = (tmp_path / "web.log").open("wb")
    process = subprocess.Popen(
        [str(BIN / "gunicorn"), "controlplane.wsgi:application", "-c", "python:controlplane.gunicorn_conf",
         "-b", f"127.0.0.1:{port}", "-w", "1", "-k", "gthread", "--threads", "4", "--graceful-timeout", "30"],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 90  # gunicorn's start on a loaded machine
    while True:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return process
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline and process.poll() is None, (tmp_path / "web.log").read_text()[-3000:]
        time.sleep(0.2)


def test_a_stopping_web_worker_answers_its_held_waits_and_exits_promptly(fleet: Any, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    web = _gunicorn(tmp_path, int(url.rsplit(":", 1)[1]))
    try:
        _, token = register_node("gpu-01")
        item = {"name": "gpu-01", "token": token}
        since = _since(url, item)
        answers: list[tuple[float, requests.Response]] = []

        def agent_waits() -> None:
            answer = _wait(url, item, since, 25.0)
            answers.append((time.monotonic(), answer))

        agent = threading.Thread(target=agent_waits)
        agent.start()
        time.sleep(1.5)  # its wait held
        assert not answers, "the wait was answered before the worker was told to stop"
        told = time.monotonic()
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(timeout=40)
        exited = time.monotonic() - told
        agent.join(5)
    finally:
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()

    answered_at, answer = answers[0]
    assert answer.status_code == 200 and answer.json()["woken"] == [], answer.text
    assert answered_at - told < 3.0, f"answered {answered_at - told:.2f} s after SIGTERM"
    # its graceful exit: the kept-alive connections' linger (2 s) and the worker's last tick
    assert exited < 8.0, f"gunicorn exited {exited:.2f} s after SIGTERM"
    assert "Traceback" not in (tmp_path / "web.log").read_text()
