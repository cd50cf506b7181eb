"""`qm-agent`: the node agent's command line.

    qm-agent --server https://qm.example.org                       # this GPU node (NVML)
    qm-agent --server URL --name gpu-07 --gpus 8 --gpu-type H100-80GB --pool h100 \\
             --leaf-switch leaf-1 --spine spine-1                  # declared inventory
    qm-agent --server URL --simulate 16 --gpu-type H100-80GB       # 16 simulated nodes

The first registration needs the bootstrap secret (QM_AGENT_BOOTSTRAP_TOKEN); the node token
it returns is kept in the state directory (mode 0600) for the next start. SIGTERM stops the
node's jobs (SIGTERM, grace, SIGKILL), reports them, says goodbye and exits; the jobs are
requeued. SIGUSR1/SIGUSR2 cut and heal the agent's network traffic (for chaos drills).
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import logging
import math
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog

from controlplane import structured_logs
from controlplane.agent.client import (
    AgentClient,
    ProtocolError,
    Refused,
    Retired,
    Unauthorized,
    Unreachable,
    error_for,
)
from controlplane.agent.containment import ContainmentError
from controlplane.agent.inventory import Nvml, gpu_type_name, host_cpus, host_identity, host_memory_gb
from controlplane.agent.job_users import (
    AS_ROOT,
    DEFAULT_UID_BASE,
    DEFAULT_USER_UID_BASE,
    JOB_USER_MODES,
    JobUserError,
)
from controlplane.agent.job_users import checked as job_users_checked
from controlplane.agent.job_users import chosen_mode as chosen_job_user_mode
from controlplane.agent.launch_journal import LAUNCHES_DIR, LaunchJournal
from controlplane.agent.logs import read_regular, write_whole
from controlplane.agent.members import ProcessLauncher, SimulatedLauncher
from controlplane.agent.node import (
    REFUSED_FILE,
    Call,
    NodeAgent,
    NodeInventory,
    WakeListener,
    install_partition_signals,
)

log = structlog.get_logger("qm.agent")


def _whole(least: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is less than {least}")
        return value
    return parse


def _seconds(*, zero: bool) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"{text} must be {'0 or more' if zero else 'more than 0'} seconds")
        return value
    return parse


def _log_setting(check: Any, variable: str) -> Any:
    def parse(text: str) -> str:
        try:
            return str(check(text, name=variable))
        except structured_logs.LogSettingRefused as refused:  # the flag's, else the variable's value
            raise argparse.ArgumentTypeError(f"{refused.problem} (the flag, else ${variable})") from None
    return parse


def _server_url(text: str) -> str:
    url = urlsplit(text)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL, e.g. https://qm.example.org")
    return text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Numbers and the server URL are checked here: a bad one exits 2 naming the option (before,
    --batch 0 crashed a thread, --simulate 0 ran nothing and exited 0, a server without a scheme
    was retried forever as 'control plane unreachable')."""
    p = argparse.ArgumentParser(prog="qm-agent", description="Quartermaster node agent.")
    p.add_argument("--server", type=_server_url, default=os.environ.get("QM_SERVER", "http://127.0.0.1:8000"),
                   help="control plane base URL (env QM_SERVER)")
    p.add_argument("--bootstrap-token", default=os.environ.get("QM_AGENT_BOOTSTRAP_TOKEN", ""),
                   help="secret for first registration (env QM_AGENT_BOOTSTRAP_TOKEN)")
    p.add_argument("--name", default=os.environ.get("QM_NODE_NAME", socket.gethostname().split(".")[0]),
                   help="node name; other nodes reach this one by it (MASTER_ADDR)")
    p.add_argument("--pool")
    p.add_argument("--gpu-type", help="GPU type name as the control plane knows it, e.g. H100-80GB")
    p.add_argument("--gpus", type=_whole(1), help="declared GPU count (without NVML); per node with --simulate")
    p.add_argument("--cpus", type=_whole(1))
    p.add_argument("--memory-gb", type=_whole(1))
    p.add_argument("--leaf-switch")
    p.add_argument("--spine")
    p.add_argument("--capacity-tier", choices=["reserved", "on_demand", "spot"])
    p.add_argument("--state-dir", default=os.environ.get("QM_AGENT_STATE_DIR", "/var/lib/qm-agent"),
                   help="node token, job working directories, process-group records, launch journal, agent lock")
    p.add_argument("--interval", type=_seconds(zero=False), help="heartbeat interval in seconds (default: what the server says)")
    p.add_argument("--sample-interval", type=_seconds(zero=False), default=10.0, help="seconds between usage samples")
    p.add_argument("--limit-grace", type=_seconds(zero=True), default=30.0,
                   help="a job still running this long past its runtime limit, with no stop from the control "
                        "plane, is stopped by the agent (SIGTERM, then SIGKILL after as long again)")
    p.add_argument("--stop-grace", type=_seconds(zero=True), default=10.0, help="on SIGTERM, seconds jobs get before SIGKILL")
    p.add_argument("--no-self-fence", action="store_true",
                   help="do NOT kill jobs when the lease cannot be renewed (drills only: models a frozen agent)")
    p.add_argument("--simulate", type=_whole(1), metavar="N", help="run N simulated nodes in this process")
    p.add_argument("--name-prefix", default="sim-", help="simulated node names: PREFIX000, PREFIX001, …")
    p.add_argument("--start-index", type=_whole(0), default=0)
    p.add_argument("--nodes-per-leaf", type=_whole(1), default=8)
    p.add_argument("--leaves-per-spine", type=_whole(1), default=4)
    p.add_argument("--inventory", help="JSON file: a list of nodes (name and any inventory fields) to simulate")
    p.add_argument("--names", help="comma-separated names of existing nodes to simulate, inventory as stored")
    p.add_argument("--threads", type=_whole(0), default=0, help="simulate: worker threads (default: by node count)")
    p.add_argument("--batch", type=_whole(1), default=64,
                   help="simulate: most nodes' heartbeats and reports sent in one request")
    p.add_argument("--no-wake", action="store_true",
                   help="hold no long poll for wake-ups: learn new work only from heartbeats")
    p.add_argument("--wake-with-state", action="store_true",
                   help="ask for the desired state with each wake-up instead of fetching it after one (measured: no "
                        "gain in true_jobs; see docs/operations.md)")
    p.add_argument("--full-desired-state", action="store_true",
                   help="ask for the whole desired state at every contact, never 'unchanged' (for comparison)")
    p.add_argument("--status-file", help="write what runs where (JSON) to this file twice a second, for drills")
    p.add_argument("--no-output", action="store_true", default=os.environ.get("QM_AGENT_NO_OUTPUT", "") == "1",
                   help="do not ship jobs' output to the control plane (env QM_AGENT_NO_OUTPUT=1): it stays in "
                        "the state directory, and qm logs and the job page have none")
    p.add_argument("--keep-output-s", type=_seconds(zero=True),
                   default=os.environ.get("QM_AGENT_KEEP_OUTPUT_S", "259200"),
                   help="a finished run's directory (its output files) is removed this long after all its output "
                        "was shipped (env QM_AGENT_KEEP_OUTPUT_S; default 3 days; 0: at once). Runs not shipped "
                        "(--no-output) are never removed")
    p.add_argument("--max-rank-output-mib", type=_whole(0),
                   default=os.environ.get("QM_AGENT_MAX_RANK_OUTPUT_MIB", "256"),
                   help="the most of one rank's output not yet shipped that the node keeps, in MiB (env "
                        "QM_AGENT_MAX_RANK_OUTPUT_MIB; default 256; 0: no cap): a rank printing faster than its "
                        "output ships loses the oldest of it, and the job's output says how much; with --no-output "
                        "the node keeps each rank's last this much")
    p.add_argument("--cgroup-root", default=os.environ.get("QM_AGENT_CGROUP_ROOT", "auto"),
                   help="contain each run's processes in a cgroup under this cgroup v2 directory (env "
                        "QM_AGENT_CGROUP_ROOT): auto (the default: the agent's own cgroup if it can hold them, as "
                        "under systemd with Delegate=yes, else /sys/fs/cgroup/unified or /sys/fs/cgroup, if "
                        "writable), off, or a path; without one a process that clears its environment and leaves "
                        "its session outlives its run")
    # No default here: run_real chooses one from the agent's uid (job_users.chosen_mode), and
    # logs whether the mode was given or defaulted.
    p.add_argument("--job-user", choices=JOB_USER_MODES,
                   help="which Unix user jobs run as (env QM_AGENT_JOB_USER): agent (the agent's own; a job can "
                        "read the node token and reach other teams' jobs on the node, and as root do anything "
                        "root can), team (each team's own uid and gid, --job-uid-base + the team's id; jobs of one "
                        "team share it) or user (the submitter's own uid, --job-user-uid-base + the user's id, and "
                        "the team's gid, --job-uid-base + the team's id: one member's job cannot signal or read "
                        "another's); team and user need the agent to run as root and util-linux's setpriv. "
                        "Default: user for an agent running as root, agent otherwise")
    p.add_argument("--job-uid-base", type=_whole(1000), default=os.environ.get("QM_AGENT_JOB_UID_BASE",
                                                                            str(DEFAULT_UID_BASE)),
                   help=f"teams' ids: with --job-user team a team's uid and gid, with user its gid, are this + its "
                        f"id (env QM_AGENT_JOB_UID_BASE; default {DEFAULT_UID_BASE})")
    p.add_argument("--job-user-uid-base", type=_whole(1000),
                   default=os.environ.get("QM_AGENT_JOB_USER_UID_BASE", str(DEFAULT_USER_UID_BASE)),
                   help=f"users' uids: with --job-user user a submitter's uid is this + their id; above "
                        f"--job-uid-base, and teams' ids must stay below it in either mode, so a team's id is never "
                        f"a user's (env QM_AGENT_JOB_USER_UID_BASE; default {DEFAULT_USER_UID_BASE})")
    # argparse checks `choices` on the command line only, and `type` on a string default too:
    # QM_LOG_FORMAT=JSON was taken as console text, QM_LOG_LEVEL=verbose ended in a KeyError.
    p.add_argument("--log-format", type=_log_setting(structured_logs.log_format, "QM_LOG_FORMAT"),
                   metavar="{json,console}", default=os.environ.get("QM_LOG_FORMAT", "json"))
    p.add_argument("--log-level", type=_log_setting(structured_logs.log_level, "QM_LOG_LEVEL"),
                   default=os.environ.get("QM_LOG_LEVEL", "INFO"))
    return p.parse_args(argv)


def configure_logging(fmt: str, level: str) -> None:
    # JSON lines get a traceback as text ("exception"); before 5 Dec they said only
    # "exc_info": true. The console renderer writes it itself.
    renderers: list[Any] = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()] \
        if fmt == "json" else [structlog.dev.ConsoleRenderer(colors=False)]
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *renderers,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    if args.simulate is not None or args.inventory or args.names:
        return run_simulated(args)
    return run_real(args)


# ------------------------------------------------------------------------------------ real node


def _token_file(state_dir: Path, name: str) -> Path:
    return state_dir / name / "token"


def _load_token(path: Path) -> str:
    try:
        return read_regular(path, 4096).decode(errors="replace").strip()
    except OSError:  # none yet; or not a regular file (the state directory is its jobs' to change too)
        return ""


def _save_token(path: Path, token: str) -> None:
    """Keep the node token for the next start (mode 0600). One that cannot be written (a full
    disk; a job made `token.tmp` a directory) is logged, and the agent serves on: the next
    start then registers with the bootstrap secret. Before 5 Dec the error ended `qm-agent`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, (token + "\n").encode(), mode=0o600)
    except OSError as error:
        log.error("could not keep the node token; the next start needs the bootstrap secret", path=str(path),
                  error=str(error))


#: The file in a node's state directory a running `qm-agent` holds locked (flock) while it serves
#: the node; it says the holder's pid.
AGENT_LOCK_FILE = "agent.lock"


def hold_node_lock(state_dir: Path, name: str) -> tuple[int | None, str]:
    """Lock the node's state directory for this agent (flock, held until the process ends
    however it ends; not inherited by its jobs): (the descriptor, "") or (None, why not).

    One agent serves a node. A second one started on the same host with the same state
    directory (a unit started twice, an operator's test run beside the service) would sweep the
    first one's runs as left behind (killing jobs that were running fine), register in its place
    and be displaced by it in turn, every heartbeat, each time fencing what the other started.
    Until 8 Dec nothing stopped it."""
    import fcntl

    path = state_dir / name / AGENT_LOCK_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as error:
        return None, f"cannot open {path}: {error}"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        except OSError:
            holder = "unknown"
        os.close(fd)
        return None, f"another qm-agent (pid {holder}) serves node {name} from {state_dir}"
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd, ""


def real_inventory(args: argparse.Namespace, nvml: Nvml | None) -> NodeInventory:
    devices = nvml.devices() if nvml is not None else []
    gpu_count = len(devices) or args.gpus
    if not gpu_count:
        raise SystemExit("qm-agent: no GPUs found through NVML; declare them with --gpus N (and --gpu-type)")
    gpu_type = args.gpu_type or (gpu_type_name(devices[0].name, devices[0].memory_mb) if devices else None)
    return NodeInventory(
        name=args.name,
        gpu_count=gpu_count,
        pool=args.pool or (gpu_type.split("-")[0].lower() if gpu_type else None),
        gpu_type=gpu_type,
        cpus=args.cpus if args.cpus is not None else host_cpus(),
        memory_gb=args.memory_gb if args.memory_gb is not None else host_memory_gb(),
        leaf_switch=args.leaf_switch or "leaf-0",
        spine=args.spine or "spine-0",
        capacity_tier=args.capacity_tier,
        simulated=False,
        devices=[d.as_json() for d in devices],
        host=host_identity(),
    )


def run_real(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    nvml = Nvml.open()
    inventory = real_inventory(args, nvml)
    # Before anything touches the node's runs: a second agent of the node exits here.
    lock, why = hold_node_lock(state_dir, inventory.name)
    if lock is None:
        log.error("cannot serve the node: " + why, node=inventory.name)
        return 2
    euid = os.geteuid()
    mode, chosen = chosen_job_user_mode(args.job_user, os.environ.get("QM_AGENT_JOB_USER"), euid)
    try:
        job_users = job_users_checked(mode, args.job_uid_base, state_dir, euid=euid,
                                      user_uid_base=args.job_user_uid_base)
    except JobUserError as error:
        # A defaulted `user` that this node cannot honour stops the agent too, rather than run
        # jobs as root: the operator fixes what it names, or gives --job-user agent knowingly.
        log.error("cannot run jobs as asked", error=str(error), job_user=mode, chosen=chosen,
                  **({"instead": "give --job-user agent to run jobs as root, knowing what that allows"}
                     if chosen.startswith("default") else {}))
        return 2
    try:
        launcher = ProcessLauncher(state_dir, inventory.name, nvml, cgroup_root=args.cgroup_root,
                                   output_cap=args.max_rank_output_mib * 1024 * 1024 or None, job_users=job_users)
    except ContainmentError as error:
        log.error("cannot contain runs as asked", error=str(error))
        return 2
    runs_as = {"agent": "the agent's user", "team": "their team's user", "user": "their submitter's user"}
    log.info("jobs run as " + runs_as[job_users.mode], node=inventory.name, job_user=job_users.mode,
             chosen=chosen, uid_base=job_users.uid_base if job_users.separate else None,
             user_uid_base=job_users.user_uid_base if job_users.mode == "user" else None)
    if not job_users.separate and euid == 0:  # only when given: a root agent's default is `user`
        log.warning(AS_ROOT, node=inventory.name, job_user=job_users.mode, chosen=chosen)
    if launcher.cgroups is not None:
        log.info("each run's processes are contained in a cgroup of their own", node=inventory.name,
                 cgroups=launcher.containment)
    else:
        log.warning("a run's processes are contained by session and marker only: one that clears its "
                    "environment and leaves its session outlives its run", node=inventory.name,
                    why=launcher.containment)
    leftovers = launcher.sweep_leftovers()
    if leftovers:
        log.warning("killed processes a previous agent left behind", node=inventory.name, pids=leftovers,
                    generations=sorted(launcher.left_behind))
    # What agents of this node launched that the control plane may not know of, with the runs
    # just found left behind: the registration names them, and they are never started again.
    journal = LaunchJournal(state_dir / inventory.name / LAUNCHES_DIR)
    journal.found(launcher.left_behind)
    # Started now rather than with the first job: its ~10 ms are paid here, not in a launch.
    launcher.reaper.start()
    token_path = _token_file(state_dir, inventory.name)
    if not args.bootstrap_token and not _load_token(token_path):
        return _no_way_to_register(f"node {inventory.name} has no token in {token_path}")
    agent = NodeAgent(
        inventory, client=AgentClient(args.server), launcher=launcher, bootstrap_token=args.bootstrap_token,
        token=_load_token(token_path), interval_s=args.interval, sample_interval_s=args.sample_interval,
        self_fence=not args.no_self_fence, exits_wake=True, limit_grace_s=args.limit_grace,
        keep_desired=not args.full_desired_state, ship_output=not args.no_output,
        refused_path=state_dir / inventory.name / REFUSED_FILE, launch_journal=journal,
    )
    # The output of runs a previous agent left unsent (it died, and their processes with it):
    # shipped with the first heartbeats, then forgotten (agent/logs.py).
    agent.recover_output(launcher.unshipped_output())
    prune_at = 0.0
    stop = threading.Event()
    sleeper = SignalSleep()

    def on_term(signum: int, frame: object) -> None:
        if not agent.shutting_down:
            log.info("shutting down: stopping jobs", node=agent.name, signal=signum)
            agent.shutdown(args.stop_grace)
            stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    install_partition_signals([agent])
    if args.status_file:
        start_status_writer(args.status_file, [agent], stop)
    if not args.no_wake:
        # A long poll on its own thread and connection: a commit that gives this node work
        # (or asks it to stop some) makes the loop below run its round at once.
        WakeListener([agent], AgentClient(args.server), lambda woken: sleeper.poke(), stop,
                     desired=args.wake_with_state).start()
    log.info("agent starting", node=inventory.name, gpus=inventory.gpu_count, gpu_type=inventory.gpu_type,
             nvml=nvml is not None, server=args.server)
    saved = agent.token
    hard_deadline: float | None = None
    while not agent.done:
        wait = agent.step()
        if time.monotonic() >= prune_at and not agent.shutting_down:
            prune_finished_runs(launcher, agent, args.keep_output_s)
            prune_at = time.monotonic() + min(PRUNE_EVERY_S, max(1.0, args.keep_output_s / 10))
        if agent.token and agent.token != saved:
            _save_token(token_path, agent.token)
            saved = agent.token
        if agent.shutting_down:
            hard_deadline = hard_deadline or time.monotonic() + args.stop_grace + 10.0
            if time.monotonic() > hard_deadline:
                for running in agent.members.values():
                    running.member.kill()
                log.warning("control plane unreachable at shutdown; its lease will expire and fence", node=agent.name)
                break
        # Sleep until the next thing due, or until a signal: a job's process exiting
        # (SIGCHLD), SIGTERM, the drills' SIGUSR1/2. No polling while jobs run.
        sleeper.sleep(min(wait, 0.05) if agent.shutting_down else min(wait, 1.0))
    return 0


#: How often a real agent looks for finished runs' directories to remove (a glob and a stat a
#: run), at most; a shorter --keep-output-s looks more often (0: every second).
PRUNE_EVERY_S = 60.0


def prune_finished_runs(launcher: ProcessLauncher, agent: NodeAgent, keep_s: float) -> None:
    removed, freed = launcher.prune_finished_runs(keep_s, running=set(agent.members), now=time.time())
    if removed:
        log.info("removed finished runs' directories, their output shipped", node=agent.name,
                 generations=removed, bytes_freed=freed, keep_output_s=keep_s)


class SignalSleep:
    """Sleeps that any signal cuts short (signal.set_wakeup_fd on a socket pair)."""

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        # SIGCHLD is ignored by default, so no byte would be written: give it a handler.
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    def poke(self) -> None:
        """Cut the current (or next) sleep short, from another thread."""
        try:
            self._write.send(b"w")
        except BlockingIOError:
            pass  # the buffer is full of wake-ups already

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            select.select([self._read], [], [], seconds)
        try:
            while self._read.recv(4096):
                pass
        except BlockingIOError:
            pass


# ------------------------------------------------------------------------------- simulated nodes


def simulated_inventories(args: argparse.Namespace) -> list[NodeInventory]:
    if args.inventory:
        entries = json.loads(Path(args.inventory).read_text())
        return [
            NodeInventory(
                name=str(e["name"]), gpu_count=int(e.get("gpu_count", e.get("gpus", args.gpus or 8))),
                pool=e.get("pool", args.pool), gpu_type=e.get("gpu_type", args.gpu_type), cpus=e.get("cpus", args.cpus),
                memory_gb=e.get("memory_gb", args.memory_gb), leaf_switch=e.get("leaf_switch"), spine=e.get("spine"),
                capacity_tier=e.get("capacity_tier", args.capacity_tier), simulated=True,
            )
            for e in entries
        ]
    if args.names:
        return [NodeInventory(name=n.strip(), gpu_count=args.gpus or 8, simulated=True)
                for n in args.names.split(",") if n.strip()]
    nodes = []
    for i in range(args.start_index, args.start_index + args.simulate):
        leaf = i // max(1, args.nodes_per_leaf)
        nodes.append(
            NodeInventory(
                name=f"{args.name_prefix}{i:03d}",
                gpu_count=args.gpus or 8,
                pool=args.pool or "sim",
                gpu_type=args.gpu_type or "H100-80GB",
                cpus=args.cpus if args.cpus is not None else 64,
                memory_gb=args.memory_gb if args.memory_gb is not None else 512,
                leaf_switch=args.leaf_switch or f"{args.name_prefix}leaf-{leaf}",
                spine=args.spine or f"{args.name_prefix}spine-{leaf // max(1, args.leaves_per_spine)}",
                capacity_tier=args.capacity_tier,
                simulated=True,
            )
        )
    return nodes


def start_status_writer(path: str, agents: list[NodeAgent], stop: threading.Event) -> threading.Thread:
    """Twice a second, atomically replace `path` with what every node runs on which GPUs.

    The chaos tests read it to check, from the nodes' side, that no GPU ever runs two
    generations at once."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")

    def write() -> None:
        while not stop.is_set():
            nodes = {}
            for agent in agents:
                try:
                    members = {str(g): list(r.assignment.gpus) for g, r in list(agent.members.items())}
                except RuntimeError:  # changed while we copied it: next round
                    continue
                nodes[agent.name] = {"registered": agent.registered, "partitioned": agent.partitioned,
                                     "members": members}
            tmp.write_text(json.dumps({"written_at": time.time(), "pid": os.getpid(), "nodes": nodes}))
            os.replace(tmp, target)
            stop.wait(0.5)

    thread = threading.Thread(target=write, name="status", daemon=True)
    thread.start()
    return thread


def _no_way_to_register(why: str) -> int:
    """An agent that can never register exits at once (status 2) instead of running on, doing
    nothing but log an error every 30 s (what it did before)."""
    log.error(f"cannot register: {why} and no bootstrap secret was given; set QM_AGENT_BOOTSTRAP_TOKEN "
              "(or --bootstrap-token) to the control plane's")
    return 2


def run_simulated(args: argparse.Namespace) -> int:
    if not args.bootstrap_token:
        # Simulated nodes keep no token between runs: every start registers them.
        return _no_way_to_register("simulated nodes register at every start")
    inventories = simulated_inventories(args)
    for inventory in inventories:  # (their registrations say where they run, as a real agent's)
        inventory.host = host_identity()
    client = AgentClient(args.server)
    launcher = SimulatedLauncher()
    agents = [
        NodeAgent(inv, client=client, launcher=launcher, bootstrap_token=args.bootstrap_token,
                  interval_s=args.interval, sample_interval_s=args.sample_interval,
                  self_fence=not args.no_self_fence, limit_grace_s=args.limit_grace,
                  keep_desired=not args.full_desired_state, ship_output=not args.no_output,
                  refused_path=Path(args.state_dir) / inv.name / REFUSED_FILE)
        for inv in inventories
    ]
    # Spread first contacts over a second so N nodes do not register in one burst.
    for i, agent in enumerate(agents):
        agent.next_contact = time.monotonic() + (i / max(1, len(agents)))
    threads = args.threads or max(1, min(8, (len(agents) + 127) // 128))
    stop = threading.Event()
    shutdown_deadline: list[float] = []

    def on_term(signum: int, frame: object) -> None:
        if not shutdown_deadline:
            shutdown_deadline.append(time.monotonic() + args.stop_grace + 10.0)
            for agent in agents:
                agent.shutdown(min(args.stop_grace, 2.0))

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    install_partition_signals(agents)
    if args.status_file:
        start_status_writer(args.status_file, agents, stop)
    log.info("simulating nodes", nodes=len(agents), threads=threads, server=args.server)
    threading.Thread(target=_report_round_trips, args=(agents, stop), name="round-trips", daemon=True).start()
    wake_events = [threading.Event() for _ in range(threads)]
    workers = [
        threading.Thread(target=_drive, args=(agents[i::threads], stop, shutdown_deadline, client, args.batch,
                                              wake_events[i]),
                         name=f"sim-{i}", daemon=True)
        for i in range(threads)
    ]
    if not args.no_wake:
        # One long poll for every simulated node; a wake-up pokes the threads driving them.
        thread_of = {id(agent): i % threads for i, agent in enumerate(agents)}

        def poke(woken: list[NodeAgent]) -> None:
            for index in {thread_of[id(agent)] for agent in woken}:
                wake_events[index].set()

        WakeListener(agents, AgentClient(args.server), poke, stop).start()
    for w in workers:
        w.start()
    try:
        while any(w.is_alive() for w in workers):
            for w in workers:
                w.join(timeout=0.2)
    finally:
        stop.set()
    return 0


def _report_round_trips(agents: list[NodeAgent], stop: threading.Event, every_s: float = 10.0) -> None:
    """Every `every_s`, log how many calls the simulated nodes made and how long they took:
    the first sign of an overloaded control plane is heartbeats slower than the interval."""
    while not stop.wait(every_s):
        trips: list[float] = []
        for agent in agents:
            trips.extend(agent.round_trips)
            agent.round_trips = []
        if not trips:
            continue
        trips.sort()
        log.info("round trips", calls_per_s=round(len(trips) / every_s, 1),
                    p50_ms=round(trips[len(trips) // 2] * 1000, 1),
                    p95_ms=round(trips[min(len(trips) - 1, int(len(trips) * 0.95))] * 1000, 1),
                    max_ms=round(trips[-1] * 1000, 1), self_fenced=sum(a.counters["self_fenced"] for a in agents))


def _drive(agents: list[NodeAgent], stop: threading.Event, shutdown_deadline: list[float],
           client: AgentClient, batch: int, woken: threading.Event | None = None) -> None:
    """Run many simulated nodes on one thread: every node's round when it is due, and the
    heartbeats and reports of all nodes due together in one request (each item with its own
    node's token), so a thousand nodes cost tens of requests a second, not a thousand. A
    wake-up (`woken`) runs the rounds of the nodes it names at once."""
    woken = woken or threading.Event()
    scheduled = [agent.next_contact for agent in agents]  # each node's one live entry in `due`
    due = [(at, i) for i, at in enumerate(scheduled)]
    heapq.heapify(due)
    while due and not stop.is_set():
        if woken.is_set():
            woken.clear()
            now = time.monotonic()
            for i, agent in enumerate(agents):
                if agent.wake_requested and scheduled[i] > now:
                    scheduled[i] = now
                    heapq.heappush(due, (now, i))
        delay = due[0][0] - time.monotonic()
        if delay > 0:
            woken.wait(min(delay, 0.2))
            continue
        now = time.monotonic()
        ready: list[int] = []
        while due and due[0][0] <= now:
            at, i = heapq.heappop(due)
            if at == scheduled[i]:  # else superseded by an earlier entry (a wake-up)
                ready.append(i)
        calls: list[tuple[NodeAgent, Call]] = []
        for i in ready:
            agent = agents[i]
            try:
                call = agent.begin()
            except Exception:  # noqa: BLE001 - one node's bug must not stop the others
                log.exception("simulated node round failed", node=agent.name)
                continue
            if call is None:
                continue
            if call.kind == "register":
                _send_alone(agent, call)
            else:
                calls.append((agent, call))
        for start in range(0, len(calls), batch):
            _send_batch(client, calls[start:start + batch])
        for i in ready:
            agent = agents[i]
            try:
                wait = agent.end()
            except Exception:  # noqa: BLE001
                log.exception("simulated node round failed", node=agent.name)
                wait = 1.0
            if agent.done or (shutdown_deadline and time.monotonic() > shutdown_deadline[0]):
                if not agent.done:  # said as the real agent's loop says it (run_real)
                    log.warning("control plane unreachable at shutdown; its lease will expire and fence",
                                node=agent.name)
                scheduled[i] = -1.0
                continue
            # A wake-up that came in during this round is served by the next one, right away.
            scheduled[i] = time.monotonic() + (0.0 if agent.wake_requested else max(wait, 0.005))
            heapq.heappush(due, (scheduled[i], i))


def _send_alone(agent: NodeAgent, call: Call) -> None:
    try:
        reply = agent.send(call)
    except ProtocolError as error:
        agent.finish(call, error=error)
    else:
        agent.finish(call, reply=reply)


def _items_refused(error: ProtocolError, count: int) -> dict[int, dict[str, list[str]]] | None:
    """A 400 to a batch, its `errors` per item: `nodes.3.reports.0.message` is item 3's
    `reports.0.message`, so that node sets aside what it refuses and the others send theirs
    again at once. None when it names no item (or is no 400): every item takes the error."""
    if not isinstance(error, Refused) or isinstance(error, Retired) or error.status != 400:
        return None
    mine: dict[int, dict[str, list[str]]] = {}
    for name, problems in error.errors.items():
        head, _, rest = name.partition(".")
        index, _, field = rest.partition(".")
        if head != "nodes" or not index.isdigit() or int(index) >= count:
            return None
        mine.setdefault(int(index), {})[field or "non_field_errors"] = problems
    return mine or None


def _send_batch(client: AgentClient, calls: list[tuple[NodeAgent, Call]]) -> None:
    items = [{"name": agent.name, "token": agent.token, "renew": call.kind == "heartbeat", **call.body}
             for agent, call in calls]
    # No longer than the nearest self-fence among them (NodeAgent.self_fence_in).
    left = [t for t in (agent.self_fence_in() for agent, _ in calls) if t is not None]
    within = getattr(client, "within", None)  # (a test's stand-in client may have none)
    try:
        with within(min(left)) if within is not None and left else contextlib.nullcontext():
            results = client.sync_many(items)
    except ProtocolError as error:
        mine = _items_refused(error, len(calls))
        for index, (agent, call) in enumerate(calls):
            if mine is None:
                agent.finish(call, error=error)
            elif index in mine:
                assert isinstance(error, Refused)
                agent.finish(call, error=Refused(error.status, error.detail, mine[index]))
            else:
                # Refused only for another node's item (the batch is validated whole): again, now.
                agent.finish(call, error=Unreachable("nodes/heartbeats: the batch was refused for another node's "
                                                     "contact; sent again"))
        return
    for (agent, call), result in zip(calls, results, strict=True):
        status = int(result.get("status", 500))
        if status == 200:
            agent.finish(call, reply=result)
        elif status == 401:
            agent.finish(call, error=Unauthorized(str(result.get("detail", ""))))
        else:
            agent.finish(call, error=error_for(status, result))


if __name__ == "__main__":
    sys.exit(main())
