"""Two PostgreSQL connections racing: run one side on a thread, and know that the other really
waits on a lock (not merely runs slowly) before letting the first go on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connections


def in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Start `work` on a thread with its own connection; its result or exception lands in the
    dict (the test fails on an exception there), and the connection is closed at the end."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = work()
        except Exception as exc:  # noqa: BLE001 (reported to the test, which fails on it)
            out["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def blocked_on_a_lock(timeout: float = 20.0, *, at_least: int = 1) -> bool:
    """Whether `at_least` other connections are waiting on a row or advisory lock
    (pg_stat_activity), within `timeout`: the other side is then really blocked where the test
    means it, not merely slow. Asked inside a transaction too (the statistics are read afresh
    each time: PostgreSQL otherwise keeps a transaction's first reading of them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lock_waiters() >= at_least:
            return True
        time.sleep(0.02)
    return False


def lock_waiters() -> int:
    """How many other connections wait on a lock now."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
        return int(cursor.fetchone()[0])
