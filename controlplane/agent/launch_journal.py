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

import json
import os
from collections.abc import Iterable
from pathlib import Path

import structlog

log = structlog.get_logger("qm.agent")

#: The journal's directory in a node's state directory (`<state-dir>/<node>/`).
LAUNCHES_DIR = "launches"


class LaunchJournal:
    """Runs launched on this node whose launch the control plane may not know of, by generation.
    ``path``: the directory that keeps them across agents (None: this agent's memory only).

    A run that ended keeps, in its entry, the report of its end until a reply came to a contact
    carrying it (`ended`): a successor sends those first, with the node's token, before it
    registers (`endings`), so a job that ended while its agent could not tell is settled as it
    ended, not requeued as lost with the agent and run again."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._generations: set[int] = set()
        self._endings: dict[int, dict[str, object]] = {}
        if path is not None:
            self._generations.update(self._on_disk())
            for generation in self._generations:
                ending = self._read_ending(generation)
                if ending is not None:
                    self._endings[generation] = ending

    def _read_ending(self, generation: int) -> dict[str, object] | None:
        assert self.path is not None
        try:
            with open(self.path / str(generation), "rb") as f:
                raw = f.read(4096)
        except OSError:
            return None
        try:
            ending = json.loads(raw) if raw.strip() else None
        except ValueError:
            return None
        if not isinstance(ending, dict) or ending.get("generation") != generation or ending.get("kind") not in (
                "exited", "lost"):
            return None
        return ending

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
            self._write(generation, b"")
        self._generations.add(generation)

    def _write(self, generation: int, content: bytes) -> None:
        assert self.path is not None
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.path / f".{generation}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path / str(generation))
        directory = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def ended(self, generation: int, report: dict[str, object]) -> None:
        """`generation`'s processes are gone and `report` (its `exited` or `lost`) is queued: kept
        until a reply came to a contact carrying it (`told`). Not kept when it cannot be written
        (logged): a successor then names the run `launched`, and it is requeued as lost."""
        self._generations.add(generation)
        self._endings[generation] = report
        if self.path is not None:
            try:
                self._write(generation, json.dumps(report).encode())
            except OSError as error:
                log.error("could not keep a run's end in the launch journal", generation=generation, error=str(error))

    def endings(self) -> list[dict[str, object]]:
        """The exits of runs a previous agent of this node reaped and did not get to tell (the
        job's own exits, or its stops as the control plane asked). Runs the agent stopped for a
        reason of its own (`lost`: its lease, its shutdown) are named `launched` by the
        registration instead, which settles them as it always has (NodeLeaseExpired after a
        self-fence)."""
        return [self._endings[g] for g in sorted(self._endings) if self._endings[g].get("kind") == "exited"]

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
            self._endings.pop(generation, None)
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

    def unended(self, generation: int) -> None:
        """A successor could not tell `generation`'s end (its token refused): the run is only
        named `launched` by the registration, as one whose end is unknown."""
        self._endings.pop(generation, None)
