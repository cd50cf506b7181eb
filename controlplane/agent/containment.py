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

The hierarchy: `--cgroup-root` (env `QM_AGENT_CGROUP_ROOT`): `auto` (the default), `off` none,
or a path. `auto` takes the agent's own cgroup (the `0::` line of /proc/self/cgroup, under the
cgroup v2 mount that holds it) when it is writable, a plain domain cgroup, and enables no
controller for its children: under systemd with `Delegate=yes`, `/sys/fs/cgroup/system.slice/
qm-agent.service`, the subtree systemd gave the agent (systemd owns the rest of the tree, and a
cgroup made beside its slices is one it neither made nor expects). Else (and when that cgroup
refuses the child: a `cgroup.max.descendants` limit), as before 5 Dec always, the first
writable cgroup v2 mount of `/sys/fs/cgroup/unified` (a hybrid host) and
`/sys/fs/cgroup` (a cgroup v2 host): an agent in the hierarchy's root (a container's cgroup
namespace, a host without systemd) gets that anyway.

The kernel's no-internal-process rule: a cgroup other than the root holds processes, or gives
controllers to its children (`cgroup.subtree_control`), not both. The agent enables no
controller, so its own cgroup may hold the agent (and its reaper) and the runs' cgroups below
it. A controller enabled in the agent's own `cgroup.subtree_control` cannot happen while the
agent is in it (the kernel refuses either order), except in a threaded subtree, where a run's
cgroup could not hold a process; so `auto` does not use such a cgroup, nor one whose
`cgroup.type` is not `domain`, and falls back to the mount's top. It does not move itself
into a leaf (`<own>/agent`) to make room: that would change the cgroup systemd and the
operator account the agent in, and an agent started again in place would nest one level
deeper each time, for a controller nobody enabled.

Under the root, one parent per agent, `qm-agent-<node>-<hash of the state directory>` (two
agents of the same name on one host, as in tests, never touch each other's), and in it
`g<generation>` per run. No controller is enabled: it counts and kills, and limits nothing.
The parent's path is written to the state directory (`<state>/<node>/cgroup`): an agent
started in another cgroup (by hand, then under systemd; a unit renamed) still empties the run
cgroups its predecessor left under the old parent, and those of an agent from before 5 Dec at
the mount's top, whose parents have the same name there.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path

from controlplane.agent.logs import read_regular, write_whole

#: Where a cgroup v2 hierarchy is mounted: a hybrid host's, then a cgroup v2 host's.
CGROUP_V2_MOUNTS = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))


class ContainmentError(Exception):
    """An explicit `--cgroup-root` that cannot hold the runs' cgroups."""


def _is_cgroup_v2(path: Path) -> bool:
    return (path / "cgroup.procs").is_file() and (path / "cgroup.controllers").is_file()


def _unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (space, tab, newline and backslash as octal)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _cgroup2_mounts() -> list[tuple[str, Path]]:
    """(root in the hierarchy, mount point) of every cgroup2 mount (/proc/self/mountinfo)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields, _, after = line.partition(" - ")
        head = fields.split()
        if len(head) >= 5 and after.split()[:1] == ["cgroup2"]:
            found.append((_unescape(head[3]), Path(_unescape(head[4]))))
    return found


def own_cgroup() -> Path | None:
    """The cgroup v2 directory this process is in: the `0::` line of /proc/self/cgroup, found
    under the cgroup2 mount whose root holds it; ``None`` without one (no cgroup v2, or a cgroup
    outside what is mounted here: a namespace's `/..`)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    if own is None or not own.startswith("/") or own.endswith(" (deleted)"):
        return None
    for root, point in _cgroup2_mounts():
        if own == root or root == "/" or own.startswith(root + "/"):
            path = point / own[len(root):].lstrip("/")
            if _is_cgroup_v2(path):
                return path
    return None


def _holds_runs(cgroup: Path) -> str | None:
    """Why the runs' cgroups may not go under ``cgroup`` (the agent's own), or ``None``: it is
    writable, and a plain domain cgroup that gives no controller to its children (see the
    module's no-internal-process rule; the hierarchy's root, which has no `cgroup.type`, is
    exempt from the rule)."""
    if not (os.access(cgroup, os.W_OK) and os.access(cgroup / "cgroup.procs", os.W_OK)):
        return f"not writable by this agent (uid {os.getuid()})"
    try:
        controllers = (cgroup / "cgroup.subtree_control").read_text().split()
        kind: str | None = (cgroup / "cgroup.type").read_text().strip()
    except FileNotFoundError:
        kind = None  # the root (only it has no cgroup.type)
    except OSError as error:
        return f"unreadable: {error}"
    if kind is not None and kind != "domain":
        return f"a {kind} cgroup, not a domain one: a run's cgroup under it could not hold a process"
    if kind is not None and controllers:
        return (f"it gives its children the {', '.join(controllers)} controller(s), so it may hold no process "
                "(the kernel's no-internal-process rule)")
    return None


def auto_root() -> tuple[Path | None, str]:
    """Where `--cgroup-root auto` puts the runs' cgroups (see the module), and why there."""
    own = own_cgroup()
    why_not = None if own is None else _holds_runs(own)
    if own is not None and why_not is None:
        top = not (own / "cgroup.type").exists()  # the hierarchy's root: where an agent outside systemd is
        return own, "the top of the cgroup v2 mount, the agent's own cgroup" if top else "the agent's own cgroup"
    top = _mount_top()
    if top is None:
        return None, "no writable cgroup v2 hierarchy"
    if own is None:
        return top, "the top of the cgroup v2 mount: the agent's own cgroup was not found"
    return top, f"the top of the cgroup v2 mount: the agent's own cgroup {own} is {why_not}"


def _mount_top() -> Path | None:
    """The first writable cgroup v2 mount of CGROUP_V2_MOUNTS."""
    return next((path for path in CGROUP_V2_MOUNTS if _is_cgroup_v2(path) and os.access(path, os.W_OK)), None)


def find_cgroup_root(setting: str) -> Path | None:
    """The cgroup v2 directory to put the runs' cgroups under, or ``None`` (containment by
    session and marker only). ``setting``: ``auto`` (:func:`auto_root`), ``off`` or a path; a
    path that is not a writable cgroup v2 directory raises :class:`ContainmentError`."""
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
    return auto_root()[0]


#: In the agent's state directory (`<state>/<node>/`): the path of its run cgroups' parent.
PARENT_RECORD = "cgroup"


class RunCgroups:
    """The cgroups of one agent's runs: ``<root>/qm-agent-<node>-<state>/g<generation>``."""

    def __init__(self, root: Path, node_name: str, state_root: Path) -> None:
        digest = hashlib.sha256(str(state_root.resolve()).encode()).hexdigest()[:10]
        self.parent = root / f"qm-agent-{node_name}-{digest}"
        self.state_root = state_root
        # Parents of the same name elsewhere that a predecessor may have left runs in: those its
        # record names (it ran in another cgroup) and the mount tops (an agent before 5 Dec).
        self.elsewhere = sorted({p for p in [*self._recorded(), *(m / self.parent.name for m in CGROUP_V2_MOUNTS)]
                                 if p != self.parent})

    def _recorded(self) -> list[Path]:
        """The parents the record names: only run-cgroup parents of this agent's name in a
        cgroup v2 hierarchy, never any directory the file may name (the state directory is its
        jobs' to change too)."""
        try:
            lines = read_regular(self.state_root / PARENT_RECORD, 64 * 1024).decode(errors="replace").splitlines()
        except OSError:
            return []
        mounts = [point for _, point in _cgroup2_mounts()]
        return [Path(line) for line in lines if line.startswith("/") and Path(line).name == self.parent.name
                and ".." not in Path(line).parts and any(Path(line).is_relative_to(m) for m in mounts)]

    @classmethod
    def open(cls, setting: str, node_name: str, state_root: Path) -> tuple[RunCgroups | None, str]:
        """The agent's run cgroups under ``setting`` (:func:`find_cgroup_root`), their parent
        made and recorded in the state directory, or ``None`` when there is no usable
        hierarchy; and what to say of it at start."""
        auto = setting in ("", "auto")
        root, why = auto_root() if auto else (find_cgroup_root(setting), "--cgroup-root")
        if root is None:
            return None, (why if setting != "off" else "--cgroup-root off")
        cgroups = cls(root, node_name, state_root)
        try:
            cgroups.parent.mkdir(exist_ok=True)
        except OSError as error:
            if not auto:
                raise ContainmentError(f"--cgroup-root {setting}: cannot create {cgroups.parent}: {error}") from error
            top = _mount_top()
            if top is None or top == root:
                return None, f"cannot create {cgroups.parent}: {error}"
            # the agent's own cgroup refused a child (its cgroup.max.descendants, say): the mount's top
            why = f"the top of the cgroup v2 mount: cannot create {cgroups.parent}: {error}"
            cgroups = cls(top, node_name, state_root)
            try:
                cgroups.parent.mkdir(exist_ok=True)
            except OSError as again:
                return None, f"cannot create {cgroups.parent}: {again}"
        cgroups._record()
        return cgroups, f"{cgroups.parent} ({why})" if auto else str(cgroups.parent)

    def _record(self) -> None:
        """Write where the parent is, and the parents elsewhere not yet emptied (see the
        module), for the next agent. A state directory that cannot take it costs only that:
        the next agent still looks under its own root and the mount tops."""
        lines = [self.parent, *(p for p in self.elsewhere if p.is_dir())]
        try:
            self.state_root.mkdir(parents=True, exist_ok=True)
            write_whole(self.state_root / PARENT_RECORD, "".join(f"{line}\n" for line in lines).encode())
        except OSError:
            pass

    def create(self, generation: int) -> Path:
        path = self.parent / f"g{generation}"
        path.mkdir(parents=True, exist_ok=True)  # (the parent again, if an operator removed it)
        return path

    def runs(self) -> list[Path]:
        """Every run cgroup there is (after an agent's death: the ones it left), under this
        agent's parent and under those a predecessor in another cgroup used (`elsewhere`)."""
        found: list[Path] = []
        for parent in [self.parent, *self.elsewhere]:
            try:
                found.extend(sorted(p for p in parent.iterdir() if p.is_dir() and p.name.startswith("g")))
            except OSError:  # (FileNotFoundError: none there)
                pass
        return found

    def forget_elsewhere(self) -> None:
        """Once `runs` were swept: remove the parents elsewhere that are empty now, and keep
        recording those that are not (a run cgroup that could not be removed)."""
        for parent in self.elsewhere:
            try:
                parent.rmdir()
            except OSError:
                pass
        self._record()


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
