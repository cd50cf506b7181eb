"""A loop worker and beat log as docs/operations.md says every process does: one JSON object per
line (`QM_LOG_FORMAT`, default `json`), Celery's own lines included.

Until 2 Dec Celery replaced the root logger's handlers with its own at start, so a worker's log
read `[2026-12-02 08:29:07,776: INFO/MainProcess] {'holder': 'loop2@vm/613', 'epoch': 2, …,
'event': 'leader elected', …}`: the structured event printed as a Python dict inside Celery's
text format, which no log shipper parses, and its own lines (`Task qm.tick[…] succeeded`) plain
text. Real processes here, started as the docs start them, on the test PostgreSQL and Redis.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane import tasks
from tests.controlplane.loop import chaos_cluster

pytestmark = [
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the Redis and PostgreSQL `make test` starts"),
    pytest.mark.django_db(transaction=True),  # the worker reads and writes the test database
]


def _env() -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": chaos_cluster.test_database_url(),
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "PYTHONPATH": str(chaos_cluster.REPO),
    }
    for name in ("QM_LOG_FORMAT", "QM_LOG_LEVEL", "DEBUG"):
        env.pop(name, None)  # the defaults of a deployment
    return env


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., tuple[Path, Path, subprocess.Popen[bytes]]]]:
    """Start a Celery process (its stdout and stderr to files of their own); every one is
    stopped with its whole process group at the end, whatever happened."""
    procs: list[subprocess.Popen[bytes]] = []

    def _start(name: str, *argv: str) -> tuple[Path, Path, subprocess.Popen[bytes]]:
        out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with open(out, "wb") as o, open(err, "wb") as e:
            procs.append(subprocess.Popen([str(chaos_cluster.BIN / "celery"), "-A", "controlplane", *argv],
                                          env=_env(), cwd=str(tmp_path), stdout=o, stderr=e, start_new_session=True))
        return out, err, procs[-1]

    yield _start
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _until(path: Path, needle: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while needle not in path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{what} not seen in {timeout:g} s:\n{path.read_text()[-3000:]}"
        time.sleep(0.1)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of the log, each required to be one JSON object with an event, a level and a
    timestamp. The processes are still running: a last line without its newline is still being
    written, and is left out."""
    records = []
    *whole, _being_written = path.read_text(errors="replace").split("\n")
    for line in whole:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"a log line that is no JSON: {line!r}\nthe log:\n{path.read_text()[-3000:]}") from None
        assert isinstance(record, dict) and {"event", "level", "timestamp"} <= record.keys(), line
        records.append(record)
    return records


def test_a_loop_worker_and_beat_log_one_json_object_per_line(
        start: Callable[..., tuple[Path, Path, subprocess.Popen[bytes]]]) -> None:
    name = f"logtest-{os.getpid()}@%h"
    # started as docker-compose starts them: --quiet, so Celery prints no start banner (text)
    worker_out, worker_err, worker_proc = start(
        "worker", "--quiet", "worker", "-Q", "qm.loop", "-P", "solo", "-n", name,
        "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO")
    beat_out, beat_err, beat_proc = start("beat", "--quiet", "beat", "--loglevel", "INFO", "--schedule", "beat-schedule")
    _until(worker_err, "ready.", 90, "the worker's ready line")
    tasks.tick.apply_async(queue="qm.loop", expires=30)  # as beat would, without waiting for its tick
    _until(worker_err, "leader elected", 90, "the leader's election")
    _until(worker_err, "] succeeded in ", 90, "the tick's outcome")  # logged once the task has returned
    _until(beat_err, "Sending due task", 90, "beat sending a tick")

    worker = _json_lines(worker_err)
    elected = [r for r in worker if r["event"] == "leader elected"]
    assert len(elected) == 1 and isinstance(elected[0]["epoch"], int), worker
    assert elected[0]["holder"].startswith(f"logtest-{os.getpid()}@") and elected[0]["level"] == "info"
    # Celery's own lines are structured too: its worker's "ready" and each task's outcome.
    assert any("ready." in r["event"] and r["logger"].startswith("celery") for r in worker), worker
    assert any("qm.tick" in r["event"] and "succeeded" in r["event"] for r in worker), worker
    beat = _json_lines(beat_err)
    assert any("Sending due task" in r["event"] for r in beat), beat
    # The banner's facts are log lines instead; standard output stays empty.
    [started] = [r for r in worker if r["event"] == "worker started"]
    assert started["worker"].startswith(f"logtest-{os.getpid()}@") and started["pool"] == "solo"
    assert started["concurrency"] == 1
    assert "qm.loop" in started["queues"] and f"qm.worker.{started['worker']}" in started["queues"], started
    assert started["broker"].startswith("redis://"), started
    [beat_started] = [r for r in beat if r["event"] == "beat started"]
    assert beat_started["scheduler"] == "controlplane.beat.LoopScheduler", beat_started
    assert "accounting-rollup" in beat_started["entries"], beat_started
    assert worker_out.read_text() == "" and beat_out.read_text() == "", (worker_out.read_text(), beat_out.read_text())

    # Stopped as docker compose and systemd stop them (SIGTERM): the worker's "Warm shutdown",
    # which Celery printed as text on standard output, is a log line too.
    for proc in (worker_proc, beat_proc):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    [stopping] = [r for r in _json_lines(worker_err) if r["event"] == "worker shutting down"]
    assert stopping["signal"] == "SIGTERM" and stopping["how"] == "warm" and stopping["exitcode"] == 0, stopping
    assert stopping["worker"].startswith(f"logtest-{os.getpid()}@"), stopping
    _json_lines(beat_err)
    assert worker_out.read_text() == "" and beat_out.read_text() == "", (worker_out.read_text(), beat_out.read_text())
