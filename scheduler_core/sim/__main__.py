"""``python -m scheduler_core.sim --trace FILE.csv --nodes 64 --gpus-per-node 8 --json``

Replays a trace through the engine and prints one JSON object (``--json``) or a short table.
Exit status: 0 done, 2 bad arguments or a bad trace, 3 the engine returned a plan that cannot
take effect (an engine bug; the message names the job, node and GPU).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence

from scheduler_core.sim.fleet import FleetShape, fleet_check
from scheduler_core.sim.loop import SimulationError, simulate
from scheduler_core.sim.maintenance_plan import load_maintenance
from scheduler_core.sim.metrics import METRIC_KEYS
from scheduler_core.sim.overrides import OverrideError, config_with
from scheduler_core.sim.progress import ProgressBar
from scheduler_core.sim.trace import TraceError, load_trace


def _at_least_one(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse names the flag when it fails)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


#: The largest fleet the simulator builds (800,000 GPUs at 8 a node, 16 times the cycle
#: benchmark's largest): --nodes 100000000 ran for minutes building a fleet before any cycle.
MAX_NODES = 100_000
#: GPUs on one node: a node's GPUs are a bit mask, and no machine carries more than a few dozen.
MAX_GPUS_PER_NODE = 1_024


def _at_most(limit: int, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number from 1 to ``limit``."""
    def parse(text: str) -> int:
        value = _at_least_one(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"at most {limit:,} {what}, got {text!r}")
        return value
    return parse


def _minutes(text: str) -> float:
    """An argparse type: a finite number of minutes > 0 (``nan`` and ``inf`` made every figure NaN)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of minutes > 0, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of minutes > 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler_core.sim",
        description="Replay a job trace through the scheduling engine and report what the fleet did.",
    )
    parser.add_argument("--trace", required=True, help="CSV: job_id,submit_s,gpus,duration_s,runtime_limit_s,user[,...]")
    parser.add_argument("--nodes", type=_at_most(MAX_NODES, "nodes"), default=64,
                        help=f"GPU nodes in the fleet (default 64, at most {MAX_NODES:,})")
    parser.add_argument("--gpus-per-node", type=_at_most(MAX_GPUS_PER_NODE, "GPUs per node"), default=8,
                        help="GPUs per node (default 8)")
    parser.add_argument("--nodes-per-leaf", type=_at_least_one, default=16, help="nodes under one leaf switch (default 16)")
    parser.add_argument("--leaves-per-spine", type=_at_least_one, default=4, help="leaf switches under one spine (default 4)")
    parser.add_argument(
        "--gpu-types",
        default="gpu",
        help="comma-separated GPU type names, dealt to nodes in equal blocks (default: one type, 'gpu')",
    )
    parser.add_argument(
        "--maintenance",
        metavar="FILE.csv",
        help="maintenance windows to replay (CSV: id,nodes,start_s,end_s[,reason][,announced_s]; nodes n0000 "
             "n0001 ...; announced_s: when the window became known, 0 if left out)",
    )
    parser.add_argument("--horizon-min", type=_minutes, default=10080.0, help="simulated minutes (default 10080, one week)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a SchedulerConfig setting, e.g. --set aging_per_hour=4 (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    bar = parser.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show progress on stderr")
    bar.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
    return parser


def _format(value: float | int | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    gpu_types = tuple(name.strip() for name in args.gpu_types.split(","))
    if any(not name for name in gpu_types) or len(set(gpu_types)) != len(gpu_types):
        parser.error(f"argument --gpu-types: expected distinct non-empty names, got {args.gpu_types!r}")
    try:
        shape = FleetShape(
            nodes=args.nodes,
            gpus_per_node=args.gpus_per_node,
            nodes_per_leaf=args.nodes_per_leaf,
            leaves_per_spine=args.leaves_per_spine,
            gpu_types=gpu_types,
        )
        config = config_with(args.set)
        # a job the engine would refuse on this fleet is a bad row, not a job to drop or keep waiting
        jobs = load_trace(args.trace, check=fleet_check(shape))
        if not jobs:
            raise TraceError(args.trace, None, None, "the trace has a header but no jobs")
        first = jobs[0].submit_s
        if first >= args.horizon_min * 60.0:
            raise ValueError(f"--horizon-min {args.horizon_min:g} ends before the trace's first submission "
                             f"(minute {first / 60.0:g}): no job would count")
        windows = load_maintenance(args.maintenance) if args.maintenance else []
    except (TraceError, OverrideError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    horizon_s = args.horizon_min * 60.0
    show = sys.stderr.isatty() if args.progress is None else bool(args.progress)
    bar = ProgressBar(sys.stderr, horizon_s, time.perf_counter, label="sim") if show else None
    started = time.perf_counter()
    try:
        result = simulate(jobs, shape, config=config, horizon_s=horizon_s, clock=time.perf_counter, progress=bar,
                          maintenance=windows)
    except ValueError as error:     # a window on a node the fleet does not have
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SimulationError as error:
        print(f"error: the engine's plan cannot take effect: {error}", file=sys.stderr)
        return 3
    finally:
        if bar is not None:
            bar.close()
    report = result.as_dict()
    report["wall_seconds"] = time.perf_counter() - started
    if args.json:
        print(json.dumps(report, sort_keys=False))
    else:
        for key in (*METRIC_KEYS, *result.extras, "wall_seconds"):
            print(f"{key:<24}{_format(report[key])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
