"""Which Unix user a job's processes run as (`qm-agent --job-user`).

The default (`default_mode`): `user` for an agent running as root, as the usual systemd
service does (it needs root for cgroups), and `agent` for one that does not (it cannot switch
user). Until 6 Dec it was `agent` whatever the agent's user, so a root agent ran every job as
root.

`agent`: the agent's own user. A job can then read what the agent can (its node token: it
could speak for the node) and signal or read the processes and files of any other job on the
node; run by a root agent it is root (`AS_ROOT`).

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
where its progress files go. Jobs of one team share a user, so they can reach each other.

`user`: each run gets its submitter's own uid, `--job-user-uid-base` + the user's id, and its
team's gid, `--job-uid-base` + the team's id (the same number the team's user has in `team`
mode), and no other group: as Slurm runs a job as the user who submitted it. Signals, ptrace
and `/proc/PID/environ` are checked against the uid, so one member's job cannot reach another
member's; what a member wants the team to read it opens to the group on purpose (a dataset
directory group-owned by the team's gid, `umask 027`, `chmod g+rx` of its own `work/`). The
`work/` stays 0700 as in `team` mode: it is the job's HOME (tokens, caches, `.netrc`), and a
group-readable HOME would hand those to every member of the team.

The ids: teams' from `--job-uid-base` up to below `--job-user-uid-base`, users' from there up
to UID_CEILING, in every mode that switches (a team whose id would reach the users' range is
refused, in `team` mode too). A team's number is then never a user's uid, whichever mode
each node of a site runs, and with the same two bases on every node one person or team has
one number everywhere (files on shared storage keep their meaning).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

JOB_USER_MODES = ("agent", "team", "user")
#: Far above the ids a distribution hands to people (1000-60000) and below systemd's dynamic
#: and container ranges' usual 2^16 multiples: 200000 + team id.
DEFAULT_UID_BASE = 200_000
#: Users' uids (`--job-user user`), 1000000 + user id: above the 800000 teams' ids below it,
#: and readable (uid 1000042 is user 42).
DEFAULT_USER_UID_BASE = 1_000_000
#: uid_t is 32 bits, and 2^31 - 1 and above are refused or special in places (-1: "unchanged").
UID_CEILING = 2**31 - 2
WORK_DIR_NAME = "work"
#: What a job run as root can do, said once at start by a root agent given `--job-user agent`.
AS_ROOT = ("jobs run as root: any job can read the node token and speak for the node, signal, trace or "
           "read every other team's jobs on the node, and leave its cgroup; --job-user user (the default "
           "for a root agent) or team keeps them apart")


class JobUserError(Exception):
    """`--job-user team` or `user` cannot be honoured on this node (said at start, with the
    reason), or for this run (it fails to launch, never run as the agent)."""


@dataclass(frozen=True)
class JobIdentity:
    """The user and group one run's processes get."""

    uid: int
    gid: int


@dataclass(frozen=True)
class JobUsers:
    """The `--job-user` policy of one agent."""

    mode: str = "agent"
    uid_base: int = DEFAULT_UID_BASE  # teams' ids
    user_uid_base: int = DEFAULT_USER_UID_BASE  # users' uids, and where teams' ids end
    setpriv: str | None = None  # util-linux's setpriv, found by `check`

    @property
    def separate(self) -> bool:
        return self.mode != "agent"

    def identity(self, team_id: int | None, submitter_id: int | None = None) -> JobIdentity | None:
        """The user and group a run of this team and submitter gets; None: the agent's own. A
        run sent without the team (or, in `user` mode, its submitter: a control plane too old,
        a submitter since deleted) is refused rather than run as the agent."""
        if not self.separate:
            return None
        if team_id is None or team_id < 0:
            raise JobUserError("the control plane sent no team for this run: it cannot run as its team's user")
        team = self.uid_base + team_id
        if team >= self.user_uid_base:
            raise JobUserError(f"team {team_id}: id {team} reaches --job-user-uid-base {self.user_uid_base}, "
                               "where users' uids start (raise --job-user-uid-base)")
        if self.mode == "team":
            return JobIdentity(team, team)
        if submitter_id is None or submitter_id < 0:
            raise JobUserError("the control plane sent no submitter for this run: it cannot run as its "
                               "submitter's user")
        uid = self.user_uid_base + submitter_id
        if uid > UID_CEILING:
            raise JobUserError(f"user {submitter_id}: uid {uid} is beyond {UID_CEILING} (lower --job-user-uid-base)")
        return JobIdentity(uid, team)

    def wrapped(self, identity: JobIdentity, command: str) -> list[str]:
        """The argv that runs `command` as `identity`, dying with the agent."""
        assert self.setpriv is not None, "JobUsers.check() finds setpriv before any launch"
        return [self.setpriv, f"--reuid={identity.uid}", f"--regid={identity.gid}", "--clear-groups",
                "--no-new-privs", "--pdeathsig", "KILL", "/bin/sh", "-c", command]

    def work_dir(self, run_dir: Path, identity: JobIdentity) -> Path:
        """The run's directory kept the agent's (0711), and the job's own `work/` in it (0700,
        its uid's and gid's: the job may open it to its team's group itself)."""
        os.chmod(run_dir, 0o711)
        work = run_dir / WORK_DIR_NAME
        work.mkdir(mode=0o700, exist_ok=True)
        os.lchown(work, identity.uid, identity.gid)
        return work


def default_mode(euid: int) -> str:
    """`--job-user` when neither the flag nor QM_AGENT_JOB_USER gives one: a root agent runs
    each job as its submitter, as Slurm does, rather than as root; any other agent cannot switch
    user, so its jobs run as its own."""
    return "user" if euid == 0 else "agent"


def chosen_mode(flag: str | None, variable: str | None, euid: int) -> tuple[str, str]:
    """The mode an agent runs jobs with, and why, for its start log: the flag's, else the
    variable's (an empty one is not given, as `QM_AGENT_JOB_USER=` in a unit's environment
    file), else the default for its effective uid."""
    if flag:
        return flag, "given: --job-user"
    if variable:
        return variable, "given: $QM_AGENT_JOB_USER"
    if euid == 0:
        return default_mode(euid), "default: the agent runs as root (effective uid 0)"
    return default_mode(euid), f"default: the agent runs as uid {euid}, not root"


def checked(mode: str, uid_base: int, state_dir: Path, euid: int | None = None,
            user_uid_base: int = DEFAULT_USER_UID_BASE) -> JobUsers:
    """The policy `mode` asks for, once this node can honour it; else a JobUserError saying why
    (the agent stops at start: it never runs a job as a user it was not told to)."""
    if mode not in JOB_USER_MODES:
        raise JobUserError(f"--job-user {mode!r}: give one of {', '.join(JOB_USER_MODES)}")
    if mode == "agent":
        return JobUsers()
    if not 1000 <= uid_base <= UID_CEILING:
        raise JobUserError(f"--job-uid-base {uid_base}: give a uid from 1000 to {UID_CEILING}")
    if not uid_base < user_uid_base <= UID_CEILING:
        raise JobUserError(f"--job-user-uid-base {user_uid_base}: give a uid above --job-uid-base {uid_base} "
                           f"(teams' ids run from it up to where users' uids start) and up to {UID_CEILING}")
    if (os.geteuid() if euid is None else euid) != 0:
        raise JobUserError(f"--job-user {mode} needs the agent to run as root: it switches user for every launch")
    setpriv = _setpriv_that_switches()
    if setpriv is None:
        raise JobUserError(f"--job-user {mode} needs util-linux's setpriv (2.33 or later) in /usr/bin or /bin")
    closed = _closed_ancestor(state_dir)
    if closed is not None:
        raise JobUserError(f"--job-user {mode}: jobs could not reach their working directory under {state_dir}: "
                           f"{closed} is mode {stat.S_IMODE(closed.stat().st_mode):o} (others need x, e.g. 0711)")
    return JobUsers(mode, uid_base, user_uid_base, setpriv)


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
