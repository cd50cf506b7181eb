"""The history page's totals, before and after: the page timed with each, side by side.

    scripts/test-services.sh .venv/bin/python bench/history_totals.py [--jobs 100000] [--runs 9] [--reuse]

Builds bench/pages.py's fleet (100,000 jobs over 30 days, their day, hour and minute rollups)
or reuses it, then times `/history/` through Django's test client (in process: the server's
time, no network) as the admin (every ended job, about 90,000), a member (one team's) and the
admin over one day, each with the totals computed two ways, alternated run by run so both see
the same load, in wall time and in CPU time (Django's process and its PostgreSQL backend, read
from /proc: the request's time on a core of its own, which a loaded machine's wall time is not):

- before: `job_history.history_totals_row_by_row`, the jobs grouped by state and lost work,
  then every job's day-rollup sum read to Python and rounded there (the page until 1 Dec 2026);
- after: `job_history.history_totals`, one query: each job's day sum as the triggers of
  migration 0024 keep it (`controlplane_job_day_gpu_seconds`), rounded and added up in
  PostgreSQL.

Prints the medians, the figures of both ways (they must agree: the exit status is 1 otherwise)
and both queries' EXPLAIN ANALYZE.

Since 6 Dec 2026 the unfiltered page (the admin's, the member's) adds up with `history_totals`
only the jobs that ended since yesterday, the others read as kept totals
(services/closed_history.py; `scale_audit.py --side-by-side --only "closed totals"` compares
that): its two ways differ little here; the one-day page and the figures compared at the end
(over every ended job) still measure `history_totals` itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

GOAL_MS = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--reuse", action="store_true", help="measure the data a previous run left in the database")
    args = parser.parse_args()

    from bench import pages

    data = pages.build(args.jobs, args.days, args.seed, args.reuse)

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from controlplane.models import Job, UsageRollup
    from controlplane.services import job_history

    with connection.cursor() as cursor:
        # The tables as autovacuum leaves them on a database in use.
        for table in (UsageRollup._meta.db_table, job_history.JOB_DAY_SUMS, Job._meta.db_table):
            cursor.execute(f'VACUUM ANALYZE "{table}"')

    def backend_cpu_s() -> float:
        """The CPU seconds this connection's PostgreSQL backend has used (it runs on this machine)."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    clients: dict[str, Client] = {}
    for name in ("admin", "u000"):
        clients[name] = Client()
        clients[name].force_login(get_user_model().objects.get(username=name))
    day_ago = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    pages_timed = [("every ended job, admin", "admin", "/history/"), ("a member's", "u000", "/history/"),
                   ("one day, admin", "admin", f"/history/?finished_after={day_ago}")]
    ways = {"before (row by row)": job_history.history_totals_row_by_row, "after (one query)": job_history.history_totals}
    real = job_history.history_totals
    times: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    loads = [os.getloadavg()[0]]
    try:
        for label, who, url in pages_timed:
            for totals in ways.values():
                job_history.history_totals = totals  # the view reads it from the module
                assert clients[who].get(url).status_code == 200  # warm
            for _ in range(args.runs):
                for way, totals in ways.items():
                    job_history.history_totals = totals
                    c0 = time.process_time() + backend_cpu_s()
                    t0 = time.perf_counter()
                    response = clients[who].get(url)
                    times.setdefault((label, way), []).append((time.perf_counter() - t0) * 1000)
                    cpu.setdefault((label, way), []).append((time.process_time() + backend_cpu_s() - c0) * 1000)
                    assert response.status_code == 200
            loads.append(os.getloadavg()[0])
    finally:
        job_history.history_totals = real

    ended = job_history.ended_jobs(Job.objects.all())
    before, after = job_history.history_totals_row_by_row(ended), job_history.history_totals(ended)
    figures = [(t.jobs, t.states, t._gpu_hours, t._lost_gpu_hours) for t in (before, after)]
    same = figures[0] == figures[1]

    print(f"{data['jobs']:,} jobs, {data['usage_rollups']:,} usage rollup rows; load average "
          f"{' → '.join(f'{x:.1f}' for x in loads)}; {args.runs} runs each, alternated")
    print(f"{'page':26s} {'totals':22s} {'p50 ms':>8s} {'min ms':>8s} {'max ms':>8s} {'CPU ms':>8s}")
    for key, values in times.items():
        label, way = key
        print(f"{label:26s} {way:22s} {statistics.median(values):8.1f} "
              f"{min(values):8.1f} {max(values):8.1f} {statistics.median(cpu[key]):8.0f}")
    print("(CPU ms: the median of the request's CPU time, Django's process and its PostgreSQL backend added, "
          "to 10 ms: what it takes on a core of its own, whatever the load)")
    print(f"figures, before: {figures[0]}")
    print(f"figures, after:  {figures[1]}  ({'the same' if same else 'DIFFERENT'})")
    worst = statistics.median(times[("every ended job, admin", "after (one query)")])
    print(f"every ended job, after, p50 {worst:.1f} ms; goal ≤ {GOAL_MS:.0f} ms: {'met' if worst <= GOAL_MS else 'MISSED'}")
    with connection.cursor() as cursor:
        # Each way's queries as the admin's page sends them.
        for way, totals in ways.items():
            captured: list[tuple[str, Any]] = []

            def keep(execute: Any, sql: str, params: Any, many: bool, context: Any,
                     captured: list[tuple[str, Any]] = captured) -> Any:
                captured.append((sql, params))
                return execute(sql, params, many, context)

            with connection.execute_wrapper(keep):
                totals(ended)
            for sql, params in captured:
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
                print(f"\n{way}:\n" + "\n".join(row[0] for row in cursor.fetchall()))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
