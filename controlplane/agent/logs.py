"""Shipping each rank's output to the control plane, a little with every contact.

A job's processes write stdout and stderr to `<workdir>/rank<N>.log` on the node (a simulated
job writes the lines it would print into memory). The agent reads what is new and sends it with
its next heartbeat or report, as `logs`: chunks of `{generation, rank, offset, bytes, text}`:
  - chunks of at most RANK_BYTES (64 KiB); at most BURST_BYTES (256 KiB) per rank per contact,
    and CALL_BYTES (512 KiB) in all, the ranks longest unserved first; the rest goes next time,
    BACKLOG_DELAY_S (0.1 s) after the reply rather than a heartbeat interval later while bytes
    wait (bench/agent_output_rate.py: one rank printing 4 MiB at once was shipped at 1.8 MiB/s,
    four at 3.4 MiB/s for the node; before, 0.12 MiB/s a rank);
  - a chunk ends on a whole UTF-8 character (a character cut in two would read as two U+FFFD),
    except at the end of a process's output; `text` is the bytes decoded as UTF-8 with
    replacement, NUL read as U+FFFD, and `bytes` how many bytes it covers;
  - one read per rank is in flight: until a reply says the contact was taken, the same chunks
    (same offsets, same texts) are sent again, and the server drops those it already holds. A
    retried report never duplicates lines, and an unreachable control plane costs the agent
    BURST_BYTES per rank of memory: the file on the node holds the rest;
  - a member that ended is followed until its output is all sent;
  - a chunk the control plane refuses (a 400 naming it) is never sent again: the rank reads on
    past it (`LogShipper.refused`), and the agent keeps it in its `refused.jsonl`;
  - a running rank's file gives the disk back its shipped bytes but the last KEEP_ON_NODE_BYTES
    (16 MiB), RELEASE_STEP_BYTES (64 MiB) at a time, by punching a hole: its offsets stay;
  - a rank that printed more than its member's `output_cap` (`--max-rank-output-mib`) beyond
    what was shipped loses the oldest of it: the bytes before the last `output_cap` are given
    back to the disk and never sent, and the next contact carries, where they began, a line
    saying how many were dropped and why (a chunk standing for the gap's first bytes, so a
    reader sees that line, then "[… N bytes never received …]"). A gap shorter than that line
    (a few bytes printed while the cap's worth still waits) is sent nothing and reads as
    "[… N bytes never received …]" alone: a chunk may not hold more characters than bytes,
    and until 6 Dec the control plane refused every contact after such a line, the run's exit
    with them. Before 5 Dec such a rank's
    file grew on the node for as long as it printed faster than ~1.8 MiB/s. The cap is looked
    at here at each contact with no chunk of the rank in flight, and by the member every
    TRIM_EVERY_S (0.5 s; members.py): a rank's file holds on the disk at most the cap and a
    quarter plus what it printed since the member last looked. Not a strict bound: the job
    writes its file itself, and nothing the agent does (here or there) runs between its writes
    (docs/operations.md, *Disk*).
A chunk names its generation: a stopped run's last lines and a requeued run's first ones never
mix, even when both ship in one contact.

What a run has shipped survives the agent (real processes only: a simulated job's output lives
in the agent's memory and dies with it). Its work directory holds `shipped.json`, `{"generation",
"ranks": {RANK: [shipped, sent]}, "done", "cap"}` (`cap`: the run's `output_cap` in bytes, null
for none), written (to a temporary file, then renamed) when the
run is launched, before a contact that carries its output and after the reply took it: below
`shipped` every byte was taken by the control plane (or dropped in a gap too short for the
line saying so), and nothing past `sent` was ever sent (a
line in flight saying bytes were dropped speaks for all of them: `sent` is where they end). An
agent that starts on the node after one that died (`kill -9`, OOM; the job's processes died with it, by design)
finds the runs not `done` (`recover`) and ships the rest of their files: first exactly the
bytes `shipped`..`sent` again, split as before (the chunks that may have been in flight: the
control plane drops those it has), then on to the end of each file, with its heartbeats as any
ended run's output; then the run is marked `done` and forgotten. A rank's bytes before its last
`cap` (the smaller of the record's and this agent's: its member may have given them back to the
disk, where they read as NUL) are never sent, in flight or not, but said dropped with the same
line as a running rank's: those in flight by a line at their own offset, which the control
plane drops as a resend exactly when it holds them already (only the reply was lost), and
those after them by a line at `sent`, where it holds nothing (before 5 Dec one line at
`shipped` said both, and was lost whenever the control plane held the chunk in flight). The last lines a crashed job printed, the
ones that often say why, are not lost with the agent that should have shipped them.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import structlog

log = structlog.get_logger("qm.agent")

#: The most one chunk carries (the control plane's CHUNK_BYTES).
RANK_BYTES = 64 * 1024
#: The most one rank ships in one contact (in chunks of RANK_BYTES), and one contact in all (the
#: control plane takes up to 1 MiB). A rank that prints faster than the heartbeats carry is
#: behind: the next contact then goes BACKLOG_DELAY_S after the reply, not a heartbeat
#: interval later, so a rank is shipped at up to BURST_BYTES per (BACKLOG_DELAY_S + round
#: trip), and a node at up to CALL_BYTES per the same, while bytes wait (bench/agent_output_rate.py).
BURST_BYTES = 256 * 1024
CALL_BYTES = 512 * 1024
BACKLOG_DELAY_S = 0.1
# Cursors of ended members kept at most (a control plane that refuses every contact for long).
MAX_CURSORS = 4096
#: A run's shipping record, in its work directory (see the module's docstring).
RECORD_NAME = "shipped.json"
#: A running rank's file keeps on disk at least its last KEEP_ON_NODE_BYTES of shipped output;
#: shipped bytes before that are given back to the disk (a hole punched in the file, offsets
#: unchanged) once RELEASE_STEP_BYTES more have been shipped since the last time.
KEEP_ON_NODE_BYTES = 16 * 1024 * 1024
RELEASE_STEP_BYTES = 64 * 1024 * 1024


def whole_characters(data: bytes) -> int:
    """How many bytes of `data` end on a whole UTF-8 character: all of them, unless the last
    1-3 bytes begin a character whose other bytes have not been written yet."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        byte = data[n - back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for the lead
        if byte < 0x80:
            return n
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
        return n if back >= need else n - back
    return n


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


@dataclass
class Chunk:
    generation: int
    rank: int
    offset: int
    nbytes: int
    text: str

    def as_json(self) -> dict[str, Any]:
        return {"generation": self.generation, "rank": self.rank, "offset": self.offset, "bytes": self.nbytes,
                "text": self.text}


def split(generation: int, rank: int, offset: int, data: bytes) -> list[Chunk]:
    """`data` (read from byte `offset`) as chunks of at most RANK_BYTES, each but the last ending
    on a whole character. The same bytes always split the same way (a resend after a restart
    has the very boundaries of the first send)."""
    chunks: list[Chunk] = []
    at = 0
    while at < len(data):
        piece = data[at:at + RANK_BYTES]
        if at + len(piece) < len(data):
            piece = piece[:whole_characters(piece)] or piece
        chunks.append(Chunk(generation, rank, offset + at, len(piece), decode(piece)))
        at += len(piece)
    return chunks


@dataclass
class Cursor:
    generation: int
    rank: int
    read: Callable[[int, int], bytes]  # (offset, at most) -> bytes
    shipped: int = 0
    # The chunks in flight (at most BURST_BYTES, from `shipped` on), sent again as they are
    # until a reply says they were taken.
    pending: list[Chunk] = field(default_factory=list)
    ended: bool = False
    backlog: bool = False  # the last read stopped at BURST_BYTES: more is waiting
    served: int = 0  # the contact that last carried a chunk of it (fairness)
    # Gives the file's bytes before an offset back to the disk (a member writing files only).
    release: Callable[[int, int], None] | None = None  # (from, upto): give those bytes back
    released: int = 0  # bytes before this offset were given back
    size: Callable[[], int] | None = None  # how long the rank's file is now
    cap: int | None = None  # the most unshipped bytes the node keeps of it
    dropped: int = 0  # bytes never shipped: the rank printed faster than they could be
    resume_at: int | None = None  # once the chunk in flight saying so is taken, read from here

    def release_shipped(self) -> None:
        """Give back to the disk what the control plane holds, but for the last
        KEEP_ON_NODE_BYTES: a rank printing for days no longer fills the node's disk while it
        runs. Only bytes below `shipped` are touched: nothing unsent is ever lost, and a next
        agent recovering the run reads from `shipped` on."""
        upto = self.shipped - KEEP_ON_NODE_BYTES
        if self.release is None or upto - self.released < RELEASE_STEP_BYTES:
            return
        self.release(self.released, upto)
        self.released = upto

    @property
    def sent(self) -> int:
        """Where the chunks in flight end (`shipped` if none)."""
        return self.pending[-1].offset + self.pending[-1].nbytes if self.pending else self.shipped

    @property
    def reached(self) -> int:
        """Where what was ever sent of this rank ends, as its record says (`sent`): a line in
        flight saying bytes were dropped speaks for all of them, up to `resume_at`."""
        return self.sent if self.resume_at is None else self.resume_at

    def next_chunks(self) -> list[Chunk]:
        """The chunks for the next contact: those in flight, else what is new (up to BURST_BYTES)."""
        if self.pending:
            return self.pending
        if self.cap is not None and self.size is not None:
            dropped = self._drop_beyond_cap()
            if dropped:
                return dropped
        try:
            data = self.read(self.shipped, BURST_BYTES)
        except OSError:
            data = b""
        self.backlog = len(data) >= BURST_BYTES
        if not self.ended:
            data = data[:whole_characters(data)]
        elif self.backlog:
            data = data[:whole_characters(data)] or data
        self.pending = split(self.generation, self.rank, self.shipped, data)
        return self.pending


    def _drop_beyond_cap(self) -> list[Chunk]:
        """When more than `cap` bytes wait unshipped, drop the oldest of them: give them back to
        the disk, and send in their place a chunk saying so (see the module)."""
        assert self.cap is not None and self.size is not None
        try:
            end = self.size()
        except OSError:
            return []
        drop_to = end - self.cap
        if drop_to <= self.shipped:
            return []
        notice = self.notice(self.shipped, drop_to - self.shipped)
        if notice is None:
            # too few bytes for the line: left as a gap, read on from its end (next_chunks)
            if self.release is not None:
                self.release(self.shipped, drop_to)
            self.shipped = drop_to
            return []
        self.resume_at = drop_to
        if self.release is not None:
            # (the bytes the chunk stands for stay; a next agent recovering the run says the gap
            # dropped again rather than resend them: the member may have given them back too)
            self.release(self.shipped + notice.nbytes, drop_to)
        self.pending = [notice]
        return self.pending

    def notice(self, offset: int, gap: int) -> Chunk | None:
        """The chunk saying the `gap` bytes from `offset` were dropped, standing for the gap's
        first bytes (see the module); counted and logged. None when the gap is shorter than
        the line: the control plane refuses a chunk of more characters than bytes, and the
        whole contact with it (heartbeat, exits and all: the agent sent it again and again and
        its job never ended); such a gap is sent nothing, and the job's output reads the
        control plane's `[… N bytes never received …]` there."""
        assert self.cap is not None
        self.dropped += gap
        log.warning("a rank printed faster than its output could be shipped: its oldest unsent output dropped",
                    generation=self.generation, rank=self.rank, bytes_dropped=gap, cap_bytes=self.cap)
        text = (f"\n[qm-agent: {gap:,} bytes of rank {self.rank}'s output dropped on the node: it printed "
                f"faster than they could be shipped, and the node keeps at most the last {_size(self.cap)} of a "
                f"rank's unshipped output (qm-agent --max-rank-output-mib)]\n")
        if len(text) > min(gap, RANK_BYTES):
            return None
        return Chunk(self.generation, self.rank, offset, min(gap, RANK_BYTES), text)


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n:,} bytes"


@dataclass
class Unshipped:
    """A run whose output a previous agent of the node left (partly) unsent: its record says,
    per rank, (shipped, sent) in bytes; `read(rank, offset, at most)` reads its files."""

    generation: int
    ranks: dict[int, tuple[int, int]]
    read: Callable[[int, int, int], bytes]
    record: Path
    # The cap its files were kept to (--max-rank-output-mib: the smaller of the one it was
    # launched with, in its record, and this agent's) and `size(rank)`: what lies before a
    # rank's last `cap` bytes may have been given back to the disk while it ran, so it is not
    # sent (it reads as NUL) but said dropped, as a running rank's would be.
    size: Callable[[int], int] | None = None
    cap: int | None = None


class Record(NamedTuple):
    """What a run's shipping record says (see the module)."""

    generation: int
    ranks: dict[int, tuple[int, int]]
    done: bool
    # The --max-rank-output-mib (bytes) of the agent that launched the run; None: no cap, or a
    # record written before 5 Dec, which did not say.
    cap: int | None = None


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of ``path`` if it is a regular file (made if `flags` say O_CREAT), else an
    OSError. The files of a run's directory are the job's to change, as its user: one it made a
    FIFO would hold an open for reading until a writer comes (or one for writing until a
    reader does), and a link to /dev/zero or a device never ends a read. Neither is followed
    nor waited for: not a link at the last component (O_NOFOLLOW), no wait in the open
    (O_NONBLOCK, cleared again once the file is known to be regular)."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, limit: int, offset: int = 0) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` from ``offset`` (:func:`open_regular`)."""
    fd = open_regular(path)
    try:
        return os.pread(fd, limit, offset)
    finally:
        os.close(fd)


def write_whole(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``path`` whole: a temporary file made anew beside it (whatever the job left under
    that name removed first, never opened), then renamed over it. An OSError if it cannot be."""
    temporary = path.with_name(path.name + ".tmp")
    try:
        os.unlink(temporary)
    except FileNotFoundError:
        pass
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(temporary, path)


#: The most of a shipping record read (a record is ~100 bytes a rank).
RECORD_READ_BYTES = 1024 * 1024


def write_record(path: Path, generation: int, ranks: dict[int, tuple[int, int]], *, done: bool = False,
                 cap: int | None = None) -> bool:
    """Write a run's shipping record whole (:func:`write_whole`); False if it could not be
    written (the shipping goes on; only a restart would then resend more)."""
    body = {"generation": generation, "ranks": {str(r): list(v) for r, v in sorted(ranks.items())}, "done": done,
            "cap": cap}
    try:
        write_whole(path, json.dumps(body).encode())
    except OSError as error:
        log.warning("could not write the output shipping record", path=str(path), error=str(error))
        return False
    return True


def read_record(path: Path) -> Record | None:
    """What a record says; None for one unreadable or not of this form."""
    try:
        body = json.loads(read_regular(path, RECORD_READ_BYTES))
        ranks = {int(rank): (int(pair[0]), int(pair[1])) for rank, pair in body["ranks"].items()}
        generation = int(body["generation"])
        cap = None if body.get("cap") is None else int(body["cap"])
    except (OSError, ValueError, RecursionError, TypeError, KeyError, IndexError, AttributeError):
        return None  # (RecursionError: JSON nested thousands deep, as a job may write it)
    if any(shipped < 0 or sent < shipped for shipped, sent in ranks.values()) or (cap is not None and cap <= 0):
        return None
    return Record(generation, ranks, bool(body.get("done")), cap)


class LogShipper:
    """The output cursors of one node's members."""

    def __init__(self) -> None:
        self.cursors: dict[tuple[int, int], Cursor] = {}
        # generation → its shipping record on the node (members that write files only)
        self.records: dict[int, Path] = {}
        self.written: dict[int, dict[int, tuple[int, int]]] = {}  # what each record says now
        self.caps: dict[int, int | None] = {}  # generation → the output cap its record keeps
        self.contacts = 0
        self.bytes_shipped = 0
        self.chunks_shipped = 0
        self.recovered_runs = 0

    def watch(self, generation: int, member: Any) -> None:
        """Follow `member`'s ranks, if it writes output (a member without `read_output` does not)."""
        ranks = getattr(member, "output_ranks", None)
        reader = getattr(member, "read_output", None)
        if ranks is None or reader is None:
            return
        watched = ranks()
        releaser = getattr(member, "release_output", None)
        sizer = getattr(member, "output_size", None)
        cap = getattr(member, "output_cap", None)
        for rank in watched:
            self.cursors[(generation, rank)] = Cursor(
                generation, rank, read=lambda offset, limit, rank=rank: reader(rank, offset, limit),
                release=None if releaser is None else lambda start, upto, rank=rank: releaser(rank, start, upto),
                size=None if sizer is None else lambda rank=rank: sizer(rank), cap=cap)
        record = getattr(member, "output_record", None)
        if record is not None and watched:
            self.records[generation] = record
            self.written[generation] = {rank: (0, 0) for rank in watched}
            self.caps[generation] = cap
            write_record(record, generation, self.written[generation], cap=cap)

    def recover(self, run: Unshipped) -> None:
        """Ship what a previous agent left of `run` (its processes are gone): the chunk that may
        have been in flight again, byte for byte, then the rest of each rank's file. Bytes
        before a rank's last `cap` may have been given back to the disk (they read as NUL, the
        in-flight chunk's included): they are said dropped instead, never sent.

        The control plane may hold the in-flight bytes already (only the reply was lost), and
        it drops a chunk at an offset it holds: so the in-flight bytes given back are said
        dropped by a line at their own offset (dropped with them, or shown in their place),
        and what was given back after them by a line where nothing was ever sent (`sent`, once
        this is taken). Before 5 Dec one line at `shipped` said both, and was dropped as a
        resend whenever the control plane held the chunk in flight."""
        for rank, (shipped, sent) in run.ranks.items():
            cursor = Cursor(run.generation, rank, read=lambda offset, limit, rank=rank: run.read(rank, offset, limit),
                            shipped=shipped, ended=True, cap=run.cap,
                            size=None if run.size is None else lambda rank=rank: run.size(rank))
            if sent > shipped:
                kept_from = self._kept_from(run, rank)
                start = shipped if kept_from is None else max(shipped, min(sent, kept_from))
                if start > shipped:
                    notice = cursor.notice(shipped, start - shipped)
                    if notice is None:  # too few bytes for the line: a gap (Cursor.notice)
                        cursor.shipped = start
                    else:
                        cursor.pending = [notice]
                        cursor.resume_at = sent
                if sent > start:
                    try:
                        data = run.read(rank, start, min(sent - start, BURST_BYTES))
                    except OSError:
                        data = b""
                    cursor.pending += split(run.generation, rank, start, data)
            self.cursors[(run.generation, rank)] = cursor
        self.records[run.generation] = run.record
        self.written[run.generation] = dict(run.ranks)
        self.caps[run.generation] = run.cap
        self.recovered_runs += 1

    @staticmethod
    def _kept_from(run: Unshipped, rank: int) -> int | None:
        """Where rank `rank`'s last `cap` bytes begin: the member (or the shipper, dropping) may
        have given back to the disk what is before; None without a cap."""
        if run.cap is None or run.size is None:
            return None
        try:
            return run.size(rank) - run.cap
        except OSError:
            return None

    def _write_records(self) -> None:
        """Bring the runs' records up to date before a contact (see the module): a record is
        written only when what it says changed (a chunk goes out, or the last was taken)."""
        now: dict[int, dict[int, tuple[int, int]]] = {generation: {} for generation in self.records}
        for c in self.cursors.values():
            if c.generation in now:
                now[c.generation][c.rank] = (c.shipped, c.reached)
        for generation, ranks in now.items():
            if ranks == self.written.get(generation):
                continue
            if ranks:
                write_record(self.records[generation], generation, ranks, cap=self.caps.get(generation))
                self.written[generation] = ranks
            else:  # all of it taken: nothing left to ship after a restart either
                write_record(self.records.pop(generation), generation, {}, done=True,
                             cap=self.caps.pop(generation, None))
                self.written.pop(generation, None)

    def ended(self, generation: int) -> None:
        """The member's processes are gone: send what is left, then forget it."""
        for cursor in self.cursors.values():
            if cursor.generation == generation:
                cursor.ended = True
        if len(self.cursors) > MAX_CURSORS:
            for key in [k for k, c in self.cursors.items() if c.ended][: len(self.cursors) - MAX_CURSORS]:
                del self.cursors[key]

    def collect(self) -> list[Chunk]:
        """The chunks for the next contact: what each rank has new (or the chunk it still owes)."""
        self.contacts += 1
        out: list[Chunk] = []
        budget = CALL_BYTES
        for key, cursor in sorted(self.cursors.items(), key=lambda kv: kv[1].served):
            chunks = cursor.next_chunks()
            if not chunks:
                if cursor.ended:
                    del self.cursors[key]
                continue
            size = cursor.sent - cursor.shipped
            if out and size > budget:
                cursor.backlog = True
                continue
            out.extend(chunks)  # a rank's chunks in flight go together, or not at all
            budget -= size
            cursor.served = self.contacts
        if self.records:
            self._write_records()
        return out

    def delivered(self, chunks: list[Chunk]) -> None:
        """The contact carrying `chunks` was answered: read on from their ends."""
        for chunk in chunks:
            cursor = self.cursors.get((chunk.generation, chunk.rank))
            if cursor is not None and cursor.pending and cursor.pending[-1] is chunk:
                cursor.shipped = cursor.reached
                cursor.resume_at = None
                cursor.pending = []
                cursor.release_shipped()
            self.bytes_shipped += chunk.nbytes
            self.chunks_shipped += 1
        if self.records and chunks:
            self._write_records()

    def refused(self, chunk: Chunk) -> None:
        """The control plane refused `chunk` (a 400 naming it): it is never sent again. The rest
        of its rank's flight goes on as it was, and reading goes on past its bytes, which the
        control plane's copy of the output shows as "[… N bytes never received …]" (the agent
        keeps the chunk in its `refused.jsonl`, and the rank's file on the node holds them)."""
        cursor = self.cursors.get((chunk.generation, chunk.rank))
        if cursor is None or not any(c is chunk for c in cursor.pending):
            return
        end = chunk.offset + chunk.nbytes
        cursor.pending = [c for c in cursor.pending if c is not chunk]
        if cursor.pending:
            cursor.resume_at = max(cursor.reached, end)
        else:  # nothing else in flight: read on from past it
            cursor.shipped = max(cursor.reached, end)
            cursor.resume_at = None
        if self.records:
            self._write_records()

    @property
    def backlog(self) -> bool:
        """Bytes are known to be waiting beyond what the last contact could carry."""
        return any(c.backlog or (c.pending and c.served != self.contacts) for c in self.cursors.values())
