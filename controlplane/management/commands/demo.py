"""`make demo`: the whole product in one command on the embedded default.

Migrates, seeds the demo fleet, then runs side by side: the web server, the scheduling loop on a
thread, simulated node agents (a `qm-agent --simulate` process speaking the real agent protocol
over HTTP) and a synthetic job stream. Ctrl-C (or SIGTERM) stops everything in a few seconds:
the loops, each finishing the round it is in, the agents while the server still answers their
last reports and goodbyes, then the server (`DemoShutdown`).
"""

from __future__ import annotations

import _thread
import argparse
import ctypes
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import structlog
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from controlplane.demo_fleet import demo_nodes, seed_demo_fleet
from controlplane.demo_stream import DemoJobStream
from controlplane.embedded import EmbeddedLoop, notification_loop, scheduling_loop
from controlplane.services.reconcile import reconcile_nodes
from controlplane.tasks_accounting import accounting_loop

log = structlog.get_logger(__name__)


def _tcp_port(text: str) -> int:
    """A TCP port, 1 to 65535. `PORT=abc` ended in a ValueError traceback naming no variable."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"PORT must be a TCP port from 1 to 65535, got {text!r} "
                                         "(--port, else $PORT)")
    return port


class Command(BaseCommand):
    help = "Run the demo: web server, scheduling loop, simulated agents and a job stream."

    def add_arguments(self, parser: Any) -> None:
        # argparse applies `type` to a string default too, so $PORT is checked (and named) as --port is
        parser.add_argument("--port", type=_tcp_port, default=os.environ.get("PORT", "8000"),
                            help="where it serves (default: $PORT, else 8000)")
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--submit-every", type=float, default=3.0, help="Seconds between synthetic submits.")
        parser.add_argument("--no-stream", action="store_true", help="Submit no synthetic jobs.")

    def handle(self, *args: Any, **options: Any) -> None:
        (settings.BASE_DIR / "var").mkdir(exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        seed_demo_fleet(awaiting_agents=True)
        port, host = options["port"], options["host"]
        _refuse_busy_port(host, port)
        url = f"http://{host}:{port}"
        settings.QM["PUBLIC_URL"] = settings.QM.get("PUBLIC_URL") or url  # its notifications' job links
        loops = [
            scheduling_loop(),
            EmbeddedLoop("reconcile", float(settings.QM["CYCLE_INTERVAL_S"]), [reconcile_nodes]),
            accounting_loop(),
            notification_loop(),
        ]
        if not options["no_stream"]:
            stream = DemoJobStream()
            loops.append(EmbeddedLoop("demo-job-stream", options["submit_every"], [stream.step]))
        for loop in loops:
            loop.start()
        agents = AgentSupervisor(url, host, port)
        shutdown = DemoShutdown(agents, loops)
        signal.signal(signal.SIGTERM, shutdown.on_signal)
        signal.signal(signal.SIGINT, shutdown.on_signal)
        agents.start()
        self.stdout.write(self.style.SUCCESS(
            f"\nQuartermaster demo at {url}/  — log in as admin/admin, alice/alice, bob/bob or finn/finn "
            "(demo passwords only)\n"
        ))
        try:
            call_command("runserver", f"{host}:{port}", use_reloader=False, use_threading=True)
        finally:
            # A second Ctrl-C, or the server stopping by itself: whatever is still running stops now.
            shutdown.server_ended = True
            shutdown.stop_all()


#: How long the agents get to stop their jobs, report them and say goodbye before they are
#: killed (they take about 2 s: their jobs get `min(--stop-grace, 2)` s), and each loop to
#: finish the round it is in.
AGENTS_STOP_S = 6.0
LOOP_STOP_S = 5.0


class DemoShutdown:
    """Stops the demo in the order that loses nothing: the loops, each after the round it is in,
    the agents while the web server still answers (their jobs' ends and goodbyes are its
    requests), and only then the server.

    Until 7 Dec the signal raised KeyboardInterrupt in the server at once, and the agents were
    told to stop after it had stopped accepting: a goodbye on a new connection went to a port
    still listening but never answered, waited out the agent's 10 s read timeout, and the
    demo killed the agents after 15 s: stopping took 11 s when the agents were connecting, about
    18 s in the review of 6 Dec; now about 2 s (tests/controlplane/test_demo_stops_promptly.py)."""

    def __init__(self, agents: AgentSupervisor, loops: list[EmbeddedLoop]) -> None:
        self.agents, self.loops = agents, loops
        self._began = False
        self.server_ended = False  # past the server: a signal has nothing left to interrupt
        self._stopped = threading.Event()
        self._lock = threading.Lock()

    def on_signal(self, signum: int, frame: object) -> None:
        """The first SIGINT or SIGTERM stops the parts on a thread while the server keeps
        serving, which then interrupts the server (through this handler, in the main thread).
        A second one, or the parts stopped, ends the server at once."""
        if self.server_ended:
            return
        if self._began or self._stopped.is_set():
            raise KeyboardInterrupt
        self._began = True
        log.info("demo stopping: its loops, its agents, then the web server", signal=signal.Signals(signum).name)
        threading.Thread(target=self._stop_then_end_server, name="demo-shutdown", daemon=True).start()

    def _stop_then_end_server(self) -> None:
        try:
            self.stop_all()
        finally:
            _thread.interrupt_main(signal.SIGINT)

    def stop_all(self) -> None:
        with self._lock:  # the shutdown thread and the main thread's finally: once
            if self._stopped.is_set():
                return
            began = time.monotonic()
            # The loops first, each finishing its round: no job is submitted or bound to nodes
            # whose agents are going away. What the goodbyes change (jobs requeued, their
            # notifications queued) is written by the requests and waits in the database.
            for loop in self.loops:
                loop.stop()
            for loop in self.loops:
                loop.join(LOOP_STOP_S)
            unfinished = [loop.name for loop in self.loops if loop.is_alive()]
            self.agents.stop(AGENTS_STOP_S)
            self._stopped.set()
            log.info("demo stopped", seconds=round(time.monotonic() - began, 1),
                     **({"loops_still_in_a_round": unfinished} if unfinished else {}))


def _die_with_parent() -> None:
    """In the agent child: get SIGTERM if the demo process dies, however it dies (even -9)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


class AgentSupervisor(threading.Thread):
    """Starts the simulated agents once the web server accepts connections.

    They are a separate process speaking the real agent protocol over HTTP, exactly as agents
    on GPU nodes would.
    """

    def __init__(self, url: str, host: str, port: int) -> None:
        super().__init__(name="agent-supervisor", daemon=True)
        self.url, self.host, self.port = url, host, port
        self.process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._starting = threading.Lock()  # a stop while the agents start waits for the process to exist

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                break
            except OSError:
                self._stopping.wait(0.2)
        if self._stopping.is_set():
            return
        # The demo makes its own bootstrap secret unless one is set; the in-process server
        # reads it from settings at request time.
        token = settings.QM.get("AGENT_BOOTSTRAP_TOKEN") or secrets.token_urlsafe(24)
        settings.QM["AGENT_BOOTSTRAP_TOKEN"] = token
        names = ",".join(str(node["name"]) for node in demo_nodes())
        # One state directory per demo port: two demos of one checkout (on other databases)
        # would otherwise hand each other's agents their node tokens.
        state_dir = settings.BASE_DIR / "var" / f"agents-{self.port}"
        command = [
            sys.executable, "-m", "controlplane.agent.main", "--server", self.url, "--names", names,
            "--state-dir", str(state_dir), "--sample-interval", "5", "--log-format", "console",
            "--log-level", "WARNING",
        ]
        with self._starting:
            if self._stopping.is_set():
                return
            self.process = subprocess.Popen(
                command, env={**os.environ, "QM_AGENT_BOOTSTRAP_TOKEN": token}, preexec_fn=_die_with_parent
            )
        # The kernel's parent-death signal follows the thread that forked the child, so this
        # thread lives as long as the agents should.
        self._stopping.wait()

    def stop(self, timeout_s: float) -> None:
        """SIGTERM the agents (they stop their jobs, report them and say goodbye) and wait up to
        `timeout_s` for them to exit; then SIGKILL."""
        with self._starting:
            self._stopping.set()
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("the demo's agents did not stop in time: killed; their nodes read as lost until the "
                        "next start", timeout_s=timeout_s)
            self.process.kill()
            self.process.wait()


def _refuse_busy_port(host: str, port: int) -> None:
    """Fail before starting agents that would talk to whatever else holds the port."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise CommandError(f"port {port} on {host} is in use ({error.strerror}); set PORT to another port") from error
