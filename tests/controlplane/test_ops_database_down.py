"""Found by an SRE: with PostgreSQL stopped, `/api/v1/nodes/` answered Django's HTML 500 page,
which `qm` and scripts cannot parse. The API now answers 503 in its JSON error shape with a
Retry-After, and logs the outage as one structured line.

Real failures only: a web process whose DATABASE_URL points at a port nothing listens on, and a
gunicorn serving from a throwaway PostgreSQL cluster of its own that the test stops and starts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLOSED_PORT_URL = "postgres://qm@127.0.0.1:1/quartermaster"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(database_url: str) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "QM_LOG_FORMAT": "json", "PYTHONUNBUFFERED": "1"}


def _assert_database_unavailable(status: int, headers: Any, body: bytes) -> dict[str, Any]:
    assert status == 503, body[:500]
    assert headers["Content-Type"].startswith("application/json"), (headers["Content-Type"], body[:300])
    data = json.loads(body)
    assert data["code"] == "database_unavailable" and "database unavailable" in data["detail"].lower(), data
    assert isinstance(data["retry_after"], int) and data["retry_after"] > 0
    assert headers["Retry-After"] == str(data["retry_after"])
    return data


REQUESTS = [
    # (what, method, path, headers)
    ("token list", "get", "/api/v1/nodes/", {"HTTP_AUTHORIZATION": "Token 0123456789abcdef0123456789abcdef01234567"}),
    ("session list", "get", "/api/v1/nodes/", {}),
    ("browser", "get", "/api/v1/jobs/", {"HTTP_ACCEPT": "text/html"}),
    ("submit", "post", "/api/v1/jobs/", {"HTTP_AUTHORIZATION": "Token 0123456789abcdef0123456789abcdef01234567"}),
    ("schema", "get", "/api/schema/", {}),
    ("showback csv", "get", "/api/v1/showback/", {"HTTP_ACCEPT": "text/csv"}),
]


def test_every_api_request_with_the_database_unreachable_is_a_json_503() -> None:
    script = f"""
import django, json; django.setup()
from django.test import Client
for what, method, path, headers in {REQUESTS!r}:
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "0123456789abcdefghijklmnopqrstuv"
    extra = dict(data="{{}}", content_type="application/json") if method == "post" else {{}}
    r = getattr(client, method)(path, **extra, **headers)
    print("RESULT", json.dumps([what, r.status_code, dict(r.headers), r.content.decode()]))
r = Client(raise_request_exception=False).get("/healthz")
print("RESULT", json.dumps(["healthz", r.status_code, dict(r.headers), r.content.decode()]))
"""
    done = subprocess.run([sys.executable, "-c", script], env=_env(CLOSED_PORT_URL), cwd=ROOT, capture_output=True,
                          text=True, timeout=90)
    results = [json.loads(line[len("RESULT "):]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == len(REQUESTS) + 1, done.stderr[-3000:]
    for what, status, headers, body in results[:-1]:
        try:
            _assert_database_unavailable(status, headers, body.encode())
        except AssertionError as error:
            raise AssertionError(f"{what}: {error}") from None
    healthz = results[-1]
    assert healthz[1] == 503 and json.loads(healthz[3])["status"] == "unavailable"
    # One structured line per refused request, with its path and the driver's reason (never the
    # whole traceback of an outage, once per request).
    logged = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    outages = [e for e in logged if e.get("event") == "api.database_unavailable"]
    assert {e["path"] for e in outages} == {path for _, _, path, _ in REQUESTS}, done.stderr[-3000:]
    assert all("Connection refused" in e["error"] and e["retry_after_s"] > 0 for e in outages)


# ------------------------------------------------------------------------ a real PostgreSQL stop


class Cluster:
    """A PostgreSQL cluster of this test's own, with the binaries scripts/test-services.sh found."""

    def __init__(self, work: Path) -> None:
        self.bin = os.environ["QM_TEST_PG_BIN"]
        self.user = os.environ.get("QM_TEST_PG_USER", "postgres")
        self.data = work / "pg"
        self.port = _free_port()
        self.url = f"postgres://qm@127.0.0.1:{self.port}/quartermaster"
        self.work = work

    def _run(self, *argv: str) -> None:
        command = [f"{self.bin}/{argv[0]}", *argv[1:]]
        if os.getuid() == 0:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def create(self) -> None:
        self.data.mkdir()
        if os.getuid() == 0:
            shutil.chown(self.work, self.user)
            shutil.chown(self.data, self.user)
        self._run("initdb", "-D", str(self.data), "-U", "qm", "--auth=trust", "-E", "UTF8")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = '{self.work}'\n"
                       "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
        self.start()
        subprocess.run([f"{self.bin}/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "qm", "quartermaster"],
                       check=True, capture_output=True, timeout=30)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.work / "pg.log"), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if not os.environ.get("QM_TEST_PG_BIN"):
        pytest.fail("run via `make test`: scripts/test-services.sh says where PostgreSQL's binaries are")
    work = Path(tempfile.mkdtemp(prefix="qm-ops-pg-"))
    os.chmod(work, 0o755)
    db = Cluster(work)
    try:
        db.create()
        yield db
    finally:
        subprocess.run(["runuser", "-u", db.user, "--", f"{db.bin}/pg_ctl", "-D", str(db.data), "-m", "immediate",
                        "stop"] if os.getuid() == 0 else [f"{db.bin}/pg_ctl", "-D", str(db.data), "-m", "immediate",
                                                           "stop"], capture_output=True, timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def _get(url: str, token: str) -> tuple[int, Any, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def test_the_api_answers_503_json_while_postgresql_is_stopped_and_recovers_after(cluster: Cluster) -> None:
    env = _env(cluster.url)
    setup = ("import django; django.setup(); from django.core.management import call_command; "
             "call_command('migrate', verbosity=0); from django.contrib.auth.models import User; "
             "from controlplane.services import api_tokens; "
             "u = User.objects.create_superuser('ops', password='ops'); print('TOKEN', api_tokens.issue(u))")
    done = subprocess.run([sys.executable, "-c", setup], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    token = next((line.split()[1] for line in done.stdout.splitlines() if line.startswith("TOKEN ")), None)
    assert token, done.stderr[-3000:]

    port = _free_port()
    log = (cluster.work / "web.log").open("w")
    web = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "controlplane.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "-k", "gthread", "--threads", "4"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/api/v1/nodes/"
    try:
        deadline = time.monotonic() + 90  # gunicorn's start on a loaded machine
        while True:
            try:
                status, _, body = _get(url, token)
                break
            except (ConnectionError, urllib.error.URLError):
                assert time.monotonic() < deadline and web.poll() is None, (cluster.work / "web.log").read_text()
                time.sleep(0.2)
        assert status == 200, body[:500]  # the web holds a live connection (CONN_MAX_AGE) to the cluster

        cluster.stop()
        for _ in range(2):  # the broken kept connection, then a fresh connect refused
            _assert_database_unavailable(*_get(url, token))

        cluster.start()
        status, _, body = _get(url, token)
        assert status == 200 and json.loads(body)["results"] == [], body[:500]
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        try:
            web.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()
        log.close()
    lines = [json.loads(line) for line in (cluster.work / "web.log").read_text().splitlines() if line.startswith("{")]
    assert any(e.get("event") == "api.database_unavailable" for e in lines)
