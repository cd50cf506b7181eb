"""`/metrics` with PostgreSQL unreachable answers as the API and `/healthz` do: a 503 in JSON
with a Retry-After, logged as one structured line. It answered Django's HTML 500 page ("Something
broke on our side") and logged a full traceback at every scrape (every 15 s for as long as the
outage lasts) — found on the deployment drill of docs/operations.md, 2 Dec. Prometheus marks
the target down either way (`up == 0`); the operator's log now says what happened in one line.

A real failure: a process whose DATABASE_URL points at a port nothing listens on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_metrics_with_the_database_unreachable_is_a_json_503_logged_in_one_line() -> None:
    script = """
import django, json; django.setup()
from django.test import Client
client = Client(raise_request_exception=False)
for what, headers in (("scraper", {"HTTP_AUTHORIZATION": "Bearer scrape-token"}),
                      ("admin token", {"HTTP_AUTHORIZATION": "Token 0123456789abcdef0123456789abcdef01234567"})):
    r = client.get("/metrics", **headers)
    print("RESULT", json.dumps([what, r.status_code, dict(r.headers), r.content.decode()]))
"""
    env = {**os.environ, "DATABASE_URL": "postgres://qm@127.0.0.1:1/quartermaster",
           "DJANGO_SETTINGS_MODULE": "controlplane.settings", "QM_LOG_FORMAT": "json", "QM_METRICS_TOKEN": "scrape-token",
           "SECRET_KEY": os.environ.get("SECRET_KEY") or "a-key-for-this-test-only-0123456789abcdef",
           "ALLOWED_HOSTS": "testserver"}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=90)
    results = [json.loads(line[len("RESULT "):]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 2, done.stderr[-3000:]
    for what, status, headers, body in results:
        assert status == 503, (what, status, body[:300])
        assert headers["Content-Type"].startswith("application/json"), (what, headers["Content-Type"])
        data = json.loads(body)
        assert data["code"] == "database_unavailable" and headers["Retry-After"] == str(data["retry_after"]), data
    logged = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    refused = [r for r in logged if r.get("event") == "api.database_unavailable" and r.get("path") == "/metrics"]
    assert len(refused) == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
