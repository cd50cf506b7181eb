"""What runs on a node for one allocation: its gang member, as real processes or simulated.

A member is started from an `Assignment` (one entry of the heartbeat's desired allocations)
and answers: has it exited (and with which code)? how far has it got? how busy were its
devices? It can be asked to stop (SIGTERM) and forced to (SIGKILL).

Real members (`ProcessMember`) run the job's command with `/bin/sh -c`, one process per GPU by
default (the torch.distributed `env://` contract: CUDA_VISIBLE_DEVICES lists the node's GPUs of
the allocation, LOCAL_RANK picks one, RANK/WORLD_SIZE number every GPU of the gang), or one
process per node with `QM_LAUNCH=per_node` in the job's env (for launchers such as torchrun,
which get NNODES/NODE_RANK/LOCAL_WORLD_SIZE). A heterogeneous gang's processes also learn
their role: QM_ROLE, QM_ROLE_RANK and QM_ROLE_WORLD_SIZE per GPU, or QM_ROLES (the node's
local GPUs of each role) per node. Every process gets `QM_PROGRESS_FILE`: the job
appends JSON lines such as `{"steps": 1200, "useful_tokens": 4915200, "checkpoint": true}`
(cumulative totals for the whole job; the agent reads the RANK=0 process's file).

Each process runs in its own session (so the whole tree can be signalled; a process that left
it, `setsid`, is found by the run's marker in its environment, QM_AGENT_NODE and QM_GENERATION,
and, where the host has a writable cgroup v2 hierarchy, in the run's cgroup whatever its
environment (containment.py); the member is over only once none is left) and dies with the agent (PR_SET_PDEATHSIG). What it started in turn (torchrun's workers, a pipeline, anything
that forks) dies with the agent too: a `Reaper`, a small process of its own, is told every
process group the agent starts and kills them all the moment the agent is gone, however it
went (SIGKILL, the OOM killer). The groups are also recorded in the state directory, so a
restarted agent kills anything left behind even if the reaper could not: a GPU never keeps a
process the control plane no longer knows about.

Simulated members make progress at the rates in the job's env (QM_SIM_DURATION_S,
QM_SIM_STEPS_PER_S, QM_SIM_TOKENS_PER_STEP, QM_SIM_ACTIVITY, QM_SIM_EXIT_CODE, QM_SIM_STOP_S)
and report exactly like real ones.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import structlog

from controlplane.agent import containment
from controlplane.agent.containment import RunCgroups
from controlplane.agent.job_users import JobIdentity, JobUsers
from controlplane.agent.logs import (
    RECORD_NAME,
    Unshipped,
    open_regular,
    read_record,
    read_regular,
    write_record,
    write_whole,
)

PR_SET_PDEATHSIG = 1
#: The most of one rank's output not shipped that a node keeps (qm-agent --max-rank-output-mib).
DEFAULT_OUTPUT_CAP = 256 * 1024 * 1024
NO_COMMAND_EXIT_CODE = 127
#: Every run's processes carry their agent's state directory (`<state-dir>/<node>`, absolute) in
#: this variable, beside QM_AGENT_NODE: a sweep kills only the marked runs of its own state
#: directory, or of one that no longer exists (`ProcessLauncher.sweep_leftovers`).
STATE_MARKER = "QM_AGENT_STATE"

log = structlog.get_logger("qm.agent")


@dataclass(frozen=True)
class Release:
    reason: str
    grace_remaining_s: float


@dataclass(frozen=True)
class Assignment:
    """One desired allocation on this node, as the control plane sent it."""

    generation: int
    state: str
    job_id: int
    job_name: str
    command: str
    env: dict[str, str]
    gpus: tuple[int, ...]
    ranks: tuple[int, ...]
    world_size: int
    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int
    checkpoint_interval_s: float | None
    runtime_limit_s: float | None
    release: Release | None
    # A heterogeneous gang's roles, aligned with `gpus` (empty for a plain gang): each GPU's
    # role, its rank within the role, and each role's GPUs over the whole gang.
    roles: tuple[str, ...] = ()
    role_ranks: tuple[int, ...] = ()
    role_sizes: tuple[tuple[str, int], ...] = ()
    team_id: int | None = None  # whose user (--job-user team) or group (user) the run gets (job_users.py)
    submitter_id: int | None = None  # whose user the run gets with --job-user user (job_users.py)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Assignment:
        job = data["job"]
        release = data.get("release")
        return cls(
            generation=int(data["generation"]),
            state=str(data["state"]),
            job_id=int(job["id"]),
            job_name=str(job.get("name", "")),
            command=str(job.get("command") or ""),
            env={str(k): str(v) for k, v in (job.get("env") or {}).items()},
            gpus=tuple(int(g) for g in data["gpus"]),
            ranks=tuple(int(r) for r in data["ranks"]),
            world_size=int(data["world_size"]),
            nnodes=int(data["nnodes"]),
            node_rank=int(data["node_rank"]),
            master_addr=str(data["master_addr"]),
            master_port=int(data["master_port"]),
            checkpoint_interval_s=float(job["checkpoint_interval_s"]) if job.get("checkpoint_interval_s") else None,
            runtime_limit_s=float(job["runtime_limit_s"]) if job.get("runtime_limit_s") else None,
            release=Release(str(release.get("reason", "")), float(release.get("grace_remaining_s", 0.0)))
            if release else None,
            roles=tuple(str(r) for r in data.get("roles") or ()),
            role_ranks=tuple(int(r) for r in data.get("role_ranks") or ()),
            role_sizes=tuple((str(k), int(v)) for k, v in (data.get("role_sizes") or {}).items()),
            team_id=int(job["team_id"]) if job.get("team_id") is not None else None,
            submitter_id=int(job["submitter_id"]) if job.get("submitter_id") is not None else None,
        )

    @property
    def hosts_rank_zero(self) -> bool:
        return 0 in self.ranks


@dataclass
class Progress:
    """Cumulative totals for the job as its RANK=0 process last wrote them."""

    steps: int = 0
    useful_tokens: int = 0
    last_checkpoint_at: float | None = None  # wall-clock seconds
    gpu_activity: float | None = None  # the job's own figure, when it gives one


class Member(Protocol):
    generation: int

    def poll(self) -> int | None:
        """The exit code once every process is gone, else None."""

    def terminate(self) -> None:
        """Ask to stop (SIGTERM): the job may checkpoint within its grace period."""

    def kill(self) -> None:
        """Stop now (SIGKILL)."""

    def progress(self) -> Progress:
        ...

    def activity(self) -> float | None:
        """Mean device activity (0..1) since the last call, or None when nothing measures it."""

    def next_event_in(self) -> float | None:
        """Seconds until this member will change by itself (simulated; math.inf: never), None if unknown."""


class Launcher(Protocol):
    def launch(self, assignment: Assignment) -> Member:
        ...


# ----------------------------------------------------------------------------- real processes


def _load_libc() -> Any:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


# Loaded once in the agent: the child between fork and exec only calls into it (loading it
# there cost every launch a dlopen).
_LIBC = _load_libc()


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL me when the agent dies (Linux)."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _find_setpriv() -> str | None:
    """util-linux's `setpriv`, if it can set the parent-death signal (util-linux ≥ 2.33)."""
    import shutil

    path = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if path is None:
        return None
    try:
        probe = subprocess.run([path, "--pdeathsig", "KILL", "/bin/true"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return path if probe.returncode == 0 else None


_SETPRIV: str | None | bool = False  # False: not looked up yet


def launch_argv(command: str) -> tuple[list[str], Callable[[], None] | None]:
    """How to start `command` so that it dies with the agent: `setpriv --pdeathsig KILL
    /bin/sh -c …` where setpriv exists (the agent spawns it without running Python in the
    child, so CPython uses vfork: ~1.5 ms of CPU a process instead of ~4.7 ms for a fork of the
    whole agent with a pre-exec hook), else a pre-exec hook that sets PR_SET_PDEATHSIG."""
    global _SETPRIV
    if _SETPRIV is False:
        _SETPRIV = _find_setpriv() if os.environ.get("QM_AGENT_PREEXEC_PDEATHSIG", "") != "1" else None
    if isinstance(_SETPRIV, str):
        return [_SETPRIV, "--pdeathsig", "KILL", "/bin/sh", "-c", command], None
    return ["/bin/sh", "-c", command], _die_with_parent


#: Every name the agent sets in a job's processes' environment: the torch.distributed ones
#: (rank_environment), a heterogeneous gang's role names, QM_AGENT_NODE and QM_PROGRESS_FILE,
#: whatever the job's shape (a plain gang gets no QM_ROLE, so a job's own would have reached its
#: processes as if it were the agent's). A job's env may not set them: the submit refuses them
#: (services/jobs.py) and a process gets the agent's value or none, never the job's. The rest
#: of `QM_` is the job's to set on purpose: QM_LAUNCH, the simulator's QM_SIM_*.
PROCESS_ENV_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "RANK", "LOCAL_RANK", "QM_JOB_ID", "QM_GENERATION", "QM_ROLE", "QM_ROLE_RANK",
    "QM_ROLE_WORLD_SIZE", "QM_ROLES", "QM_AGENT_NODE", "QM_AGENT_STATE", "QM_PROGRESS_FILE",
})


#: The agent's own secrets, never passed on to a job's processes from the agent's environment:
#: the bootstrap secret registers any node (docs/operations.md, *Registration*).
AGENT_SECRETS = frozenset({"QM_AGENT_BOOTSTRAP_TOKEN"})


def rank_environment(assignment: Assignment, local_index: int, per_node: bool) -> dict[str, str]:
    """The torch.distributed environment of one process of this node's gang member."""
    devices = ",".join(str(g) for g in assignment.gpus)
    common = {
        "CUDA_VISIBLE_DEVICES": devices,
        "MASTER_ADDR": assignment.master_addr,
        "MASTER_PORT": str(assignment.master_port),
        "NNODES": str(assignment.nnodes),
        "NODE_RANK": str(assignment.node_rank),
        "GROUP_RANK": str(assignment.node_rank),
        "LOCAL_WORLD_SIZE": str(len(assignment.gpus)),
        "QM_JOB_ID": str(assignment.job_id),
        "QM_GENERATION": str(assignment.generation),
    }
    if per_node:
        return {**common, "WORLD_SIZE": str(assignment.nnodes), "RANK": str(assignment.node_rank), "LOCAL_RANK": "0",
                **_node_roles_environment(assignment)}
    return {
        **common,
        "WORLD_SIZE": str(assignment.world_size),
        "RANK": str(assignment.ranks[local_index]),
        "LOCAL_RANK": str(local_index),
        **_gpu_role_environment(assignment, local_index),
    }


def _gpu_role_environment(assignment: Assignment, local_index: int) -> dict[str, str]:
    """A heterogeneous gang's process: what it runs as (QM_ROLE), its rank among that role's
    GPUs over the gang (QM_ROLE_RANK) and how many they are (QM_ROLE_WORLD_SIZE)."""
    if not assignment.roles:
        return {}
    role = assignment.roles[local_index]
    return {"QM_ROLE": role, "QM_ROLE_RANK": str(assignment.role_ranks[local_index]),
            "QM_ROLE_WORLD_SIZE": str(dict(assignment.role_sizes).get(role, 0))}


def _node_roles_environment(assignment: Assignment) -> dict[str, str]:
    """A launcher started once per node learns which of its LOCAL GPUs serve which role
    (QM_ROLES="learner=0,1;rollout=2"), and QM_ROLE when they all serve one."""
    if not assignment.roles:
        return {}
    local: dict[str, list[str]] = {}
    for index, role in enumerate(assignment.roles):
        local.setdefault(role, []).append(str(index))
    env = {"QM_ROLES": ";".join(f"{role}={','.join(indices)}" for role, indices in local.items())}
    if len(local) == 1:
        env["QM_ROLE"] = assignment.roles[0]
    return env


class DeviceMonitor(Protocol):
    # "activity", not "utilization": a device counter is one factor of utilization, never all
    # of it (DEVELOPERS.md; the control plane multiplies it with allocation and progress).
    def activity(self, gpus: tuple[int, ...]) -> float | None:
        ...


class ProcessMember:
    """The job's command as real subprocesses on this node."""

    def __init__(
        self,
        assignment: Assignment,
        *,
        workdir: Path,
        node_name: str,
        devices: DeviceMonitor | None,
        base_env: dict[str, str] | None = None,
        reaper: Reaper | None = None,
        cgroups: RunCgroups | None = None,
        output_cap: int | None = None,
        job_users: JobUsers | None = None,
    ) -> None:
        self.generation = assignment.generation
        self.reaper = reaper
        # The most of a rank's output not shipped that the node keeps (--max-rank-output-mib):
        # the member gives back to the disk what is before a rank's last `output_cap` bytes,
        # shipped or not, and the shipper sends in place of what it never sent a line saying
        # so (agent/logs.py). With --no-output the files keep only their last `output_cap`.
        self.output_cap = output_cap
        self._trimmed: dict[int, int] = {}  # per rank: bytes before this were given back
        self._trim_at = 0.0
        self.cgroup: Path | None = None  # the run's cgroup, when the agent contains runs (containment.py)
        self.assignment = assignment
        self.devices = devices
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.node_name = node_name
        self._exit_code: int | None = None
        self._first_failure: int | None = None
        self._ending: int | None = None  # the exit code once the shells are gone, until the rest is
        self._strays: list[int] = []  # live processes of this run outside its process groups
        self._stray_starts: dict[int, bytes] = {}  # the strays found by marker, by pid: each one's start time
        self._strays_told = False
        self._progress = Progress()
        self._progress_offset = 0
        self._activity_sum = 0.0
        self._activity_n = 0
        per_node = assignment.env.get("QM_LAUNCH", "per_gpu") == "per_node"
        count = 1 if per_node else max(1, len(assignment.gpus))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ranks: list[int] = []  # each process's RANK: its output is rank<RANK>.log
        self.output_record = workdir / RECORD_NAME  # what of it was shipped (agent/logs.py)
        self.job_users = job_users
        self.identity: JobIdentity | None = None  # its user and group, with --job-user team or user (job_users.py)
        self.job_dir = workdir  # the job's cwd, HOME with --job-user team or user, and its progress files' place
        self.progress_file = workdir / "rank0.progress.jsonl"
        if not assignment.command.strip():
            self._exit_code = NO_COMMAND_EXIT_CODE
            self._never_ran("the job has no command to run")
            return
        env_base = {name: value for name, value in (base_env if base_env is not None else os.environ).items()
                    if name not in AGENT_SECRETS}
        # The agent's names are its own: a job stored before the submit refused them (or written
        # around it) sets none of them, even those this job's shape leaves unset.
        job_env = {name: value for name, value in assignment.env.items() if name not in PROCESS_ENV_NAMES}
        try:
            self._become(assignment)
            self._spawn(assignment, cgroups, count, per_node, {**env_base, **job_env})
            # Within the launch: before 5 Dec a record that could not be written (a full disk)
            # failed the launch with every rank already running, and nothing killed them.
            write_whole(workdir / "pgids", "".join(f"{p.pid}\n" for p in self.procs).encode())
            if reaper is not None:
                reaper.watch([p.pid for p in self.procs], self.generation, self.cgroup)
        except BaseException as error:
            self._abandon_launch()
            self._never_ran(f"launch failed: {type(error).__name__}: {error}")
            raise

    def _become(self, assignment: Assignment) -> None:
        """With --job-user team or user: the run's user, and its own `work/` as where it works."""
        if self.job_users is not None:
            self.identity = self.job_users.identity(assignment.team_id, assignment.submitter_id)
        if self.job_users is not None and self.identity is not None:
            self.job_dir = self.job_users.work_dir(self.workdir, self.identity)
            self.progress_file = self.job_dir / "rank0.progress.jsonl"

    def _spawn(self, assignment: Assignment, cgroups: RunCgroups | None, count: int, per_node: bool,
               env_base: dict[str, str]) -> None:
        """Start one process per rank (`self.procs`), each joining the run's cgroup first."""
        workdir, job_dir, node_name = self.workdir, self.job_dir, self.node_name
        for index in range(count):
            env = {**env_base, **rank_environment(assignment, index, per_node),
                   "QM_AGENT_NODE": node_name, STATE_MARKER: str(workdir.parent.resolve())}
            if self.identity is not None:
                env["HOME"] = str(job_dir)
            rank = env["RANK"]
            self.ranks.append(int(rank))
            env["QM_PROGRESS_FILE"] = str(self.progress_file if rank == "0" else job_dir / f"rank{rank}.progress.jsonl")
            argv, pre_exec = launch_argv(assignment.command)
            if self.job_users is not None and self.identity is not None:
                argv, pre_exec = self.job_users.wrapped(self.identity, assignment.command), None
            if cgroups is not None:
                if self.cgroup is None:
                    self.cgroup = cgroups.create(self.generation)
                argv = containment.joined_argv(self.cgroup, argv)
            # (a rank already started may have made the next one's file a FIFO: open_regular)
            log = open_regular(workdir / f"rank{rank}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode=0o600)
            try:
                proc = subprocess.Popen(
                    argv,
                    env=env,
                    cwd=str(job_dir),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=pre_exec,
                )
            finally:
                os.close(log)
            self.procs.append(proc)

    def _never_ran(self, why: str) -> None:
        """A run that never ran (no command; a launch that failed): `why` in its directory's
        error.txt, and its shipping record written `done` now (it has nothing to ship), so its
        directory is removed `--keep-output-s` later as a shipped run's is
        (ProcessLauncher.prune_finished_runs). Before 5 Dec such a run wrote no record, and its
        directory (a failed launch's rank files, error.txt) was never removed."""
        try:
            write_whole(self.workdir / "error.txt", (why + "\n").encode())
        except OSError:
            pass
        write_record(self.output_record, self.generation, {}, done=True, cap=self.output_cap)

    def _abandon_launch(self) -> None:
        """A launch failed part-way (a rank could not be spawned): kill the ranks already
        started and whatever they started, and remove the run's cgroup, now. The member is
        never returned, so nothing would look at them again: before 5 Dec rank 0 of a run whose
        rank 1 failed to spawn ran on (its GPUs reported free) and the run's cgroup stayed, both
        until the next agent's start swept them."""
        self._signal(signal.SIGKILL)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log.warning("a rank of a failed launch did not die", generation=self.generation, pid=proc.pid)
        try:
            (self.workdir / "pgids").unlink()
        except OSError:
            pass
        removed = self.cgroup is None
        if self.cgroup is not None:
            for _ in range(250):  # what the ranks started is gone once the cgroup is not populated
                if not containment.populated(self.cgroup):
                    break
                containment.signal_all(self.cgroup, signal.SIGKILL)
                time.sleep(0.02)
            removed = containment.remove(self.cgroup)
            if not removed:
                log.warning("the cgroup of a failed launch could not be removed; the next agent start sweeps it",
                            path=str(self.cgroup))
        if self.reaper is not None:  # told of the run when the launch failed after the ranks started
            self.reaper.forget([p.pid for p in self.procs], self.generation, None if not removed else self.cgroup)

    def poll(self) -> int | None:
        if self._exit_code is not None:
            return self._exit_code
        if self.output_cap is not None:
            self._trim_output()
        codes = [p.poll() for p in self.procs]
        failed = [c for c in codes if c not in (None, 0)]
        if failed and self._first_failure is None:
            # The first rank to fail names the member's exit code (the others are then
            # stopped by us: their SIGTERM is not the cause).
            self._first_failure = failed[0]
            if any(c is None for c in codes):
                # One rank died: the others cannot finish a collective without it.
                self.terminate()
        if any(c is None for c in codes):
            return None
        if self._ending is None:
            self._ending = self._first_failure if self._first_failure is not None else 0
        # The shells are gone; anything they left (in their sessions, or in a session of its
        # own: `setsid`, a daemon's double fork) is killed, and the member is over only once
        # none of it lives: its GPUs may go to a new owner the moment we report the exit.
        self._signal(signal.SIGKILL)
        if self._strays or (self.cgroup is not None and containment.populated(self.cgroup)):
            if not self._strays_told:
                self._strays_told = True
                log.warning("its shells are gone: killing what the job left running outside its session",
                            generation=self.generation, pids=self._strays)
            return None
        self._exit_code = self._ending
        if self.output_cap is not None:
            self._trim_output(final=True)  # what it printed in its last moments, too
        self._read_progress()
        self._cleanup_groups()
        return self._exit_code

    def _signal(self, sig: int) -> None:
        """`sig` to every process group the member started, and to every process that left
        them (a new session, a new group): in the run's cgroup, or carrying this run's marker
        (looked for only when the job could have left its cgroup, or has none); `_strays` then
        holds those still alive."""
        for proc in self.procs:
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if not self.procs:
            return
        if self.cgroup is not None:
            containment.signal_all(self.cgroup, sig)
        # A job run as a user of its own cannot leave its cgroup (moving a process takes write
        # access to the cgroups' `cgroup.procs`, root's): the cgroup holds all it started, and
        # reading every process's environment on the node for the marker is not needed. It cost
        # ~8 ms of the agent's CPU a stop or exit with 300-odd processes on the node
        # (bench/true_jobs.py: 7.5 of the agents' 12 CPU-s).
        contained = self.cgroup is not None and self.identity is not None
        marked = [] if contained else marked_processes(self.node_name, {self.generation})
        for pid in marked:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        # A stray found by its marker stays one, and is signalled, until it is a zombie or gone: a
        # process in the middle of dying has already dropped its memory (its environment reads
        # empty, so the scan no longer finds it) but not yet its open files, the GPU's among them;
        # and one that wrote over its environment's area (a process title: `setproctitle`) while
        # alive was, after 9c891b7 (6 Dec), waited for but never signalled, its member never
        # over. Checked against its start time, so that a pid taken since by another process is not.
        # (What is in the run's cgroup is found there again at each look, and needs none of this.)
        tracked: dict[int, bytes] = {}
        for pid in marked:
            started = _start_time(pid)
            if started is not None:  # else gone already
                tracked[pid] = started
        for pid, started in self._stray_starts.items():
            if pid not in tracked and _signal_if_still(pid, started, sig):
                tracked[pid] = started
        self._stray_starts = tracked
        # what lives in the run's cgroup is the run's, whatever its environment says
        self._strays = sorted(set(marked) | set(tracked) | set(containment.pids(self.cgroup) if self.cgroup else ()))

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _cleanup_groups(self) -> None:
        try:
            (self.workdir / "pgids").unlink()
        except OSError:  # gone; or the job made it a directory
            pass
        if self.reaper is not None:
            self.reaper.forget([p.pid for p in self.procs], self.generation, self.cgroup)
        if self.cgroup is not None:
            containment.remove(self.cgroup)

    def _read_progress(self) -> None:
        try:
            chunk = read_regular(self.progress_file, PROGRESS_READ_BYTES, self._progress_offset)
        except OSError:
            # not there yet; or the job made it something that is not a regular file (a
            # directory, a FIFO, a link to /dev/zero: logs.open_regular)
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            if len(chunk) == PROGRESS_READ_BYTES:  # no progress line is that long: skipped
                self._progress_offset += len(chunk)
            return
        self._progress_offset += end + 1
        for line in chunk[: end + 1].splitlines():
            try:
                item = json.loads(line)
            except (ValueError, RecursionError):  # (a line nested thousands deep: RecursionError)
                continue
            if isinstance(item, dict):
                apply_progress_line(self._progress, item, now=time.time())

    def progress(self) -> Progress:
        self._read_progress()
        return self._progress

    def activity(self) -> float | None:
        if self.devices is not None:
            value = self.devices.activity(self.assignment.gpus)
            if value is not None:
                return value
        return self._progress.gpu_activity

    def next_event_in(self) -> float | None:
        # Its shells' exits wake the agent (SIGCHLD); the end of processes that left their
        # session does not, so while they die they are looked at every 50 ms. With a cap on
        # its output, it is looked at every TRIM_EVERY_S while it runs (_trim_output).
        if self._exit_code is not None:
            return None
        if self._ending is not None:
            return 0.05
        return TRIM_EVERY_S if self.output_cap is not None and self.procs else None

    def output_ranks(self) -> list[int]:
        return list(self.ranks)

    def output_size(self, rank: int) -> int:
        """How many bytes rank `rank` has printed (its file's length; not what a link the job
        put in its place points to)."""
        return os.stat(self.workdir / f"rank{rank}.log", follow_symlinks=False).st_size

    def _trim_output(self, *, final: bool = False) -> None:
        """The node keeps only the last `output_cap` bytes of each rank's output: what is
        before is given back to the disk once a quarter of the cap more has been printed
        (looked at every TRIM_EVERY_S while the member runs; shipped or not: a control plane
        out of reach for hours does not fill the disk either), and all of it once the member
        is over (`final`: a rank that printed a burst and exited at once keeps no more).
        A rank's file so holds on the disk at most `output_cap` * 5/4 plus what it printed
        since the last look: not a strict bound, since the job writes the file itself between
        looks (docs/operations.md, *Disk*)."""
        now = time.monotonic()
        if now < self._trim_at and not final:
            return
        self._trim_at = now + TRIM_EVERY_S
        assert self.output_cap is not None
        step = 1 if final else max(1, self.output_cap // 4)
        for rank in self.ranks:
            try:
                upto = self.output_size(rank) - self.output_cap
            except OSError:
                continue
            first = rank not in self._trimmed
            if upto - self._trimmed.get(rank, 0) >= step:
                punch_hole(self.workdir / f"rank{rank}.log", upto, self._trimmed.get(rank, 0))
                self._trimmed[rank] = upto
            # said when it begins and at the end with the total, not at each trim
            if rank in self._trimmed and (final or first):
                log.info("a rank's output passed the node's cap: its oldest bytes given back to the disk",
                         generation=self.generation, rank=rank, cap_bytes=self.output_cap,
                         bytes_given_back=self._trimmed[rank], **({"final": True} if final else {}))

    def read_output(self, rank: int, offset: int, limit: int) -> bytes:
        """Up to `limit` bytes of rank `rank`'s stdout+stderr from byte `offset` (agent/logs.py)."""
        return _read_rank(self.workdir, rank, offset, limit)

    def release_output(self, rank: int, start: int, upto: int) -> None:
        """Give the disk blocks of rank `rank`'s file from byte `start` to `upto` back
        (agent/logs.py: shipped bytes, or bytes dropped); the file keeps its size and
        offsets, the range reads as NUL."""
        punch_hole(self.workdir / f"rank{rank}.log", upto, start)


#: How often a running member with an output cap looks whether its ranks' files passed it.
TRIM_EVERY_S = 0.5
#: The most of a progress file read at one look (its lines are ~100 bytes).
PROGRESS_READ_BYTES = 1024 * 1024

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_punch_refused: set[int] = set()  # errnos already logged once


def punch_hole(path: Path, upto: int, start: int = 0) -> None:
    """Deallocate `path`'s bytes [start, upto) (Linux fallocate PUNCH_HOLE, as ext4, xfs and
    tmpfs offer): the job keeps appending where it was, readers see NUL there. A filesystem
    that cannot is said once in the log and the file stays whole."""
    if _LIBC is None or upto <= start:
        return
    try:
        fd = open_regular(path, os.O_WRONLY)
    except OSError:
        return
    try:
        failed = _LIBC.fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, ctypes.c_long(start), ctypes.c_long(upto - start))
        errno = ctypes.get_errno() if failed else 0
    finally:
        os.close(fd)
    if errno and errno not in _punch_refused:
        _punch_refused.add(errno)
        log.warning("cannot give shipped output back to the disk; rank files grow whole", path=str(path),
                    error=os.strerror(errno))


def _read_rank(workdir: Path, rank: int, offset: int, limit: int) -> bytes:
    """A rank file's bytes; an OSError if the job made it something else than a regular file."""
    try:
        return read_regular(workdir / f"rank{rank}.log", limit, offset)
    except FileNotFoundError:
        return b""


#: The largest count of steps or tokens a job may report (the control plane keeps 64-bit ones),
#: and the latest checkpoint time (the end of year 9999, as Python's datetime has it).
MAX_PROGRESS_COUNT = 2**63 - 1
MAX_CHECKPOINT_AT = 253402300799.0


def _count(value: Any) -> int | None:
    """A cumulative count a job wrote: a finite number from 0 to MAX_PROGRESS_COUNT, else None."""
    if not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= MAX_PROGRESS_COUNT:
        return None
    return int(value)


def apply_progress_line(progress: Progress, item: dict[str, Any], *, now: float) -> None:
    """Fold one JSON line a job wrote into its progress (totals only move forward). A value out
    of range is ignored: before 5 Dec `{"steps": 1e400}` (infinity, as JSON reads it) or NaN
    raised here, and `{"last_checkpoint_at": 1e300}` when the agent reported it; either went up
    out of the agent's round, and `qm-agent` exited, its reaper killing every run on the node."""
    steps, tokens = _count(item.get("steps")), _count(item.get("useful_tokens"))
    if steps is not None:
        progress.steps = max(progress.steps, steps)
    if tokens is not None:
        progress.useful_tokens = max(progress.useful_tokens, tokens)
    checkpoint = item.get("last_checkpoint_at")
    at: float | None = None
    if isinstance(checkpoint, int | float):
        at = float(checkpoint)
    elif isinstance(checkpoint, str):
        try:
            at = datetime.fromisoformat(checkpoint).timestamp()
        except (ValueError, OverflowError):
            pass
    elif item.get("checkpoint") is True:
        at = now
    if at is not None and math.isfinite(at) and 0 <= at <= MAX_CHECKPOINT_AT:
        progress.last_checkpoint_at = at
    if isinstance(item.get("gpu_activity"), int | float) and math.isfinite(item["gpu_activity"]):
        progress.gpu_activity = min(1.0, max(0.0, float(item["gpu_activity"])))


class ProcessLauncher:
    def __init__(self, state_dir: Path, node_name: str, devices: DeviceMonitor | None,
                 cgroup_root: str = "auto", output_cap: int | None = DEFAULT_OUTPUT_CAP,
                 job_users: JobUsers | None = None) -> None:
        """``cgroup_root``: where the runs' cgroups go (``auto``, ``off`` or a path;
        containment.py). ``output_cap``: the most of a rank's output not shipped the node
        keeps (``None``: no cap). ``job_users``: which user jobs run as (job_users.py; None:
        the agent's)."""
        self.output_cap = output_cap
        self.job_users = job_users
        self.root = state_dir / node_name
        if job_users is not None and job_users.separate:  # the jobs' users pass through to their work/
            self.root.mkdir(parents=True, exist_ok=True)
            os.chmod(self.root, 0o711)
        self.node_name = node_name
        self.devices = devices
        self.reaper = Reaper(node_name)
        # Runs of a previous agent of this node found alive by `sweep_leftovers`, by generation.
        self.left_behind: set[int] = set()
        self.cgroups, self.containment = RunCgroups.open(cgroup_root, node_name, self.root)
        # The environment the jobs' processes start from, taken once: the agent never changes
        # its own, and decoding all of os.environ at every launch was ~5 % of a busy agent's
        # CPU (bench/true_jobs.py).
        self.base_env = {name: value for name, value in os.environ.items() if name not in AGENT_SECRETS}

    def launch(self, assignment: Assignment) -> Member:
        return ProcessMember(
            assignment, workdir=self.root / f"g{assignment.generation}", node_name=self.node_name, devices=self.devices,
            base_env=self.base_env, reaper=self.reaper, cgroups=self.cgroups, output_cap=self.output_cap,
            job_users=self.job_users,
        )

    def unshipped_output(self) -> list[Unshipped]:
        """The runs whose output a previous agent of this node did not finish shipping (their
        records not `done`, agent/logs.py), oldest first. Call after `sweep_leftovers`: their
        processes are gone, so their files are whole."""
        if not self.root.exists():
            return []
        runs: list[Unshipped] = []
        for path in self.root.glob(f"g*/{RECORD_NAME}"):
            record = read_record(path)
            if record is None:
                log.warning("an output shipping record could not be read; that run's rest is not shipped",
                            path=str(path))
                continue
            generation, ranks, done, launched_cap = record
            if done or not ranks:
                continue
            workdir = path.parent
            # The cap the run's files were kept to is the one it was launched with: an agent
            # restarted with a bigger one read the span between the two, given back to the disk,
            # as text (NUL as U+FFFD). A smaller one now: this agent drops to it.
            caps = [cap for cap in (launched_cap, self.output_cap) if cap is not None]
            runs.append(Unshipped(generation, ranks, read=lambda rank, offset, limit, workdir=workdir: _read_rank(
                workdir, rank, offset, limit), record=path, cap=min(caps) if caps else None,
                size=lambda rank, workdir=workdir: (workdir / f"rank{rank}.log").stat().st_size))
        return sorted(runs, key=lambda run: run.generation)

    def prune_finished_runs(self, keep_s: float, running: Collection[int], now: float) -> tuple[list[int], int]:
        """Remove the work directories of runs whose output was all shipped (their record says
        `done`, agent/logs.py) at least `keep_s` seconds before `now` (wall clock, as the files'
        times); the generations removed and the bytes freed. Nothing else is touched: a run
        still running (`running`), one with processes recorded, one whose output is not all
        taken, or one never shipped (`--no-output`: its files are the only copy) stays. A run
        that never ran (a failed launch, no command) has its record written `done` when it
        fails (ProcessMember._never_ran), with `--no-output` too: it is removed as a shipped
        one is.
        Before 5 Dec no run directory was ever removed, so a node's disk filled with every
        output its jobs ever printed."""
        removed: list[int] = []
        freed = 0
        if not self.root.exists():
            return removed, freed
        for record in sorted(self.root.glob(f"g*/{RECORD_NAME}")):
            workdir = record.parent
            generation = int(workdir.name[1:]) if workdir.name[1:].isdigit() else None
            if generation is None or generation in running or (workdir / "pgids").exists():
                continue
            read = read_record(record)
            try:
                ended_ago = now - record.stat().st_mtime
            except OSError:
                continue
            if read is None or not read[2] or ended_ago < keep_s:
                continue
            size = sum(f.stat().st_size for f in workdir.rglob("*") if f.is_file() and not f.is_symlink())
            shutil.rmtree(workdir, ignore_errors=True)
            if not workdir.exists():
                removed.append(generation)
                freed += size
        return removed, freed

    def sweep_leftovers(self) -> list[int]:
        """Kill process groups a previous agent of this node recorded and left running, everything
        in the run cgroups it left (containment.py), and every process on the host that carries
        this node's run marker (QM_AGENT_NODE and a QM_GENERATION) and this state directory's
        (QM_AGENT_STATE, or one that no longer exists), recorded or not: nothing of this agent
        runs yet, so such a process was started by an agent before it (its records lost with
        the state directory, or written too late: the agent died between the spawn and the
        record). The generations of the runs found alive are kept in `left_behind`: they ran
        here, and the registration says so (launch_journal.py).

        Only processes that still carry this node's QM_AGENT_NODE are touched, so a recycled
        pid of an unrelated process is left alone."""
        marked = self._marked_runs()
        self.left_behind = set(marked.values()) | self._populated_run_cgroups()
        killed = self._empty_run_cgroups() + _sigkill(marked)
        groups: set[int] = set()
        generations: set[int] = set()
        records = list(self.root.glob("g*/pgids")) if self.root.exists() else []
        for record in records:
            try:
                raw = read_regular(record, 1024 * 1024).split()
            except OSError:
                raw = []
            groups.update(int(pgid) for pgid in raw if pgid.isdigit())
            if record.parent.name[1:].isdigit():
                generations.add(int(record.parent.name[1:]))
        killed += kill_groups(groups, self.node_name, generations)
        for record in records:
            try:
                record.unlink()
            except OSError:  # (the job made it a directory)
                pass
        return sorted(set(killed))

    def _marked_runs(self) -> dict[int, int]:
        """pid → generation of the live processes left behind by a previous agent of this node
        and state directory: those carrying this node's marker and this state directory's, or
        that of one that no longer exists (lost with its records: its runs are this node's
        agent's to end). Runs of another state directory that exists are another agent's (two
        agents given one name on a host, as tests do): left alone, as their cgroups are."""
        mine = str(self.root.resolve())
        return {pid: generation for pid, (generation, state) in node_runs(self.node_name).items()
                if state is not None and (state == mine or not Path(state).is_dir())}

    def _populated_run_cgroups(self) -> set[int]:
        """The generations of this agent's run cgroups (`g<generation>`) still populated: a
        process that cleared its environment is still in its run's cgroup."""
        return {int(cgroup.name[1:]) for cgroup in (self.cgroups.runs() if self.cgroups is not None else [])
                if cgroup.name[1:].isdigit() and containment.populated(cgroup)}

    def _empty_run_cgroups(self) -> list[int]:
        """Kill what lives in the run cgroups a previous agent left, and remove them; the pids
        killed (a process that cleared its environment and left its session included)."""
        if self.cgroups is None:
            return []
        killed: list[int] = []
        for cgroup in self.cgroups.runs():
            for _ in range(50):
                alive = containment.pids(cgroup)
                if not alive and not containment.populated(cgroup):
                    break
                killed.extend(alive)
                containment.signal_all(cgroup, signal.SIGKILL)
                time.sleep(0.02)
            if not containment.remove(cgroup):
                log.warning("a run's cgroup could not be removed", path=str(cgroup))
        self.cgroups.forget_elsewhere()
        return killed


def kill_groups(groups: set[int], node_name: str, generations: set[int] | None = None) -> list[int]:
    """SIGKILL every process still in one of `groups` (the leader may be gone while its
    children live on) that carries this node's marker, and every process that carries it and
    one of `generations` whatever its group (it moved to a session of its own); the pids killed."""
    targets = {pid for pid, pgid in _process_groups() if pgid in groups and _carries_node(pid, node_name)}
    targets.update(marked_processes(node_name, generations or set()))
    return _sigkill(targets)


def _sigkill(pids: Collection[int]) -> list[int]:
    """SIGKILL each of `pids`, lowest first; the ones killed (a process gone meanwhile, or not
    ours to signal, is passed over)."""
    killed: list[int] = []
    for pid in sorted(pids):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed


# The reaper's whole program: the standard library only (no site, no Django, no package on the
# path), ~10 ms to start. It reads "+pgid" / "-pgid" lines (and "G<generation>" / "g<generation>",
# "C<cgroup path>" / "c<cgroup path>") until the agent's end of the pipe closes, then kills what
# is left of those groups, of those runs (as kill_groups does) and in those cgroups, removes the
# cgroups, and exits.
_REAPER_PROGRAM = r'''
import json, os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
node = sys.argv[1]
marker = ("QM_AGENT_NODE=" + node).encode()
groups, generations, cgroups, buffer = set(), set(), set(), b""
while True:
    try:
        chunk = os.read(0, 65536)
    except InterruptedError:
        continue
    except OSError:
        chunk = b""
    if not chunk:
        break
    buffer += chunk
    *lines, buffer = buffer.split(b"\n")
    for line in lines:
        if line[:1] == b"+":
            groups.add(int(line[1:]))
        elif line[:1] == b"-":
            groups.discard(int(line[1:]))
        elif line[:1] == b"G":
            generations.add(b"QM_GENERATION=" + line[1:])
        elif line[:1] == b"g":
            generations.discard(b"QM_GENERATION=" + line[1:])
        elif line[:1] == b"C":
            cgroups.add(line[1:].decode())
        elif line[:1] == b"c":
            cgroups.discard(line[1:].decode())
killed = []
def subtree(cgroup):
    # the run's cgroup and those its job made in it, deepest first
    return [top for top, _, _ in os.walk(cgroup, topdown=False)]
def write(path, text):
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError:
        return False
def inside(cgroup):
    found = []
    for inner in subtree(cgroup):
        try:
            with open(inner + "/cgroup.procs") as f:
                found.extend(int(pid) for pid in f.read().split())
        except (OSError, ValueError):
            pass
    return found
for cgroup in sorted(cgroups):
    if not os.path.isdir(cgroup):
        continue
    # as containment.signal_all: cgroup.kill, else each process with the subtree frozen
    if os.environ.get("QM_AGENT_NO_CGROUP_KILL", "") != "1":
        listed = inside(cgroup)
        if write(cgroup + "/cgroup.kill", "1"):
            killed.extend(listed)
            continue
    frozen = write(cgroup + "/cgroup.freeze", "1")
    deadline = time.monotonic() + 0.1
    while frozen and time.monotonic() < deadline:
        try:
            with open(cgroup + "/cgroup.events") as f:
                if "frozen 1" in f.read().splitlines():
                    break
        except OSError:
            break
        time.sleep(0.001)
    listed = inside(cgroup)
    killed.extend(listed)
    for pid in listed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if frozen:
        write(cgroup + "/cgroup.freeze", "0")
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    try:
        with open("/proc/" + entry + "/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) < 3 or int(entry) == os.getpid():
            continue
        with open("/proc/" + entry + "/environ", "rb") as f:
            environ = f.read().split(b"\0")
        if marker not in environ or (int(fields[2]) not in groups and generations.isdisjoint(environ)):
            continue
        os.kill(int(entry), signal.SIGKILL)
        killed.append(int(entry))
    except (OSError, ValueError):
        continue
for cgroup in sorted(cgroups):
    for _ in range(50):
        for inner in subtree(cgroup):
            try:
                os.rmdir(inner)
            except OSError:
                pass
        if not os.path.isdir(cgroup):
            break
        time.sleep(0.02)
if killed:
    sys.stderr.write(json.dumps({"node": node, "pids": sorted(set(killed)), "event": "agent gone: killed what its jobs "
                                 "left running", "level": "warning", "logger": "qm.agent.reaper",
                                 "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
'''


class Reaper:
    """Kills every process group the agent started the moment the agent is gone.

    PR_SET_PDEATHSIG reaches only the process the agent started (`/bin/sh -c …`); whatever
    that shell started (torchrun's workers, a pipeline, `cd … && python train.py`) was
    re-parented to init when the agent was killed, and kept its GPUs and went on writing while
    the control plane ran the job again elsewhere, until an agent was started again on the node
    and swept it. The reaper is a small process in its own session (a kill of the agent's
    process group leaves it alone); the agent tells it over a pipe which groups it started and
    which ended. When the pipe closes — the agent exited, or was killed with SIGKILL or by the
    OOM killer — it SIGKILLs every process still in those groups that carries this node's
    marker, and exits. An agent that exits normally has stopped its jobs first: nothing is left.
    Only groups this agent told it of are touched, never those of an agent started after it."""

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.groups: set[int] = set()
        self.generations: set[int] = set()
        self.cgroups: set[Path] = set()
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the reaper now (else with the first job), telling it every group known."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER_PROGRAM, self.node_name],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
        )
        if self.groups or self.generations or self.cgroups:
            self._send("".join(f"+{g}\n" for g in sorted(self.groups))
                       + "".join(f"G{g}\n" for g in sorted(self.generations))
                       + "".join(f"C{c}\n" for c in sorted(self.cgroups)))

    def watch(self, groups: list[int], generation: int | None = None, cgroup: Path | None = None) -> None:
        """The agent started `groups` for run `generation`: on the agent's death the reaper kills
        what is left of them, every process of that run that moved out of them, and everything
        in the run's `cgroup`."""
        self.groups.update(groups)
        if generation is not None:
            self.generations.add(generation)
        if cgroup is not None:
            self.cgroups.add(cgroup)
        if self._proc is None or self._proc.poll() is not None:
            self.start()  # tells it every group, these included
        else:
            self._send("".join(f"+{g}\n" for g in groups) + (f"G{generation}\n" if generation is not None else "")
                       + (f"C{cgroup}\n" if cgroup is not None else ""))

    def forget(self, groups: list[int], generation: int | None = None, cgroup: Path | None = None) -> None:
        self.groups.difference_update(groups)
        if generation is not None:
            self.generations.discard(generation)
        if cgroup is not None:
            self.cgroups.discard(cgroup)
        if self._proc is not None and self._proc.poll() is None:
            self._send("".join(f"-{g}\n" for g in groups) + (f"g{generation}\n" if generation is not None else "")
                       + (f"c{cgroup}\n" if cgroup is not None else ""))

    def _send(self, text: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(text.encode())
            self._proc.stdin.flush()
        except OSError:
            # The reaper is gone (killed on its own): the next watch starts another one, and a
            # restarted agent's sweep remains.
            pass


def _process_groups() -> list[tuple[int, int]]:
    """(pid, process group) of every process this agent can see, from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may contain spaces: fields follow the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2:
            out.append((int(entry.name), int(fields[2])))
    return out


def _stat_fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat's fields after the command name (state first), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()


def _start_time(pid: int) -> bytes | None:
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def _not_yet_dead(pid: int, started: bytes) -> bool:
    """Whether `pid` is still the process that started at `started` and not yet a zombie."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) <= 19 or fields[0] in (b"Z", b"X"):
        return False
    return fields[19] == started


def _signal_if_still(pid: int, started: bytes, sig: int) -> bool:
    """`sig` to `pid` if it is still the process that started at `started` and not yet a zombie;
    whether it was. Through a pidfd opened before the check, so the signal reaches the process
    checked even if it dies and its pid is taken in between; without pidfd_open (Linux < 5.3)
    by pid, which leaves that window open."""
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:
        pidfd = None
    try:
        if not _not_yet_dead(pid, started):
            return False
        try:
            if pidfd is None:
                os.kill(pid, sig)
            else:
                signal.pidfd_send_signal(pidfd, sig)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def marked_processes(node_name: str, generations: set[int]) -> list[int]:
    """The live (not zombie) processes that carry this node's marker and one of `generations`
    (QM_AGENT_NODE, QM_GENERATION: the agent sets both in every process it starts, and every
    descendant inherits them, whatever session or process group it moved to). A process that
    replaced its whole environment (`env -i`) is not found."""
    node = f"QM_AGENT_NODE={node_name}".encode()
    wanted = {f"QM_GENERATION={g}".encode() for g in generations}
    me = os.getpid()
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            if node not in environ or wanted.isdisjoint(environ):
                continue
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X"):
            found.append(int(entry.name))
    return sorted(found)


def node_runs(node_name: str) -> dict[int, tuple[int, str | None]]:
    """pid → (generation, state directory) of every live (not zombie) process carrying this
    node's marker and a run's generation (QM_AGENT_NODE, QM_GENERATION; the state directory from
    STATE_MARKER, None for a run an agent before 8 Dec started), whatever its session, group or
    cgroup."""
    node = f"QM_AGENT_NODE={node_name}".encode()
    state_prefix = f"{STATE_MARKER}=".encode()
    me = os.getpid()
    found: dict[int, tuple[int, str | None]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            if node not in environ:
                continue
            marks = [v[len(b"QM_GENERATION="):] for v in environ if v.startswith(b"QM_GENERATION=")]
            if not marks or not marks[0].isdigit():
                continue
            states = [v[len(state_prefix):] for v in environ if v.startswith(state_prefix)]
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X"):
            found[int(entry.name)] = (int(marks[0]), states[0].decode(errors="replace") if states else None)
    return found


def _carries_node(pid: int, node_name: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"QM_AGENT_NODE={node_name}".encode() in environ.split(b"\0")


# ----------------------------------------------------------------------------- simulated jobs


def _env_float(env: dict[str, str], name: str, default: float | None) -> float | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        return default


@dataclass
class SimulatedMember:
    """A job that runs only in the agent's memory, at the rates its env declares.

    QM_SIM_DURATION_S: seconds until it exits by itself (absent: until stopped);
    QM_SIM_STEPS_PER_S, QM_SIM_TOKENS_PER_STEP: its progress; QM_SIM_ACTIVITY: device activity;
    QM_SIM_EXIT_CODE: its exit code; QM_SIM_STOP_S: how long it takes to checkpoint and exit
    after SIGTERM (longer than the grace period means it gets SIGKILLed, like a real job).

    Its rank 0 prints what a training script's would (QM_SIM_LOG_EVERY_S, default 5; 0: nothing
    but the first and last lines): the command, a `step … loss …` line every so often, and how
    it ended. The other ranks print nothing, as most training scripts' other ranks.
    """

    assignment: Assignment
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    generation: int = 0
    started: float = 0.0
    terminated_at: float | None = None
    killed_at: float | None = None
    last_checkpoint: float | None = None
    _spec: dict[str, float | None] = field(default_factory=dict)
    # Rank 0's output not yet read past (agent/logs.py reads forward only), and where it begins.
    _out: bytearray = field(default_factory=bytearray)
    _out_base: int = 0
    _lines: int = -1  # progress lines written (-1: not even the first line)
    _closed: bool = False

    def __post_init__(self) -> None:
        env = self.assignment.env
        self.generation = self.assignment.generation
        self.started = self.clock()
        self._spec = {
            "duration": _env_float(env, "QM_SIM_DURATION_S", None),
            "steps_per_s": _env_float(env, "QM_SIM_STEPS_PER_S", 1.0),
            "tokens_per_step": _env_float(env, "QM_SIM_TOKENS_PER_STEP", 0.0),
            "activity": _env_float(env, "QM_SIM_ACTIVITY", 0.9),
            "exit_code": _env_float(env, "QM_SIM_EXIT_CODE", 0.0),
            "stop_s": _env_float(env, "QM_SIM_STOP_S", 0.2),
            "checkpoint_s": _env_float(env, "QM_SIM_CHECKPOINT_S", self.assignment.checkpoint_interval_s),
            "log_every_s": _env_float(env, "QM_SIM_LOG_EVERY_S", 5.0),
        }

    def _end(self) -> tuple[float, int] | None:
        """When and how it ends, as things stand."""
        ends: list[tuple[float, int]] = []
        duration = self._spec["duration"]
        if duration is not None:
            ends.append((self.started + duration, int(self._spec["exit_code"] or 0)))
        if self.terminated_at is not None:
            ends.append((self.terminated_at + float(self._spec["stop_s"] or 0.0), -signal.SIGTERM))
        if self.killed_at is not None:
            ends.append((self.killed_at, -signal.SIGKILL))
        return min(ends) if ends else None

    def poll(self) -> int | None:
        end = self._end()
        if end is not None and self.clock() >= end[0]:
            return end[1]
        return None

    def terminate(self) -> None:
        if self.terminated_at is None:
            self.terminated_at = self.clock()
            self.last_checkpoint = self.terminated_at  # a well-behaved job checkpoints on SIGTERM

    def kill(self) -> None:
        if self.killed_at is None:
            self.killed_at = self.clock()

    def _ran_until(self) -> float:
        end = self._end()
        now = self.clock()
        return min(now, end[0]) if end is not None else now

    def progress(self) -> Progress:
        ran = max(0.0, self._ran_until() - self.started)
        steps = int(ran * float(self._spec["steps_per_s"] or 0.0))
        checkpoint = self.last_checkpoint
        every = self._spec["checkpoint_s"]
        if every:
            periodic = self.started + every * int(ran // every)
            if periodic > self.started and (checkpoint is None or periodic > checkpoint):
                checkpoint = periodic
        offset = self.wall() - self.clock()
        return Progress(
            steps=steps,
            useful_tokens=int(steps * float(self._spec["tokens_per_step"] or 0.0)),
            last_checkpoint_at=checkpoint + offset if checkpoint is not None else None,
        )

    def activity(self) -> float | None:
        return float(self._spec["activity"] or 0.0)

    def output_ranks(self) -> list[int]:
        return [0] if self.assignment.hosts_rank_zero else []

    def read_output(self, rank: int, offset: int, limit: int) -> bytes:
        """Rank 0's output from byte `offset` (what it printed by now; see the class)."""
        if rank != 0:
            return b""
        self._write_output()
        if offset > self._out_base:  # read past: never asked for again
            del self._out[: offset - self._out_base]
            self._out_base = offset
        start = offset - self._out_base
        return bytes(self._out[start:start + limit])

    def _write_output(self) -> None:
        a = self.assignment
        if self._lines < 0:
            self._lines = 0
            self._out += (f"[sim] job {a.job_id} ({a.job_name}), generation {a.generation}, rank 0 of "
                          f"{a.world_size}: {a.command or '(no command)'}\n").encode()
        if self._closed:
            return
        every = float(self._spec["log_every_s"] or 0.0)
        ran = self._ran_until() - self.started
        rate = float(self._spec["steps_per_s"] or 0.0)
        per_step = float(self._spec["tokens_per_step"] or 0.0)
        while every > 0 and (self._lines + 1) * every <= ran:
            self._lines += 1
            steps = int(self._lines * every * rate)
            loss = 1.6 + 2.4 * math.exp(-steps / 3000.0)
            self._out += f"step {steps} tokens {int(steps * per_step)} loss {loss:.3f}\n".encode()
        end = self._end()
        if end is None or self.clock() < end[0]:
            return
        self._closed = True
        steps = int(ran * rate)
        if self.killed_at is not None and end[1] == -signal.SIGKILL:
            return  # a killed process says nothing
        if end[1] == -signal.SIGTERM:
            self._out += f"SIGTERM received: checkpoint saved at step {steps}, exiting\n".encode()
        elif end[1] == 0:
            self._out += f"training finished: {steps} steps\n".encode()
        else:
            self._out += f"error: simulated failure after {steps} steps (exit code {end[1]})\n".encode()

    def next_event_in(self) -> float | None:
        # Nothing changes a simulated job but its own end: without one (no duration, not
        # stopped) there is nothing to wake up for. Polling it (None) every 50 ms cost a
        # process simulating 500 busy nodes all of its CPU.
        end = self._end()
        return math.inf if end is None else max(0.0, end[0] - self.clock())


class SimulatedLauncher:
    def __init__(self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.wall = wall

    def launch(self, assignment: Assignment) -> Member:
        return SimulatedMember(assignment, clock=self.clock, wall=self.wall)


def describe(assignment: Assignment) -> str:
    return f"job {assignment.job_id} g{assignment.generation} gpus {','.join(map(str, assignment.gpus))}: " + (
        shlex.quote(assignment.command[:80]) if assignment.command else "(no command)"
    )
