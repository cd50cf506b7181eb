"""Asking the loop's workers for work soon, instead of at their next beat: a cycle after a
submit, a job's end or a node coming back (`request_cycle`), the webhook sender after a commit
that queued deliveries (`request_notifications`).

Called from `transaction.on_commit` by the services; the work itself is in controlplane/tasks.py,
which calls the services back, so a request is sent to the broker by the task's name and this
module imports neither. Redis is only a trigger here: a request lost with it waits for the next
beat. In a process that runs the loop itself (the embedded demo) a request sets an event the
loop's thread waits on (controlplane/embedded.py).
"""

from __future__ import annotations

import threading
import time

import structlog
from django.conf import settings

from controlplane.redis_client import shared_client

log = structlog.get_logger(__name__)

DEBOUNCE_KEY = "qm:cycle:debounce"
NOTIFY_DEBOUNCE_KEY = "qm:notify:debounce"

# Set when a cycle is requested in a process that runs the loop itself (the embedded demo): the
# loop's thread wakes on it instead of sleeping out its interval (embedded.scheduling_loop).
cycle_requested = threading.Event()
# The same for the embedded demo's notification sender (embedded.notification_loop).
notifications_requested = threading.Event()


def in_process() -> bool:
    """Whether this process runs the loop itself (a request is then an event, no round trip)."""
    return bool(settings.QM.get("IN_PROCESS_LOOP") or getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False))


def _send(task: str, **options: object) -> None:
    from controlplane.celery import app  # the Celery app loads late: submit must not import it at startup

    app.send_task(task, retry=False, **options)  # routed by CELERY_TASK_ROUTES, as apply_async is


def request_cycle() -> None:
    """Ask for a cycle soon; call it from `transaction.on_commit` after a submit, a job's end
    or a node coming back. Requests within CYCLE_DEBOUNCE_S of each other share one cycle."""
    if in_process():
        cycle_requested.set()
        return
    debounce = float(settings.QM.get("CYCLE_DEBOUNCE_S", 0.5))
    try:
        if not shared_client().set(DEBOUNCE_KEY, "1", nx=True, px=max(1, int(debounce * 1000))):
            return  # a cycle is already on its way for this window
        window_closes = time.time() + debounce
        _send("qm.cycle", kwargs={"requested_at": window_closes}, countdown=debounce,
              expires=debounce + float(settings.QM["CYCLE_INTERVAL_S"]) * 2)
    except Exception as error:  # noqa: BLE001 - Redis is only a trigger; the next tick covers it
        log.warning("cycle trigger not sent; the next tick will run it", error=str(error))


def request_notifications() -> None:
    """Wake the webhook sender soon; called on commit of a transaction that queued deliveries.
    Requests within half a second share one run, which starts once that window closes; a lost
    one waits for beat's next `qm.notify`."""
    if in_process():
        notifications_requested.set()
        return
    try:
        if not shared_client().set(NOTIFY_DEBOUNCE_KEY, "1", nx=True, px=500):
            return
        _send("qm.notify", countdown=0.5, expires=60)
    except Exception as error:  # noqa: BLE001 - Redis is only a trigger; beat's next run sends them
        log.warning("notification trigger not sent; the next scheduled run will send them", error=str(error))
