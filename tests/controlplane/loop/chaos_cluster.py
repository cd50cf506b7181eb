"""A whole control plane in real processes, the means to break it, and an independent checker.

`Cluster` starts the web server (gunicorn, serving the agent API), Celery workers, Celery beat
and simulated node agents (`qm-agent --simulate`), all against the test database and the test
Redis that `make test` started. It can kill -9 any of them, freeze or partition agents, and
restart Redis and PostgreSQL (scripts/test-services.sh says how, through QM_TEST_* variables).

`InvariantChecker` runs on its own thread and connection. Every poll reads the database in one
REPEATABLE READ snapshot and checks:
  - no GPU in two live allocations;
  - no partially placed gang: an allocation holds exactly its job's GPUs, all of them live
    while it is active, none once it is released or fenced;
  - no lost job: every submitted job exists, and a job is running or preempting exactly when
    it has one live allocation;
  - generations strictly increasing: never lowered between polls, and on every GPU each owner
    has a higher generation than every earlier owner held it under (a gang member that left a
    node early held it under the generation its MemberExited event records, even if the rest
    of the gang was fenced to a newer one later); the scheduler's epoch never goes back;
  - every preempted or fenced job requeued or finished (or running again under a newer
    generation);
and, from the nodes' side, reads the agents' status files: no GPU runs two generations at once.

A drill that fails keeps its evidence (`Cluster.keep_evidence`): every process's log, the
Redis and PostgreSQL server logs, the agents' status files and the drill's timeline (what it
did, what it waited for and how long, every change of the scheduler's leader the checker saw)
go to test-artifacts/chaos/<test>-<time>/, and the failure's message names the directory and
shows their tails. The logs lived in pytest's temporary directory and the servers' in
scripts/test-services.sh's, which the run removes: a drill that failed in a full run (the Redis
outage's, 15.6 s against its 8-s bound) left nothing to read but the number.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from django.conf import settings
from django.db import connection, connections, transaction
from django.utils import timezone

from controlplane.choices import FINISHED_JOB_STATES, EventKind, JobState
from controlplane.models import Job
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[3]

# Fast clocks so a drill fits in seconds: beat ticks twice a second, a dead leader is replaced
# within 2.5 s, a silent node is suspect after 1.5 s and fenced after 4 s.
CHAOS_ENV = {
    "QM_CYCLE_INTERVAL_S": "0.5",
    "QM_CYCLE_DEBOUNCE_S": "0.2",
    "QM_LEADER_LEASE_S": "2.5",
    "QM_AGENT_LEASE_S": "4",
    "QM_SUSPECT_AFTER_S": "1.5",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_database_url() -> str:
    """DATABASE_URL pointing at the database pytest-django created for this run."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit((parts.scheme, parts.netloc, "/" + settings.DATABASES["default"]["NAME"], "", ""))


def services_known() -> bool:
    return all(os.environ.get(k) for k in ("QM_TEST_PG_BIN", "QM_TEST_PG_DATA", "QM_TEST_REDIS_PORT",
                                           "QM_TEST_SERVICES_DIR", "REDIS_URL"))


@dataclass
class Proc:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0


#: Where a failed drill's evidence goes (ignored by git, as the browser tests' screenshots are).
EVIDENCE = REPO / "test-artifacts" / "chaos"
#: The log lines a failed drill's message picks out of every process's log (`said_about_the_lead`).
LEAD_WORDS = re.compile(r"lead|lease|broker|run in beat|Connected to|Cannot connect", re.IGNORECASE)


def _once(lines: list[str]) -> list[str]:
    """`lines` with each run of lines that differ only in their numbers (a timestamp, an
    attempt's count) said once, and how many more there were."""
    out: list[str] = []
    shape, repeats = None, 0
    for line in [*lines, None]:
        this = None if line is None else re.sub(r"\d+", "#", line)
        if this == shape and line is not None:
            repeats += 1
            continue
        if repeats:
            out.append(f"    … {repeats} more like it")
        shape, repeats = this, 0
        if line is not None:
            out.append(line)
    return out


@dataclass
class Cluster:
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, Proc] = field(default_factory=dict)
    port: int = 0
    actions: list[str] = field(default_factory=list)
    restarts_mid_cycle: int = 0
    #: what the drill did and saw, each line with the seconds since the cluster was made
    timeline: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: time.strftime("%H:%M:%S UTC", time.gmtime()))
    evidence: Path | None = None

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.env = {
            **os.environ,
            **CHAOS_ENV,
            "DATABASE_URL": test_database_url(),
            "QM_AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP,
            # 2 web workers × 4 threads: one wake-up long poll per worker at most.
            "QM_AGENT_MAX_WAITS": "1",
            "QM_LOG_FORMAT": "json",
            "QM_LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(REPO),
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            **self.env,
        }
        self.server = f"http://127.0.0.1:{self.port}"

    # ----------------------------------------------------------------------------- evidence

    def note(self, what: str) -> None:
        """A line of the timeline, at the seconds since the cluster was made."""
        self.timeline.append(f"{time.monotonic() - self.started:7.1f} s  {what}")

    def keep_evidence(self, test: str, lines: int = 25) -> str:
        """Copy the processes' logs, the servers' logs, the agents' status files and the
        timeline to EVIDENCE/<test>-<time>/ (once: a later call adds the timeline since), and
        say where, with the timeline and the last `lines` lines of each process's log: the
        text for a failure's message."""
        if self.evidence is None:
            self.evidence = EVIDENCE / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', test)[:120]}-{time.strftime('%Y%m%d-%H%M%S')}"
            self.evidence.mkdir(parents=True, exist_ok=True)
            for path in [*(proc.log for proc in self.procs.values()), *self.workdir.glob("*.status.json")]:
                if path.exists():
                    shutil.copy2(path, self.evidence / path.name)
            work = os.environ.get("QM_TEST_SERVICES_DIR")
            servers = {"redis-server.log": Path(work, "redis.log") if work else None,
                       "postgresql.log": Path(p) if (p := os.environ.get("QM_TEST_PG_LOG")) else None}
            for name, path in servers.items():
                if path is not None and path.exists():
                    shutil.copy2(path, self.evidence / name)
        timeline = [f"(seconds since the cluster was made, at {self.started_at})", *self.timeline]
        (self.evidence / "timeline.txt").write_text("\n".join(timeline) + "\n")
        lead = self.said_about_the_lead()
        tails = "\n".join(f"--- {name} (last {lines} lines, a line repeated said once)\n"
                          + "\n".join(_once(self.tail(name, 10 * lines).splitlines())[-lines:]) for name in self.procs)
        return (f"\nevidence kept in {self.evidence}\n--- timeline\n" + "\n".join(timeline)
                + "\n--- what the processes said about the lead and the broker\n" + "\n".join(lead) + f"\n{tails}")

    def said_about_the_lead(self, most: int = 40) -> list[str]:
        """The processes' log lines about the scheduler's lead and the broker, all processes
        together in the order of their timestamps (UTC), a line repeated said once: who led
        when, who gave the lead up or handed it back, when a broker connection was lost or made."""
        said = []
        for name in self.procs:
            for line in self.log_lines(name):
                event = str(line.get("event", ""))
                if LEAD_WORDS.search(event) and "timestamp" in line:
                    who = line.get("holder") or line.get("worker") or ""
                    said.append((str(line["timestamp"]), f"{str(line['timestamp'])[11:23]} {name}: "
                                 f"{event.splitlines()[0][:160]}" + (f" ({who})" if who else "")))
        return _once([text for _, text in sorted(said)])[-most:]

    # ----------------------------------------------------------------------------- processes

    def add(self, name: str, argv: list[str]) -> Proc:
        proc = Proc(name, argv, self.workdir / f"{name}.log")
        self.procs[name] = proc
        return proc

    def start(self, name: str) -> None:
        proc = self.procs[name]
        with open(proc.log, "ab") as log:
            proc.popen = subprocess.Popen(proc.argv, env=self.env, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        proc.starts += 1
        self.note(f"started {name} (pid {proc.popen.pid})")

    def web(self) -> None:
        self.add("web", [str(BIN / "gunicorn"), "controlplane.wsgi:application", "-b", f"127.0.0.1:{self.port}",
                         "-w", "2", "-k", "gthread", "--threads", "4", "--graceful-timeout", "1"])
        self.start("web")

    def workers(self, count: int = 3) -> list[str]:
        names = []
        for i in range(count):
            name = f"worker-{i}"
            self.add(name, [str(BIN / "celery"), "-A", "controlplane", "worker", "-P", "solo", "-n", f"chaos{i}@%h",
                            "--without-gossip", "--without-mingle", "-l", "WARNING"])
            self.start(name)
            names.append(name)
        return names

    def beat(self) -> None:
        self.add("beat", [str(BIN / "celery"), "-A", "controlplane", "beat", "-s", str(self.workdir / "beat-schedule"),
                          "--pidfile=", "-l", "WARNING"])
        self.start("beat")

    def agents(self, name: str, nodes: int, *extra: str) -> None:
        self.add(name, [str(BIN / "qm-agent"), "--server", self.server, "--simulate", str(nodes),
                        "--name-prefix", f"{name}-", "--sample-interval", "1", "--log-level", "INFO",
                        "--status-file", str(self.status_file(name)), *extra])
        self.start(name)

    def status_file(self, name: str) -> Path:
        return self.workdir / f"{name}.status.json"

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        if proc.popen is not None and proc.popen.poll() is None:
            os.killpg(proc.popen.pid, sig)
            if sig == signal.SIGKILL:
                proc.popen.wait()
        self.actions.append(f"{time.monotonic():.1f} {signal.Signals(sig).name} {name}")
        self.note(f"{signal.Signals(sig).name} {name}")

    def signal(self, name: str, sig: int) -> None:
        proc = self.procs[name]
        assert proc.popen is not None
        os.kill(proc.popen.pid, sig)
        self.actions.append(f"{time.monotonic():.1f} {signal.Signals(sig).name} {name}")
        self.note(f"{signal.Signals(sig).name} {name}")

    def ensure_running(self) -> None:
        for name, proc in self.procs.items():
            if proc.popen is None or proc.popen.poll() is not None:
                self.start(name)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.popen is not None and proc.popen.poll() is None:
                try:
                    os.killpg(proc.popen.pid, signal.SIGCONT)
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.popen.wait()

    def wait_web(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if requests.get(self.server + "/healthz", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise AssertionError(f"web server did not come up:\n{self.tail('web')}")

    def tail(self, name: str, lines: int = 30) -> str:
        try:
            return "\n".join(self.procs[name].log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def log_lines(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in self.procs[name].log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    # ----------------------------------------------------------------------------- servers

    def restart_redis(self) -> None:
        port = os.environ["QM_TEST_REDIS_PORT"]
        work = os.environ["QM_TEST_SERVICES_DIR"]
        subprocess.run(["redis-cli", "-p", port, "shutdown", "nosave"], capture_output=True, timeout=10)
        subprocess.run(["redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--daemonize", "yes", "--pidfile", f"{work}/redis.pid", "--logfile", f"{work}/redis.log",
                        "--dir", work], check=True, timeout=10)
        self._wait(lambda: subprocess.run(["redis-cli", "-p", port, "ping"], capture_output=True).returncode == 0)
        self.actions.append(f"{time.monotonic():.1f} restart redis")
        self.note("Redis started again (answers PING)")

    def restart_postgresql(self) -> None:
        """Restart PostgreSQL under the running loop: every connection is terminated and every
        in-flight transaction (a cycle's commit, a heartbeat) is rolled back.

        Fast mode, not immediate: the test server runs with synchronous_commit=off and fsync=off
        for speed, so a crash would forget transactions it had already acknowledged, a loss no
        production configuration accepts and no control plane could survive."""
        caught = self._wait_for_a_commit_in_flight()
        self._pg_ctl("-m", "fast", "-w", "restart")
        connections.close_all()
        self.actions.append(f"{time.monotonic():.1f} restart postgresql"
                            + (" while a transaction held the scheduler lease row" if caught else ""))
        self.note(self.actions[-1].split(" ", 1)[1])
        self.restarts_mid_cycle += int(caught)

    def _wait_for_a_commit_in_flight(self, timeout: float = 5.0) -> bool:
        """Wait (briefly) until another session holds the scheduler lease row locked: a cycle's
        commit (or a fence) is in flight, so the restart cuts it off in the middle."""
        deadline = time.monotonic() + timeout
        with connection.cursor() as cursor:
            while time.monotonic() < deadline:
                cursor.execute(
                    "SELECT count(*) FROM pg_locks WHERE relation = 'controlplane_schedulerlease'::regclass "
                    "AND mode = 'RowShareLock' AND granted AND pid <> pg_backend_pid()"
                )
                if cursor.fetchone()[0]:
                    return True
                time.sleep(0.002)
        return False

    def ensure_postgresql(self) -> None:
        if subprocess.run(self._pg_ctl_argv("status"), capture_output=True).returncode != 0:
            self._pg_ctl("-w", "start")
            connections.close_all()

    def _pg_ctl_argv(self, *args: str) -> list[str]:
        argv = [f"{os.environ['QM_TEST_PG_BIN']}/pg_ctl", "-D", os.environ["QM_TEST_PG_DATA"], *args]
        if "start" in args or "restart" in args:
            argv += ["-l", os.environ.get("QM_TEST_PG_LOG", "/dev/null")]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", os.environ.get("QM_TEST_PG_USER", "postgres"), "--", *argv]
        return argv

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(self._pg_ctl_argv(*args), check=True, capture_output=True, timeout=60)

    @staticmethod
    def _wait(condition: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError("timed out")
            time.sleep(0.05)


def flush_redis() -> None:
    subprocess.run(["redis-cli", "-p", os.environ["QM_TEST_REDIS_PORT"], "flushall"], capture_output=True, timeout=10)


# --------------------------------------------------------------------------------- workload


SHAPES = [(1, None, 0.35), (2, None, 0.2), (4, None, 0.15), (8, None, 0.15), (16, 8, 0.15)]


def submit_jobs(fleet: LoopFleet, count: int, rng: random.Random, *, duration: tuple[float, float] = (1.0, 3.0),
                prefix: str = "chaos", shapes: list[tuple[int, int | None, float]] | None = None) -> list[int]:
    """`count` jobs of mixed shapes (single GPUs up to two-node gangs), committed together, and
    a cycle requested as the API's submit does."""
    from controlplane import triggers

    ids = []
    now = timezone.now()
    with transaction.atomic():
        for i in range(count):
            choices = shapes or SHAPES
            gpus, per_node, _ = rng.choices(choices, weights=[s[2] for s in choices])[0]
            job = Job.objects.create(
                team=fleet.team, priority_class=fleet.research, name=f"{prefix}-{i}", gpus=gpus,
                gpus_per_node=per_node, runtime_limit_s=3600, submitted_at=now, state_changed_at=now,
                env={"QM_SIM_DURATION_S": f"{rng.uniform(*duration):.2f}", "QM_SIM_STEPS_PER_S": "20"},
            )
            ids.append(job.pk)
        transaction.on_commit(triggers.request_cycle)
    return ids


def job_states(ids: Iterable[int]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for state in Job.objects.filter(pk__in=list(ids)).values_list("state", flat=True):
        counts[state] += 1
    return dict(counts)


def wait_until_finished(ids: list[int], cluster: Cluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not Job.objects.filter(pk__in=ids).exclude(state__in=FINISHED_JOB_STATES).exists():
                return
        except Exception:  # noqa: BLE001 - PostgreSQL restarting under us
            connection.close()
        cluster.ensure_running()
        time.sleep(0.3)
    raise AssertionError(
        f"jobs still not finished after {timeout:.0f} s: {job_states(ids)}\nactions: {cluster.actions[-12:]}\n"
        + "\n".join(f"--- {n}\n{cluster.tail(n, 15)}" for n in cluster.procs)
    )


# ---------------------------------------------------------------------------------- checker


class InvariantChecker(threading.Thread):
    def __init__(self, cluster: Cluster, job_ids: Callable[[], set[int]], interval_s: float = 0.2) -> None:
        super().__init__(name="invariant-checker", daemon=True)
        self.cluster = cluster
        self.job_ids = job_ids
        self.interval_s = interval_s
        self.violations: list[str] = []
        self.polls = 0
        self.failed_polls = 0
        self.max_epoch = 0
        self.epochs_seen: set[int] = set()
        self.generations: dict[int, int] = {}
        self.status_reads = 0
        self.leader: tuple[int, str] = (0, "")
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def violate(self, message: str) -> None:
        if len(self.violations) < 50:
            self.violations.append(f"poll {self.polls}: {message}")

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.poll()
                self.polls += 1
            except Exception:  # noqa: BLE001 - PostgreSQL restarting: read again next time
                self.failed_polls += 1
                connection.close()
            self.check_agents()
            self._stop_event.wait(self.interval_s)
        connection.close()

    def poll(self) -> None:
        # Read the submitted ids before the snapshot: every one of them is committed by then.
        submitted = set(self.job_ids())
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute(
                "SELECT node_id, gpu_index, count(*) FROM controlplane_allocationgpu WHERE live "
                "GROUP BY node_id, gpu_index HAVING count(*) > 1"
            )
            for node_id, gpu, n in cursor.fetchall():
                self.violate(f"GPU {node_id}:{gpu} is live in {n} allocations")
            cursor.execute(
                """SELECT a.id, a.generation, a.state, a.release_reason, a.job_id, j.gpus,
                          count(g.id), count(g.id) FILTER (WHERE g.live)
                   FROM controlplane_allocation a JOIN controlplane_job j ON j.id = a.job_id
                   LEFT JOIN controlplane_allocationgpu g ON g.allocation_id = a.id
                   GROUP BY a.id, j.gpus"""
            )
            allocations = cursor.fetchall()
            cursor.execute("SELECT id, state FROM controlplane_job")
            jobs = dict(cursor.fetchall())
            cursor.execute(
                """SELECT g.node_id, g.gpu_index, a.id, a.generation FROM controlplane_allocationgpu g
                   JOIN controlplane_allocation a ON a.id = g.allocation_id ORDER BY g.node_id, g.gpu_index, a.id"""
            )
            owners = cursor.fetchall()
            # A gang member that left its node early (its exit, or a confirmed stop) gave those
            # GPUs up under the generation it had then, which its event records; a fence of the
            # rest of the gang later draws the allocation a newer one, after a new owner may
            # have taken these GPUs, and that is no reuse before fencing.
            cursor.execute(
                "SELECT allocation_id, node_id, max((data->>'generation')::bigint) FROM controlplane_event "
                "WHERE kind = %s AND reason = 'MemberExited' GROUP BY allocation_id, node_id",
                [EventKind.ALLOCATION_RELEASED.value],
            )
            gave_up = {(alloc_id, node_id): generation for alloc_id, node_id, generation in cursor.fetchall()}
            cursor.execute("SELECT epoch, holder FROM controlplane_schedulerlease WHERE name = 'scheduler'")
            row = cursor.fetchone()
        epoch = row[0] if row else 0
        if row and (row[0], row[1]) != self.leader:
            self.leader = (row[0], row[1])
            self.cluster.note(f"checker: scheduler led by {row[1] or '(nobody)'}, epoch {row[0]}")
        if epoch < self.max_epoch:
            self.violate(f"scheduler epoch went back from {self.max_epoch} to {epoch}")
        self.max_epoch = max(self.max_epoch, epoch)
        self.epochs_seen.add(epoch)

        live_by_job: dict[int, list[int]] = defaultdict(list)
        for alloc_id, _, state, _, job_id, *_ in allocations:
            if state in ("active", "releasing"):
                live_by_job[job_id].append(alloc_id)
        for alloc_id, generation, state, reason, job_id, gpus, total, live in allocations:
            before = self.generations.get(alloc_id)
            if before is not None and generation < before:
                self.violate(f"allocation {alloc_id} generation went back {before} → {generation}")
            self.generations[alloc_id] = generation
            if total != gpus:
                self.violate(f"allocation {alloc_id} (job {job_id}) holds {total} GPUs, its job asked {gpus}: partial gang")
            if state == "active" and live != total:
                self.violate(f"active allocation {alloc_id} has {live} of {total} GPUs live: partial gang")
            if state in ("released", "fenced") and live:
                self.violate(f"{state} allocation {alloc_id} still has {live} live GPUs")
            if (state == "fenced" or (state == "released" and reason == "Preempted")) and job_id in jobs:
                job_state = jobs[job_id]
                settled = job_state == JobState.PENDING or job_state in FINISHED_JOB_STATES
                if not settled and not live_by_job.get(job_id):
                    self.violate(f"job {job_id} was {state} ({reason}) but is {job_state} with no live allocation")

        for job_id in submitted:
            state = jobs.get(job_id)
            if state is None:
                self.violate(f"job {job_id} was lost")
                continue
            live = live_by_job.get(job_id, [])
            if state in (JobState.RUNNING, JobState.PREEMPTING) and len(live) != 1:
                self.violate(f"job {job_id} is {state} with {len(live)} live allocations")
            if state not in (JobState.RUNNING, JobState.PREEMPTING) and live:
                self.violate(f"job {job_id} is {state} but still has live allocations {live}")

        previous: dict[tuple[int, int], int] = {}
        for node_id, gpu, alloc_id, generation in owners:
            key = (node_id, gpu)
            if key in previous and generation <= previous[key]:
                self.violate(f"GPU {node_id}:{gpu}: allocation {alloc_id} has generation {generation}, not above "
                             f"the generation {previous[key]} its earlier owner held it under")
            previous[key] = gave_up.get((alloc_id, node_id), generation)

    def check_agents(self) -> None:
        for path in self.cluster.workdir.glob("*.status.json"):
            try:
                status = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            self.status_reads += 1
            for node, info in status["nodes"].items():
                holders: dict[int, str] = {}
                for generation, gpus in info["members"].items():
                    for gpu in gpus:
                        if gpu in holders:
                            self.violate(f"node {node} runs generations {holders[gpu]} and {generation} on GPU {gpu}")
                        holders[gpu] = generation
