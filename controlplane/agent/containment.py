"""Process containment by cgroup: a run's processes stay countable and killable whatever they do.

A job's processes run in their own sessions, and one that leaves (`setsid`, a daemon's double
fork) is still found by the marker in its environment (`members.marked_processes`). A process
that also clears its environment (`env -i setsid …`) carries no marker, and it kept running,
perhaps on a GPU, after its run ended or was fenced. Slurm (proctrack/cgroup), systemd and the
kubelet contain such processes with a cgroup, and so does the agent where a writable cgroup v2
hierarchy exists: every run gets one cgroup, each rank's shell joins it before it runs the
job's command, so every descendant is in it however it left its session, its environment or
its parent, or into a cgroup of its own it made inside the run's (a job running as root may).
A run is over only once its cgroup's subtree is empty and `cgroup.events` says so; its leftovers are killed at once with
`cgroup.kill` (Linux ≥ 5.14; otherwise each process in `cgroup.procs`, the subtree frozen
meanwhile with `cgroup.freeze` where the kernel has it, ≥ 5.2); an agent that died
leaves its runs' cgroups to its reaper and to the next agent of the node, which kill what is in
them and remove them.

The hierarchy: `--cgroup-root` (env `QM_AGENT_CGROUP_ROOT`): `auto` (the default) takes the
first writable cgroup v2 mount of `/sys/fs/cgroup/unified` (a hybrid host) and `/sys/fs/cgroup`
(a cgroup v2 host), `off` none, or a path. Under it, one parent per agent, named for its node
and state directory (two agents of the same name on one host, as in tests, never touch each
other's), and in it `g<generation>` per run. No controller is enabled: it counts and kills,
and limits nothing.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path

#: Where a cgroup v2 hierarchy is mounted: a hybrid host's, then a cgroup v2 host's.
CGROUP_V2_MOUNTS = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))


class ContainmentError(Exception):
    """An explicit `--cgroup-root` that cannot hold the runs' cgroups."""


def _is_cgroup_v2(path: Path) -> bool:
    return (path / "cgroup.procs").is_file() and (path / "cgroup.controllers").is_file()


def find_cgroup_root(setting: str) -> Path | None:
    """The cgroup v2 directory to put the runs' cgroups under, or ``None`` (containment by
    session and marker only). ``setting``: ``auto``, ``off`` or a path; a path that is not a
    writable cgroup v2 directory raises :class:`ContainmentError`."""
    if setting == "off":
        return None
    if setting not in ("", "auto"):
        path = Path(setting)
        if not _is_cgroup_v2(path):
            raise ContainmentError(f"--cgroup-root {setting}: not a cgroup v2 directory (no cgroup.procs "
                                   "and cgroup.controllers in it)")
        if not os.access(path, os.W_OK):
            raise ContainmentError(f"--cgroup-root {setting}: not writable by this agent (uid {os.getuid()})")
        return path
    for path in CGROUP_V2_MOUNTS:
        if _is_cgroup_v2(path) and os.access(path, os.W_OK):
            return path
    return None


class RunCgroups:
    """The cgroups of one agent's runs: ``<root>/qm-agent-<node>-<state>/g<generation>``."""

    def __init__(self, root: Path, node_name: str, state_root: Path) -> None:
        digest = hashlib.sha256(str(state_root.resolve()).encode()).hexdigest()[:10]
        self.parent = root / f"qm-agent-{node_name}-{digest}"

    @classmethod
    def open(cls, setting: str, node_name: str, state_root: Path) -> tuple[RunCgroups | None, str]:
        """The agent's run cgroups under ``setting`` (:func:`find_cgroup_root`), their parent
        made, or ``None`` when there is no usable hierarchy; and what to say of it at start."""
        root = find_cgroup_root(setting)
        if root is None:
            return None, ("no writable cgroup v2 hierarchy" if setting != "off" else "--cgroup-root off")
        cgroups = cls(root, node_name, state_root)
        try:
            cgroups.parent.mkdir(exist_ok=True)
        except OSError as error:
            if setting not in ("", "auto"):
                raise ContainmentError(f"--cgroup-root {setting}: cannot create {cgroups.parent}: {error}") from error
            return None, f"cannot create {cgroups.parent}: {error}"
        return cgroups, str(cgroups.parent)

    def create(self, generation: int) -> Path:
        path = self.parent / f"g{generation}"
        path.mkdir(parents=True, exist_ok=True)  # (the parent again, if an operator removed it)
        return path

    def runs(self) -> list[Path]:
        """Every run cgroup there is (after an agent's death: the ones it left)."""
        try:
            return sorted(p for p in self.parent.iterdir() if p.is_dir() and p.name.startswith("g"))
        except FileNotFoundError:
            return []


def joined_argv(cgroup: Path, argv: list[str]) -> list[str]:
    """``argv`` with its shell first moving itself into ``cgroup``: the `echo` builtin writes
    from the shell's own process, so the command it then execs, and everything that command
    starts, is inside before any of it runs. (No pre-exec hook in the agent: CPython spawns
    such a child without running Python in it.) A shell that cannot join says so and exits
    125 without running the command."""
    procs = str(cgroup / "cgroup.procs")
    join = ('echo 0 > "$0" || { echo "qm-agent: cannot join the run\'s cgroup $0" >&2; exit 125; }; '
            'exec "$@"')
    return ["/bin/sh", "-c", join, procs, *argv]


def _subtree(cgroup: Path) -> list[Path]:
    """``cgroup`` and every cgroup a job made inside it (a job running as root may), deepest
    first: the order they can be removed in. Empty if ``cgroup`` is gone."""
    return [Path(top) for top, _, _ in os.walk(cgroup, topdown=False)]


def pids(cgroup: Path) -> list[int]:
    """The live processes in ``cgroup`` and in the cgroups inside it (a cgroup's
    `cgroup.procs` lists only its own; zombies are not listed)."""
    found: set[int] = set()
    for inner in _subtree(cgroup):
        try:
            found.update(int(raw) for raw in (inner / "cgroup.procs").read_text().split())
        except (FileNotFoundError, ValueError):
            pass
    return sorted(found)


def populated(cgroup: Path) -> bool:
    """Whether a process of ``cgroup``'s subtree has not finished exiting (`cgroup.events`).
    A process leaves `cgroup.procs` as its exit begins, before it has closed its files (a
    GPU's among them); it leaves `populated` once it has."""
    try:
        return "populated 1" in (cgroup / "cgroup.events").read_text().splitlines()
    except FileNotFoundError:
        return False


#: Set to 1 in the agent's environment, it never writes `cgroup.kill` and kills as on a kernel
#: before 5.14, which has none (drills, and the tests of that path on a newer kernel).
NO_CGROUP_KILL_ENV = "QM_AGENT_NO_CGROUP_KILL"


def cgroup_kill_used() -> bool:
    """Whether a SIGKILL of a run's cgroup tries its `cgroup.kill` first (see NO_CGROUP_KILL_ENV)."""
    return os.environ.get(NO_CGROUP_KILL_ENV, "") != "1"


#: How long a SIGKILL without `cgroup.kill` waits for the run's cgroup to be frozen, at most (a
#: process in an uninterruptible wait, a driver's call, freezes only once it is over).
FREEZE_WAIT_S = 0.1


def signal_all(cgroup: Path, sig: int) -> None:
    """``sig`` to every process in ``cgroup`` and the cgroups inside it; SIGKILL at once with
    ``cgroup.kill`` (the whole subtree) where the kernel has it (no process can fork out of
    the way). Without it (Linux < 5.14) a SIGKILL first freezes the subtree (`cgroup.freeze`,
    Linux ≥ 5.2), then kills each process listed, then thaws it: while frozen, nothing in it
    forks or acts on another's death, and a killed process still dies. Before 5 Dec the
    processes were killed one by one as they ran, and one not yet killed could start another
    (a supervisor starting its worker again), which no SIGKILL reached."""
    frozen = sig == signal.SIGKILL and _kill_or_freeze(cgroup)
    if frozen is None:
        return
    try:
        for pid in pids(cgroup):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    finally:
        if frozen:
            _write(cgroup / "cgroup.freeze", "0")


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
    except OSError:
        return False
    return True


def _kill_or_freeze(cgroup: Path) -> bool | None:
    """``None``: killed whole by `cgroup.kill`. Else whether the subtree was frozen (it is then
    to be thawed once its processes were sent SIGKILL)."""
    if cgroup_kill_used() and _write(cgroup / "cgroup.kill", "1"):
        return None
    if not _write(cgroup / "cgroup.freeze", "1"):
        return False  # no freezer either (Linux < 5.2), or the cgroup is gone
    deadline = time.monotonic() + FREEZE_WAIT_S
    while time.monotonic() < deadline:
        try:
            if "frozen 1" in (cgroup / "cgroup.events").read_text().splitlines():
                break
        except OSError:
            break
        time.sleep(0.001)
    return True


def remove(cgroup: Path) -> bool:
    """Remove an empty run cgroup and those the job made in it; ``False`` if something still
    lives in it (or it is gone)."""
    removed = False
    for inner in _subtree(cgroup):
        try:
            inner.rmdir()
            removed = inner == cgroup
        except OSError:
            pass
    return removed
