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

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plane import BOOTSTRAP, Plane, machine, prepare_database, wait_for  # noqa: E402

AGENTS = 64
GPUS_PER_AGENT = 8
JOBS = 1000


def seed() -> str:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from controlplane.models import GpuType, Membership, PriorityClass, Quota, Team

    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    batch = PriorityClass.objects.create(name="batch", value=100, grace_period_s=10)
    team = Team.objects.create(name="bench", default_priority_class=batch)
    Quota.objects.create(team=team, gpu_type=h100, nominal_gpus=AGENTS * GPUS_PER_AGENT)
    user = get_user_model().objects.create_user("bench", password="bench")
    Membership.objects.create(user=user, team=team)
    return Token.objects.create(user=user).key


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--agents", type=int, default=AGENTS)
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--interval", type=float, default=1.0, help="agents' heartbeat interval, seconds")
    parser.add_argument("--timeline", action="store_true", help="print (seconds, running, finished) as it went")
    args = parser.parse_args()
    before = machine()
    prepare_database("qm_bench_true_jobs")
    token = seed()

    import requests
    from django.db import connection
    from django.db.models import Count

    from controlplane.choices import NodeState
    from controlplane.models import Job, Node

    workdir = Path("/tmp/qm-bench/true-jobs")
    shutil.rmtree(workdir / "agents", ignore_errors=True)
    plane = Plane(workdir, {"QM_CYCLE_INTERVAL_S": "1", "QM_CYCLE_DEBOUNCE_S": "0.2"})
    try:
        plane.web(workers=2, threads=8)
        plane.loop(workers=1)
        plane.wait_web()
        agent = str(Path(sys.executable).parent / "qm-agent")
        for i in range(args.agents):
            plane.spawn(f"agent-{i:02d}", [
                agent, "--server", plane.server, "--name", f"node-{i:02d}", "--gpus", str(GPUS_PER_AGENT),
                "--gpu-type", "H100-80GB", "--pool", "h100", "--leaf-switch", f"leaf-{i // 16}", "--spine", "spine-0",
                "--cpus", "64", "--memory-gb", "512", "--state-dir", str(workdir / "agents"),
                "--bootstrap-token", BOOTSTRAP, "--interval", str(args.interval), "--sample-interval", "30",
            ])
        registered = wait_for(lambda: Node.objects.filter(state=NodeState.READY).count() == args.agents, 120,
                              "all agents registered")
        time.sleep(2)

        started = time.perf_counter()
        response = requests.post(
            plane.server + "/api/v1/job-arrays/",
            json={"name": "true", "gpus": 1, "array": f"0-{args.jobs - 1}", "command": "/bin/true"},
            headers={"Authorization": f"Token {token}"}, timeout=120,
        )
        submitted = time.perf_counter() - started
        if response.status_code != 201:
            raise SystemExit(f"submit failed: HTTP {response.status_code} {response.text[:500]}")
        timeline: list[tuple[float, int, int]] = []

        def finished() -> bool:
            counts = dict(Job.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
            timeline.append((time.perf_counter() - started, counts.get("running", 0),
                             counts.get("succeeded", 0) + counts.get("failed", 0)))
            return timeline[-1][2] == args.jobs

        done = wait_for(finished, 180, "all jobs finished", poll=0.05) + submitted
        first_bound = next((t for t, running, ended in timeline if running or ended), None)
        half = next((t for t, _, ended in timeline if ended >= args.jobs // 2), None)
        failed = Job.objects.filter(state="failed").count()
        connection.close()
        result = {
            "benchmark": "true_jobs_real_agents",
            "agents": args.agents, "gpus": args.agents * GPUS_PER_AGENT, "jobs": args.jobs,
            "heartbeat_interval_s": args.interval,
            "registration_s": round(registered, 2),
            "submit_s": round(submitted, 2),
            "first_job_bound_s": round(first_bound, 2) if first_bound is not None else None,
            "half_finished_s": round(half, 2) if half is not None else None,
            "all_finished_s": round(done, 2),
            "failed": failed,
            "jobs_per_s": round(args.jobs / done, 1),
            "goal_s": 10.0,
            "goal_met": done <= 10.0 and failed == 0,
            **before,
        }
    finally:
        plane.stop()
    if args.timeline:
        for t, running, ended in timeline[::5]:
            print(f"{t:7.2f} s  running {running:5d}  finished {ended:5d}")
    print(json.dumps(result) if args.json else "\n".join(f"{k:>22}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
