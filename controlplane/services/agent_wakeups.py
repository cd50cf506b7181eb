"""Wake-ups: an agent learns its desired state from its heartbeats; wake-ups only make it ask
sooner. When a commit binds work to a node or asks it to stop something, the node's wake
sequence number is raised in Redis (`qm:agent:wake`, node id → number) and published on
`qm:agent:wake:<database>` (`wake_channel`); an agent holding a long poll (POST nodes/wait, api/agent.py) is answered at
once and fetches its allocations right away instead of up to a heartbeat interval later. Losing
a wake-up (Redis down, a web process restarting) costs only that latency: the heartbeat remains
the source of truth. The rest of the agent protocol is services/agent_protocol.py; this module
depends on none of the services, so the transitions that bind and stop work can wake nodes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import structlog
from django.conf import settings
from django.db import transaction

from controlplane.redis_client import shared_client

log = structlog.get_logger(__name__)

WAKE_KEY = "qm:agent:wake"
WAKE_SEQ_KEY = "qm:agent:wake:seq"
WAKE_CHANNEL = "qm:agent:wake"  # and the Redis database's number: `wake_channel`
MAX_WAIT_S = 30.0
#: How often a held wait asks whether its agent is still there (`gone`, when the web server can
#: tell): a dead agent's wait gives its thread back within this, not at its timeout.
GONE_CHECK_S = 0.5


def wake_channel() -> str:
    """The channel this control plane's wake-ups go out on. Redis keeps keys per database but
    channels per server: two control planes on one Redis server at different database numbers
    (staging and production) would otherwise answer each other's agents' waits."""
    from redis.connection import parse_url

    return f"{WAKE_CHANNEL}:{parse_url(settings.REDIS_URL).get('db', 0)}"


def listener_name() -> str:
    """The name this process's wake-up listener gives its Redis connection (CLIENT LIST)."""
    import os

    return f"qm-agent-wake-{os.getpid()}"


def wake_nodes(node_ids: Iterable[int]) -> None:
    """After a commit: tell the agents of these nodes to fetch their allocations now."""
    ids = sorted({int(n) for n in node_ids})
    if ids:
        _hub().publish(ids)


def wake_nodes_on_commit(node_ids: Iterable[int]) -> None:
    ids = sorted({int(n) for n in node_ids})
    if ids:
        transaction.on_commit(lambda: wake_nodes(ids))


def answer_every_wait() -> None:
    """Answer every wait this process holds now, each with what is new for its nodes (often
    nothing), instead of at its timeout: for a server that is done serving them (the tests'
    live server between tests, whose agents have stopped and whose threads would otherwise hold
    their database connections for up to 30 s)."""
    if _wake_hub is not None:
        _wake_hub.answer_all()


def stop_holding_waits() -> None:
    """This process is stopping (a web worker told to exit gracefully): answer every wait it
    holds now, and any it is asked for from now on at once. A held wait is a request in flight,
    which a graceful stop waits for: up to the wait's 30 s, where the worker's other requests
    take a second or two."""
    _hub().answer_all(stopping=True)


class WaitsExhausted(Exception):
    """This process already holds AGENT_MAX_WAITS long polls: a wait now would take a thread
    the API needs. The agent backs off and relies on its heartbeats meanwhile."""


def wait_for_wake(node_ids: Sequence[int], since: int | None, timeout_s: float,
                  gone: Callable[[], bool] | None = None) -> tuple[list[int], int]:
    """Block up to `timeout_s` until one of `node_ids` is woken after sequence number `since`,
    or until `gone()` says the waiting agent has left (asked every GONE_CHECK_S; None: never).
    Returns (the nodes woken since then, the current sequence number to wait from next).
    Raises WaitsExhausted when this process holds as many waits as it may."""
    return _hub().wait(list(node_ids), since, max(0.0, min(timeout_s, MAX_WAIT_S)), gone)


class _WakeHub:
    """Per process: the waiting requests, and one thread listening on the Redis channel. With
    no Redis (the embedded demo) wake-ups stay inside the process, which runs the loop too."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._waiters: dict[int, set[Any]] = defaultdict(set)
        self._listener: Any = None
        self._local_seq = 0
        self._local: dict[int, int] = {}
        self._holding = 0  # waits this process holds now
        self._answered = 0  # raised by answer_all: every wait held before it ends
        self._stopping = False  # stop_holding_waits: no wait is held any more

    # -- storage of the sequence numbers
    def _redis(self) -> Any:
        if not settings.REDIS_URL or settings.QM.get("IN_PROCESS_LOOP"):
            return None
        return shared_client()

    def publish(self, ids: list[int]) -> None:
        client = self._redis()
        if client is None:
            with self._lock:
                self._local_seq += 1
                for n in ids:
                    self._local[n] = self._local_seq
            self._notify(ids)
            return
        try:
            seq = int(client.incr(WAKE_SEQ_KEY))
            pipe = client.pipeline(transaction=False)
            pipe.hset(WAKE_KEY, mapping={str(n): seq for n in ids})
            pipe.publish(wake_channel(), ",".join(map(str, ids)))
            pipe.execute()
        except Exception as error:  # noqa: BLE001 - a lost wake-up costs latency, nothing else
            log.warning("agent wake-up not sent; agents learn at their next heartbeat", error=str(error))

    def _woken(self, ids: list[int], since: int | None) -> tuple[list[int], int]:
        client = self._redis()
        if client is None:
            with self._lock:
                seqs = [self._local.get(n, 0) for n in ids]
                current = self._local_seq
        else:
            pipe = client.pipeline(transaction=False)
            pipe.get(WAKE_SEQ_KEY)
            pipe.hmget(WAKE_KEY, [str(n) for n in ids])
            raw_seq, raw = pipe.execute()
            current = int(raw_seq or 0)
            seqs = [int(v) if v is not None else 0 for v in raw]
        if since is None:
            return [], current
        return [n for n, seq in zip(ids, seqs, strict=True) if seq > since], current

    # -- waiting
    def wait(self, ids: list[int], since: int | None, timeout_s: float,
             gone: Callable[[], bool] | None = None) -> tuple[list[int], int]:
        import threading
        import time

        woken, current = self._woken(ids, since)
        if woken or since is None or timeout_s <= 0 or self._stopping:
            return woken, current
        with self._lock:
            # Each wait holds a web thread: never so many that the API has none left.
            if self._holding >= int(settings.QM.get("AGENT_MAX_WAITS", 2)):
                raise WaitsExhausted(f"{self._holding} agent waits already held by this process")
            self._holding += 1
        event = threading.Event()
        with self._lock:
            answered = self._answered
            for n in ids:
                self._waiters[n].add(event)
        try:
            self._ensure_listener()
            woken, current = self._woken(ids, since)  # published while we registered?
            until = time.monotonic() + timeout_s
            while not woken and (left := until - time.monotonic()) > 0:
                if event.wait(left if gone is None else min(left, GONE_CHECK_S)):
                    event.clear()  # first: a wake-up published during the re-check sets it again
                    woken, current = self._woken(ids, since)
                    if self._answered != answered:
                        break  # answer_every_wait
                    # nothing new (the listener's re-check after regaining Redis): wait on
                if gone is not None and gone():
                    break  # nobody to answer: the thread goes back to the API now
        finally:
            with self._lock:
                self._holding -= 1
                for n in ids:
                    waiters = self._waiters.get(n)
                    if waiters is not None:
                        waiters.discard(event)
                        if not waiters:
                            del self._waiters[n]
        return woken, current

    def answer_all(self, stopping: bool = False) -> None:
        with self._lock:
            self._answered += 1
            self._stopping = self._stopping or stopping
        self._notify(None)

    def _notify(self, ids: Iterable[int] | None) -> None:
        with self._lock:
            if ids is None:
                events = {e for waiters in self._waiters.values() for e in waiters}
            else:
                events = {e for n in ids for e in self._waiters.get(n, ())}
        for event in events:
            event.set()

    def _ensure_listener(self) -> None:
        if self._redis() is None:
            return
        with self._lock:
            if self._listener is not None and self._listener.is_alive():
                return
            import threading

            self._listener = threading.Thread(target=self._listen, name="qm-agent-wake", daemon=True)
            self._listener.start()

    def _listen(self) -> None:
        import time

        import redis

        while True:
            try:
                client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1.0, socket_timeout=5.0,
                                              health_check_interval=10, client_name=listener_name())
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(wake_channel())
                # Whatever was published while we were not subscribed: let every waiter re-check.
                self._notify(None)
                while True:
                    asked = time.monotonic()
                    message = pubsub.get_message(timeout=1.0)
                    if message is None:
                        if time.monotonic() - asked < 0.5:
                            time.sleep(0.5)  # never spin should the connection stop blocking
                        continue
                    data = message.get("data")
                    if isinstance(data, bytes):
                        data = data.decode()
                    self._notify(int(n) for n in str(data).split(",") if n.strip().isdigit())
            except Exception as error:  # noqa: BLE001 - Redis restarting: waiters time out, agents heartbeat
                log.warning("agent wake-up listener lost Redis; retrying", error=str(error))
                self._notify(None)
                time.sleep(1.0)


_wake_hub: _WakeHub | None = None


def _hub() -> _WakeHub:
    global _wake_hub
    if _wake_hub is None:
        _wake_hub = _WakeHub()
    return _wake_hub
