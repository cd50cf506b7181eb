"""`manage.py demo` stops within seconds on SIGTERM or Ctrl-C (SIGINT), and its agents say goodbye.

Until 7 Dec the demo's web server stopped accepting connections the moment the signal came, and
only then were its simulated agents told to stop: their last reports and goodbyes went to a port
still listening but never answered, each call waiting out the agent's 10 s read timeout, and the
demo killed them after 15 s. Stopping took 11 s when the agents were connecting (about 18 s in
the review of 6 Dec). Now the loops stop first, each finishing its round, then the agents while the
server still answers, then the server. The demo runs here as a real process on a SQLite file, with its real agents."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO_NODES = 16
STOP_BOUND_S = 8.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def node_states(database: Path) -> dict[str, str]:
    if not database.exists():
        return {}
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5) as db:
        try:
            return dict(db.execute("SELECT name, state FROM controlplane_node").fetchall())
        except sqlite3.OperationalError:  # not migrated yet
            return {}


def answered_or_refused(url: str, timeout_s: float) -> bool:
    """True when the request got a reply or was refused; False when it was left hanging."""
    try:
        urllib.request.urlopen(url, timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return True
    except (ConnectionError, urllib.error.URLError) as error:
        reason = getattr(error, "reason", error)
        return not isinstance(reason, TimeoutError | socket.timeout)
    except TimeoutError:
        return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_demo_stops_within_seconds_and_its_agents_say_goodbye(signum: int, tmp_path: Path) -> None:
    database = tmp_path / "demo.sqlite3"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("QM_") and k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="controlplane.settings", QM_LOG_FORMAT="console",
               DATABASE_URL=f"sqlite:///{database}")
    log = (tmp_path / "demo.log").open("wb")
    demo = subprocess.Popen([sys.executable, "manage.py", "demo", "--port", str(port), "--no-stream"],
                            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 120
        while list(node_states(database).values()).count("ready") < DEMO_NODES:
            assert demo.poll() is None, (tmp_path / "demo.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"the demo's agents never all registered: {node_states(database)}"
            time.sleep(0.2)

        began = time.monotonic()
        demo.send_signal(signum)
        # While it stops, a new connection is answered or refused, never left waiting: the
        # agents' goodbyes need one as much as a browser does.
        assert answered_or_refused(url, timeout_s=3.0), "a request to the stopping demo was left hanging"
        try:
            code = demo.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        took = time.monotonic() - began
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        log.close()
        shutil.rmtree(ROOT / "var" / f"agents-{port}", ignore_errors=True)  # the demo's agents' state, per port

    output = (tmp_path / "demo.log").read_text()
    assert code == 0, output[-3000:]
    assert took < STOP_BOUND_S, f"the demo took {took:.1f} s to stop"
    assert "Traceback" not in output, output[-3000:]
    # Every node's agent said goodbye before the demo went: none is left ready for a next start
    # to find suspect.
    assert set(node_states(database).values()) == {"down"}, node_states(database)
    # It gave up the scheduler's lead on the way out, so a demo started again leads at its
    # first cycle instead of waiting the lease out (about 12 s).
    assert lease_expiry(database) <= datetime.now(UTC), "the stopped demo still holds the scheduler lease"


def lease_expiry(database: Path) -> datetime:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5) as db:
        (expires,) = db.execute("SELECT expires_at FROM controlplane_schedulerlease WHERE name = 'scheduler'").fetchone()
    return datetime.fromisoformat(expires).replace(tzinfo=UTC)
