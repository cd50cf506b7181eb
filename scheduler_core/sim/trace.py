"""Job traces for the simulator: CSV in, validated :class:`TraceJob` records out.

Columns (header required, order free): ``job_id,submit_s,gpus,duration_s,runtime_limit_s,user``
and optionally ``team,priority,gpu_type,checkpoint_interval_s,min_gpus,max_gpus,gpus_per_node``
(``min_gpus`` and ``max_gpus`` together or not at all: the engine refuses half an elastic range).
The file is UTF-8, with or without a byte-order mark.

``duration_s`` is the job's true run time. Only the simulator reads it, to end the job; the
engine is given ``runtime_limit_s`` (what a user declares) and never the true duration.

Every bad cell is reported as a :class:`TraceError` naming the line, the column, what was
expected and what came, so a broken trace is fixed in one look instead of by bisection.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler_core.types import DependencyCondition, GangRole, TopologyConstraint, WorkloadClass

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_s", "gpus", "duration_s", "runtime_limit_s", "user")
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "team",
    "priority",
    "gpu_type",
    "checkpoint_interval_s",
    "min_gpus",
    "max_gpus",
    "gpus_per_node",
)


class TraceError(ValueError):
    """A trace that cannot be replayed, with the line and column at fault."""

    def __init__(self, source: str, line: int | None, column: str | None, problem: str) -> None:
        where = source
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column '{column}'"
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.line = line
        self.column = column
        self.problem = problem


@dataclass(frozen=True, slots=True)
class TraceDependency:
    """The job may start only once job ``upstream`` meets ``condition`` (the control plane's
    ``JobDependency``, Slurm's ``--dependency``).

    An upstream job of the trace meets it in the replay's own timeline: ``after`` once it has
    started (or ended without starting), ``afterok`` once it ended having succeeded (it completes
    its ``duration_s`` and :attr:`TraceJob.succeeds`), ``afternotok`` once it ended otherwise
    (killed at its runtime limit, never runnable, cancelled for a dependency of its own never
    met, or a run that did not succeed), ``afterany`` once it ended at all. ``met_s`` is read only
    for an upstream job not in the trace (submitted before it, or ended without ever starting):
    when the condition was met, in seconds from the origin (``None``: not within the replay)."""

    upstream: str
    condition: DependencyCondition = DependencyCondition.AFTER_OK
    met_s: float | None = None


@dataclass(frozen=True, slots=True)
class TraceHold:
    """A stretch during which the job, if it waits then, is held out of the queue (Slurm's
    ``scontrol hold``): from ``start_s`` to ``end_s`` (``None``: never released within the
    replay). A hold keeps a waiting job from starting; it does not stop a running one, as the
    control plane refuses to hold a running job (409: cancel it or requeue it held). ``by``: who
    holds it, as the engine's explanation names the holder. ``requeues``: the hold came with a
    requeue (``qm requeue --hold``), which stops a running job: a job running in the replay when
    it begins is stopped, after its class's grace period, and goes back to the queue held, from
    its last checkpoint, as the control plane requeues it (not counted as a preemption)."""

    start_s: float
    end_s: float | None
    by: str
    requeues: bool = False

    def covers(self, at_s: float) -> bool:
        return self.start_s <= at_s and (self.end_s is None or at_s < self.end_s)


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace. Times are seconds from the trace's origin.

    ``priority`` is an integer priority value (higher runs first); ``min_gpus``/``max_gpus``
    make the job elastic around its preferred size ``gpus``."""

    job_id: str
    submit_s: float
    gpus: int
    duration_s: float
    runtime_limit_s: float | None
    user: str
    team: str = ""
    priority: int = 0
    gpu_type: str = ""
    checkpoint_interval_s: float | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    #: The job's own layout (members of this many GPUs), as a live job may ask; without it the
    #: engine puts a job of at least one node's GPUs on whole nodes and a smaller one on one node.
    gpus_per_node: int | None = None
    # The rest of a job's shape, as the control loop gives it to the engine (JobSpec's fields of
    # the same names). A CSV trace has no columns for them: its jobs keep these defaults. The
    # what-if replay of the real queue fills them, so a job that asked for distinct nodes, a
    # leaf, roles or an array's task limit is replayed as it asked, not as a packed, homogeneous, any-topology job.
    #: GPU types the job accepts when more than one (``gpu_type`` names a single one).
    gpu_types: tuple[str, ...] = ()
    workload: WorkloadClass = WorkloadClass.TRAINING
    min_gpu_memory_gb: int = 0
    cpus_per_gpu: int = 0
    memory_gb_per_gpu: int = 0
    topology: TopologyConstraint = TopologyConstraint.ANY
    roles: tuple[GangRole, ...] = ()
    members_on_distinct_nodes: bool = False
    array_id: str = ""
    array_task_limit: int | None = None
    # Holds and dependencies, as the what-if replay reads them from the control plane (a CSV
    # trace has neither): the stretches the job is held if it waits then; the jobs it waits on,
    # all of them met (Slurm's ``,``) or, with ``depends_on_any``, any one (``?``); and whether a
    # run that completes its ``duration_s`` succeeded (what ``afterok`` and ``afternotok`` read).
    holds: tuple[TraceHold, ...] = ()
    depends_on: tuple[TraceDependency, ...] = ()
    depends_on_any: bool = False
    succeeds: bool = True
    #: Slurm's ``--dependency=singleton``: it starts only when no other job of the trace of its
    #: ``user`` and ``name`` runs, or waits ahead of it (earlier in the trace), as the control
    #: plane keeps it (a job without a user has none: its account is gone).
    name: str = ""
    singleton: bool = False
    #: Requeues someone asked for while the job ran, not held (``qm requeue``; one held is a
    #: :class:`TraceHold` with ``requeues``), in seconds from the origin: a job running in the
    #: replay then is stopped as the control plane stops it, after its class's grace period, and
    #: goes back to the queue at once from its last checkpoint (not counted as a preemption); a
    #: job not running then is left as it is. The engine's own preemptions are not listed: the
    #: replayed policy makes its own.
    requeued_at: tuple[float, ...] = ()

    @property
    def accepted_gpu_types(self) -> tuple[str, ...]:
        """The GPU types the engine is told the job accepts (none: any)."""
        if self.gpu_types:
            return self.gpu_types
        return (self.gpu_type,) if self.gpu_type else ()

    @property
    def gpu_seconds(self) -> float:
        """Work the job needs: its true duration at its preferred size."""
        return self.duration_s * self.gpus


class _Row:
    """Cell parsing for one CSV line; every failure names the line and the column."""

    def __init__(self, source: str, line: int, cells: dict[str, str]) -> None:
        self.source = source
        self.line = line
        self.cells = cells

    def fail(self, column: str, problem: str) -> TraceError:
        return TraceError(self.source, self.line, column, problem)

    def text(self, column: str) -> str:
        return self.cells.get(column, "").strip()

    def number(self, column: str, *, positive: bool, optional: bool) -> float | None:
        raw = self.text(column)
        if raw == "":
            if optional:
                return None
            raise self.fail(column, "expected a number of seconds, got an empty cell")
        try:
            value = float(raw)
        except ValueError:
            raise self.fail(column, f"expected a number of seconds, got {raw!r}") from None
        if not math.isfinite(value):
            raise self.fail(column, f"expected a finite number of seconds, got {raw!r}")
        if positive and value <= 0:
            raise self.fail(column, f"expected a number of seconds > 0, got {raw!r}")
        if value < 0:
            raise self.fail(column, f"expected a number of seconds >= 0, got {raw!r}")
        return value

    def integer(self, column: str, *, minimum: int | None, optional: bool) -> int | None:
        raw = self.text(column)
        if raw == "":
            if optional:
                return None
            raise self.fail(column, "expected an integer, got an empty cell")
        try:
            value = int(raw)
        except ValueError:
            raise self.fail(column, f"expected an integer, got {raw!r}") from None
        if minimum is not None and value < minimum:
            raise self.fail(column, f"expected an integer >= {minimum}, got {raw!r}")
        return value


def _required_float(row: _Row, column: str, *, positive: bool) -> float:
    value = row.number(column, positive=positive, optional=False)
    assert value is not None  # optional=False never returns None
    return value


def _required_int(row: _Row, column: str, *, minimum: int) -> int:
    value = row.integer(column, minimum=minimum, optional=False)
    assert value is not None  # optional=False never returns None
    return value


def _parse_row(row: _Row) -> TraceJob:
    job_id = row.text("job_id")
    if not job_id:
        raise row.fail("job_id", "expected a job id, got an empty cell")
    gpus = _required_int(row, "gpus", minimum=1)
    min_gpus = row.integer("min_gpus", minimum=1, optional=True)
    max_gpus = row.integer("max_gpus", minimum=1, optional=True)
    if min_gpus is not None and min_gpus > gpus:
        raise row.fail("min_gpus", f"expected at most gpus ({gpus}), got {min_gpus}")
    if max_gpus is not None and max_gpus < gpus:
        raise row.fail("max_gpus", f"expected at least gpus ({gpus}), got {max_gpus}")
    if (min_gpus is None) != (max_gpus is None):
        given, empty = ("min_gpus", "max_gpus") if max_gpus is None else ("max_gpus", "min_gpus")
        raise row.fail(empty, f"an elastic job needs both min_gpus and max_gpus, this row gives {given} only "
                              f"(leave both empty for a job of exactly gpus)")
    priority = row.integer("priority", minimum=None, optional=True)
    gpus_per_node = row.integer("gpus_per_node", minimum=1, optional=True)
    if gpus_per_node is not None and gpus_per_node > gpus:
        raise row.fail("gpus_per_node", f"expected at most gpus ({gpus}), got {gpus_per_node}")
    return TraceJob(
        job_id=job_id,
        submit_s=_required_float(row, "submit_s", positive=False),
        gpus=gpus,
        duration_s=_required_float(row, "duration_s", positive=True),
        runtime_limit_s=row.number("runtime_limit_s", positive=True, optional=True),
        user=row.text("user"),
        team=row.text("team"),
        priority=0 if priority is None else priority,
        gpu_type=row.text("gpu_type"),
        checkpoint_interval_s=row.number("checkpoint_interval_s", positive=True, optional=True),
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        gpus_per_node=gpus_per_node,
    )


def csv_rows(lines: Iterable[str], source: str, required: Sequence[str], optional: Sequence[str],
             what: str = "trace") -> Iterator[_Row]:
    """The CSV's lines after its header, one :class:`_Row` each (blank lines skipped). The header
    must have every ``required`` column and no unknown or repeated one; each line as many cells."""
    reader = csv.reader(lines)
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise TraceError(source, None, None, f"the {what} is empty; expected a header line") from None
    missing = [name for name in required if name not in header]
    if missing:
        raise TraceError(
            source,
            1,
            missing[0],
            f"required column missing from the header (expected {', '.join(required)}; "
            f"got {', '.join(header) or 'nothing'})",
        )
    known = set(required) | set(optional)
    for name in header:
        if name not in known:
            raise TraceError(source, 1, name, f"unknown column; optional columns are {', '.join(optional)}")
    if len(set(header)) != len(header):
        duplicate = next(name for name in header if header.count(name) > 1)
        raise TraceError(source, 1, duplicate, "column appears twice in the header")
    for cells in reader:
        line = reader.line_num
        if not cells or all(not cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise TraceError(
                source, line, None, f"expected {len(header)} cells as in the header, got {len(cells)}"
            )
        yield _Row(source, line, dict(zip(header, cells, strict=True)))


#: A further check of each parsed job (e.g. against the fleet it will run on): ``None`` if it
#: passes, else the column to blame and the problem.
JobCheck = Callable[[TraceJob], tuple[str, str] | None]


def parse_trace(lines: Iterable[str], source: str = "<trace>", check: JobCheck | None = None) -> list[TraceJob]:
    """Parse CSV text into jobs sorted by submission time (stable for equal times).

    Steps: check the header has every required column and no unknown one; parse each line
    (blank lines are skipped), then ``check`` it when given, a failure naming the line; refuse
    duplicate job ids; sort by ``submit_s``."""
    jobs: list[TraceJob] = []
    first_line_of: dict[str, int] = {}
    for row in csv_rows(lines, source, REQUIRED_COLUMNS, OPTIONAL_COLUMNS):
        job = _parse_row(row)
        problem = check(job) if check is not None else None
        if problem is not None:
            raise row.fail(*problem)
        if job.job_id in first_line_of:
            raise TraceError(
                source,
                row.line,
                "job_id",
                f"job id {job.job_id!r} already used on line {first_line_of[job.job_id]}",
            )
        first_line_of[job.job_id] = row.line
        jobs.append(job)
    jobs.sort(key=lambda job: job.submit_s)
    return jobs


def csv_lines(path: str | Path, what: str = "trace") -> io.StringIO:
    """A CSV file's text, to parse; a file that cannot be read is a :class:`TraceError`."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark is not part of the header
    except OSError as error:
        raise TraceError(str(path), None, None, f"cannot read the {what}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise TraceError(str(path), None, None,
                         f"the {what} is not UTF-8 text (byte {error.start} is {error.object[error.start]:#04x})") from None
    return io.StringIO(text, newline="")


def load_trace(path: str | Path, check: JobCheck | None = None) -> list[TraceJob]:
    """Read and parse a trace file (see :func:`parse_trace`)."""
    return parse_trace(csv_lines(path), str(path), check)


def write_trace(jobs: Sequence[TraceJob], columns: Sequence[str] = REQUIRED_COLUMNS) -> str:
    """Render jobs as CSV text with the given columns (the inverse of :func:`parse_trace`)."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for job in jobs:
        writer.writerow([_cell(getattr(job, column)) for column in columns])
    return out.getvalue()


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
