"""How fast a real agent ships a job's output when the job prints faster than it can be sent.

    flock /tmp/qm-bench.lock scripts/test-services.sh .venv/bin/python bench/agent_output_rate.py \
        [--ranks 1] [--mib 4] [--interval 2.0] [--json]

gunicorn and the scheduling loop (bench/plane.py), one real `qm-agent` (real processes, no
NVML) on a node of 8 GPUs, heartbeating every `--interval` seconds. One job of `--ranks` GPUs
whose every rank prints `--mib` MiB of 100-byte lines at once (`yes | head -c`), far faster than
any link. The clock starts when a rank's file on the node is whole and stops when the control
plane holds every byte of every rank (its end offset, GET-able by `qm logs`): the agent's
shipping rate per rank and for the node, in MiB/s. (agent/logs.py: what a contact carries, and
how soon the next goes while output waits.)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import requests  # noqa: E402
from fleet_setup import seed, start_plane, wait_registered  # noqa: E402
from plane import BOOTSTRAP, machine, prepare_database, wait_for  # noqa: E402

MIB = 1024 * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--mib", type=float, default=4.0)
    parser.add_argument("--interval", type=float, default=2.0, help="the agent's heartbeat interval, seconds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    before = machine()
    prepare_database("qm_bench_output_rate")
    token = seed(8)
    total = int(args.mib * MIB)

    from django.db import connection
    from django.db.models import Max, Sum

    from controlplane.agent import logs as agent_logs
    from controlplane.models import Allocation, JobLogChunk

    work = Path("/tmp/qm-bench/output-rate")
    plane = start_plane(work, {"QM_CYCLE_INTERVAL_S": "1", "QM_JOB_LOG_KEEP_BYTES_PER_RANK": str(total + MIB)},
                        web_workers=2)
    state = work / "agent-state"
    shutil.rmtree(state, ignore_errors=True)  # a previous run's g1/ would be appended to (a fresh database)
    try:
        plane.spawn("agent", [str(Path(sys.executable).parent / "qm-agent"), "--server", plane.server,
                              "--name", "out-01", "--gpus", "8", "--gpu-type", "H100-80GB",
                              "--state-dir", str(state), "--interval", str(args.interval), "--no-wake",
                              "--bootstrap-token", BOOTSTRAP, "--log-level", "WARNING"])
        wait_registered(1)
        line = "x" * 99
        r = requests.post(plane.server + "/api/v1/jobs/", headers={"Authorization": f"Token {token}"}, timeout=30,
                          json={"name": "loud", "gpus": args.ranks, "command": f"yes {line} | head -c {total}; sleep 600"})
        if r.status_code != 201:
            raise SystemExit(f"submit failed: HTTP {r.status_code} {r.text[:300]}")
        job = r.json()["id"]
        wait_for(lambda: Allocation.objects.filter(job_id=job).exists(), 30, "the job bound")
        generation = Allocation.objects.get(job_id=job).generation
        workdir = state / "out-01" / f"g{generation}"

        def whole() -> bool:
            return all((workdir / f"rank{r}.log").exists() and (workdir / f"rank{r}.log").stat().st_size == total
                       for r in range(args.ranks))

        wait_for(whole, 60, "the output on disk", poll=0.005)
        start = time.perf_counter()

        def stored() -> bool:
            ends = JobLogChunk.objects.filter(job_id=job).values("rank").annotate(end=Max("offset")).count()
            got = JobLogChunk.objects.filter(job_id=job).aggregate(n=Sum("nbytes"))["n"] or 0
            return ends == args.ranks and got >= total * args.ranks

        took = wait_for(stored, 600, "all of it on the control plane", poll=0.02)
        took = time.perf_counter() - start
        rows = JobLogChunk.objects.filter(job_id=job).count()
        connection.close()
        result = {
            "benchmark": "agent_output_rate", "ranks": args.ranks, "mib_per_rank": args.mib,
            "heartbeat_interval_s": args.interval, "seconds": round(took, 2),
            "mib_per_s_per_rank": round(args.mib / took, 2), "mib_per_s_node": round(args.mib * args.ranks / took, 2),
            "rows": rows, "chunk_bytes": agent_logs.RANK_BYTES, "rank_bytes_per_contact": agent_logs.BURST_BYTES,
            "call_bytes": agent_logs.CALL_BYTES,
            "backlog_delay_s": agent_logs.BACKLOG_DELAY_S, **before,
        }
    finally:
        plane.stop()
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
