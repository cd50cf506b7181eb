"""Gunicorn's settings for the web service (`gunicorn -c python:controlplane.gunicorn_conf
controlplane.wsgi:application …`): its own lines, from the master and the workers (booting,
a worker that exits or fails to boot, the access log when one is asked for), written as every
other line of the process is, one JSON object per line on standard error (`QM_LOG_FORMAT`,
default `json`; `QM_LOG_LEVEL`, default `INFO`). Without it they are gunicorn's text
(`[2026-12-02 11:02:07 +0000] [613] [INFO] Booting worker with pid: 614`), which a log shipper
reading JSON drops. Command-line flags still set the rest (bind, workers, threads).

A worker told to stop (SIGTERM: a deploy, `docker stop`, the old workers of a reload's HUP)
answers its agents' held wake-up waits at once (`post_worker_init`)."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from controlplane.structured_logs import log_settings, logging_config

#: gunicorn.error is its operational log (not only errors); both propagate to the root handler.
#: A format or level no process can follow stops gunicorn here, naming the variable.
logconfig_dict = logging_config(
    *log_settings(os.environ),
    loggers={"gunicorn.error": {"level": "INFO", "propagate": True},
             "gunicorn.access": {"level": "INFO", "propagate": True}},
)


def post_worker_init(worker: Any) -> None:
    """On SIGTERM, as well as gunicorn's graceful stop, every agent wait the worker holds is
    answered (nothing woken: its agent waits again, on another worker), and any it is asked for
    meanwhile at once. Each would otherwise hold the worker's exit to its timeout (up to 30 s;
    `docker stop` kills at 10 s, cutting the worker's other requests short)."""
    stop_gracefully = worker.handle_exit

    def handle_exit(signum: int, frame: Any) -> None:
        stop_gracefully(signum, frame)
        # On a thread of its own: the handler runs inside the worker's loop, which must not wait on the hub's lock.
        from controlplane.services import agent_wakeups

        threading.Thread(target=agent_wakeups.stop_holding_waits, name="qm-stop-waits", daemon=True).start()

    signal.signal(signal.SIGTERM, handle_exit)
    signal.siginterrupt(signal.SIGTERM, False)  # as gunicorn sets it: requests' system calls go on
