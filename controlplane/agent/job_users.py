"""Which Unix user a job's processes run as (`qm-agent --job-user`).

`agent` (the default, as before 6 Dec): the agent's own user. A job can then read what the
agent can (its node token: it could speak for the node) and signal or read the processes and
files of any other job on the node.

`team`: each team's jobs run as a user of their own, uid = gid = `--job-uid-base` + the team's
id (no passwd entry is needed; give the ids names or file-system groups where a site wants
them, e.g. a team's datasets group-owned by its gid). The kernel then keeps teams apart on a
node: a job cannot signal another team's processes or read their environment (`/proc/PID/
environ`), their working directory or output, nor the node token (mode 0600, the agent's).
The agent must be root (it switches user for every launch) and starts each rank through
util-linux's `setpriv` (`--reuid`/`--regid`, supplementary groups cleared, `--no-new-privs`
so no set-user-id program gives root back, and the parent-death signal set after the switch,
which would clear it). The run's directory stays the agent's (mode 0711: its output files and
records, 0600), and the job works in `work/` inside it, its own (0700): its cwd, its HOME and
where its progress files go. Jobs of one team share a user, so they can reach each other,
as the processes of one Slurm user can.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

JOB_USER_MODES = ("agent", "team")
#: Far above the ids a distribution hands to people (1000-60000) and below systemd's dynamic
#: and container ranges' usual 2^16 multiples: 200000 + team id.
DEFAULT_UID_BASE = 200_000
#: uid_t is 32 bits, and 2^31 - 1 and above are refused or special in places (-1: "unchanged").
UID_CEILING = 2**31 - 2
WORK_DIR_NAME = "work"


class JobUserError(Exception):
    """`--job-user team` cannot be honoured on this node (said at start, with the reason)."""


@dataclass(frozen=True)
class JobIdentity:
    """The user and group one run's processes get."""

    uid: int
    gid: int


@dataclass(frozen=True)
class JobUsers:
    """The `--job-user` policy of one agent."""

    mode: str = "agent"
    uid_base: int = DEFAULT_UID_BASE
    setpriv: str | None = None  # util-linux's setpriv, found by `check`

    @property
    def separate(self) -> bool:
        return self.mode == "team"

    def identity(self, team_id: int | None) -> JobIdentity | None:
        """The user a run of this team gets; None: the agent's own. A control plane too old to
        send the team is refused rather than run as the agent."""
        if not self.separate:
            return None
        if team_id is None or team_id < 0:
            raise JobUserError("the control plane sent no team for this run: it cannot run as its team's user")
        uid = self.uid_base + team_id
        if uid > UID_CEILING:
            raise JobUserError(f"team {team_id}: uid {uid} is beyond {UID_CEILING} (lower --job-uid-base)")
        return JobIdentity(uid, uid)

    def wrapped(self, identity: JobIdentity, command: str) -> list[str]:
        """The argv that runs `command` as `identity`, dying with the agent."""
        assert self.setpriv is not None, "JobUsers.check() finds setpriv before any launch"
        return [self.setpriv, f"--reuid={identity.uid}", f"--regid={identity.gid}", "--clear-groups",
                "--no-new-privs", "--pdeathsig", "KILL", "/bin/sh", "-c", command]

    def work_dir(self, run_dir: Path, identity: JobIdentity) -> Path:
        """The run's directory kept the agent's (0711), and the job's own `work/` in it (0700)."""
        os.chmod(run_dir, 0o711)
        work = run_dir / WORK_DIR_NAME
        work.mkdir(mode=0o700, exist_ok=True)
        os.lchown(work, identity.uid, identity.gid)
        return work


def checked(mode: str, uid_base: int, state_dir: Path, euid: int | None = None) -> JobUsers:
    """The policy `mode` asks for, once this node can honour it; else a JobUserError saying why
    (the agent stops at start: it never runs a job as a user it was not told to)."""
    if mode not in JOB_USER_MODES:
        raise JobUserError(f"--job-user {mode!r}: give one of {', '.join(JOB_USER_MODES)}")
    if mode == "agent":
        return JobUsers()
    if not 1000 <= uid_base <= UID_CEILING:
        raise JobUserError(f"--job-uid-base {uid_base}: give a uid from 1000 to {UID_CEILING}")
    if (os.geteuid() if euid is None else euid) != 0:
        raise JobUserError("--job-user team needs the agent to run as root: it switches user for every launch")
    setpriv = _setpriv_that_switches()
    if setpriv is None:
        raise JobUserError("--job-user team needs util-linux's setpriv (2.33 or later) in /usr/bin or /bin")
    closed = _closed_ancestor(state_dir)
    if closed is not None:
        raise JobUserError(f"--job-user team: jobs could not reach their working directory under {state_dir}: "
                           f"{closed} is mode {stat.S_IMODE(closed.stat().st_mode):o} (others need x, e.g. 0711)")
    return JobUsers(mode, uid_base, setpriv)


def _setpriv_that_switches() -> str | None:
    path = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if path is None:
        return None
    try:
        probe = subprocess.run([path, "--reuid=65534", "--regid=65534", "--clear-groups", "--no-new-privs",
                                "--pdeathsig", "KILL", "/bin/true"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return path if probe.returncode == 0 else None


def _closed_ancestor(state_dir: Path) -> Path | None:
    """The first directory from / down to `state_dir` that others may not pass through."""
    state_dir.mkdir(parents=True, exist_ok=True)
    resolved = state_dir.resolve()
    for directory in (*reversed(resolved.parents), resolved):
        if not directory.stat().st_mode & stat.S_IXOTH:
            return directory
    return None
