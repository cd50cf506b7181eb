"""Job output benchmark: what shipping and keeping a job's output costs, on PostgreSQL.

    flock /tmp/qm-bench.lock scripts/test-services.sh .venv/bin/python bench/job_logs.py \
        [--chatty-mib 1] [--burst-mib 10] [--runs 20] [--merge-bytes 16384,4096,0] [--json]

1. A fresh database (bench/plane.py's prepare_database) with one node registered through the
   agent protocol (its real token) and one running job on it.
2. Heartbeats through the real endpoint (Django's test client, in process): an idle one, and one
   carrying a 300-byte chunk (three 100-byte lines, a chatty job between two heartbeats),
   alternated `--runs` times: request bytes and median server ms.
3. A chatty rank: 100-byte lines, three per heartbeat, until `--chatty-mib` MiB, once per
   `--merge-bytes` limit (how far small chunks are appended to the rank's last row), each on an
   empty table: store time per chunk (services.job_logs.store), rows, table bytes before vacuum
   (dead row versions included) and after VACUUM FULL, WAL written.
4. A bursty rank: 64 KiB chunks (the most a contact carries per rank) until `--burst-mib` MiB,
   past the 8 MiB kept: rows and bytes kept after pruning, table bytes.
5. Reads as `qm logs` and the job page make them (GET jobs/{id}/logs/, signed in), median of
   `--runs`: the last 1 MiB (tail_bytes), the last 200 lines, a follow with nothing new, and the
   raw text of all 8 MiB kept (?format=txt&tail_bytes=8388608); and the job page itself.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plane import machine, prepare_database  # noqa: E402

BOOTSTRAP = "bench-bootstrap"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chatty-mib", type=float, default=1.0)
    p.add_argument("--burst-mib", type=float, default=10.0)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--merge-bytes", default="16384,4096,0",
                   help="appends to a rank's last row up to this many bytes (0: a row per chunk), compared")
    p.add_argument("--json", action="store_true")
    return p.parse_args(argv)


def ms(samples: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(samples) * 1000, 2), "max_ms": round(max(samples) * 1000, 2)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    before = machine()
    prepare_database("qm_bench_job_logs")
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.test import Client
    from django.utils import timezone

    from controlplane.models import GpuType, Job, JobLogChunk, PriorityClass, Team
    from controlplane.services import agent_protocol, job_logs, reconcile, transitions

    settings.QM["AGENT_BOOTSTRAP_TOKEN"] = BOOTSTRAP
    settings.ALLOWED_HOSTS = ["*"]
    GpuType.objects.create(name="H100-80GB", memory_gb=80)
    pc = PriorityClass.objects.create(name="research", value=500)
    team = Team.objects.create(name="vision", default_priority_class=pc)
    node = agent_protocol.register("h100-01", agent_protocol.Inventory(
        pool="h100", gpu_type="H100-80GB", gpu_count=8, cpus=96, memory_gb=1024, leaf_switch="leaf-1",
        spine="spine-1"), token=BOOTSTRAP, running=[], now=timezone.now())
    token = node.token
    now = timezone.now()

    def running_job(name: str) -> tuple[Job, int]:
        job = Job.objects.create(team=team, priority_class=pc, name=name, gpus=1, runtime_limit_s=86400,
                                 submitted_at=now, state_changed_at=now, command="python train.py")
        with transaction.atomic():
            allocation = transitions.bind_job(job.pk, [transitions.GpuSet(node.node.pk, [len(jobs)])],
                                              lease=reconcile.lock_scheduler_lease(), borrowed=False, at=now,
                                              actor="bench")
        assert allocation is not None
        return job, allocation.generation

    jobs: list[Job] = []
    results: dict[str, Any] = {"machine": before}

    # --- 2. heartbeats with and without output
    hb_job, hb_gen = running_job("heartbeats")
    jobs.append(hb_job)
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    url = "/api/v1/agent/nodes/h100-01/heartbeat"
    rng = random.Random(7)

    def lines(n: int) -> str:
        """`n` lines of about 100 bytes as a training script prints them (numbers that vary, so
        PostgreSQL's compression of the stored text is not flattered by repetition)."""
        out = []
        for _ in range(n):
            step = rng.randrange(1, 10**6)
            out.append(f"step {step:>7} tokens {step * 4096:>12} loss {rng.uniform(1, 4):.4f} lr "
                       f"{rng.uniform(1e-5, 3e-4):.3e} grad_norm {rng.uniform(0.1, 2):.3f} {rng.uniform(100, 200):.1f} "
                       f"samples/s\n")
        return "".join(out)

    offset = 0
    idle_body = json.dumps({"running": [hb_gen], "reports": [], "known": None})
    idle_t, chatty_t, chatty_bytes = [], [], 0
    for _ in range(args.runs + 3):
        started = time.perf_counter()
        assert agent.post(url, idle_body, content_type="application/json").status_code == 200
        idle_t.append(time.perf_counter() - started)
        text = lines(3)
        body = json.dumps({"running": [hb_gen], "reports": [], "known": None, "logs": [
            {"generation": hb_gen, "rank": 0, "offset": offset, "bytes": len(text), "text": text}]})
        chatty_bytes = len(body)
        offset += len(text)
        started = time.perf_counter()
        assert agent.post(url, body, content_type="application/json").status_code == 200
        chatty_t.append(time.perf_counter() - started)
    results["heartbeat"] = {
        "idle": {"request_bytes": len(idle_body), **ms(idle_t[3:])},
        "with_300_bytes_of_output": {"request_bytes": chatty_bytes, **ms(chatty_t[3:])},
    }

    def table_bytes() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_total_relation_size('controlplane_joblogchunk')")
            return int(cursor.fetchone()[0])

    def wal() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
            return int(cursor.fetchone()[0])

    # --- 3. a chatty rank, for each merge limit (side by side)
    results["chatty_rank"] = {}
    default_merge = job_logs.MERGE_BYTES
    for merge in [int(m) for m in args.merge_bytes.split(",")]:
        job_logs.MERGE_BYTES = max(1, merge)
        chatty, gen = running_job(f"chatty-{merge}")
        jobs.append(chatty)
        total = int(args.chatty_mib * 1024 * 1024)
        store_t = []
        offset = 0
        with connection.cursor() as cursor:  # each variant on an empty table: sizes not muddled
            cursor.execute("TRUNCATE controlplane_joblogchunk")
        base, wal_base = table_bytes(), wal()
        while offset < total:
            text = lines(3)
            started = time.perf_counter()
            job_logs.store(node.node.pk, "h100-01", [job_logs.Chunk(gen, 0, offset, len(text), text)],
                           now=timezone.now())
            store_t.append(time.perf_counter() - started)
            offset += len(text)
        rows = JobLogChunk.objects.filter(job=chatty).count()
        grown, wal_written = table_bytes() - base, wal() - wal_base
        with connection.cursor() as cursor:
            cursor.execute("VACUUM FULL controlplane_joblogchunk")
        results["chatty_rank"][f"merge_{merge}"] = {
            "bytes": offset, "chunks": len(store_t), "rows": rows,
            "rows_per_mib": round(rows / (offset / 1048576), 1), "store": ms(store_t),
            "table_bytes_before_vacuum": grown, "wal_bytes": wal_written,
            "table_bytes_after_vacuum_full": table_bytes()}
    job_logs.MERGE_BYTES = default_merge

    # --- 4. a bursty rank, past what is kept
    burst, gen = running_job("burst")
    jobs.append(burst)
    def chunk_text() -> str:
        text = lines(700)
        return text[: text.rfind("\n", 0, job_logs.CHUNK_BYTES) + 1]

    total = int(args.burst_mib * 1024 * 1024)
    store_t = []
    offset = 0
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE controlplane_joblogchunk")
    base, wal_base = table_bytes(), wal()
    while offset < total:
        text = chunk_text()
        started = time.perf_counter()
        job_logs.store(node.node.pk, "h100-01", [job_logs.Chunk(gen, 0, offset, len(text), text)],
                       now=timezone.now())
        store_t.append(time.perf_counter() - started)
        offset += len(text)
    kept = JobLogChunk.objects.filter(job=burst)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE controlplane_joblogchunk")
    results["bursty_rank"] = {"bytes": offset, "chunks": len(store_t), "rows_kept": kept.count(),
                              "bytes_kept": sum(kept.values_list("nbytes", flat=True)), "store": ms(store_t),
                              "table_bytes": table_bytes() - base, "wal_bytes": wal() - wal_base}

    # --- 5. reads
    admin = get_user_model().objects.create_superuser("root", password="root")
    browser = Client()
    browser.force_login(admin)
    reads = {
        "tail_1_MiB": f"/api/v1/jobs/{burst.pk}/logs/?tail_bytes=1048576",
        "tail_200_lines": f"/api/v1/jobs/{burst.pk}/logs/?tail_lines=200",
        "follow_nothing_new": f"/api/v1/jobs/{burst.pk}/logs/?offset={offset}",
        "raw_8_MiB_txt": f"/api/v1/jobs/{burst.pk}/logs/?format=txt&tail_bytes=8388608",
        "job_page": f"/jobs/{burst.pk}/",
    }
    results["reads"] = {}
    for name, path in reads.items():
        samples = []
        size = 0
        for _ in range(args.runs + 2):
            started = time.perf_counter()
            r = browser.get(path, HTTP_ACCEPT="application/json" if "txt" not in path and "jobs/" in path
                            and "logs" in path else "*/*")
            samples.append(time.perf_counter() - started)
            assert r.status_code == 200, (path, r.status_code, r.content[:300])
            size = len(r.content)
        results["reads"][name] = {"response_bytes": size, **ms(samples[2:])}
    import os

    load1, load5, _ = os.getloadavg()
    results["machine"].update({"load_avg_1m_after": round(load1, 2), "load_avg_5m_after": round(load5, 2)})
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for key, value in results.items():
            print(f"{key}: {json.dumps(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
