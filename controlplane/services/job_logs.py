"""A job's output, as its agents ship it: store, prune, read.

Writing (the agent endpoints, see "The agent protocol" in docs/operations.md): a heartbeat or
a report may carry `logs`, chunks of `{generation, rank, offset, bytes, text}`. Steps per request:
  1. keep the chunks of generations that held GPUs on the sending node, drop the rest. A
     fenced run counts: fencing gives its allocation a new generation (transitions.
     fence_allocation), and the run's own, which its agent still names, is found in the fence
     event; its last words are the job's history, kept under that generation, apart from the
     next run's;
  2. per (generation, rank), oldest offset first:
       - a chunk whose offset lies inside what is stored already is a resend: dropped (a
         retried report never duplicates lines);
       - a chunk that follows the rank's last row on, while that row is under MERGE_BYTES, is
         appended to it: one UPDATE, compare-and-set on the row's end, so two copies of one
         report racing (the agent timed out and resent while the first was still applied)
         append once;
       - else a new row; the unique (generation, rank, offset) drops a racing twin;
  3. prune: when a rank's output has passed a PRUNE_STEP boundary since its last row began, its
     rows wholly older than the last `keep_bytes()` are deleted (one DELETE on the rank's index).
The common contact, a few lines of one rank that follow on its last row, is one UPDATE (after
the first contact of a run, whose generation → job is then remembered in this process); a batch
of many nodes' contacts, one UPDATE for all such chunks on PostgreSQL (store_many).

Reading (`read`): one rank of one generation, from a byte offset (following) or the last bytes
or lines (tail); the text, where it starts and the offset to ask from next. Bytes that were
pruned are said, never silently skipped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Max, Min, Sum, TextField, Value
from django.db.models.functions import Concat

from controlplane.choices import FINISHED_JOB_STATES, AllocationState, EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, JobLogChunk
from controlplane.services.run_text import run_named
from scheduler_core.sentences import counted

#: The most one chunk may carry (the agent ships at most this per rank per report).
CHUNK_BYTES = 64 * 1024
#: Small chunks are appended to the rank's last row while it is under this: fewer rows, and an
#: append rewrites at most this much (PostgreSQL writes a whole new row version on UPDATE).
#: Measured for a job printing 300 bytes a contact, per MiB of output (bench/job_logs.py):
#: 16 KiB rows: 65 rows, 16.3 MB of WAL, 12.1 MB of table before vacuum; 4 KiB: 259 rows,
#: 5.9 MB, 3.0 MB; none: 3,884 rows, 2.8 MB, 1.8 MB. Kept, after VACUUM FULL: 0.6, 0.6 and
#: 1.8 MB (PostgreSQL compresses rows over ~2 KB).
MERGE_BYTES = 4 * 1024
#: Pruning runs when a rank's output passes a multiple of this (or of a quarter of what is kept,
#: if less), not on every report.
PRUNE_STEP = 1024 * 1024
DEFAULT_KEEP_BYTES = 8 * 1024 * 1024
#: The most one forward read returns (the reply's `next_offset` continues from there).
READ_BYTES = 1024 * 1024
MAX_TAIL_LINES = 10_000


def keep_bytes() -> int:
    """How many of each rank's last bytes are kept (QM_JOB_LOG_KEEP_BYTES_PER_RANK)."""
    return int(getattr(settings, "QM", {}).get("JOB_LOG_KEEP_BYTES_PER_RANK", DEFAULT_KEEP_BYTES))


def clean_text(text: str) -> str:
    """PostgreSQL text holds no NUL: it reads as U+FFFD, as an undecodable byte does."""
    return text.replace("\x00", "\ufffd")


@dataclass(frozen=True)
class Chunk:
    generation: int
    rank: int
    offset: int
    nbytes: int
    text: str

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


@dataclass
class Stored:
    """What one request's chunks did (the agent endpoints log it at debug level)."""

    inserted: int = 0
    appended: int = 0
    duplicates: int = 0
    refused: list[int] = field(default_factory=list)  # generations never on that node
    pruned_rows: int = 0


# ------------------------------------------------------------------------------------ writing


def store(node_id: int, node_name: str, chunks: Sequence[Chunk], *, now: datetime) -> Stored:
    """Store one node's chunks (see the module's steps)."""
    return store_many([(node_id, node_name, chunks)], now=now)


def store_many(batches: Sequence[tuple[int, str, Sequence[Chunk]]], *, now: datetime) -> Stored:
    """Store the chunks of many nodes' contacts (a batch of simulated nodes, or one node), in a
    number of queries that does not grow with the nodes or ranks in the common cases: one to find
    the runs not met before, one INSERT for every rank's first chunk, and on PostgreSQL one
    UPDATE for every chunk that follows on its rank's last row. The rest (a chunk that starts a
    new row, a resend, pruning) costs a few queries per rank."""
    result = Stored()
    batches = [(n, name, c) for n, name, c in batches if c]
    if not batches:
        return result
    jobs = _runs_of({(node_id, c.generation) for node_id, _, chunks in batches for c in chunks})
    by_rank: dict[tuple[int, int], list[Chunk]] = defaultdict(list)
    node_of: dict[tuple[int, int], str] = {}
    refused: set[int] = set()
    for node_id, node_name, chunks in batches:
        for chunk in chunks:
            if (node_id, chunk.generation) not in jobs:
                refused.add(chunk.generation)
                continue
            by_rank[(chunk.generation, chunk.rank)].append(chunk)
            node_of[(chunk.generation, chunk.rank)] = node_name
    result.refused = sorted(refused)
    job_of = {g: job for (_, g), job in jobs.items()}
    # A rank's first chunk (its output's first bytes, e.g. with the start report) needs no read:
    # all of them go in one INSERT, and the unique (generation, rank, offset) drops a resend.
    first = [these[0] for these in by_rank.values() if len(these) == 1 and these[0].offset == 0]
    if first:
        JobLogChunk.objects.bulk_create([
            JobLogChunk(job_id=job_of[c.generation], generation=c.generation, node_name=node_of[(c.generation, c.rank)],
                        rank=c.rank, offset=0, nbytes=c.nbytes, text=clean_text(c.text), received_at=now)
            for c in first
        ], ignore_conflicts=True)
        result.inserted += len(first)
    rest = {key: these for key, these in by_rank.items() if not (len(these) == 1 and these[0].offset == 0)}
    merge_limit = _merge_limit()
    # The common contact: a few lines that follow on the rank's last row, appended in place.
    single = [these[0] for these in rest.values() if len(these) == 1 and these[0].nbytes < merge_limit]
    for key in _append_many(single, merge_limit, now):
        del rest[key]
        result.appended += 1
    for (generation, rank), these in rest.items():
        _store_rank(job_of[generation], generation, rank, node_of[(generation, rank)],
                    sorted(these, key=lambda c: c.offset), now, result)
    return result


def _runs_of(pairs: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """(node id, generation) → job, for the pairs whose generation held GPUs on that node (a
    fenced run's found from its fence event); the others are left out."""
    jobs = {pair: _RUNS[pair] for pair in pairs if pair in _RUNS}
    missing = pairs - set(jobs)
    if not missing:
        return jobs
    found = {
        (node_id, generation): job_id
        for generation, node_id, job_id in Allocation.objects.filter(
            generation__in={g for _, g in missing}, gpus__node_id__in={n for n, _ in missing}
        ).order_by().values_list("generation", "gpus__node_id", "job_id").distinct()
        if (node_id, generation) in missing
    }
    for node_id in {n for n, _ in missing - set(found)}:
        for generation, job_id in _fenced_runs({g for n, g in missing - set(found) if n == node_id}, node_id).items():
            found[(node_id, generation)] = job_id
    if len(_RUNS) > 50_000:
        _RUNS.clear()
    _RUNS.update(found)
    jobs.update(found)
    return jobs


def _merge_limit() -> int:
    # Rows stay small next to what is kept, so pruning (whole rows) keeps close to that.
    return min(MERGE_BYTES, max(1, keep_bytes() // 8))


def _append_many(chunks: list[Chunk], merge_limit: int, now: datetime) -> list[tuple[int, int]]:
    """Append each chunk to its rank's row that ends where it begins, if that row has room; the
    (generation, rank) of those appended. PostgreSQL: one UPDATE for all; else one each. Each is
    a compare-and-set on the row's end: under PostgreSQL's row lock a twin's append that
    committed first moved the end, so this one matches nothing (and is then found a duplicate)."""
    if not chunks:
        return []
    if connection.vendor != "postgresql":
        return [(c.generation, c.rank) for c in chunks
                if _append(JobLogChunk.objects.filter(generation=c.generation, rank=c.rank), c, merge_limit, now)]
    table = JobLogChunk._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS t SET text = t.text || v.text, nbytes = t.nbytes + v.n, received_at = %s "
            "FROM unnest(%s::bigint[], %s::integer[], %s::bigint[], %s::integer[], %s::text[]) AS v(g, r, o, n, text) "
            "WHERE t.generation = v.g AND t.rank = v.r AND t.\"offset\" >= v.o - %s AND t.\"offset\" < v.o "
            "AND t.\"offset\" + t.nbytes = v.o AND t.nbytes <= %s - v.n RETURNING t.generation, t.rank",
            [now, [c.generation for c in chunks], [c.rank for c in chunks], [c.offset for c in chunks],
             [c.nbytes for c in chunks], [clean_text(c.text) for c in chunks], merge_limit, merge_limit],
        )
        return [(int(g), int(r)) for g, r in cursor.fetchall()]


#: (node id, generation) → job id of runs found on a node. Never stale: a run's job and the node
#: its GPUs were on never change (a fence gives the allocation a new generation, and the run's
#: own stays the run's). Saves a query per contact while a job prints.
_RUNS: dict[tuple[int, int], int] = {}


def _fenced_runs(generations: set[int], node_id: int) -> dict[int, int]:
    """generation → job of the runs among `generations` that were fenced off while holding GPUs
    on this node (their allocations carry a new generation since; the fence event the old)."""
    found: dict[int, int] = {}
    for data, job_id in (Event.objects.filter(kind=EventKind.ALLOCATION_FENCED,
                                              data__old_generation__in=sorted(generations),
                                              allocation__gpus__node_id=node_id)
                         .order_by().values_list("data", "job_id").distinct()):
        if isinstance(data, dict) and job_id is not None and data.get("old_generation") in generations:
            found[int(data["old_generation"])] = job_id
    return found


def _store_rank(job_id: int, generation: int, rank: int, node_name: str, chunks: list[Chunk], now: datetime,
                result: Stored) -> None:
    rows = JobLogChunk.objects.filter(generation=generation, rank=rank)
    merge_limit = _merge_limit()
    last = rows.order_by("-offset").values("id", "offset", "nbytes").first()
    # Where the rank's last row began: appends since (the fast path above) may have passed a
    # prune boundary, and this catches it.
    since = None if last is None else last["offset"]
    for chunk in chunks:
        if last is not None and chunk.offset < last["offset"] + last["nbytes"]:
            # Before the rank's end: stored (or pruned) already. The agent sends one chunk per
            # rank at a time and the next only once this one was answered, so this is a resend.
            result.duplicates += 1
            continue
        if (last is not None and chunk.offset == last["offset"] + last["nbytes"]
                and last["nbytes"] + chunk.nbytes <= merge_limit):
            # Compare-and-set on the row's end: a twin of this report applied meanwhile has
            # moved it, and then this chunk is a duplicate.
            if JobLogChunk.objects.filter(pk=last["id"], nbytes=last["nbytes"]).update(
                    text=Concat(F("text"), _text_value(chunk.text)), nbytes=F("nbytes") + chunk.nbytes,
                    received_at=now):
                last = {"id": last["id"], "offset": last["offset"], "nbytes": last["nbytes"] + chunk.nbytes}
                result.appended += 1
            else:
                result.duplicates += 1
                last = rows.order_by("-offset").values("id", "offset", "nbytes").first()
            continue
        try:
            with transaction.atomic():
                row = JobLogChunk.objects.create(job_id=job_id, generation=generation, node_name=node_name,
                                                 rank=rank, offset=chunk.offset, nbytes=chunk.nbytes,
                                                 text=clean_text(chunk.text), received_at=now)
        except IntegrityError:
            result.duplicates += 1  # a racing twin inserted it first
            last = rows.order_by("-offset").values("id", "offset", "nbytes").first()
            continue
        result.inserted += 1
        last = {"id": row.pk, "offset": row.offset, "nbytes": row.nbytes}
    if last is None:
        return
    end = last["offset"] + last["nbytes"]
    keep = keep_bytes()
    step = max(1, min(PRUNE_STEP, keep // 4))
    if end > keep and (since is None or end // step > since // step):
        deleted, _ = JobLogChunk.objects.filter(
            generation=generation, rank=rank, offset__lt=end - keep
        ).filter(offset__lte=end - keep - F("nbytes")).delete()
        result.pruned_rows += deleted


def _append(rows: Any, chunk: Chunk, merge_limit: int, now: datetime) -> bool:
    """Append `chunk` to the rank's row that ends where it begins, if that row has room: one
    UPDATE. Compare-and-set: under PostgreSQL's row lock a twin's append that committed first
    moved the row's end, so this one matches nothing (and the caller finds it a duplicate)."""
    return bool(rows.filter(offset__gte=chunk.offset - merge_limit, offset__lt=chunk.offset,
                            nbytes__lte=merge_limit - chunk.nbytes)
                .alias(end=F("offset") + F("nbytes")).filter(end=chunk.offset)
                .update(text=Concat(F("text"), _text_value(chunk.text)), nbytes=F("nbytes") + chunk.nbytes,
                        received_at=now))


def _text_value(text: str) -> Any:
    return Value(clean_text(text), output_field=TextField())


# ------------------------------------------------------------------------------------ reading


class BadRead(Exception):
    """A read the job cannot answer; `errors` maps the query parameter to what is wrong (400)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


@dataclass
class Output:
    job_id: int
    generation: int | None
    generations: list[int]
    rank: int
    ranks: list[int]
    node: str | None
    offset: int  # where `text` begins (bytes)
    next_offset: int  # ask from here to follow
    end_offset: int  # every byte received of this rank so far
    pruned_bytes: int  # bytes at the start of this rank's output no longer kept
    text: str
    more: bool  # a forward read stopped at READ_BYTES: more is stored after next_offset
    notice: str

    def as_json(self) -> dict[str, Any]:
        return {
            "job": self.job_id, "generation": self.generation, "generations": self.generations,
            "rank": self.rank, "ranks": self.ranks, "node": self.node, "offset": self.offset,
            "next_offset": self.next_offset, "end_offset": self.end_offset, "pruned_bytes": self.pruned_bytes,
            "more": self.more, "notice": self.notice, "text": self.text,
        }


def generations_of(job: Job) -> list[int]:
    """The job's runs, oldest first, by the generation its agents knew them by: every run not
    fenced, and every run with output (a fenced run's allocation was given a new generation,
    never a run's; its output is stored under the run's own). One query."""
    runs = (Allocation.objects.filter(job=job).exclude(state=AllocationState.FENCED).order_by()
            .values_list("generation", flat=True)
            .union(JobLogChunk.objects.filter(job=job).order_by().values_list("generation", flat=True)))
    return sorted(set(runs))


def read(job: Job, *, rank: int = 0, generation: int | None = None, offset: int | None = None,
         tail_bytes: int | None = None, tail_lines: int | None = None) -> Output:
    """One rank's output of one run (default: the job's latest run). Exactly one way to start:
    `offset` (forward, at most READ_BYTES; follow with `next_offset`), `tail_bytes`,
    `tail_lines`, or none of them (from the first byte kept)."""
    given = [name for name, value in (("offset", offset), ("tail_bytes", tail_bytes), ("tail_lines", tail_lines))
             if value is not None]
    if len(given) > 1:
        raise BadRead({given[1]: f"Give one of offset, tail_bytes and tail_lines, not {' and '.join(given)}."})
    generations = generations_of(job)
    if generation is None:
        generation = generations[-1] if generations else None
    elif generation not in generations:
        runs = ", ".join(map(str, generations[-20:])) if generations else "none yet (it never ran)"
        raise BadRead({"generation": f"Job {job.pk} has no run of generation {generation}; its generations: {runs}."})
    empty = Output(job_id=job.pk, generation=generation, generations=generations, rank=rank, ranks=[], node=None,
                   offset=offset or 0, next_offset=offset or 0, end_offset=0, pruned_bytes=0, text="", more=False,
                   notice="")
    if generation is None:
        # a job that ended without a run (cancelled while waiting, a dependency never met) never will
        empty.notice = (f"Job {job.pk} never ran: no output." if job.state in FINISHED_JOB_STATES
                        else f"Job {job.pk} has not run yet: no output.")
        return empty
    rows = JobLogChunk.objects.filter(generation=generation, rank=rank)
    # Every rank of the run with where its output starts and ends, in one query.
    spans = {r["rank"]: r for r in JobLogChunk.objects.filter(job=job, generation=generation).order_by()
             .values("rank").annotate(start=Min("offset"), end=Max(F("offset") + F("nbytes")),
                                      node=Max("node_name"))}
    empty.ranks = sorted(spans)
    if rank not in spans:
        # Rank 0, or one below a rank with output, exists: no query for those (the job page asks rank 0).
        world = world_size(job, generation) if rank > max(spans, default=0) else None
        if world is not None and rank >= world:
            # "Rank 5 … has written nothing yet" of a 1-GPU run read as if it might still write.
            raise BadRead({"rank": f"{_capital(run_named(generations, generation, job=job.pk))} has "
                                   f"{counted(world, 'rank')} (0–{world - 1}): there is no rank {rank}."})
        empty.notice = _no_output(job, generations, generation, rank, empty.ranks)
        return empty
    end, start, node = spans[rank]["end"], spans[rank]["start"], spans[rank]["node"]
    out = Output(job_id=job.pk, generation=generation, generations=generations, rank=rank, ranks=empty.ranks,
                 node=node, offset=start, next_offset=end, end_offset=end, pruned_bytes=start, text="", more=False,
                 notice="")
    if tail_lines is not None:
        out.offset, out.text = _tail_lines(rows, tail_lines, start)
        return _noted(out, out.offset)
    if offset is not None:
        begin = offset
    elif tail_bytes is not None:
        begin = max(start, end - tail_bytes)
    else:
        begin = start
    if begin >= end:
        # Following and nothing new (or asked past the end: wait there).
        out.offset = out.next_offset = begin
        return out
    out.offset, out.text, out.next_offset, out.more = _forward(
        rows, max(begin, start), cut_lines=tail_bytes is not None, limit=None if tail_bytes else READ_BYTES)
    return _noted(out, begin)


def _noted(out: Output, asked_from: int) -> Output:
    """Say what is missing before the text: bytes pruned (or asked for before what is kept)."""
    if out.pruned_bytes and asked_from <= out.pruned_bytes and out.offset <= out.pruned_bytes and out.text:
        out.notice = (f"… {out.pruned_bytes} bytes earlier were pruned (the last "
                      f"{_size(keep_bytes())} of each rank's output are kept).")
    return out


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n} bytes"


def world_size(job: Job, generation: int) -> int | None:
    """How many ranks the run of this generation has, as its agents start them: one a GPU, or
    one a node with QM_LAUNCH=per_node (agent/members.py); None when no allocation carries the
    generation (a fenced run's output keeps the run's own). One query."""
    held = AllocationGpu.objects.filter(allocation__job=job, allocation__generation=generation)
    if (job.env or {}).get("QM_LAUNCH") == "per_node":
        count = held.values("node_id").distinct().count()
    else:
        count = held.count()
    return count or None


def _no_output(job: Job, generations: list[int], generation: int, rank: int, ranks: list[int]) -> str:
    """A rank (or a run) with no output: "has written nothing yet" while the run may still write
    (the job runs, and this is its latest run), "wrote nothing" once the run is over: the job has
    ended, or waits again after a requeue, or runs a later run ("yet" read as if more might come)."""
    running = job.state in (JobState.RUNNING, JobState.PREEMPTING) and generation == generations[-1]
    said = "has written nothing yet" if running else "wrote nothing"
    if ranks:
        return (f"Rank {rank} of {run_named(generations, generation)} {said}; ranks with output: "
                f"{', '.join(map(str, ranks[:32]))}.")
    return f"{_capital(run_named(generations, generation, job=job.pk))} {said}."


def _capital(words: str) -> str:
    """A sentence's first letter capital, the rest as it is."""
    return words[:1].upper() + words[1:]


def _forward(rows: Any, begin: int, *, cut_lines: bool, limit: int | None) -> tuple[int, str, int, bool]:
    """The text from byte `begin` on: (where it starts, text, next offset, more stored after)."""
    # No row is longer than CHUNK_BYTES (appends stop at MERGE_BYTES): the one holding `begin`
    # starts after begin - CHUNK_BYTES.
    chunks = rows.filter(offset__gt=begin - CHUNK_BYTES).order_by("offset").values_list(
        "offset", "nbytes", "text")
    parts: list[str] = []
    at = None
    taken = 0
    more = False
    for offset, nbytes, text in chunks.iterator(chunk_size=64):
        if offset + nbytes <= begin:
            continue
        if limit is not None and taken and taken + nbytes > limit:
            more = True
            break
        if at is None:
            if offset < begin:
                text = _cut_front(text, nbytes, offset + nbytes - begin, lines=cut_lines)
                offset, nbytes = begin, offset + nbytes - begin
            at = offset
        elif offset > at + taken:
            parts.append(f"\n[… {counted(offset - at - taken, 'byte')} never received …]\n")
        elif offset < at + taken:
            continue  # overlaps what is read already (cannot happen with one agent per node)
        parts.append(text)
        taken = offset + nbytes - at
    if at is None:
        return begin, "", begin, False
    return at, "".join(parts), at + taken, more


def _cut_front(text: str, nbytes: int, keep: int, *, lines: bool) -> str:
    """The last `keep` bytes of a chunk's text (exact when the chunk decoded without
    replacement), from the next line on when `lines` and it was cut mid-line."""
    raw = text.encode("utf-8")
    if len(raw) != nbytes:  # some bytes were undecodable: cut by the same share of characters
        return text[max(0, len(text) - round(len(text) * keep / nbytes)):]
    kept = raw[len(raw) - keep:].decode("utf-8", errors="ignore")
    if lines and keep < len(raw) and raw[len(raw) - keep - 1:len(raw) - keep] != b"\n":
        newline = kept.find("\n")
        if 0 <= newline < len(kept) - 1:
            kept = kept[newline + 1:]
    return kept


def _tail_lines(rows: Any, lines: int, start: int) -> tuple[int, str]:
    """The last `lines` lines (at most READ_BYTES): (byte offset where they start, text)."""
    parts: list[str] = []
    newlines = 0
    taken = 0
    at = None
    batch = 2  # rows of up to 64 KiB: the job page's 200 lines are mostly in the last one or two
    while newlines <= lines and taken < READ_BYTES:
        older = rows if at is None else rows.filter(offset__lt=at)
        found = list(older.order_by("-offset").values_list("offset", "nbytes", "text")[:batch])
        for offset, nbytes, text in found:
            parts.append(text)
            at = offset
            taken += nbytes
            # A final line without its newline counts too: look for one newline more than asked.
            newlines += text.count("\n")
            if newlines > lines or taken >= READ_BYTES:
                break
        if len(found) < batch:
            break
        batch *= 4
    if at is None:
        return start, ""
    text = "".join(reversed(parts))
    body = text[:-1] if text.endswith("\n") else text
    cut = len(body)
    for _ in range(lines):
        cut = body.rfind("\n", 0, cut)
        if cut < 0:
            return at, text
    kept = text[cut + 1:]
    return at + len(text[:cut + 1].encode("utf-8")), kept


def stored_bytes(job: Job) -> int:
    """Bytes of output stored for the job (all runs and ranks), for the page's footnote."""
    return int(JobLogChunk.objects.filter(job=job).aggregate(n=Sum("nbytes"))["n"] or 0)
