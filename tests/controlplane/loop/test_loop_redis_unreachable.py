"""The loop's Redis uses fail soft, each under a real Redis URL where nobody listens.

Beat's scheduler (controlplane/beat.py) finds the broker away at once (never Celery's endless
reconnect), runs a loop entry itself under the leader lease, says so once per outage, and once a
send gets through again sends instead, runs nothing and hands the lead back. A submit, a bind's
agent wake-up and an agent's wait each go on without Redis (log, or a 503 the agent backs off
from). The whole drill with beat as a real process is tests/controlplane/loop/
test_beat_runs_the_loop_without_broker.py.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery.beat import ScheduleEntry
from celery.schedules import schedule
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane import beat, redis_client, tasks
from controlplane.beat import LoopScheduler, beat_holder, broker_unreachable
from controlplane.celery import app
from controlplane.models import SchedulerLease
from controlplane.services.cycle import LEASE_NAME
from tests.controlplane import factories as f
from tests.controlplane.loop import chaos_cluster
from tests.controlplane.loop_fixtures import agent_client, bind, build_loop_fleet, make_job, register_node

pytestmark = [
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the Redis and PostgreSQL `make test` starts"),
    pytest.mark.django_db(transaction=True),  # beat's loop thread reads and writes the test database
]


def _events(caplog: pytest.LogCaptureFixture, event: str) -> list[dict[str, Any]]:
    return [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == event]


@pytest.fixture
def dead_redis(settings: Any) -> Iterator[str]:
    """REDIS_URL pointing where nobody listens, for the code that reads it (the debounce, the
    wake-ups); Celery's own connection is given to each scheduler below."""
    url = f"redis://127.0.0.1:{chaos_cluster.free_port()}/0"
    settings.REDIS_URL = url
    settings.QM = {**settings.QM, "CYCLE_INTERVAL_S": 0.5}  # a tick is served for a quarter second
    saved = redis_client._client
    redis_client._client = None
    try:
        yield url
    finally:
        redis_client._client = saved


def _scheduler(tmp_path: Path, broker_url: str) -> LoopScheduler:
    scheduler = LoopScheduler(app=app, schedule_filename=str(tmp_path / "beat-schedule"), lazy=True)
    scheduler.__dict__["connection"] = app.connection_for_write(broker_url)
    return scheduler


def _runs_told(scheduler: LoopScheduler) -> queue.SimpleQueue[str]:
    """The tasks `scheduler` runs itself, each put once its run is over. Beat waits for a run of
    the loop one interval at most (0.5 s here) and then goes on, skipping the entries that fall
    due while it still runs: a cycle on a loaded machine takes longer (at load 8 the lease read
    0 cycles right after the first entry)."""
    ended: queue.SimpleQueue[str] = queue.SimpleQueue()

    def runner(task: str, holder: str) -> str:
        try:
            return beat.run_loop_task(task, holder)
        finally:
            ended.put(task)

    scheduler.runner = runner
    return ended


def _tick_entry() -> ScheduleEntry:
    return ScheduleEntry(name="scheduling-cycle", task="qm.tick", schedule=schedule(2.0),
                         options={"expires": 2.0}, app=app)


def test_a_send_that_finds_no_broker_is_told_from_other_failures(dead_redis: str) -> None:
    connection = app.connection_for_write(dead_redis)
    with pytest.raises(Exception) as failed:
        tasks.tick.apply_async(connection=connection, retry=False)
    assert broker_unreachable(failed.value, tuple(connection.connection_errors))
    assert not broker_unreachable(ValueError("a bad argument"))
    try:
        raise RuntimeError("Couldn't apply scheduled task") from ConnectionRefusedError(111, "refused")
    except RuntimeError as wrapped:
        assert broker_unreachable(wrapped)


def test_beat_runs_the_tick_itself_while_the_broker_is_away_and_sends_it_once_back(
        tmp_path: Path, dead_redis: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    fleet = build_loop_fleet()
    register_node("gpu-01")
    job = make_job(fleet, gpus=1)
    scheduler = _scheduler(tmp_path, dead_redis)
    ended = _runs_told(scheduler)
    entry = _tick_entry()

    started = time.monotonic()
    assert scheduler.producer is None  # at once: Celery's own would retry forever (max_retries None)
    assert time.monotonic() - started < 2
    scheduler.apply_entry(entry, producer=scheduler.producer)
    assert ended.get(timeout=60) == "qm.tick"

    lease = SchedulerLease.objects.get(name=LEASE_NAME)
    assert lease.holder == scheduler.holder == beat_holder() and lease.cycles == 1
    assert job.allocations.filter(epoch=lease.epoch).exists()  # the cycle beat ran bound it
    for _ in range(3):
        time.sleep(0.6)  # past half an interval: not "already served"
        scheduler.apply_entry(entry, producer=scheduler.producer)
        assert ended.get(timeout=60) == "qm.tick"
    assert SchedulerLease.objects.get(name=LEASE_NAME).cycles == 4
    (said,) = _events(caplog, "loop tick run in beat: broker unreachable")  # once for the outage
    assert said["task"] == "qm.tick" and "Connection refused" in said["error"]

    # The broker is back (the test's own Redis database): at beat's next try (once per PROBE_S
    # during an outage) the tick is sent, not run, and beat hands the lead back so a worker
    # leads at its next tick.
    time.sleep(beat.PROBE_S)
    queue = redis.Redis.from_url(os.environ["REDIS_URL"])
    queue.delete("qm.loop")
    scheduler.__dict__["connection"] = app.connection_for_write(os.environ["REDIS_URL"])
    scheduler.apply_entry(entry, producer=scheduler.producer)
    scheduler.apply_entry(entry, producer=scheduler.producer)
    try:
        assert queue.llen("qm.loop") == 2
    finally:
        queue.delete("qm.loop")
        scheduler.close()
    lease = SchedulerLease.objects.get(name=LEASE_NAME)
    assert lease.cycles == 4 and lease.expires_at <= timezone.now()  # ran nothing more; lead given up
    (back,) = _events(caplog, "broker reachable again: loop ticks go to the workers")
    assert back["runs_in_beat"] == 4
    assert len(_events(caplog, "loop tick run in beat: broker unreachable")) == 1


class _Blackhole:
    """A broker behind a partition that drops packets: a port that takes connections (the
    kernel completes them) and never answers; it counts them."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"
        self._held: list[socket.socket] = []
        threading.Thread(target=self._take, daemon=True).start()

    def _take(self) -> None:
        while True:
            try:
                self._held.append(self._listener.accept()[0])
            except OSError:
                return

    @property
    def connections(self) -> int:
        return len(self._held)

    def close(self) -> None:
        self._listener.close()
        for held in self._held:
            held.close()


@pytest.fixture
def blackhole() -> Iterator[_Blackhole]:
    hole = _Blackhole()
    yield hole
    hole.close()


def test_during_an_outage_beat_connects_to_the_broker_only_once_it_answered_a_ping(
        tmp_path: Path, dead_redis: str, blackhole: _Blackhole, monkeypatch: pytest.MonkeyPatch) -> None:
    # Celery asks for the producer before every due entry. Until 6 Dec, with no connection
    # made before the broker stopped answering (beat started during the partition), each ask
    # tried one and waited out the socket timeout (3 s): beat ran one entry every 3 to 5 s,
    # its own loop ticks among them, and led 28 s after the partition began instead of 3.
    probe_s = beat.PROBE_S
    monkeypatch.setattr(beat, "PROBE_S", 3600.0)  # no PING falls due until the broker is back
    scheduler = _scheduler(tmp_path, blackhole.url)
    ended = _runs_told(scheduler)
    entry = _tick_entry()
    assert scheduler.producer is None  # the one try: the broker does not answer
    assert blackhole.connections == 1
    scheduler.apply_entry(entry, producer=None)  # the outage begins: the tick is run here
    assert ended.get(timeout=60) == "qm.tick"
    for _ in range(3):
        scheduler.apply_entry(entry, producer=scheduler.producer)
    assert blackhole.connections == 1, "no connection tried before the broker answered a PING"

    # The broker answers a PING (the test's own Redis): the next ask connects.
    monkeypatch.setattr(beat, "PROBE_S", probe_s)
    time.sleep(probe_s)
    scheduler.__dict__["connection"] = app.connection_for_write(os.environ["REDIS_URL"])
    try:
        assert scheduler.producer is not None
    finally:
        scheduler.close()


def test_during_an_outage_a_ping_that_times_out_is_asked_again_a_whole_probe_interval_after_it_ended(
        tmp_path: Path, dead_redis: str, blackhole: _Blackhole, monkeypatch: pytest.MonkeyPatch) -> None:
    # A PING the broker never answers lasts PROBE_S itself. Until 6 Dec the next was due PROBE_S
    # after the last began, so at the very next entry: beat spent its time asking, an entry at
    # a time, and its loop ticks waited their turn.
    monkeypatch.setattr(app.conf, "broker_url", blackhole.url)
    scheduler = _scheduler(tmp_path, dead_redis)
    ended = _runs_told(scheduler)
    scheduler.apply_entry(_tick_entry(), producer=None)  # the outage begins
    assert ended.get(timeout=60) == "qm.tick"
    time.sleep(beat.PROBE_S)
    # an entry beat neither sends nor runs during an outage: only the PING may take time
    waits = ScheduleEntry(name="keep-team-days", task="qm.frontend.keep_team_days", schedule=schedule(1800.0),
                          app=app)
    scheduler.apply_entry(waits, producer=scheduler.producer)
    asked = blackhole.connections
    assert asked == 1, "one PING, unanswered"
    scheduler.apply_entry(waits, producer=scheduler.producer)
    assert blackhole.connections == asked, "not asked again right after it timed out"
    scheduler.close()


def test_beat_leaves_a_live_leaders_cycle_alone_and_never_forwards_without_a_broker(
        tmp_path: Path, dead_redis: str) -> None:
    from controlplane.services.cycle import acquire_lease

    assert acquire_lease("loop1@host/7", timezone.now()) is not None  # a worker leads
    scheduler = _scheduler(tmp_path, dead_redis)
    started = time.monotonic()
    scheduler.apply_entry(_tick_entry(), producer=scheduler.producer)
    # No forward through the missing broker (a send with retry=False spent 6 s reconnecting);
    # beat waits for its run half a second at most, the rest is slack for a loaded machine.
    assert time.monotonic() - started < 5
    lease = SchedulerLease.objects.get(name=LEASE_NAME)
    assert lease.holder == "loop1@host/7" and lease.epoch == 1 and lease.cycles == 0
    scheduler.close()


def test_a_submit_is_accepted_and_a_bind_wakes_no_one_without_redis(
        dead_redis: str, caplog: pytest.LogCaptureFixture, django_capture_on_commit_callbacks: Any) -> None:
    caplog.set_level(logging.INFO)
    fleet = build_loop_fleet()
    node, token = register_node("gpu-01")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(f.make_user('alice', team=fleet.team))}")
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post("/api/v1/jobs/", {"name": "during-outage", "gpus": 1}, format="json")
    assert r.status_code == 201, r.content
    assert _events(caplog, "cycle trigger not sent; the next tick will run it")

    with django_capture_on_commit_callbacks(execute=True):
        bind(make_job(fleet, gpus=1), {node: [0]})  # its commit wakes the node's agent: not sent
    assert _events(caplog, "agent wake-up not sent; agents learn at their next heartbeat")

    wait = agent_client("-").post("/api/v1/agent/nodes/wait", {"nodes": [{"name": "gpu-01", "token": token}]},
                                  format="json")
    assert wait.status_code == 503 and wait.json()["code"] == "wake_unavailable"
    assert wait["Retry-After"] == "2"
