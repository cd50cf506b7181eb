"""Gunicorn's settings for the web service (`gunicorn -c python:controlplane.gunicorn_conf
controlplane.wsgi:application …`): its own lines, from the master and the workers (booting,
a worker that exits or fails to boot, the access log when one is asked for), written as every
other line of the process is, one JSON object per line on standard error (`QM_LOG_FORMAT`,
default `json`; `QM_LOG_LEVEL`, default `INFO`). Without it they are gunicorn's text
(`[2026-12-02 11:02:07 +0000] [613] [INFO] Booting worker with pid: 614`), which a log shipper
reading JSON drops. Command-line flags still set the rest (bind, workers, threads)."""

from __future__ import annotations

import os

from controlplane.structured_logs import log_settings, logging_config

#: gunicorn.error is its operational log (not only errors); both propagate to the root handler.
#: A format or level no process can follow stops gunicorn here, naming the variable.
logconfig_dict = logging_config(
    *log_settings(os.environ),
    loggers={"gunicorn.error": {"level": "INFO", "propagate": True},
             "gunicorn.access": {"level": "INFO", "propagate": True}},
)
