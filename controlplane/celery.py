"""The Celery application: Redis is the broker, never the source of truth."""

from __future__ import annotations

import logging
import logging.config
import os
from typing import Any

from celery import Celery
from celery.signals import celeryd_init, setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("controlplane", include=["controlplane.tasks_accounting", "frontend.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["controlplane"])


@setup_logging.connect
def _structured_logs(loglevel: int | str | None = None, **kwargs: Any) -> None:
    """Workers and beat log as every other process does (settings.LOGGING: one JSON object per
    line, or key=value with QM_LOG_FORMAT=console), Celery's own lines included. A receiver here
    keeps Celery from replacing the root logger's handlers with its text format (which printed
    our events as Python dicts inside it). The level is QM_LOG_LEVEL when set, else Celery's
    `--loglevel` (its default: WARNING); `--logfile` is not used: logs go to standard error.
    Python warnings become log lines too."""
    from django.conf import settings

    config = {**settings.LOGGING, "root": dict(settings.LOGGING["root"])}
    if "QM_LOG_LEVEL" not in os.environ and loglevel:
        config["root"]["level"] = logging.getLevelName(loglevel) if isinstance(loglevel, int) else str(loglevel).upper()
    logging.config.dictConfig(config)
    logging.captureWarnings(True)


@celeryd_init.connect
def _structured_logs_from_the_start(options: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """A worker warns (running as root, say) before it sets up its logging: set it up first."""
    _structured_logs(loglevel=(options or {}).get("loglevel"))
