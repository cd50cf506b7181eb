"""A control plane in real processes for the loop benchmarks, on a database of its own.

    scripts/test-services.sh .venv/bin/python bench/<benchmark>.py

`test-services.sh` provides a throwaway PostgreSQL and Redis (DATABASE_URL, REDIS_URL). Each
benchmark creates its own database on that server, migrates it, seeds it in-process, and
starts what it needs: gunicorn (the API and the agent endpoints), Celery worker(s) and beat
(the loop, exactly as in production), and node agents.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# At least 24 characters: since 5f5450c the web refuses to start with a shorter one
# (QM_AGENT_BOOTSTRAP_TOKEN), and every benchmark that starts gunicorn stopped at "web server:
# not reached within 60 s".
BOOTSTRAP = "bench-bootstrap-secret-for-agents"


def prepare_database(name: str) -> str:
    """Create (or recreate) database `name` next to DATABASE_URL's, migrate it, point this
    process at it and set Django up. Returns its URL."""
    import psycopg

    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith("postgres"):
        raise SystemExit("run through scripts/test-services.sh: the benchmarks need PostgreSQL and Redis")
    parts = urlsplit(base)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, "", ""))
    os.environ["DATABASE_URL"] = url
    subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "-v0"], check=True, cwd=REPO,
                   env={**os.environ, "DATABASE_URL": url})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    return url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Plane:
    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        for old in [*workdir.glob("*.log"), *workdir.glob("beat-schedule*")]:
            old.unlink()  # a previous run's beat schedule would fire its "missed" tasks at start
        self.port = free_port()
        self.server = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "QM_AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP, "QM_LOG_LEVEL": "WARNING",
                    "QM_LOG_FORMAT": "json", "PYTHONPATH": str(REPO), **env}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.names: list[str] = []

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        with open(self.workdir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(argv, env=self.env, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.procs.append(proc)
        self.names.append(name)
        return proc

    def web(self, workers: int = 3, threads: int = 8) -> None:
        self.spawn("web", [str(BIN / "gunicorn"), "controlplane.wsgi:application", "-b", f"127.0.0.1:{self.port}",
                           "-w", str(workers), "-k", "gthread", "--threads", str(threads), "--backlog", "4096",
                           *(["--access-logfile", str(self.workdir / "access.log"), "--access-logformat",
                              "%(t)s %(m)s %(U)s %(s)s %(D)s"] if os.environ.get("QM_BENCH_ACCESS_LOG") else [])])

    def loop(self, workers: int = 1) -> None:
        """`workers` loop workers (queue qm.loop) and one worker for everything else (accounting)."""
        for i in range(workers):
            self.spawn(f"worker-{i}", [str(BIN / "celery"), "-A", "controlplane", "worker", "-P", "solo", "-Q", "qm.loop",
                                       "-n", f"bench{i}@%h", "--without-gossip", "--without-mingle", "-l", "WARNING"])
        self.spawn("worker-other", [str(BIN / "celery"), "-A", "controlplane", "worker", "-P", "solo", "-Q", "celery",
                                    "-n", "bench-other@%h", "--without-gossip", "--without-mingle", "-l", "WARNING"])
        self.spawn("beat", [str(BIN / "celery"), "-A", "controlplane", "beat", "-s", str(self.workdir / "beat-schedule"),
                            "--pidfile=", "-l", "WARNING"])

    def wait_web(self, timeout: float = 60.0) -> None:
        import requests

        wait_for(lambda: _ok(requests, self.server + "/healthz"), timeout, "web server")

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) each spawned process and its children have used so far
        (everything in its session), from /proc: where a benchmark's time went."""
        tick = os.sysconf("SC_CLK_TCK")
        by_session: dict[int, float] = {}
        rows: list[tuple[int, int, str, float]] = []  # pid, ppid, comm, cpu
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                head, tail = (entry / "stat").read_text().rsplit(")", 1)
            except (OSError, ValueError):
                continue
            fields = tail.split()
            used = (int(fields[11]) + int(fields[12])) / tick
            session = int(fields[3])  # after pid and (comm): state ppid pgrp session ...
            by_session[session] = by_session.get(session, 0.0) + used
            rows.append((int(entry.name), int(fields[1]), head.split("(", 1)[-1], used))
        out: dict[str, float] = {}
        for name, proc in zip(self.names, self.procs, strict=True):
            kind = name.rstrip("0123456789-") or name
            out[kind] = round(out.get(kind, 0.0) + by_session.get(proc.pid, 0.0), 2)
        # This run's throwaway servers (other developers' may run too), and this process (the
        # submit and the timeline's polling).
        postmaster = _our_postmaster(rows)
        out["postgres"] = round(sum(cpu for pid, ppid, comm, cpu in rows
                                    if postmaster is not None and postmaster in (pid, ppid)), 2)
        redis_port = urlsplit(os.environ.get("REDIS_URL", "")).port
        out["redis"] = round(sum(cpu for pid, _, comm, cpu in rows
                                 if comm == "redis-server" and redis_port and _cmdline_has(pid, f":{redis_port}")), 2)
        mine = os.times()
        out["bench"] = round(mine.user + mine.system, 2)
        return out

    def cpu_seconds_since(self, before: dict[str, float]) -> dict[str, float]:
        """What each process has used since `before` (an earlier cpu_seconds())."""
        return {k: round(v - before.get(k, 0.0), 2) for k, v in self.cpu_seconds().items()}

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for proc in self.procs:
            proc.wait()


def _ok(requests: object, url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not up yet
        return False


def wait_for(condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.05) -> float:
    """Wait until `condition()`; returns the seconds it took."""
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > timeout:
            raise SystemExit(f"{what}: not reached within {timeout:.0f} s")
        time.sleep(poll)
    return time.perf_counter() - started


def _cmdline_has(pid: int, text: str) -> bool:
    try:
        return text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _our_postmaster(rows: list[tuple[int, int, str, float]]) -> int | None:
    """The pid of the PostgreSQL server DATABASE_URL points at: its data directory's
    postmaster.pid names the port."""
    port = urlsplit(os.environ.get("DATABASE_URL", "")).port
    for pid, _, comm, _ in rows:
        if comm != "postgres":
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-D" not in argv:
            continue
        datadir = argv[argv.index(b"-D") + 1].decode()
        try:
            lines = (Path(datadir) / "postmaster.pid").read_text().splitlines()
        except OSError:
            continue
        if len(lines) > 3 and lines[0].strip() == str(pid) and lines[3].strip() == str(port):
            return pid
    return None


def machine() -> dict[str, object]:
    load1, load5, _ = os.getloadavg()
    return {"cpus": os.cpu_count(), "load_avg_1m_before": round(load1, 2), "load_avg_5m_before": round(load5, 2)}
