"""The embedded default: the scheduling loop on a thread of the web process.

Used by `make demo` (SQLite, no Redis). Production runs the same cycle in Celery workers
(controlplane/tasks.py); both call services.cycle.run_cycle, so there is one loop, hosted two ways.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable

import structlog
from django.conf import settings
from django.db import close_old_connections, connection

from controlplane import triggers
from controlplane.services.cycle import release_lease, run_cycle

log = structlog.get_logger(__name__)


def sqlite_concurrency(sender: object, connection: object, **kwargs: object) -> None:
    """SQLite in WAL mode lets the loop thread write while requests read."""
    if getattr(connection, "vendor", "") == "sqlite":
        with connection.cursor() as cursor:  # type: ignore[attr-defined]
            cursor.execute("PRAGMA journal_mode=WAL;")
            cursor.execute("PRAGMA synchronous=NORMAL;")


class EmbeddedLoop(threading.Thread):
    """Runs `steps` every `interval_s` until stopped; a crashing step is logged, not fatal.
    With `wake`, a request (the event set) runs them sooner, but never less than `min_gap_s`
    after the previous round began: requests in that gap share the next round, as the Celery
    path's debounce makes them share one cycle. `at_stop` runs once after the last round."""

    def __init__(self, name: str, interval_s: float, steps: list[Callable[[], object]],
                 wake: threading.Event | None = None, min_gap_s: float = 0.0,
                 at_stop: Callable[[], object] | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.interval_s = interval_s
        self.min_gap_s = min_gap_s
        self.steps = steps
        self.at_stop = at_stop
        self._stop_event = threading.Event()
        # Set by others to run the steps now rather than at the end of the interval.
        self._wake = wake
        self._round_began = 0.0

    def stop(self) -> None:
        self._stop_event.set()
        if self._wake is not None:
            self._wake.set()

    def _pause(self) -> None:
        if self._wake is None:
            self._stop_event.wait(self.interval_s)
            return
        gap = self.min_gap_s - (time.monotonic() - self._round_began)
        if gap > 0:
            self._stop_event.wait(gap)
        self._wake.wait(max(0.0, self.interval_s - max(gap, 0.0)))
        self._wake.clear()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self._round_began = time.monotonic()
            for step in self.steps:
                try:
                    step()
                except Exception:  # noqa: BLE001 - one bad step must not end the loop
                    log.exception("embedded loop step failed", loop=self.name, step=getattr(step, "__name__", "?"))
                finally:
                    close_old_connections()
            self._pause()
        if self.at_stop is not None:
            try:
                self.at_stop()
            except Exception:  # noqa: BLE001 - stopping goes on; what it could not do is logged
                log.exception("embedded loop's last step failed", loop=self.name)
        connection.close()


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def scheduling_loop() -> EmbeddedLoop:
    """The cycle every CYCLE_INTERVAL_S, and sooner when something asks for one
    (`triggers.request_cycle`: a submit, a job's end, a node back), at most one every
    CYCLE_DEBOUNCE_S. Stopped, it gives up the lead (`release_lease`), as a Celery worker does:
    a demo started again leads at its first cycle, not after up to LEADER_LEASE_S (15 s) of
    "not the leader" as until 7 Dec."""
    holder = holder_name()
    steps: list[Callable[[], object]] = [lambda: run_cycle(holder)]
    return EmbeddedLoop("scheduling-loop", float(settings.QM["CYCLE_INTERVAL_S"]), steps,
                        wake=triggers.cycle_requested, min_gap_s=float(settings.QM.get("CYCLE_DEBOUNCE_S", 0.5)),
                        at_stop=lambda: release_lease(holder))


def notification_loop() -> EmbeddedLoop:
    """The webhook sender on a thread of its own (a slow receiver never delays the cycle),
    woken when a commit queues deliveries (triggers.request_notifications), else every
    NOTIFY_INTERVAL_S for the retries."""
    from controlplane.services import notifications

    return EmbeddedLoop("notifications", float(settings.QM.get("NOTIFY_INTERVAL_S", 10)),
                        [notifications.deliver_due], wake=triggers.notifications_requested)
