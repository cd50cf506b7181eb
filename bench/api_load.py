"""API load benchmark: gunicorn + PostgreSQL on this machine.

Measures, against a real gunicorn serving the real application:
1. single-job submits per second and p50/p99 latency with 4 concurrent clients (separate
   processes, one user and token each, keep-alive connections);
2. a 1,000-task job array: server time (inside the application, from the view's Server-Timing
   header) and the client's round trip;
3. list latency with 100,000 jobs in the database (a member's team list and an admin's
   filtered list), p50/p99 over repeated requests.

Run it with throwaway servers:  scripts/test-services.sh .venv/bin/python bench/api_load.py
(it needs DATABASE_URL pointing at PostgreSQL and migrates that database). Figures go to stdout
as a table and, with --json, as JSON.
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
    from rest_framework.authtoken.models import Token

    from controlplane.choices import Role
    from controlplane.models import Cohort, GpuType, Job, Membership, Node, PriorityClass, Team

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
        tokens.append(Token.objects.get_or_create(user=user)[0].key)
    admin, created = users.objects.get_or_create(username="bench-admin")
    if created:
        Membership.objects.create(user=admin, team=None, role=Role.ADMIN)
    return {"tokens": tokens, "admin_token": Token.objects.get_or_create(user=admin)[0].key,
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
    pids = {"gunicorn": [gunicorn.pid, *_children(gunicorn.pid)], "postgresql": []}
    data = os.environ.get("QM_TEST_PG_DATA")
    if data and Path(data, "postmaster.pid").exists():
        postmaster = int(Path(data, "postmaster.pid").read_text().split()[0])
        pids["postgresql"] = [postmaster, *_children(postmaster)]
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


def submit_client(port: int, token: str, seconds: float, start_at: float, out: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    latencies: list[float] = []
    errors = 0
    while time.time() < start_at:
        time.sleep(0.001)
    end = start_at + seconds
    n = 0
    while time.time() < end:
        n += 1
        body = {"name": f"load-{os.getpid()}-{n}", "gpus": 1 + n % 8, "command": "python train.py"}
        t0 = time.perf_counter()
        try:
            status, _, _ = _request(conn, "POST", "/api/v1/jobs/", token, body)
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            errors += 1
            continue
        latencies.append(time.perf_counter() - t0)
        if status != 201:
            errors += 1
    out.put((latencies, errors))


def run_submits(port: int, tokens: list[str], seconds: float) -> dict[str, float]:
    queue: Any = mp.Queue()
    start_at = time.time() + 1.0
    procs = [mp.Process(target=submit_client, args=(port, t, seconds, start_at, queue)) for t in tokens]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    latencies = [lat for lats, _ in results for lat in lats]
    errors = sum(e for _, e in results)
    return {
        "clients": len(tokens), "seconds": seconds, "submits": len(latencies), "errors": errors,
        "submits_per_s": len(latencies) / seconds,
        "p50_ms": _percentile(latencies, 0.50) * 1000, "p99_ms": _percentile(latencies, 0.99) * 1000,
    }


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="submit phase length")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=1, help="threads per gunicorn worker (gthread)")
    parser.add_argument("--worker-class", default="gthread", choices=["gthread", "sync"])
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs in the database for the list phase")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if "postgres" not in os.environ.get("DATABASE_URL", ""):
        print("DATABASE_URL must point at PostgreSQL: scripts/test-services.sh .venv/bin/python bench/api_load.py",
              file=sys.stderr)
        return 2

    setup = prepare_database(args.clients)
    port = _free_port()
    server = start_gunicorn(port, args.workers, args.threads, args.worker_class)
    try:
        # warm every worker's connections and caches
        run_submits(port, setup["tokens"], 2.0)
        pids = server_pids(server)
        cpu_before = {k: _cpu_seconds(v) for k, v in pids.items()}
        submits = run_submits(port, setup["tokens"], args.seconds)
        for name, before in cpu_before.items():
            spent = _cpu_seconds(pids[name]) - before
            submits[f"{name}_cpu_ms_per_submit"] = spent * 1000 / max(1, submits["submits"])
        server_cpu = submits["gunicorn_cpu_ms_per_submit"] + submits["postgresql_cpu_ms_per_submit"]
        # What the server side could sustain with the machine's CPUs to itself.
        submits["capacity_per_s_on_idle_cpus"] = (os.cpu_count() or 1) * 1000 / server_cpu if server_cpu else 0.0
        array = run_array(port, setup["tokens"][0], 10)
        from controlplane.models import Job

        have = Job.objects.count()
        fill_s = fill_jobs(max(0, args.jobs - have), setup["team_ids"], setup["class_id"])
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE controlplane_job")
        lists = run_lists(port, setup["tokens"][1], setup["admin_token"], 200)
        lists["jobs_in_database"] = Job.objects.count()
        lists["fill_seconds"] = fill_s
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    figures = {"config": {"workers": args.workers, "threads": args.threads, "worker_class": args.worker_class,
                          "cpus": os.cpu_count(), "load_average": os.getloadavg()[0]},
               "submits": submits, "array": array, "lists": lists}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"gunicorn {args.worker_class} {args.workers}×{args.threads}, {os.cpu_count()} CPUs, PostgreSQL")
        print(f"submits: {submits['submits_per_s']:.0f}/s with {submits['clients']} clients "
              f"(p50 {submits['p50_ms']:.1f} ms, p99 {submits['p99_ms']:.1f} ms, {submits['errors']} errors)")
        print(f"server CPU per submit: gunicorn {submits['gunicorn_cpu_ms_per_submit']:.2f} ms + PostgreSQL "
              f"{submits['postgresql_cpu_ms_per_submit']:.2f} ms → capacity with {os.cpu_count()} idle CPUs "
              f"≈ {submits['capacity_per_s_on_idle_cpus']:.0f} submits/s; load average now {os.getloadavg()[0]:.1f}")
        print(f"1,000-task array: server {array['server_ms_p50']:.1f} ms p50 (max {array['server_ms_max']:.1f}), "
              f"round trip {array['round_trip_ms_p50']:.1f} ms")
        print(f"lists with {lists['jobs_in_database']:,} jobs: " + ", ".join(
            f"{k} {v:.1f} ms" for k, v in lists.items() if k.endswith("_ms")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
