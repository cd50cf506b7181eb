"""Maintenance windows for a replay: CSV in, :class:`~scheduler_core.types.MaintenanceWindow`
records out, to ask what a planned window costs before it is scheduled.

Columns (header required, order free): ``id,nodes,start_s,end_s`` and optionally ``reason``
and ``announced_s``. ``nodes`` lists node names separated by spaces or ``;`` (the simulator's
nodes are ``n0000``, ``n0001``, ...); times are seconds from the trace's origin.
``announced_s`` is when the window became known (an admin created it), at or before its start;
the replay's engine sees the window only from then. Left out or empty: 0, known from the start.
Every bad cell is a :class:`~scheduler_core.sim.trace.TraceError` naming the line and the column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from scheduler_core.sim.trace import _Row, csv_lines, csv_rows
from scheduler_core.types import MaintenanceWindow

REQUIRED_COLUMNS: tuple[str, ...] = ("id", "nodes", "start_s", "end_s")
OPTIONAL_COLUMNS: tuple[str, ...] = ("reason", "announced_s")
_SEPARATORS = re.compile(r"[;\s]+")


def parse_maintenance(lines: Iterable[str], source: str = "<maintenance>") -> list[MaintenanceWindow]:
    """Parse CSV text into windows, in the file's order."""
    windows: list[MaintenanceWindow] = []
    first_line_of: dict[str, int] = {}
    for row in csv_rows(lines, source, REQUIRED_COLUMNS, OPTIONAL_COLUMNS, what="maintenance file"):
        window = _window(row)
        if window.id in first_line_of:
            raise row.fail("id", f"window id {window.id!r} already used on line {first_line_of[window.id]}")
        first_line_of[window.id] = row.line
        windows.append(window)
    return windows


def _window(row: _Row) -> MaintenanceWindow:
    window_id = row.text("id")
    if not window_id:
        raise row.fail("id", "expected a window id, got an empty cell")
    nodes = tuple(name for name in _SEPARATORS.split(row.text("nodes")) if name)
    if not nodes:
        raise row.fail("nodes", "expected node names separated by spaces or ';', got an empty cell")
    start = row.number("start_s", positive=False, optional=False)
    end = row.number("end_s", positive=True, optional=False)
    assert start is not None and end is not None
    if end <= start:
        raise row.fail("end_s", f"the window ends ({end:g} s) before it starts ({start:g} s)")
    announced = row.number("announced_s", positive=False, optional=True)
    if announced is not None and announced > start:
        raise row.fail("announced_s", f"the window is announced ({announced:g} s) after it starts ({start:g} s): "
                                      "a window is known at or before its start")
    # announced at the trace's origin is known throughout, as a file without the column says
    return MaintenanceWindow(window_id, nodes, start, end, row.text("reason"),
                             announced_at=announced if announced else None)


def load_maintenance(path: str | Path) -> list[MaintenanceWindow]:
    """Read and parse a maintenance file (see :func:`parse_maintenance`)."""
    return parse_maintenance(csv_lines(path, "maintenance file"), str(path))
