"""Structured logs: every line is key=value (console) or JSON (production).

Code logs with `structlog.get_logger(__name__).bind(cycle=..., epoch=...)`; standard-library
loggers (Django, Celery) go through the same renderer so one format covers the whole process.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import structlog

_SHARED = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


FORMATS = ("json", "console")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class LogSettingRefused(ValueError):
    """QM_LOG_FORMAT or QM_LOG_LEVEL holds what no process can follow; the message names it."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name} {problem}")
        self.problem = problem


def log_format(raw: str, name: str = "QM_LOG_FORMAT") -> str:
    """`json` or `console`, as given; anything else refused: `JSON` or `text` would be logged
    as key=value text without a word, which a log shipper reading JSON drops."""
    if raw not in FORMATS:
        raise LogSettingRefused(name, f"must be json or console, got {raw!r}")
    return raw


def log_level(raw: str, name: str = "QM_LOG_LEVEL") -> str:
    """A level name in any case (`debug` is DEBUG); anything else refused, naming the variable
    (Python's logging says only "Unable to configure root logger")."""
    level = raw.strip().upper()
    if level not in LEVELS:
        raise LogSettingRefused(name, f"must be a log level ({', '.join(LEVELS[:-1])} or {LEVELS[-1]}), got {raw!r}")
    return level


def log_settings(environ: Mapping[str, str], default_format: str = "json") -> tuple[str, str]:
    """The process's log format and level from QM_LOG_FORMAT and QM_LOG_LEVEL (default INFO)."""
    return (log_format(environ.get("QM_LOG_FORMAT", default_format)),
            log_level(environ.get("QM_LOG_LEVEL", "INFO")))


def formatter(renderer: str = "json") -> logging.Formatter:
    final = (
        structlog.processors.JSONRenderer()
        if renderer == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    return structlog.stdlib.ProcessorFormatter(
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            final,
        ],
        foreign_pre_chain=_SHARED,
    )


def logging_config(renderer: str, level: str, loggers: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `logging.config.dictConfig` of every process: one handler on standard error, in
    `renderer`'s format ("json" or "console"), at `level` for the root logger. Django's settings
    use it, and so does the web's gunicorn (`controlplane/gunicorn_conf.py`) for its own lines."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"structured": {"()": "controlplane.structured_logs.formatter", "renderer": renderer}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured",
                                 "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": loggers or {},
    }


def configure() -> None:
    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
