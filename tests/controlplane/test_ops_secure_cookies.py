"""Behind TLS the session and CSRF cookies are marked Secure, so a browser never sends a signed-in
session over plain HTTP (a link to http://, a proxy's redirect from port 80). Until 6 Dec they
never were: a deployment naming its https origins in CSRF_TRUSTED_ORIGINS still signed people in
with a cookie any http:// request to the host carried in clear.

QM_SECURE_COOKIES says it outright; unset, it follows CSRF_TRUSTED_ORIGINS (every origin https:
on), so the demo on http://127.0.0.1 keeps signing in. Each case starts a real process, as
gunicorn would, and reads the settings it came up with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from tests.controlplane import factories as f

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import django; django.setup(); from django.conf import settings; "
         "print('SECURE', settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE)")


def _settings_with(**values: str) -> str:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("QM_") and k not in {"DATABASE_URL", "REDIS_URL", "CSRF_TRUSTED_ORIGINS"}}
    env.update(DJANGO_SETTINGS_MODULE="controlplane.settings", QM_LOG_FORMAT="console",
               DATABASE_URL="sqlite:////tmp/qm-secure-cookies.sqlite3", **values)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(("values", "said"), [
    ({}, "SECURE False False"),  # the demo, on http://
    ({"CSRF_TRUSTED_ORIGINS": "https://qm.example.org"}, "SECURE True True"),
    ({"CSRF_TRUSTED_ORIGINS": "https://qm.example.org,http://qm.internal"}, "SECURE False False"),
    ({"CSRF_TRUSTED_ORIGINS": "https://qm.example.org", "QM_SECURE_COOKIES": "0"}, "SECURE False False"),
    ({"QM_SECURE_COOKIES": "1"}, "SECURE True True"),
])
def test_the_cookies_are_secure_behind_tls(values: dict[str, str], said: str) -> None:
    assert _settings_with(**values) == said


@pytest.mark.django_db
def test_a_sign_in_behind_tls_sets_its_session_cookie_secure(settings) -> None:
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    f.make_user("alice")

    answer = Client().post("/accounts/login/", {"username": "alice", "password": "alice"},
                           REMOTE_ADDR="192.0.2.77", secure=True)

    assert answer.status_code == 302
    assert answer.cookies["sessionid"]["secure"] and answer.cookies["sessionid"]["httponly"]
