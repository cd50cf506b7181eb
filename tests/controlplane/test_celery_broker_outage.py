"""A worker outlives a long Redis outage: it keeps trying to reach the broker, however long.

Celery gives up after `broker_connection_max_retries` attempts (100 by default, its waits
growing by 2 s to 30 s: ~47 min; with our consumer's 1-s waits, controlplane/broker_consumer.py,
it would be under 2 min) and then the worker exits, with status 0, so not even a
`restart: on-failure` policy starts it again. Until 2 Dec that was the loop's fate after a
Redis outage of ~47 min: every worker gone, no cycle, no reconcile (no node fenced), until an
operator restarted them. The waits are shortened here (the real app and its settings, only
kombu's sleep between attempts cut to 10 ms), so 150 attempts take a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.controlplane.loop import chaos_cluster

pytestmark = pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the services `make test` starts")

WORKER = """
import kombu.connection

_ensure = kombu.connection.Connection._ensure_connection

def _quick(self, errback=None, max_retries=None, interval_start=2, interval_step=2, interval_max=30, **kwargs):
    return _ensure(self, errback, max_retries, 0.01, 0, 0.01, **kwargs)

kombu.connection.Connection._ensure_connection = _quick

from controlplane.celery import app

app.worker_main(["worker", "-Q", "qm.loop", "-P", "solo", "-n", "outage@%h", "--without-gossip", "--without-mingle",
                 "--without-heartbeat", "--loglevel", "INFO"])
"""


def test_a_worker_keeps_reconnecting_to_a_broker_that_stays_down(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    env = {**os.environ, "REDIS_URL": f"redis://127.0.0.1:{chaos_cluster.free_port()}/0",  # nobody listens
           "DJANGO_SETTINGS_MODULE": "controlplane.settings", "PYTHONPATH": str(chaos_cluster.REPO)}
    env.pop("QM_LOG_LEVEL", None)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", WORKER], env=env, cwd=str(tmp_path), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while (attempts := log.read_text(errors="replace").count("Cannot connect")) < 150:
            assert proc.poll() is None, (
                f"the worker gave up on the broker after {attempts} attempts and exited {proc.returncode}:\n"
                f"{log.read_text(errors='replace')[-2000:]}")
            assert time.monotonic() < deadline, f"only {attempts} attempts in 60 s:\n{log.read_text()[-2000:]}"
            time.sleep(0.1)
        assert proc.poll() is None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
