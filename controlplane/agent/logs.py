"""Shipping each rank's output to the control plane, a little with every contact.

A job's processes write stdout and stderr to `<workdir>/rank<N>.log` on the node (a simulated
job writes the lines it would print into memory). The agent reads what is new and sends it with
its next heartbeat or report, as `logs`: chunks of `{generation, rank, offset, bytes, text}`:
  - at most RANK_BYTES (64 KiB) per rank per contact, and CALL_BYTES (256 KiB) in all, the
    ranks longest unserved first; the rest goes next time (sooner than the next heartbeat when
    bytes are waiting: BACKLOG_DELAY_S);
  - a chunk ends on a whole UTF-8 character (a character cut in two would read as two U+FFFD),
    except at the end of a process's output; `text` is the bytes decoded as UTF-8 with
    replacement, NUL read as U+FFFD, and `bytes` how many bytes it covers;
  - one chunk per rank is in flight: until a reply says the contact was taken, the same chunk
    (same offset, same text) is sent again, and the server drops one it already holds. A
    retried report never duplicates lines, and an unreachable control plane costs the agent
    one chunk per rank of memory: the file on the node holds the rest;
  - a member that ended is followed until its output is all sent.
A chunk names its generation: a stopped run's last lines and a requeued run's first ones never
mix, even when both ship in one contact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

RANK_BYTES = 64 * 1024
CALL_BYTES = 256 * 1024
BACKLOG_DELAY_S = 0.5
# Cursors of ended members kept at most (a control plane that refuses every contact for long).
MAX_CURSORS = 4096


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


@dataclass
class Cursor:
    generation: int
    rank: int
    read: Callable[[int, int], bytes]  # (offset, at most) -> bytes
    shipped: int = 0
    pending: Chunk | None = None
    ended: bool = False
    backlog: bool = False  # the last read stopped at RANK_BYTES: more is waiting
    served: int = 0  # the contact that last carried a chunk of it (fairness)

    def next_chunk(self) -> Chunk | None:
        if self.pending is not None:
            return self.pending
        try:
            data = self.read(self.shipped, RANK_BYTES)
        except OSError:
            data = b""
        self.backlog = len(data) >= RANK_BYTES
        if not self.ended:
            data = data[:whole_characters(data)]
        elif self.backlog:
            data = data[:whole_characters(data)] or data
        if not data:
            return None
        self.pending = Chunk(self.generation, self.rank, self.shipped, len(data), decode(data))
        return self.pending


class LogShipper:
    """The output cursors of one node's members."""

    def __init__(self) -> None:
        self.cursors: dict[tuple[int, int], Cursor] = {}
        self.contacts = 0
        self.bytes_shipped = 0
        self.chunks_shipped = 0

    def watch(self, generation: int, member: Any) -> None:
        """Follow `member`'s ranks, if it writes output (a member without `read_output` does not)."""
        ranks = getattr(member, "output_ranks", None)
        reader = getattr(member, "read_output", None)
        if ranks is None or reader is None:
            return
        for rank in ranks():
            self.cursors[(generation, rank)] = Cursor(
                generation, rank, read=lambda offset, limit, rank=rank: reader(rank, offset, limit))

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
            chunk = cursor.next_chunk()
            if chunk is None:
                if cursor.ended:
                    del self.cursors[key]
                continue
            if out and chunk.nbytes > budget:
                cursor.backlog = True
                continue
            out.append(chunk)
            budget -= chunk.nbytes
            cursor.served = self.contacts
        return out

    def delivered(self, chunks: list[Chunk]) -> None:
        """The contact carrying `chunks` was answered: read on from their ends."""
        for chunk in chunks:
            cursor = self.cursors.get((chunk.generation, chunk.rank))
            if cursor is not None and cursor.pending is chunk:
                cursor.pending = None
                cursor.shipped = chunk.offset + chunk.nbytes
            self.bytes_shipped += chunk.nbytes
            self.chunks_shipped += 1

    @property
    def backlog(self) -> bool:
        """Bytes are known to be waiting beyond what the last contact could carry."""
        return any(c.backlog or (c.pending is not None and c.served != self.contacts) for c in self.cursors.values())
