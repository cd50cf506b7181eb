"""Our engine against the seed's scheduler on a public production trace, side by side.

    .venv/bin/python bench/public_trace.py [--nodes 8 16 32] [--json | --markdown] [--set KEY=VALUE ...]

The seed's weeks (``bench/seed_week.py``) are synthetic. This replays a sample of Microsoft's
Philly cluster trace (``../shared/traces/public/muri_philly_trace1.csv``, as sampled by the Muri
project, SIGCOMM'22): 1,494 jobs of 1 to 32 GPUs over about 125 days, runtimes from minutes to
weeks, on fleets of 8-GPU nodes. At 8 and 16 nodes the trace overloads the fleet (it offers
about 128 GPUs on average); at 32 it fits.

Both schedulers get the same jobs. The seed's scheduler works in whole minutes, so submit times
are rounded down and durations up to whole minutes for both sides (runtime limits, whole hours,
stay as they are). It runs as a peer, exactly as in ``seed_week.py``: imported from
``../shared/peers/seed_gpusched.py`` at run time, handed the jobs through a scripted RNG, and its
own figures checked against ours computed from its jobs. The horizon is the day after the last
submission, so nearly every job's no-wait run ends inside it.

No goal is set on this trace. Besides the ratios the report says, for each fleet, whether the
weekly goals' four comparisons would hold (``allocated`` ≥ the seed's, ``wait_mean_min`` ≤ half
the seed's, ``wait_large_p95_min`` ≤ the seed's, ``wait_max_min`` ≤ 1.5 × the seed's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import seed_week
from seed_week import REPO, Goal, load_peer, peer_path, run_seed_peer, shared_dir

from scheduler_core.sim import FleetShape, TraceJob, load_trace, simulate
from scheduler_core.sim.metrics import METRIC_KEYS
from scheduler_core.sim.overrides import config_with

assert REPO  # seed_week put the repository on sys.path before the imports above
TRACE = Path("traces") / "public" / "muri_philly_trace1.csv"
GPUS_PER_NODE = 8
DEFAULT_NODES = (8, 16, 32)


def trace_file() -> Path:
    return shared_dir() / TRACE


def in_whole_minutes(jobs: Sequence[TraceJob]) -> list[TraceJob]:
    """The jobs with submit times rounded down and durations up to whole minutes."""
    out = []
    for job in jobs:
        submit = math.floor(job.submit_s / 60) * 60.0
        duration = max(60.0, math.ceil(job.duration_s / 60) * 60.0)
        limit = job.runtime_limit_s
        if limit is not None and limit < duration:
            raise ValueError(f"job {job.job_id}: runtime limit {limit} s is below its duration rounded up, {duration} s")
        out.append(dataclasses.replace(job, submit_s=submit, duration_s=duration))
    return out


def horizon_min_of(jobs: Sequence[TraceJob]) -> int:
    """Whole days up to the day after the last submission, in minutes."""
    last = max(job.submit_s for job in jobs)
    return (math.floor(last / 86400) + 2) * 24 * 60


def _ours(jobs: Sequence[TraceJob], nodes: int, horizon_min: int, overrides: Sequence[str]) -> dict[str, Any]:
    started = time.perf_counter()
    result = simulate(jobs, FleetShape(nodes=nodes, gpus_per_node=GPUS_PER_NODE), config=config_with(overrides),
                      horizon_s=horizon_min * 60.0, clock=time.perf_counter)
    report: dict[str, Any] = result.as_dict()
    report["wall_seconds"] = time.perf_counter() - started
    return report


def _seed(jobs: Sequence[TraceJob], nodes: int, horizon_min: int) -> dict[str, Any]:
    started = time.perf_counter()
    metrics: dict[str, Any] = dict(run_seed_peer(jobs, nodes=nodes, gpus_per_node=GPUS_PER_NODE,
                                                 horizon_min=horizon_min, peer=load_peer(peer_path())).metrics)
    metrics["wall_seconds"] = time.perf_counter() - started
    return metrics


def _value(metrics: dict[str, Any], key: str) -> float:
    return math.inf if metrics[key] is None else float(metrics[key])


def comparisons(ours: dict[str, Any], seed: dict[str, Any]) -> list[Goal]:
    """The weekly goals' four comparisons, without the overload margin."""
    alloc, s_alloc = _value(ours, "allocated"), _value(seed, "allocated")
    mean, s_mean = _value(ours, "wait_mean_min"), _value(seed, "wait_mean_min")
    p95, s_p95 = _value(ours, "wait_large_p95_min"), _value(seed, "wait_large_p95_min")
    worst, s_worst = _value(ours, "wait_max_min"), _value(seed, "wait_max_min")
    return [
        Goal(f"allocated {alloc:.4f} >= seed {s_alloc:.4f}", alloc >= s_alloc),
        Goal(f"wait_mean_min {mean:.0f} <= seed/2 = {s_mean / 2:.0f}", mean <= s_mean / 2),
        Goal(f"wait_large_p95_min {p95:.0f} <= seed {s_p95:.0f}", p95 <= s_p95),
        Goal(f"wait_max_min {worst:.0f} <= 1.5 x seed = {1.5 * s_worst:.0f}", worst <= 1.5 * s_worst),
    ]


def render(fleet: dict[str, Any]) -> str:
    ours, theirs = fleet["ours"], fleet["seed_scheduler"]
    lines = [f"{fleet['nodes']} nodes x {GPUS_PER_NODE} GPUs (offered load {seed_week._cell(ours['offered_load'])})",
             f"  {'metric':<22}{'ours':>10}{'seed':>10}{'ours/seed':>11}"]
    for key in METRIC_KEYS:
        lines.append(f"  {key:<22}{seed_week._cell(ours[key]):>10}{seed_week._cell(theirs[key]):>10}"
                     f"{seed_week._ratio(ours[key], theirs[key]):>11}")
    lines.append(f"  {'allocated, bound':<22}{seed_week._cell(ours['allocated_upper_bound']):>10}   (no scheduler can do better)")
    lines.append(f"  replay: ours {ours['wall_seconds']:.1f} s ({ours['engine_cycles']} cycles, p50 "
                 f"{seed_week._cell(ours['engine_ms_p50'])} ms), seed {theirs['wall_seconds']:.1f} s")
    for goal in fleet["comparisons"]:
        lines.append(f"  [{'holds' if goal['met'] else 'fails'}] {goal['goal']}")
    return "\n".join(lines)


def render_markdown(report: dict[str, Any]) -> str:
    fleets = report["fleets"]
    head = "| metric | " + " | ".join(f"{f['nodes'] * GPUS_PER_NODE} GPUs ours | seed | ours/seed" for f in fleets) + " |"
    lines = [head, "|---|" + "---:|" * (3 * len(fleets))]
    for key in (*METRIC_KEYS, "offered_load", "allocated_upper_bound"):
        cells = []
        for fleet in fleets:
            ours, theirs = fleet["ours"][key], fleet["seed_scheduler"].get(key)
            cells += [seed_week._cell(ours), seed_week._cell(theirs),
                      seed_week._ratio(ours, theirs) if theirs is not None else ""]
        lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    lines.append("")
    for fleet in fleets:
        failed = [c["goal"] for c in fleet["comparisons"] if not c["met"]]
        lines.append(f"- {fleet['nodes'] * GPUS_PER_NODE} GPUs: "
                     + ("all four comparisons hold" if not failed else "fails: " + "; ".join(failed)))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, nargs="+", default=list(DEFAULT_NODES), help="fleet sizes, in 8-GPU nodes")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="SchedulerConfig override for our engine")
    parser.add_argument("--workers", type=int, default=2, help="parallel replays (default 2)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    output.add_argument("--markdown", action="store_true", help="print the Markdown table for docs/engine.md")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.nodes):
        parser.error("--nodes: every fleet needs at least one node")
    config_with(args.set)  # fail fast on a bad override

    jobs = in_whole_minutes(load_trace(trace_file()))
    horizon_min = horizon_min_of(jobs)
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        ours_f = [pool.submit(_ours, jobs, n, horizon_min, tuple(args.set)) for n in args.nodes]
        seed_f = [pool.submit(_seed, jobs, n, horizon_min) for n in args.nodes]
        results = [(n, o.result(), s.result()) for n, o, s in zip(args.nodes, ours_f, seed_f, strict=True)]

    report: dict[str, Any] = {"trace": str(TRACE), "jobs": len(jobs), "horizon_min": horizon_min,
                              "overrides": list(args.set), "fleets": []}
    for nodes, ours, theirs in results:
        report["fleets"].append({"nodes": nodes, "ours": ours, "seed_scheduler": theirs,
                                 "comparisons": [{"goal": c.text, "met": c.met} for c in comparisons(ours, theirs)]})
    if args.json:
        print(json.dumps(report))
    elif args.markdown:
        print(render_markdown(report))
    else:
        print(f"{TRACE}: {len(jobs)} jobs, horizon {horizon_min / 1440:.0f} days; seed scheduler run as a peer on the same jobs\n")
        print("\n\n".join(render(fleet) for fleet in report["fleets"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
