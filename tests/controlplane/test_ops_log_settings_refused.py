"""Found by the docs audit (5 Dec): docs/operations.md says `QM_LOG_FORMAT` is `json` or
`console` and `QM_LOG_LEVEL` defaults to `INFO`. A process started with `QM_LOG_FORMAT=JSON` (or
any other word) logged key=value text without a word, which a log shipper reading JSON drops; the
agent did the same, its `--log-format` choices not applied to the variable. `QM_LOG_LEVEL=debug`
(Python's level names are upper case) stopped every control-plane process with "ValueError:
Unable to configure root logger", naming no variable, and the agent with a KeyError traceback on
`QM_LOG_LEVEL=verbose`. Each case starts a real process with that environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import django; django.setup(); import structlog; "
         "structlog.get_logger('probe').debug('probe.debug'); structlog.get_logger('probe').warning('probe.warning')")


def _env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("QM_") and k not in {"DATABASE_URL", "REDIS_URL", "DEBUG"}}
    env.update(DJANGO_SETTINGS_MODULE="controlplane.settings",
               DATABASE_URL="sqlite:////tmp/qm-log-settings-refused.sqlite3", **values)
    return env


def _django(**values: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE], env=_env(**values), cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(("values", "says"), [
    ({"QM_LOG_FORMAT": "JSON"}, "QM_LOG_FORMAT must be json or console, got 'JSON'"),
    ({"QM_LOG_FORMAT": "text"}, "QM_LOG_FORMAT must be json or console, got 'text'"),
    ({"QM_LOG_LEVEL": "verbose"},
     "QM_LOG_LEVEL must be a log level (DEBUG, INFO, WARNING, ERROR or CRITICAL), got 'verbose'"),
])
def test_a_log_setting_the_process_cannot_follow_refuses_to_start_naming_the_variable(
        values: dict[str, str], says: str) -> None:
    done = _django(**values)
    assert done.returncode != 0, done.stderr[-2000:]
    assert f"ImproperlyConfigured: {says}" in done.stderr, done.stderr[-2000:]
    assert "Unable to configure root logger" not in done.stderr
    assert "probe.warning" not in done.stderr


def test_a_level_in_lower_case_is_the_level() -> None:
    done = _django(QM_LOG_FORMAT="json", QM_LOG_LEVEL="debug")
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line)["event"] for line in done.stderr.splitlines() if line.startswith("{")]
    assert "probe.debug" in events and "probe.warning" in events, done.stderr[-2000:]


def test_gunicorns_own_lines_refuse_the_same_settings() -> None:
    code = "import controlplane.gunicorn_conf"
    done = subprocess.run([sys.executable, "-c", code], env=_env(QM_LOG_FORMAT="JSON"), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "QM_LOG_FORMAT must be json or console, got 'JSON'" in done.stderr, done.stderr[-2000:]
    done = subprocess.run([sys.executable, "-c", code + "; print(controlplane.gunicorn_conf.logconfig_dict['root'])"],
                          env=_env(QM_LOG_LEVEL="warning"), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'level': 'WARNING'" in done.stdout


@pytest.mark.parametrize(("values", "says"), [
    ({"QM_LOG_FORMAT": "JSON"}, "QM_LOG_FORMAT"),
    ({"QM_LOG_LEVEL": "verbose"}, "QM_LOG_LEVEL"),
])
def test_the_agent_refuses_them_too_naming_the_variable(values: dict[str, str], says: str, tmp_path: Path) -> None:
    # `python -m` in this checkout: what `qm-agent` runs (pyproject's [project.scripts])
    done = subprocess.run([sys.executable, "-m", "controlplane.agent.main", "--simulate", "1",
                           "--state-dir", str(tmp_path)], env=_env(**values, PYTHONPATH=str(ROOT)),
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert says in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
