"""The demo as `make demo` runs it (SQLite, in-process loops, simulated agents) shows honest tiers.

Runs `manage.py demo` as a separate process on its own SQLite file and reads the product's API the
way a user would: within about a minute the fleet's allocated, active and productive GPU-hours are
non-zero and ordered, showback prices them, and no background loop step has failed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
DEADLINE_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Demo:
    def __init__(self, base: str, log: Path) -> None:
        self.base = base
        self.log = log
        self.token = ""

    def call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(self.base + path, data=json.dumps(body).encode() if body else None)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Token {self.token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[_Demo]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "CELERY"))}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}", QM_LOG_FORMAT="console", PYTHONUNBUFFERED="1")
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "demo", "--port", str(port), "--submit-every", "1"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        yield _Demo(f"http://127.0.0.1:{port}", log)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_until_up(demo: _Demo, started: float) -> None:
    while time.monotonic() - started < DEADLINE_S:
        try:
            demo.token = demo.call("/api/v1/auth/token/", {"username": "finn", "password": "finn"})["token"]
            return
        except OSError:
            time.sleep(1)
    pytest.fail(f"the demo did not answer within {DEADLINE_S:.0f} s:\n{demo.log.read_text()[-3000:]}")


def test_demo_fleet_produces_nonzero_ordered_tiers_within_a_minute_on_sqlite(demo: _Demo) -> None:
    started = time.monotonic()
    _wait_until_up(demo, started)
    points: list[dict[str, Any]] = []
    while time.monotonic() - started < DEADLINE_S:
        points = demo.call("/api/v1/metrics/utilization/?window=1h&bucket=minute")["points"]
        if any(p["productiveGpus"] > 0 for p in points):
            break
        time.sleep(3)
    log = demo.log.read_text()
    assert "step failed" not in log, f"a background loop step failed in the demo:\n{log[-4000:]}"
    assert any(p["productiveGpus"] > 0 for p in points), f"no productive GPU time after {DEADLINE_S:.0f} s: {points}"
    for p in points:
        assert p["capacityGpus"] >= p["allocatedGpus"] >= p["activeGpus"] >= p["productiveGpus"] >= 0, p
    # Showback covers whole minutes rolled: the first one is priced once its minute has ended.
    fleet_cost, showback = 0.0, {}
    while time.monotonic() - started < DEADLINE_S + 75:
        showback = demo.call("/api/v1/showback/?window=1h&group_by=team")
        fleet_cost = sum(float(e["totalCost"]) for name, e in showback["data"][0].items() if name != "__idle__")
        if fleet_cost > 0:
            break
        time.sleep(3)
    assert fleet_cost > 0, f"showback priced nothing: {showback}"
