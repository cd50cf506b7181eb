"""Found by the docs audit: a process started with QM_PLACEMENT_POLICY=binpack came up fine,
then every scheduling cycle failed and the priority listing answered 500; a lease written as
`20s` stopped the start with Python's "could not convert string to float: '20s'", naming no
variable. Each case starts a real process with that environment, as manage.py, gunicorn or
Celery would, and must refuse at once, naming the variable and what it takes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import django; django.setup(); from django.conf import settings; "
         "print('QM', settings.QM['CYCLE_DEBOUNCE_S'], settings.QM['AGENT_LEASE_S'], "
         "settings.QM['PLACEMENT_POLICY'], settings.QM['AGENT_MAX_WAITS'])")


def _start(**values: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QM_") and k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="controlplane.settings", QM_LOG_FORMAT="console",
               DATABASE_URL="sqlite:////tmp/qm-settings-refused.sqlite3", **values)
    return subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("QM_AGENT_LEASE_S", "20s", "QM_AGENT_LEASE_S must be a number > 0, got '20s'"),
    ("QM_AGENT_LEASE_S", "0", "QM_AGENT_LEASE_S must be a number > 0, got '0'"),
    ("QM_SUSPECT_AFTER_S", "-8", "QM_SUSPECT_AFTER_S must be a number > 0, got '-8'"),
    ("QM_LEADER_LEASE_S", "nan", "QM_LEADER_LEASE_S must be a number > 0, got 'nan'"),
    ("QM_BROKER_RETRY_S", "0", "QM_BROKER_RETRY_S must be a number > 0, got '0'"),
    ("QM_CYCLE_DEBOUNCE_S", "-1", "QM_CYCLE_DEBOUNCE_S must be a number >= 0, got '-1'"),
    ("QM_MAX_PLACEMENTS_PER_CYCLE", "0", "QM_MAX_PLACEMENTS_PER_CYCLE must be a whole number >= 1, got '0'"),
    ("QM_WEBHOOK_MAX_ATTEMPTS", "2.5", "QM_WEBHOOK_MAX_ATTEMPTS must be a whole number >= 1, got '2.5'"),
    ("QM_AGENT_MAX_WAITS", "-1", "QM_AGENT_MAX_WAITS must be a whole number >= 0, got '-1'"),
    ("QM_TRUSTED_PROXIES", "-1", "QM_TRUSTED_PROXIES must be a whole number >= 0, got '-1'"),
    ("QM_PLACEMENT_POLICY", "binpack",
     "The scheduler refuses its settings: placement_by_workload[training]: unknown plugin 'binpack'; "
     "known: pack, spread."),
    ("QM_FAIR_SHARE_HALF_LIFE_S", "inf", ""),  # a number > 0: the engine takes it (no decay)
    # Until 5 Dec these started fine, and then every API request answered 500 (the throttle read it)
    ("QM_USER_THROTTLE", "abc", "QM_USER_THROTTLE must be REQUESTS/PERIOD (a whole number >= 1, per s, m, h or d: "
     "100000/hour, 50/minute), got 'abc'"),
    ("QM_USER_THROTTLE", "1000", "QM_USER_THROTTLE must be REQUESTS/PERIOD"),
    ("QM_USER_THROTTLE", "0/hour", "QM_USER_THROTTLE must be REQUESTS/PERIOD"),
    ("QM_USER_THROTTLE", "100/week", "QM_USER_THROTTLE must be REQUESTS/PERIOD"),
    ("QM_USER_THROTTLE", "50/min", ""),
    ("QM_SIGN_IN_FAILURES_PER_USERNAME", "many", "QM_SIGN_IN_FAILURES_PER_USERNAME must be REQUESTS/PERIOD"),
    ("QM_SIGN_IN_FAILURES_PER_USERNAME", "5/minute", ""),
])
def test_a_malformed_setting_refuses_to_start_naming_the_variable(variable: str, value: str, says: str) -> None:
    done = _start(**{variable: value})
    if not says:
        assert done.returncode == 0, done.stderr[-2000:]
        return
    assert done.returncode != 0, done.stdout
    assert f"ImproperlyConfigured: {says}" in done.stderr, done.stderr[-2000:]
    assert "could not convert" not in done.stderr
    assert "QM " not in done.stdout


def test_settings_within_bounds_start_as_given() -> None:
    done = _start(QM_CYCLE_DEBOUNCE_S="0", QM_AGENT_LEASE_S="30", QM_PLACEMENT_POLICY="spread",
                  QM_AGENT_MAX_WAITS="0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "QM 0.0 30.0 spread 0" in done.stdout
