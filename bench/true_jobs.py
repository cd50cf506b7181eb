"""1,000 one-GPU jobs running the real command `/bin/true` through 64 real agent processes.

    scripts/test-services.sh .venv/bin/python bench/true_jobs.py [--json]

64 `qm-agent` processes (real mode, declared inventory of 8 GPUs each: 512 GPUs, so the
1,000 jobs run in two waves and the second wave waits for the first to end) launch each job
as a subprocess (`/bin/sh -c /bin/true` with CUDA_VISIBLE_DEVICES and the rank environment),
report its exit, and the loop (one Celery worker and beat) places the next wave when GPUs
free up. The clock starts when the job array is POSTed and stops when every job has
succeeded. Goal ≤ 10 s (Slurm 22.05 on this same machine: 19.9 s).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleet_setup import (  # noqa: E402
    GPU_TYPE,
    Timeline,
    options,
    report,
    seed,
    start_plane,
    submit_array,
    wait_registered,
)
from plane import BOOTSTRAP, machine, prepare_database  # noqa: E402

AGENTS = 64
GPUS_PER_AGENT = 8
JOBS = 1000


def main() -> int:
    parser = options(__doc__.split("\n\n")[0], jobs=JOBS, web_workers=2)
    parser.add_argument("--agents", type=int, default=AGENTS)
    parser.add_argument("--web-threads", type=int, default=48, help="threads per web worker")
    parser.add_argument("--agent-log-level", default="WARNING", help="INFO logs every launch and exit")
    parser.add_argument("--no-wake", action="store_true", help="agents hold no wake-up long poll")
    parser.add_argument("--full-desired-state", action="store_true",
                        help="agents ask for the whole desired state at every contact (the protocol before "
                             "'unchanged' replies), for a side-by-side comparison")
    parser.add_argument("--wake-with-state", action="store_true",
                        help="agents ask for their desired state with each wake-up (qm-agent --wake-with-state) "
                             "instead of fetching it after one, for a side-by-side comparison")
    args = parser.parse_args()
    before = machine()
    prepare_database("qm_bench_true_jobs")
    token = seed(args.agents * GPUS_PER_AGENT)

    from django.db import connection

    from controlplane.models import Job

    workdir = Path("/tmp/qm-bench/true-jobs")
    shutil.rmtree(workdir / "agents", ignore_errors=True)
    # Each agent holds one long poll (wake-ups) on a web thread: 2 × 48 threads leave room.
    # A process holds at most threads − 8 of them, so the API always has threads of its own.
    plane = start_plane(workdir, {"QM_CYCLE_INTERVAL_S": "1", "QM_CYCLE_DEBOUNCE_S": "0.2",
                                  "QM_AGENT_MAX_WAITS": str(max(1, args.web_threads - 8))},
                        web_workers=args.web_workers, web_threads=args.web_threads)
    try:
        agent = str(Path(sys.executable).parent / "qm-agent")
        for i in range(args.agents):
            plane.spawn(f"agent-{i:02d}", [
                agent, "--server", plane.server, "--name", f"node-{i:02d}", "--gpus", str(GPUS_PER_AGENT),
                "--gpu-type", GPU_TYPE, "--pool", "h100", "--leaf-switch", f"leaf-{i // 16}", "--spine", "spine-0",
                "--cpus", "64", "--memory-gb", "512", "--state-dir", str(workdir / "agents"),
                "--bootstrap-token", BOOTSTRAP, *(["--interval", str(args.interval)] if args.interval else []),
                "--sample-interval", "30",
                "--log-level", args.agent_log_level, *(["--no-wake"] if args.no_wake else []),
                *(["--full-desired-state"] if args.full_desired_state else []),
                *(["--wake-with-state"] if args.wake_with_state else []),
            ])
        registered = wait_registered(args.agents)
        time.sleep(2)

        cpu_before = plane.cpu_seconds()
        started, submitted = submit_array(plane.server, token, {
            "name": "true", "gpus": 1, "array": f"0-{args.jobs - 1}", "command": "/bin/true"})
        timeline = Timeline(started)
        done = timeline.wait(lambda s: s[4] == args.jobs, 180, "all jobs finished")
        first_bound = timeline.first(lambda s: s[2] or s[4])
        half = timeline.first(lambda s: s[4] >= args.jobs // 2)
        failed = Job.objects.filter(state="failed").count()
        cpu = plane.cpu_seconds_since(cpu_before)
        connection.close()
        result = {
            "benchmark": "true_jobs_real_agents",
            "agents": args.agents, "gpus": args.agents * GPUS_PER_AGENT, "jobs": args.jobs,
            "heartbeat_interval_s": args.interval or "server default (2.7)",
            "wake_ups": not args.no_wake,
            "unchanged_replies": not args.full_desired_state,
            "wake_carries_state": args.wake_with_state,
            "registration_s": round(registered, 2),
            "submit_s": round(submitted, 2),
            "first_job_bound_s": round(first_bound, 2) if first_bound is not None else None,
            "half_finished_s": round(half, 2) if half is not None else None,
            "all_finished_s": round(done, 2),
            "failed": failed,
            "jobs_per_s": round(args.jobs / done, 1),
            "goal_s": 10.0,
            "goal_met": done <= 10.0 and failed == 0,
            "cpu_s_during_run": cpu,
            **before,
        }
    finally:
        plane.stop()
    report(result, timeline, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
