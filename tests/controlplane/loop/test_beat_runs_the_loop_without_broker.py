"""With the broker away, beat runs the loop's ticks itself; once it is back, beat only sends them.

Until 2 Dec a Redis outage stopped the loop (docs/operations.md, *When Redis or PostgreSQL goes
away*): beat could not send `qm.tick` or `qm.reconcile`, the workers could not receive them, so
no job started, no runtime limit was enforced, and a node that died was fenced only once Redis
was back. Now beat (controlplane/beat.py) runs them in its own process, under the PostgreSQL
leader lease, while its sends fail. Real processes on the test PostgreSQL; the broker is a port
where nobody listens (the shared test Redis is never stopped), or a TCP relay to the test Redis
that starts listening mid-test.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.utils import timezone

from controlplane.choices import LIVE_ALLOCATION_STATES, AllocationState, EventKind, JobState, NodeState
from controlplane.models import (
    AccountingCursor,
    Allocation,
    Event,
    Job,
    Node,
    NotificationDelivery,
    NotificationHook,
    SchedulerLease,
)
from controlplane.services import transitions
from controlplane.services.cycle import LEASE_NAME
from tests.controlplane import factories as f
from tests.controlplane.loop import chaos_cluster
from tests.controlplane.loop_fixtures import bind, build_loop_fleet, make_job, register_node
from tests.controlplane.webhook_receiver import LOOPBACK, Receiver

pytestmark = [
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the Redis and PostgreSQL `make test` starts"),
    pytest.mark.django_db(transaction=True),  # beat and the worker read and write the test database
]

RUN_IN_BEAT = "loop tick run in beat: broker unreachable"
BACK = "broker reachable again: loop ticks go to the workers"
# Beat ticks twice a second; nodes neither go suspect nor lose their lease by themselves here
# (the test sets the one lease that runs out).
FAST = {"QM_CYCLE_INTERVAL_S": "0.5", "QM_CYCLE_DEBOUNCE_S": "0.1", "QM_LEADER_LEASE_S": "3",
        "QM_SUSPECT_AFTER_S": "300", "QM_AGENT_LEASE_S": "600", "QM_NOTIFY_INTERVAL_S": "0.5", "QM_ACCOUNTING_ROLLUP_S": "1",
        "QM_WEBHOOK_ALLOWED_NETWORKS": LOOPBACK}  # the webhook receiver is on 127.0.0.1


def _env(redis_url: str) -> dict[str, str]:
    env = {**os.environ, **FAST, "REDIS_URL": redis_url, "DATABASE_URL": chaos_cluster.test_database_url(),
           "DJANGO_SETTINGS_MODULE": "controlplane.settings", "PYTHONPATH": str(chaos_cluster.REPO),
           "QM_LOG_FORMAT": "json", "QM_LOG_LEVEL": "INFO"}
    return env


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(argv, env=env, cwd=str(chaos_cluster.REPO), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _beat(tmp_path: Path, redis_url: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "beat.log"
    argv = [str(chaos_cluster.BIN / "celery"), "-A", "controlplane", "beat", "-s", str(tmp_path / "beat-schedule"),
            "--pidfile=", "-l", "INFO"]
    return _start(argv, _env(redis_url), log), log


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait_for(what: str, ok: Callable[[], Any], timeout: float, *logs: Path) -> float:
    """Poll until `ok()` is truthy; returns the seconds it took."""
    started = time.monotonic()
    while not ok():
        if time.monotonic() - started > timeout:
            tails = "\n".join(f"--- {log.name}:\n{log.read_text(errors='replace')[-4000:]}" for log in logs)
            raise AssertionError(f"{what}: not within {timeout} s\n{tails}")
        time.sleep(0.1)
    return time.monotonic() - started


def _lease() -> SchedulerLease | None:
    return SchedulerLease.objects.filter(name=LEASE_NAME).first()


def _bound_by(job: Job) -> Event | None:
    return Event.objects.filter(job=job, kind="job.bound").first()


def test_beat_schedules_fences_sends_webhooks_and_rolls_up_usage_while_the_broker_is_down(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = build_loop_fleet()
    receiver = Receiver().start()
    dead, _ = register_node("outage-dead")
    live, _ = register_node("outage-live")
    spare, _ = register_node("outage-spare")  # where the fenced job runs again
    now = timezone.now()
    Node.objects.filter(pk__in=[live.pk, spare.pk]).update(agent_lease_expires_at=now + timedelta(hours=1),
                                                           last_heartbeat_at=now)
    # A job on a node whose agent lease has run out: reconcile fences it and quarantines the node.
    on_dead = make_job(fleet, name="on-dead-node", gpus=8, gpus_per_node=8)
    fenced_allocation = bind(on_dead, {dead: range(8)})
    Node.objects.filter(pk=dead.pk).update(agent_lease_expires_at=now - timedelta(seconds=1), last_heartbeat_at=now)
    # A job running past its runtime limit: the cycle stops it.
    over = make_job(fleet, name="over-limit", gpus=4, gpus_per_node=4, runtime_limit_s=60)
    over_allocation = bind(over, {live: range(4)})
    Allocation.objects.filter(pk=over_allocation.pk).update(started_at=now - timedelta(minutes=10))
    Job.objects.filter(pk=over.pk).update(state=JobState.RUNNING, started_at=now - timedelta(minutes=10))
    # A job submitted while Redis is away: a cycle binds it, and its submitter's webhook is told
    # (until 4 Dec the deliveries waited for the broker).
    alice = f.make_user("alice", team=fleet.team)
    hook = NotificationHook.objects.create(user=alice, url=receiver.url, events=["started"], secret="s",
                                           created_at=timezone.now())
    waiting = make_job(fleet, name="submitted-during-outage", gpus=2, submitter=alice)

    dead_port = chaos_cluster.free_port()  # nobody listens
    beat, log = _beat(tmp_path, f"redis://127.0.0.1:{dead_port}/0")
    try:
        bound_s = _wait_for("the waiting job bound", lambda: _bound_by(waiting), 30, log)
        stopped_s = _wait_for(
            "the job past its limit stopped",
            lambda: Allocation.objects.filter(pk=over_allocation.pk, state=AllocationState.RELEASING,
                                              release_reason=transitions.RELEASE_RUNTIME_LIMIT).exists(), 30, log)
        fenced_s = _wait_for(
            "the dead node fenced",
            lambda: Allocation.objects.filter(pk=fenced_allocation.pk, state=AllocationState.FENCED).exists()
            and Node.objects.filter(pk=dead.pk, state=NodeState.QUARANTINED).exists(), 30, log)
        _wait_for("the fenced job bound again", lambda: Allocation.objects.filter(
            job=on_dead, state__in=LIVE_ALLOCATION_STATES, epoch=1).exists(), 30, log)
        _wait_for("the webhook delivered", lambda: NotificationDelivery.objects.filter(
            hook=hook, delivered_at__isnull=False).exists(), 30, log)
        # the accounting rollup too (until 4 Dec it waited for the broker, as the webhooks did)
        _wait_for("usage rolled up", lambda: AccountingCursor.objects.filter(
            rolled_until__isnull=False).exists(), 30, log)
        # A few more ticks: the outage is said once, not at each one.
        time.sleep(1.5)
        assert beat.poll() is None, f"beat exited {beat.returncode}:\n{log.read_text()[-4000:]}"
    finally:
        _stop(beat)
        receiver.stop()
    text = log.read_text(errors="replace")
    [got] = receiver.received
    assert got.json()["job_id"] == waiting.pk and got.json()["event"] == "started"
    with capsys.disabled():
        print(f"\nbeat without a broker: bound after {bound_s:.1f} s, stop by {bound_s + stopped_s:.1f} s, "
              f"fenced by {bound_s + stopped_s + fenced_s:.1f} s from beat's start")

    lease = _lease()
    assert lease is not None and lease.holder.startswith("beat:") and lease.epoch == 1
    assert lease.cycles >= 3  # beat went on ticking after the first
    bound = _bound_by(waiting)
    assert bound is not None and bound.actor == "scheduler@epoch:1"
    assert Allocation.objects.filter(job=waiting, state__in=LIVE_ALLOCATION_STATES, epoch=1).exists()
    # The fenced job was requeued whole, and bound again elsewhere by a later cycle of beat's.
    assert Event.objects.filter(job=on_dead, kind=EventKind.JOB_REQUEUED).exists()
    assert Allocation.objects.filter(job=on_dead, state__in=LIVE_ALLOCATION_STATES, epoch=1).exists()
    assert text.count(RUN_IN_BEAT) == 1, text[-4000:]
    assert BACK not in text
    # The Redis uses on the way failed soft: the bind's agent wake-up, the fence's cycle trigger.
    assert "agent wake-up not sent" in text and "cycle trigger not sent" in text
    # No run in beat failed, none was refused (the one entry left waiting for the broker, the
    # teams page's days, says so when it falls due: half-hourly).
    assert "loop task in beat failed" not in text and "loop tick not sent" not in text, text[-4000:]


class _Relay:
    """A TCP relay to the test Redis that listens only once started: before, its port refuses.
    Frozen, it forwards nothing and closes nothing (a partition that drops packets: no reset,
    no reply), and holds what it read until it thaws, so nothing is lost."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.port = chaos_cluster.free_port()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._flowing = threading.Event()
        self._flowing.set()

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        # shut down first: close() alone wakes neither the thread blocked in accept() (the port
        # went on accepting) nor a pipe thread blocked in recv() (no FIN went out, and a client
        # could wait on a half-open connection forever)
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        for s in self._sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self._sockets = []


@pytest.fixture
def relay() -> Iterator[_Relay]:
    relay = _Relay(int(urlsplit(os.environ["REDIS_URL"]).port or 6379))
    yield relay
    relay.close()


def test_once_the_broker_is_back_beat_sends_the_ticks_and_a_worker_leads_and_covers_again_when_it_goes(tmp_path: Path, relay: _Relay,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    fleet = build_loop_fleet()
    node, _ = register_node("back-node")
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() + timedelta(hours=1),
                                           last_heartbeat_at=timezone.now())
    redis_url = os.environ["REDIS_URL"]
    through_relay = urlunsplit(urlsplit(redis_url)._replace(netloc=f"127.0.0.1:{relay.port}"))
    # Registering the node sent a cycle trigger to the real broker: drop it, so the worker gets
    # nothing until beat reaches the broker (the broker is down for everyone, as in an outage).
    import redis

    redis.Redis.from_url(redis_url).delete("qm.loop")
    name = f"back-{os.getpid()}"
    worker_log = tmp_path / "worker.log"
    worker = _start([str(chaos_cluster.BIN / "celery"), "-A", "controlplane", "worker", "-Q", "qm.loop", "-P", "solo",
                     "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"],
                    _env(redis_url), worker_log)
    beat, log = _beat(tmp_path, through_relay)
    try:
        # The broker (as beat reaches it) is down: beat leads and binds.
        first = make_job(fleet, name="during", gpus=1)
        _wait_for("beat binding during the outage", lambda: _bound_by(first), 30, log, worker_log)
        lease = _lease()
        assert lease is not None and lease.holder.startswith("beat:")
        beat_epoch = lease.epoch

        relay.start()
        back_s = _wait_for("a worker leading once beat reaches the broker",
                           lambda: (lease := _lease()) is not None and lease.holder.startswith(name + "@"),
                           30, log, worker_log)
        lease = _lease()
        assert lease is not None and lease.epoch == beat_epoch + 1
        second = make_job(fleet, name="after", gpus=1)
        _wait_for("the worker binding after the outage", lambda: _bound_by(second), 30, log, worker_log)
        bound = _bound_by(second)
        assert bound is not None and bound.actor == f"scheduler@epoch:{beat_epoch + 1}"
        time.sleep(1.5)  # more ticks: beat sends them and runs none
        lease = _lease()
        assert lease is not None and lease.holder.startswith(name + "@") and lease.epoch == beat_epoch + 1
        assert beat.poll() is None and worker.poll() is None

        # The broker goes away again under beat's established connection: once the worker's
        # lease has run out (it gets no ticks), beat leads again, with the next epoch.
        relay.close()
        again_s = _wait_for("beat leading again in a second outage",
                            lambda: (lease := _lease()) is not None and lease.holder.startswith("beat:"),
                            30, log, worker_log)
        lease = _lease()
        assert lease is not None and lease.epoch == beat_epoch + 2
        third = make_job(fleet, name="second-outage", gpus=1)
        _wait_for("beat binding in the second outage", lambda: _bound_by(third), 30, log, worker_log)
    finally:
        _stop(beat)
        _stop(worker)
    text = log.read_text(errors="replace")
    with capsys.disabled():
        print(f"\nbroker back: a worker led {back_s:.1f} s after the relay started listening; away again: "
              f"beat led {again_s:.1f} s after the relay closed (the worker's lease: {FAST['QM_LEADER_LEASE_S']} s)")
    assert text.count(RUN_IN_BEAT) == 2, text[-4000:]  # once per outage
    assert text.count(BACK) == 1, text[-4000:]
    assert "leader released the lease" in text  # beat handed the lead back rather than let it run out
    assert "loop task in beat failed" not in text and "loop tick not sent" not in text, text[-4000:]


RELAY_LEASE_S = "60"


class _ThroughRelay(NamedTuple):
    """A loop worker and beat that reach the broker only through the relay, with a leader
    lease of 60 s: a lead that changes hands within seconds of an outage was given up, it did
    not run out."""

    fleet: Any
    name: str
    worker: subprocess.Popen[bytes]
    beat: subprocess.Popen[bytes]
    worker_log: Path
    log: Path
    lease_s: str


def _worker_and_beat_through(relay: _Relay, tmp_path: Path, prefix: str) -> _ThroughRelay:
    fleet = build_loop_fleet()
    node, _ = register_node(f"{prefix}-node")
    Node.objects.filter(pk=node.pk).update(agent_lease_expires_at=timezone.now() + timedelta(hours=1),
                                           last_heartbeat_at=timezone.now())
    env = {**_env(urlunsplit(urlsplit(os.environ["REDIS_URL"])._replace(netloc=f"127.0.0.1:{relay.port}"))),
           "QM_LEADER_LEASE_S": RELAY_LEASE_S}
    name = f"{prefix}-{os.getpid()}"
    worker_log, log = tmp_path / "worker.log", tmp_path / "beat.log"
    relay.start()
    worker = _start([str(chaos_cluster.BIN / "celery"), "-A", "controlplane", "worker", "-Q", "qm.loop", "-P", "solo",
                     "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"],
                    env, worker_log)
    beat = _start([str(chaos_cluster.BIN / "celery"), "-A", "controlplane", "beat", "-s", str(tmp_path / "schedule"),
                   "--pidfile=", "-l", "INFO"], env, log)
    return _ThroughRelay(fleet, name, worker, beat, worker_log, log, RELAY_LEASE_S)


def test_a_worker_that_loses_the_broker_gives_up_the_lead_and_reconnects_every_second(
        tmp_path: Path, relay: _Relay, capsys: pytest.CaptureFixture[str]) -> None:
    # Until 3 Dec the loop stopped for the lease's length, and the worker came back up to 30 s
    # after the broker did: its waits grew by 2 s per attempt.
    fleet, name, worker, beat, worker_log, log, lease_s = _worker_and_beat_through(relay, tmp_path, "lost")
    try:
        _wait_for("the worker leading", lambda: (lease := _lease()) is not None and lease.holder.startswith(name + "@"),
                  60, log, worker_log)
        worker_epoch = _lease().epoch  # type: ignore[union-attr]

        relay.close()  # the broker goes away for both
        gone_s = _wait_for("beat leading", lambda: (lease := _lease()) is not None and lease.holder.startswith("beat:"),
                           30, log, worker_log)
        assert _lease().epoch == worker_epoch + 1  # type: ignore[union-attr]
        during = make_job(fleet, name="during", gpus=1)
        _wait_for("beat binding during the outage", lambda: _bound_by(during), 30, log, worker_log)
        time.sleep(8)  # long enough for Celery's own waits to have grown (2 + 4 s, then 6 s)

        relay.start()
        back_s = _wait_for("the worker leading again",
                           lambda: (lease := _lease()) is not None and lease.holder.startswith(name + "@"),
                           30, log, worker_log)
        assert _lease().epoch == worker_epoch + 2  # type: ignore[union-attr]
        assert worker.poll() is None and beat.poll() is None
    finally:
        _stop(beat)
        _stop(worker)
    with capsys.disabled():
        print(f"\nworker lost the broker: beat led {gone_s:.1f} s after (lease {lease_s} s); "
              f"broker back: the worker led again {back_s:.1f} s after")
    text = worker_log.read_text(errors="replace")
    # It gave the lead up (the lease would have held it 60 s) and tried the broker every second
    # through the outage (Celery's own waits grow by 2 s a try): said by the worker itself, and
    # the wall-clock bounds only well short of what they exclude (until 6 Dec 10 s and 6 s, which
    # a loaded machine's slow reconnect could pass).
    assert text.count("broker connection lost: gave up the scheduler's lead") == 1, text[-4000:]
    waits = re.findall(r"Trying again in ([\d.]+) seconds?", text)
    assert len(waits) >= 5 and set(waits) == {"1.00"}, waits
    assert gone_s < 30, gone_s
    assert back_s < 20, back_s


def test_a_broker_behind_a_partition_that_drops_packets_hangs_nothing(
        tmp_path: Path, relay: _Relay, capsys: pytest.CaptureFixture[str]) -> None:
    # The broker stops answering without closing anything. Without socket timeouts beat waited
    # for the reply to its next tick forever (so it never ran the loop itself), and the worker
    # noticed its silent BRPOP only after kombu's check (brpop_timeout + 2 x 25 s).
    fleet, name, worker, beat, worker_log, log, lease_s = _worker_and_beat_through(relay, tmp_path, "cut")
    try:
        _wait_for("the worker leading", lambda: (lease := _lease()) is not None and lease.holder.startswith(name + "@"),
                  60, log, worker_log)
        relay.freeze()
        # within 50 s, short of the 60-s lease: the worker gave the lead up, it did not run out
        cut_s = _wait_for("beat leading", lambda: (lease := _lease()) is not None and lease.holder.startswith("beat:"),
                          50, log, worker_log)
        during = make_job(fleet, name="during-partition", gpus=1)
        _wait_for("beat binding during the partition", lambda: _bound_by(during), 30, log, worker_log)
        relay.thaw()
        healed_s = _wait_for("the worker leading again",
                             lambda: (lease := _lease()) is not None and lease.holder.startswith(name + "@"),
                             45, log, worker_log)
        assert worker.poll() is None and beat.poll() is None
    finally:
        _stop(beat)
        _stop(worker)
    with capsys.disabled():
        print(f"\npartition dropping packets: beat led {cut_s:.1f} s after it began (lease "
              f"{lease_s} s); healed: the worker led again {healed_s:.1f} s after")
    assert "broker connection lost: gave up the scheduler's lead" in worker_log.read_text(errors="replace")


def test_each_entry_beat_runs_on_its_own_thread_names_the_task_a_worker_runs() -> None:
    # beat runs these by their function's path: a task renamed or moved must not leave a path
    # that imports nothing, or one whose task is another
    from django.utils.module_loading import import_string

    from controlplane.beat import OWN_LANE, RUN_HERE

    assert {name: import_string(path).name for name, path in OWN_LANE.items()} == {name: name for name in OWN_LANE}
    assert set(OWN_LANE) <= set(RUN_HERE)
