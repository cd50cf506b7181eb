"""A failed chaos drill keeps its evidence (chaos_cluster.py, `Cluster.keep_evidence`).

The Redis-outage drill once failed in a full run (15.6 s against its 8-s bound) with nothing
left to read: the processes' logs were in pytest's temporary directory, the servers' in
scripts/test-services.sh's, both gone, and the message was the number alone. Now the logs, the
servers' logs, the agents' status files and the drill's timeline are copied to a directory
the message names, and the message shows the timeline and each log's tail. No process is
started here: the logs are written as the processes would."""

from __future__ import annotations

from pathlib import Path

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
    cluster.add("beat", ["celery", "beat"]).log.write_text("".join(f"beat line {i}\n" for i in range(100)))
    cluster.add("worker-0", ["celery", "worker"]).log.write_text("broker connection lost: gave up the lead\n")
    cluster.status_file("a").write_text('{"nodes": {}}')
    cluster.note("Redis shut down")
    cluster.note("beat leading: 15.6 s after the wait began")

    message = cluster.keep_evidence("test_drill[one]", lines=5)

    kept = cluster.evidence
    assert kept is not None and kept.parent == tmp_path / "kept" and kept.name.startswith("test_drill_one_-")
    assert f"evidence kept in {kept}" in message
    assert sorted(p.name for p in kept.iterdir()) == ["a.status.json", "beat.log", "postgresql.log",
                                                      "redis-server.log", "timeline.txt", "worker-0.log"]
    assert (kept / "beat.log").read_text().count("\n") == 100, "the whole log, not its tail"
    assert "User requested shutdown" in (kept / "redis-server.log").read_text()
    assert (kept / "timeline.txt").read_text().splitlines()[1].endswith("s  beat leading: 15.6 s after the wait began")
    # the message: the timeline, then each process's last lines
    assert "Redis shut down" in message and "beat leading: 15.6 s" in message
    assert "--- beat (last 5 lines)\nbeat line 95\n" in message and "beat line 94" not in message
    assert "--- worker-0 (last 5 lines)\nbroker connection lost: gave up the lead" in message

    # kept again later (another failure of the same drill): the same directory, the timeline since
    cluster.note("a worker leading again")
    assert f"evidence kept in {kept}" in cluster.keep_evidence("test_drill[one]")
    assert (kept / "timeline.txt").read_text().splitlines()[-1].endswith("a worker leading again")
