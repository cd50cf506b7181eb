"""API load benchmark: gunicorn + PostgreSQL on this machine.

Measures, against a real gunicorn serving the real application:
1. single-job submits per second and p50/p99 latency with 4 concurrent clients (separate
   processes, one user and token each, keep-alive connections);
2. a 1,000-task job array: server time (inside the application, from the view's Server-Timing
   header) and the client's round trip;
3. list latency with 100,000 jobs in the database (a member's team list and an admin's
   filtered list), p50/p99 over repeated requests.

Each submit measurement runs for every gunicorn shape (--servers) under every PostgreSQL
durability setting (--durability: `durable` = PostgreSQL's defaults, `async-commit` = commits
do not wait for their WAL flush, `as-started`), side by side in one run, and reports the CPU
each submit cost gunicorn, PostgreSQL, Redis and the load clients (read from /proc), and the
ratio to Slurm's 346 submits/s. The array and the lists run on the best shape of the last
setting.

Run it with throwaway servers:  scripts/test-services.sh .venv/bin/python bench/api_load.py
(it needs DATABASE_URL pointing at PostgreSQL and migrates that database, and changes that
server's durability settings with ALTER SYSTEM). Figures go to stdout as a table and, with
--json, as JSON. On a shared machine, wrap it: flock /tmp/qm-bench.lock ...
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# ------------------------------------------------------------------------------- fixtures


def prepare_database(clients: int) -> dict[str, Any]:
    """Migrate and build a fleet like the demo's: 12 × 8 H100-80GB, 4 × 8 A100-40GB."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from controlplane.choices import Role
    from controlplane.models import Cohort, GpuType, Job, Membership, Node, PriorityClass, Team
    from controlplane.services import api_tokens

    Job.objects.all().delete()
    h100, _ = GpuType.objects.get_or_create(name="H100-80GB", defaults={"memory_gb": 80})
    a100, _ = GpuType.objects.get_or_create(name="A100-40GB", defaults={"memory_gb": 40})
    for i in range(12):
        Node.objects.get_or_create(name=f"bench-h100-{i}", defaults=dict(
            pool="h100", gpu_type=h100, gpu_count=8, cpus=96, memory_gb=1024, leaf_switch=f"leaf-{i // 4}",
            spine="spine-1"))
    for i in range(4):
        Node.objects.get_or_create(name=f"bench-a100-{i}", defaults=dict(
            pool="a100", gpu_type=a100, gpu_count=8, cpus=64, memory_gb=512, leaf_switch="leaf-a", spine="spine-2"))
    research, _ = PriorityClass.objects.get_or_create(name="research", defaults={"value": 100})
    cohort, _ = Cohort.objects.get_or_create(name="bench")
    users = get_user_model()
    tokens = []
    teams = []
    for i in range(clients):
        team, _ = Team.objects.get_or_create(name=f"bench-team-{i}", defaults={"cohort": cohort,
                                                                             "default_priority_class": research})
        teams.append(team)
        user, created = users.objects.get_or_create(username=f"bench-user-{i}")
        if created:
            Membership.objects.create(user=user, team=team, role=Role.MEMBER)
        tokens.append(api_tokens.issue(user))
    admin, created = users.objects.get_or_create(username="bench-admin")
    if created:
        Membership.objects.create(user=admin, team=None, role=Role.ADMIN)
    return {"tokens": tokens, "admin_token": api_tokens.issue(admin),
            "team_ids": [t.pk for t in teams], "class_id": research.pk}


def fill_jobs(count: int, team_ids: list[int], class_id: int) -> float:
    """`count` finished and waiting jobs spread over the teams, written in bulk; returns seconds."""
    from datetime import timedelta

    from django.utils import timezone

    from controlplane.models import Job

    started = time.perf_counter()
    now = timezone.now()
    batch = []
    states = ["succeeded", "succeeded", "failed", "pending", "running", "cancelled"]
    for i in range(count):
        at = now - timedelta(seconds=count - i)
        batch.append(Job(team_id=team_ids[i % len(team_ids)], priority_class_id=class_id, name=f"filler-{i}",
                         gpus=1 + i % 8, runtime_limit_s=3600, state=states[i % len(states)], submitted_at=at,
                         state_changed_at=at, pending_code="QuotaExceeded" if i % 6 == 3 else ""))
        if len(batch) == 5000:
            Job.objects.bulk_create(batch)
            batch = []
    if batch:
        Job.objects.bulk_create(batch)
    return time.perf_counter() - started


# --------------------------------------------------------------------------------- server


def start_gunicorn(port: int, workers: int, threads: int, worker_class: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, QM_USER_THROTTLE="100000000/hour", QM_LOG_LEVEL=os.environ.get("QM_LOG_LEVEL", "WARNING"),
               QM_IN_PROCESS_LOOP="0", DEBUG="0")
    cmd = [str(Path(sys.executable).parent / "gunicorn"), "controlplane.wsgi:application", "-b", f"127.0.0.1:{port}",
           "--workers", str(workers), "--worker-class", worker_class, "--threads", str(threads), "--keep-alive", "30",
           "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("gunicorn did not answer /healthz within 30 s")


# ------------------------------------------------------------------------------ CPU cost


def _children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry))
    return found


def _cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def server_pids(gunicorn: subprocess.Popen[bytes]) -> dict[str, list[int]]:
    """gunicorn's master and workers, and the PostgreSQL server's processes (its postmaster
    from the data directory test-services.sh started, when known)."""
    pids = {"gunicorn": [gunicorn.pid, *_children(gunicorn.pid)], "postgresql": [], "redis": []}
    data = os.environ.get("QM_TEST_PG_DATA")
    if data and Path(data, "postmaster.pid").exists():
        postmaster = int(Path(data, "postmaster.pid").read_text().split()[0])
        pids["postgresql"] = [postmaster, *_children(postmaster)]
    services = os.environ.get("QM_TEST_SERVICES_DIR")
    if services and Path(services, "redis.pid").exists():  # the throttle's counters
        pids["redis"] = [int(Path(services, "redis.pid").read_text().split()[0])]
    return pids


# -------------------------------------------------------------------------------- clients


def _request(conn: http.client.HTTPConnection, method: str, path: str, token: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, bytes, http.client.HTTPResponse]:
    payload = json.dumps(body).encode() if body is not None else None
    all_headers = {"Authorization": f"Token {token}", "Accept": "application/json", **(headers or {})}
    if payload is not None:
        all_headers["Content-Type"] = "application/json"
    conn.request(method, path, body=payload, headers=all_headers)
    response = conn.getresponse()
    data = response.read()
    return response.status, data, response


class _LeanConnection:
    """A keep-alive HTTP/1.1 client on a bare socket: the request bytes are built by hand and
    the reply is read by its Content-Length, so the load generator, which shares the machine's
    two CPUs with the server, spends as little of them as it can (http.client parses every
    reply's headers with the email package)."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.head = (f"Host: 127.0.0.1:{port}\r\nAuthorization: Token {token}\r\nAccept: application/json\r\n"
                     "Content-Type: application/json\r\n").encode()
        self._connect()

    def _connect(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        self.sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\n" + self.head
                          + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        close = False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True  # gunicorn's sync workers answer one request per connection
        while len(rest) < length:
            self.buffer = rest
            self._fill()
            rest = self.buffer
        self.buffer = rest[length:]
        if close:
            self.sock.close()
            self._connect()
        return status, rest[:length]

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()


def submit_client(port: int, token: str, seconds: float, start_at: float, out: Any) -> None:
    conn = _LeanConnection(port, token)
    latencies: list[float] = []
    errors = 0
    while time.time() < start_at:
        time.sleep(0.001)
    cpu_before = time.process_time()
    end = start_at + seconds
    n = 0
    pid = os.getpid()
    while time.time() < end:
        n += 1
        body = b'{"name": "load-%d-%d", "gpus": %d, "command": "python train.py"}' % (pid, n, 1 + n % 8)
        t0 = time.perf_counter()
        try:
            status, _ = conn.post("/api/v1/jobs/", body)
        except OSError:
            conn.close()
            conn = _LeanConnection(port, token)
            errors += 1
            continue
        latencies.append(time.perf_counter() - t0)
        if status != 201:
            errors += 1
    out.put((latencies, errors, time.process_time() - cpu_before))


def run_submits(port: int, tokens: list[str], seconds: float) -> dict[str, float]:
    queue: Any = mp.Queue()
    start_at = time.time() + 1.0
    procs = [mp.Process(target=submit_client, args=(port, t, seconds, start_at, queue)) for t in tokens]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    latencies = [lat for lats, _, _ in results for lat in lats]
    errors = sum(e for _, e, _ in results)
    client_cpu = sum(c for _, _, c in results)
    return {
        "clients": len(tokens), "seconds": seconds, "submits": len(latencies), "errors": errors,
        "submits_per_s": len(latencies) / seconds,
        "p50_ms": _percentile(latencies, 0.50) * 1000, "p99_ms": _percentile(latencies, 0.99) * 1000,
        "client_cpu_ms_per_submit": client_cpu * 1000 / max(1, len(latencies)),
    }


def warm_workers(port: int, tokens: list[str], connections: int) -> None:
    """Open many short connections so that every gunicorn worker (whichever accepts) has
    loaded the URL configuration and the views and opened its database connection before
    anything is measured."""
    for i in range(connections):
        conn = _LeanConnection(port, tokens[i % len(tokens)])
        for _ in range(3):
            conn.post("/api/v1/jobs/", b'{"name": "warm", "gpus": 1}')
        conn.close()


def run_array(port: int, token: str, repeats: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    server_ms: list[float] = []
    round_trip_ms: list[float] = []
    for i in range(repeats):
        body = {"name": f"sweep-{i}", "gpus": 1, "array": "0-999", "command": "python sweep.py"}
        t0 = time.perf_counter()
        status, _, response = _request(conn, "POST", "/api/v1/job-arrays/", token, body)
        round_trip_ms.append((time.perf_counter() - t0) * 1000)
        if status != 201:
            raise RuntimeError(f"array submit answered {status}")
        timing = response.getheader("Server-Timing", "")
        server_ms.append(float(timing.split("dur=")[1].split(",")[0]) if "dur=" in timing else float("nan"))
    return {"tasks": 1000, "repeats": repeats, "server_ms_p50": statistics.median(server_ms),
            "server_ms_max": max(server_ms), "round_trip_ms_p50": statistics.median(round_trip_ms)}


def run_lists(port: int, token: str, admin_token: str, repeats: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out: dict[str, float] = {}
    for label, tok, path in (
        ("member_team_list", token, "/api/v1/jobs/"),
        ("admin_pending_filtered", admin_token, "/api/v1/jobs/?state=pending&team=bench-team-1"),
        ("admin_all_offset_5000", admin_token, "/api/v1/jobs/?offset=5000&limit=50"),
    ):
        lat = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            status, _, _ = _request(conn, "GET", path, tok)
            lat.append((time.perf_counter() - t0) * 1000)
            if status != 200:
                raise RuntimeError(f"{path} answered {status}")
        out[f"{label}_p50_ms"] = _percentile(lat, 0.5)
        out[f"{label}_p99_ms"] = _percentile(lat, 0.99)
    return out


SLURM_SUBMITS_PER_S = 346.0  # Slurm 22.05, 4 clients, this 2-CPU machine (issue 5)
_DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
_MODES = {
    # PostgreSQL's defaults: a 201 means the job is on disk.
    "durable": _DURABLE,
    # Crash-safe (fsync and full-page writes on), but a commit does not wait for its WAL flush:
    # after a crash of the database server the last few hundred milliseconds of acknowledged
    # submits (at most 3 × wal_writer_delay) can be lost; nothing is ever corrupted.
    "async-commit": {**_DURABLE, "synchronous_commit": "off"},
}


def postgres_durability(mode: str) -> dict[str, str]:
    """Set PostgreSQL's durability for the submit phase: `durable`, `async-commit` (see
    _MODES), or `as-started`: whatever the server was started with (scripts/test-services.sh
    turns fsync, synchronous_commit and full_page_writes off for the test suite's speed: not a
    production setting). Returns the settings in force."""
    from django.db import connection

    with connection.cursor() as cursor:
        if mode in _MODES:
            for name, value in _MODES[mode].items():
                cursor.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            cursor.execute("SELECT pg_reload_conf()")
            time.sleep(0.5)
        settings = {"mode": mode}
        for name in _DURABLE:
            cursor.execute(f"SHOW {name}")
            settings[name] = cursor.fetchone()[0]
    connection.close()  # new sessions see the reloaded settings
    return settings


def parse_shape(shape: str, worker_class: str) -> tuple[str, int, int]:
    """`3x1` (the default worker class, 3 workers × 1 thread) or `sync:3`."""
    if ":" in shape:
        worker_class, shape = shape.split(":", 1)
    workers, _, threads = shape.partition("x")
    return worker_class, int(workers), int(threads or 1)


def measure_submits(setup: dict[str, Any], shape: str, worker_class: str, seconds: float) -> dict[str, Any]:
    worker_class, workers, threads = parse_shape(shape, worker_class)
    port = _free_port()
    server = start_gunicorn(port, workers, threads, worker_class)
    try:
        warm_workers(port, setup["tokens"], 8 * workers)
        run_submits(port, setup["tokens"], 1.0)
        pids = server_pids(server)
        cpu_before = {k: _cpu_seconds(v) for k, v in pids.items()}
        load_before = os.getloadavg()[0]
        submits: dict[str, Any] = run_submits(port, setup["tokens"], seconds)
        for name, before in cpu_before.items():
            spent = _cpu_seconds(pids[name]) - before
            submits[f"{name}_cpu_ms_per_submit"] = spent * 1000 / max(1, submits["submits"])
        server_cpu = sum(submits[f"{name}_cpu_ms_per_submit"] for name in pids)
        # What the server side could sustain with the machine's CPUs to itself.
        submits["capacity_per_s_on_idle_cpus"] = (os.cpu_count() or 1) * 1000 / server_cpu if server_cpu else 0.0
        submits["ratio_to_slurm"] = submits["submits_per_s"] / SLURM_SUBMITS_PER_S
        submits["load_average"] = [load_before, os.getloadavg()[0]]
        submits["server"] = f"gunicorn {worker_class} {workers}×{threads}"
        submits.update(worker_class=worker_class, workers=workers, threads=threads)
        return submits
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each submit measurement")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--servers", default="2x1,4x1",
                        help="gunicorn shapes WORKERSxTHREADS (or CLASS:WORKERSxTHREADS, e.g. sync:3), each measured "
                             "in this run, side by side")
    parser.add_argument("--worker-class", default="gthread", choices=["gthread", "sync"])
    parser.add_argument("--durability", default="durable,async-commit",
                        help="comma-separated PostgreSQL settings for the submit phase, each measured: durable, "
                             "async-commit, as-started (see postgres_durability)")
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs in the database for the list phase")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if "postgres" not in os.environ.get("DATABASE_URL", ""):
        print("DATABASE_URL must point at PostgreSQL: scripts/test-services.sh .venv/bin/python bench/api_load.py",
              file=sys.stderr)
        return 2

    setup = prepare_database(args.clients)
    shapes = args.servers.split(",")
    modes = args.durability.split(",")
    unknown = [m for m in modes if m not in (*_MODES, "as-started")]
    if unknown:
        parser.error(f"unknown durability {', '.join(unknown)}")
    runs = []
    for mode in modes:
        settings = postgres_durability(mode)
        for shape in shapes:
            run = measure_submits(setup, shape, args.worker_class, args.seconds)
            run["postgresql"] = settings
            runs.append(run)
    # The array and the lists on the last durability mode and the best shape of that mode.
    best = max((r for r in runs if r["postgresql"] == runs[-1]["postgresql"]), key=lambda r: r["submits_per_s"])
    port = _free_port()
    server = start_gunicorn(port, best["workers"], best["threads"], best["worker_class"])
    try:
        warm_workers(port, setup["tokens"], 8 * best["workers"])
        run_array(port, setup["tokens"][0], 3)  # warm the array path too
        array = run_array(port, setup["tokens"][0], 10)
        array["postgresql"] = runs[-1]["postgresql"]
        from django.db import connection

        from controlplane.models import Event, Job

        # The lists read exactly `--jobs` jobs of a fixed mix (fill_jobs), whatever the submit
        # phases above left behind (their number depends on the machine's speed).
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {Event._meta.db_table}, {Job._meta.db_table} CASCADE")
        fill_s = fill_jobs(args.jobs, setup["team_ids"], setup["class_id"])
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Job._meta.db_table}")
        lists: dict[str, Any] = run_lists(port, setup["tokens"][1], setup["admin_token"], 200)
        lists["jobs_in_database"] = Job.objects.count()
        lists["fill_seconds"] = fill_s
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    figures = {"config": {"servers": shapes, "worker_class": args.worker_class, "cpus": os.cpu_count(),
                          "load_average_end": os.getloadavg()[0], "slurm_submits_per_s": SLURM_SUBMITS_PER_S},
               "submits": runs, "array": array, "lists": lists}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{os.cpu_count()} CPUs; single-job submits, {args.clients} concurrent clients, {args.seconds:.0f} s each "
          f"(Slurm 22.05: {SLURM_SUBMITS_PER_S:.0f}/s)")
    for r in runs:
        pg = r["postgresql"]
        durable = f"{pg['mode']} (fsync {pg['fsync']}, sync commit {pg['synchronous_commit']})"
        print(f"  {r['server']:<22} PostgreSQL {durable:<44} {r['submits_per_s']:6.0f}/s = "
              f"{r['ratio_to_slurm']:.2f}× Slurm  p50 {r['p50_ms']:5.1f} ms  p99 {r['p99_ms']:5.1f} ms  "
              f"{r['errors']} errors | CPU ms/submit: gunicorn {r['gunicorn_cpu_ms_per_submit']:.2f}, PostgreSQL "
              f"{r['postgresql_cpu_ms_per_submit']:.2f}, Redis {r['redis_cpu_ms_per_submit']:.2f}, client "
              f"{r['client_cpu_ms_per_submit']:.2f} "
              f"(server capacity on 2 idle CPUs ≈ {r['capacity_per_s_on_idle_cpus']:.0f}/s) | load "
              f"{r['load_average'][0]:.1f}→{r['load_average'][1]:.1f}")
    print(f"1,000-task array ({best['server']}): server {array['server_ms_p50']:.1f} ms p50 (max "
          f"{array['server_ms_max']:.1f}), round trip {array['round_trip_ms_p50']:.1f} ms")
    print(f"lists with {lists['jobs_in_database']:,} jobs: " + ", ".join(
        f"{k} {v:.1f} ms" for k, v in lists.items() if k.endswith("_ms")))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
