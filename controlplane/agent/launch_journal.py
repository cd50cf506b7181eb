"""The node's launch journal: which runs an agent of this node launched that the control plane
may not know were launched.

Why: a fresh registration says "nothing runs here but `running`", and the control plane lets
the fresh agent start again what no agent of the node ever reported started (a run bound while
its agent was away: agent_protocol._never_started_on). A run the old agent had launched, whose
start report had not reached the control plane when it died, is no such run: it ran, and may
still run. So every launch is written here, durably, before its first process is spawned, and
forgotten only once the control plane has taken a report of that run's start or end (a reply
came to the contact carrying it). What is left when an agent registers is exactly what it must
not be given to start again: the registration names it (`launched`), and the control plane
fences those runs (their jobs requeued, the run lost with its agent) instead.

On a real node the journal is a directory of the state directory (`<state>/<node>/launches/`,
one empty file a generation, named by it), each entry fsynced with its directory before the
launch: an agent killed at any instruction after that leaves it behind. The fresh agent's sweep
adds the runs it found still alive on the host by their marker (members.ProcessLauncher,
`left_behind`), so a lost state directory still names a run that outlived its agent there. A
simulated node's journal lives in the agent's memory only: its runs die with its process.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import structlog

log = structlog.get_logger("qm.agent")

#: The journal's directory in a node's state directory (`<state-dir>/<node>/`).
LAUNCHES_DIR = "launches"


class LaunchJournal:
    """Runs launched on this node whose launch the control plane may not know of, by generation.
    ``path``: the directory that keeps them across agents (None: this agent's memory only)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._generations: set[int] = set()
        if path is not None:
            self._generations.update(self._on_disk())

    def _on_disk(self) -> set[int]:
        assert self.path is not None
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return set()
        except OSError as error:
            log.error("the launch journal cannot be read; what a previous agent launched is not told", path=str(self.path),
                      error=str(error))
            return set()
        return {int(name) for name in names if name.isdigit() and 0 < int(name) < 2**63}

    def record(self, generation: int) -> None:
        """Before launching `generation`: kept on the disk (the entry and its directory fsynced)
        before this returns. An OSError if it cannot be: the launch must not go ahead, since an
        agent that died after it could not say it had launched."""
        if self.path is not None and generation not in self._generations:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path / str(generation), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            directory = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        self._generations.add(generation)

    def found(self, generations: Iterable[int]) -> None:
        """Runs found alive on the node and killed by this agent's sweep: launched by an agent
        before it, whatever its journal says (it may be lost). Kept as launches are."""
        for generation in sorted(set(generations)):
            try:
                self.record(generation)
            except OSError as error:
                # Still told by this agent's registration (in memory); only a crash before it loses it.
                self._generations.add(generation)
                log.error("could not keep a run found left behind in the launch journal", generation=generation,
                          error=str(error))

    def told(self, generations: Iterable[int]) -> None:
        """The control plane took a report of these runs' start or end (or a registration naming
        them): it knows they were launched. Forgotten."""
        for generation in generations:
            if generation not in self._generations:
                continue
            self._generations.discard(generation)
            if self.path is not None:
                try:
                    os.unlink(self.path / str(generation))
                except FileNotFoundError:
                    pass
                except OSError as error:  # told again by the next registration: fenced, as it is already
                    log.warning("could not forget a launch in the journal", generation=generation, error=str(error))

    def left(self) -> list[int]:
        """What a registration must name: launched here, not known to the control plane to be."""
        return sorted(self._generations)
