"""Discrete-event simulator: replays a job trace through the very same engine.

``python -m scheduler_core.sim --trace FILE.csv --nodes 64 --gpus-per-node 8 --json``. The
replay reads files and draws a progress bar, so unlike the engine it does I/O, but only at
its edges (:func:`load_trace`, :func:`load_maintenance`, the CLI); the event loop itself is as deterministic as the
engine: same trace, same fleet, same config, same numbers.
"""

from __future__ import annotations

from scheduler_core.sim.fleet import FleetShape
from scheduler_core.sim.loop import SimResult, SimulationError, Simulator, simulate
from scheduler_core.sim.maintenance_plan import load_maintenance, parse_maintenance
from scheduler_core.sim.metrics import METRIC_KEYS, JobOutcome, summarize
from scheduler_core.sim.trace import (
    TraceDependency,
    TraceError,
    TraceHold,
    TraceJob,
    load_trace,
    parse_trace,
    write_trace,
)

__all__ = [
    "METRIC_KEYS",
    "FleetShape",
    "JobOutcome",
    "SimResult",
    "SimulationError",
    "Simulator",
    "TraceDependency",
    "TraceError",
    "TraceHold",
    "TraceJob",
    "load_maintenance",
    "load_trace",
    "parse_maintenance",
    "parse_trace",
    "simulate",
    "summarize",
    "write_trace",
]
