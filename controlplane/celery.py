"""The Celery application: Redis is the broker, never the source of truth."""

from __future__ import annotations

import logging
import logging.config
import os
from typing import Any

import structlog
from celery import Celery
from celery.signals import beat_init, celeryd_init, setup_logging, worker_ready, worker_shutting_down

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("controlplane", include=["controlplane.tasks_accounting", "frontend.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["controlplane"])

log = structlog.get_logger(__name__)


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


@worker_ready.connect
def _say_what_this_worker_serves(sender: Any = None, **kwargs: Any) -> None:
    """The facts of Celery's start banner as one log line. The banner itself is text on standard
    output, outside the logs; `celery -A controlplane --quiet worker` (as docker-compose starts
    the workers) drops it."""
    controller, worker_app = sender.controller, sender.app
    pool = controller.pool_cls if isinstance(controller.pool_cls, str) else controller.pool_cls.__module__
    pool = pool.rsplit(".", 1)[-1]
    # the solo pool runs one task at a time whatever -c says (its default: the CPUs)
    log.info("worker started", worker=sender.hostname, broker=worker_app.connection().as_uri(),
             pool=pool, concurrency=1 if pool == "solo" else controller.concurrency,
             queues=sorted(worker_app.amqp.queues.consume_from))
    _shutdown_said_in_the_log(controller)


def _shutdown_said_in_the_log(controller: Any) -> None:
    """Celery's SIGTERM and SIGQUIT handlers also print "worker: Warm shutdown (MainProcess)"
    as text on standard output: they are installed again, the same handlers without that
    line (`verbose=False`), and :func:`_say_the_worker_stops` logs it instead. (Its Ctrl+C
    handler, for a person at a terminal, keeps its words.)"""
    from celery.apps import worker as celery_worker

    celery_worker.install_worker_term_handler(controller, verbose=False)
    celery_worker.install_worker_term_hard_handler(controller, verbose=False)


@worker_shutting_down.connect
def _say_the_worker_stops(sender: Any = None, sig: str = "", how: str = "", exitcode: int = 0,
                          **kwargs: Any) -> None:
    """The shutdown Celery used to print, as one log line: which signal, warm (running tasks
    finish) or cold (they are cut off), and the exit status."""
    log.info("worker shutting down", worker=sender, signal=sig, how=how.lower(), exitcode=exitcode)


@beat_init.connect
def _say_what_beat_runs(sender: Any = None, **kwargs: Any) -> None:
    """Beat's start banner as one log line (see above; `--quiet` drops the banner)."""
    scheduler = sender.scheduler
    log.info("beat started", broker=sender.app.connection().as_uri(),
             scheduler=f"{type(scheduler).__module__}.{type(scheduler).__qualname__}",
             entries=sorted(scheduler.schedule), max_interval_s=sender.max_interval)
