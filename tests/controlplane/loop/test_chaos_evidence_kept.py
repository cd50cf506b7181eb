"""A failed chaos drill keeps its evidence (chaos_cluster.py, `Cluster.keep_evidence`).

The Redis-outage drill once failed in a full run (15.6 s against its 8-s bound) with nothing
left to read: the processes' logs were in pytest's temporary directory, the servers' in
scripts/test-services.sh's, both gone, and the message was the number alone. Now the logs, the
servers' logs, the agents' status files and the drill's timeline are copied to a directory
the message names, and the message shows the timeline and each log's tail. No process is
started here: the logs are written as the processes would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.loop import chaos_cluster
from tests.controlplane.loop.chaos_cluster import Cluster


def test_a_failed_drill_keeps_the_logs_the_servers_logs_and_its_timeline(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    services = tmp_path / "services"
    services.mkdir()
    (services / "redis.log").write_text("1:M 06 Dec 2026 11:00:00.000 # User requested shutdown...\n")
    (services / "pg.log").write_text("LOG:  database system is ready to accept connections\n")
    monkeypatch.setenv("QM_TEST_SERVICES_DIR", str(services))
    monkeypatch.setenv("QM_TEST_PG_LOG", str(services / "pg.log"))
    monkeypatch.setattr(chaos_cluster, "EVIDENCE", tmp_path / "kept")
    cluster = Cluster(tmp_path / "cluster")
    cluster.add("beat", ["celery", "beat"]).log.write_text(
        "".join(f"beat line {i}, line {i} of it\n" for i in range(100))
        + _json("11:00:09.000", "leader elected", holder="beat:vm/3") + "celery beat v5.7.0 is starting.\n")
    cluster.add("worker-0", ["celery", "worker"]).log.write_text(
        _json("11:00:00.500", "leader elected", holder="chaos0@vm/1")
        + _json("11:00:01.000", "broker connection lost: gave up the scheduler's lead", worker="chaos0@vm")
        + "".join(_json(f"11:00:0{1 + i}.100", f"consumer: Cannot connect to redis: refused.\nTrying again ({i}/None)")
                  for i in range(5))
        + _json("11:00:07.000", "Task qm.tick received"))
    cluster.status_file("a").write_text('{"nodes": {}}')
    cluster.note("Redis shut down")
    cluster.note("beat leading: 15.6 s after the wait began")

    message = cluster.keep_evidence("test_drill[one]", lines=5)

    kept = cluster.evidence
    assert kept is not None and kept.parent == tmp_path / "kept" and kept.name.startswith("test_drill_one_-")
    assert f"evidence kept in {kept}" in message
    assert sorted(p.name for p in kept.iterdir()) == ["a.status.json", "beat.log", "postgresql.log",
                                                      "redis-server.log", "timeline.txt", "worker-0.log"]
    assert (kept / "beat.log").read_text().count("\n") == 102, "the whole log, not its tail"
    assert "User requested shutdown" in (kept / "redis-server.log").read_text()
    timeline = (kept / "timeline.txt").read_text().splitlines()
    assert timeline[0].startswith("(seconds since the cluster was made, at ")
    assert timeline[2].endswith("s  beat leading: 15.6 s after the wait began")
    # the message: the timeline, what the processes said of the lead in the order they said it,
    # then each process's last lines, a line repeated but for its numbers said once
    assert "Redis shut down" in message and "beat leading: 15.6 s" in message
    assert ("--- what the processes said about the lead and the broker\n"
            "11:00:00.500 worker-0: leader elected (chaos0@vm/1)\n"
            "11:00:01.000 worker-0: broker connection lost: gave up the scheduler's lead (chaos0@vm)\n"
            "11:00:01.100 worker-0: consumer: Cannot connect to redis: refused.\n"
            "    … 4 more like it\n"
            "11:00:09.000 beat: leader elected (beat:vm/3)\n--- beat") in message
    assert ("--- beat (last 5 lines, a line repeated said once)\nbeat line 52, line 52 of it\n    … 47 more like it\n"
            in message)
    assert "celery beat v5.7.0 is starting.\n--- worker-0" in message
    assert message.endswith("    … 4 more like it\n" + _json("11:00:07.000", "Task qm.tick received").rstrip("\n"))

    # kept again later (another failure of the same drill): the same directory, the timeline since
    cluster.note("a worker leading again")
    assert f"evidence kept in {kept}" in cluster.keep_evidence("test_drill[one]")
    assert (kept / "timeline.txt").read_text().splitlines()[-1].endswith("a worker leading again")


def _json(at: str, event: str, **fields: Any) -> str:
    """A log line as the processes write it (QM_LOG_FORMAT=json)."""
    return json.dumps({**fields, "event": event, "level": "info", "timestamp": f"2026-12-06T{at}000Z"}) + "\n"
