"""Scale audit: every API list and every page on a big installation, with its query count, its
server time, and the plans of its queries.

    scripts/test-services.sh .venv/bin/python bench/scale_audit.py [--jobs 100000] [--days 90] [--runs 5]
        [--build-only] [--reuse] [--only SUBSTRING] [--explain] [--side-by-side]

1. Builds (bench/pages.py's builders, made bigger): 1,250 nodes × 8 GPUs (1,000 H100-80GB under
   63 leaf switches, 250 A100-40GB), 30 teams in two cohorts with quotas, 5 members each;
   `--jobs` jobs over `--days` days run first-come first-served on the fleet (pages.draw_jobs),
   plus 5,000 jobs waiting (submitted in the last 6 hours) and 2,000 running (1 to 8 GPUs,
   started in the last 10 hours, on real GPU slots); every job's events (submitted, bound,
   preempted, finished: ~4 a job); every ended job's released allocation and GPU rows (whole
   nodes from 8 GPUs), as the history's `ran_on` and a node's page read them; the accounting's
   rollups (pages.usage_rows: day and hour rows for every run, minute rows for the last week)
   and a fleet sample a minute (not every 5 s: the pages read samples by time, not by job);
   every ended job's cost remembered (job_costs.remember_ended_job_costs). Then VACUUM ANALYZE.
2. Reads every endpoint as the admin and as a member of one team (team-00, u000), in process
   through Django's test client (middleware, queries, rendering; no network): the query count,
   and for every API list the query count at ?limit=10 and ?limit=100 too, so a count that
   grows with the page's rows shows (an N+1). Times `--runs` reads after a warm-up: p50 and max.
3. `--explain`: every SELECT an endpoint ran, EXPLAINed (ANALYZE) with its parameters: prints the
   slowest query of each endpoint and every sequential scan of a table holding over 20,000 rows.

4. `--side-by-side`: only the reads fixed after the first audit (6 Dec 2026), the code before
   (kept here) and now, alternated call by call, each pair checked to give the same answer (the
   queue order's pair: every job in line with its place and factors, at one instant):
   medians, and the ratio (docs/benchmarks.md, Scale audit); `--only` keeps the pairs whose
   label contains it.

`--build-only` builds and stops (keep the database: `--reuse` measures it again). Exit status 1
if an API list's query count differs between ?limit=10 and ?limit=100.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

from bench import pages  # noqa: E402

pages.H100_NODES, pages.A100_NODES, pages.TEAMS = 1000, 250, 30
pages.SAMPLE_EVERY_S = 60
PENDING, RUNNING = 5_000, 2_000
RUNNING_SIZES = [(1, 0.40), (2, 0.25), (4, 0.25), (8, 0.10)]
BIG_TABLE_ROWS = 20_000
log = pages.log


def extra_jobs(now_s: float, rng: random.Random, origin: Any) -> list[dict[str, Any]]:
    """5,000 jobs waiting and 2,000 running now, in pages.draw_jobs' shape."""
    jobs = []
    for i in range(PENDING + RUNNING):
        running = i >= PENDING
        size = pages.pick(rng, RUNNING_SIZES) if running else pages.pick(rng, pages.SIZES)
        gpu_type = "H100-80GB" if rng.random() < 0.75 or size > 32 else "A100-40GB"
        submit_s = now_s - rng.random() * (10 if running else 6) * 3600
        start_s = submit_s + rng.random() * 600 if running else None
        start_s = min(start_s, now_s - 1) if start_s is not None else None
        jobs.append({
            "submit_s": submit_s, "gpus": size, "gpu_type": gpu_type, "duration_s": 10 * 3600.0,
            "team": rng.randrange(pages.TEAMS), "preempted": False, "start_s": start_s,
            "end_s": None if start_s is None else start_s + 10 * 3600,
            "submitted_at": origin + timedelta(seconds=submit_s),
            "started_at": None if start_s is None else origin + timedelta(seconds=start_s), "finished_at": None,
        })
    return jobs


def ended_allocations(fleet: dict[str, Any], rng: random.Random) -> tuple[int, int]:
    """A released allocation and its GPU rows for every ended job that ran (its latest run;
    a preempted one's first run too)."""
    from django.db import connection

    from controlplane.models import Allocation, AllocationGpu, Job

    nodes = {"H100-80GB": [n["id"] for n in fleet["nodes"] if n["pool"] == "h100"],
             "A100-40GB": [n["id"] for n in fleet["nodes"] if n["pool"] == "a100"]}
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(max(id), 0), COALESCE(max(generation), 0) FROM controlplane_allocation")
        next_id, generation = cursor.fetchone()
    allocations, gpus = [], []
    rows = (Job.objects.filter(state__in=("succeeded", "failed", "cancelled", "timed_out"), started_at__isnull=False)
            .order_by("pk").values_list("pk", "gpus", "gpu_types", "started_at", "finished_at", "last_preempted_at"))
    for pk, size, types, started, finished, preempted_at in rows.iterator(chunk_size=5000):
        runs = [(started, finished)]
        if preempted_at is not None:
            runs = [(started, preempted_at), (preempted_at, finished)]
        for bound, released in runs:
            next_id += 1
            generation += 1
            allocations.append({"id": next_id, "job_id": pk, "generation": generation, "epoch": 1,
                                "state": "released", "created_at": bound, "started_at": bound,
                                "released_at": released, "release_reason": "finished"})
            for node_id in rng.sample(nodes[types[0]], max(1, size // 8)):
                for slot in range(min(size, 8)):
                    gpus.append((next_id, node_id, slot, False, ""))
    pages.copy_rows(Allocation, allocations)
    pages.copy_tuples(AllocationGpu, ("allocation_id", "node_id", "gpu_index", "live", "role"), gpus)
    pages.reset_sequences(Allocation, AllocationGpu)
    return len(allocations), len(gpus)


def build(count: int, days: int, seed: int) -> dict[str, Any]:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from controlplane.models import AccountingCursor, FleetSample, Job, UsageRollup
    from controlplane.services import job_costs

    call_command("migrate", verbosity=0)
    if Job.objects.exists():
        raise SystemExit("the database already holds jobs: --reuse, or a fresh database")
    rng = random.Random(seed)
    random.seed(seed)
    now = timezone.now().replace(microsecond=0)
    started = time.perf_counter()
    fleet = pages.build_fleet(now)
    jobs = pages.draw_jobs(count, days, now, rng)
    origin = now - timedelta(days=days)
    jobs += extra_jobs(days * 86400.0, rng, origin)
    jobs.sort(key=lambda j: j["submit_s"])
    pages.place_running(jobs, fleet["nodes"])
    pages.store_jobs(jobs, fleet, now, rng)
    log("writing ended jobs' allocations")
    allocations, gpu_rows = ended_allocations(fleet, rng)
    log("writing fleet samples")
    samples = pages.copy_rows(FleetSample, pages.fleet_samples(jobs, fleet, now, days, rng))
    pages.reset_sequences(FleetSample)
    log("writing usage rollups")
    usage = pages.copy_tuples(UsageRollup, pages.USAGE_COLUMNS, pages.usage_rows(jobs, fleet, now, rng))
    pages.reset_sequences(UsageRollup)
    log("summing fleet and quota rollups")
    pages.fleet_and_quota_rollups(fleet, now, days)
    AccountingCursor.objects.update_or_create(name="usage", defaults={"rolled_until": now.replace(second=0),
                                                                      "updated_at": now})
    log("remembering ended jobs' costs")
    while job_costs.remember_ended_job_costs(now):
        pass
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    states = Counter(Job.objects.values_list("state", flat=True))
    log(f"built in {time.perf_counter() - started:.0f} s")
    return {"jobs": Job.objects.count(), "states": dict(states), "allocations": allocations, "gpu_rows": gpu_rows,
            "fleet_samples": samples, "usage_rollups": usage}


def table_sizes() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, reltuples::bigint FROM pg_class WHERE relkind = 'r' "
                       "AND relnamespace = 'public'::regnamespace")
        return dict(cursor.fetchall())


def endpoints() -> list[tuple[str, str, str, bool]]:
    """(label, user, url, is an API list that takes ?limit=)."""
    from django.utils import timezone

    from controlplane.models import Event, Job, Node

    def first(**kw: Any) -> int:
        return Job.objects.filter(team__name="team-00", **kw).order_by("-gpus", "pk").values_list("pk", flat=True)[0]

    running, pending = first(state="running"), first(state="pending")
    finished = first(state="succeeded", preemption_count=1)
    node = Node.objects.order_by("name").values_list("name", flat=True)[1]
    busy_event_job = Event.objects.values_list("job_id", flat=True).order_by("-id")[0]
    day_ago = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")  # the API refuses a time without its zone
    api = "/api/v1/"
    lists = [
        ("jobs", "jobs/"),
        ("jobs pending by queue position", "jobs/?state=pending&ordering=queue_position"),
        ("jobs running", "jobs/?state=running"),
        ("jobs one team", "jobs/?team=team-04"),
        ("jobs one user", "jobs/?user=u000"),
        ("jobs by gpus", "jobs/?ordering=-gpus"),
        ("jobs by priority", "jobs/?ordering=-priority"),
        ("jobs by elapsed", "jobs/?ordering=-elapsed"),
        ("jobs by name", "jobs/?ordering=name"),
        ("jobs by started_at", "jobs/?ordering=-started_at"),
        ("jobs by finished_at", "jobs/?ordering=-finished_at"),
        ("jobs by state", "jobs/?ordering=state"),
        ("jobs finished in a day", f"jobs/?finished_after={day_ago}"),
        ("jobs failed", "jobs/?state=failed"),
        ("jobs name contains", "jobs/?name=job-12"),
        ("jobs ran on a node", f"jobs/?ran_on={node}"),
        ("jobs on a node now", f"jobs/?node={node}"),
        ("jobs pending code", "jobs/?pending_code=QuotaExceeded"),
        ("jobs ran longer than 1 h", "jobs/?ran_longer_than_s=3600"),
        ("jobs exit code 1", "jobs/?exit_code=1"),
        ("jobs of a project", "jobs/?team=team-00&project=p1"),
        ("job events", f"jobs/{finished}/events/"),
        ("job runs", f"jobs/{finished}/runs/"),
        ("events", "events/"),
        ("events one team", "events/?team=team-04"),
        ("events finished kind", "events/?kind=job.finished"),
        ("events of a job", f"events/?job={busy_event_job}"),
        ("events of a node", f"events/?node={node}"),
        ("events reason", "events/?reason=Preempted"),
        ("events in a day", f"events/?after={day_ago}"),
        ("nodes", "nodes/"),
        ("nodes one pool", "nodes/?pool=a100"),
        ("teams", "teams/"),
        ("projects", "projects/"),
        ("quotas", "quotas/"),
        ("cohorts", "cohorts/"),
        ("priority classes", "priority-classes/"),
        ("gpu types", "gpu-types/"),
        ("price rates", "price-rates/"),
        ("maintenance windows", "maintenance-windows/"),
    ]
    others = [
        ("job", f"jobs/{running}/"),
        ("job logs", f"jobs/{running}/logs/"),
        ("metrics queue", "metrics/queue/"),
        ("metrics fragmentation", "metrics/fragmentation/"),
        ("metrics etas", "metrics/etas/"),
        ("metrics utilization", "metrics/utilization/"),
        ("showback", "showback/"),
        ("showback 30 d by project", "showback/?window=30d&group_by=project"),
        ("scheduler policy", "scheduler/policy/"),
        ("fair share (sshare)", "scheduler/fair-share/"),
        ("job priority (sprio)", "jobs/priority/"),
        ("job priority (sprio) one team", "jobs/priority/?team=team-04"),
        ("job priority (sprio) 1,000", "jobs/priority/?limit=1000"),
        ("history CSV, a day", f"jobs/history.csv?finished_after={day_ago}"),
    ]
    page_urls = [
        ("overview", "/"),
        ("overview 30 d", "/?window=30d"),
        ("overview live", "/ui/overview.json"),
        ("jobs page", "/jobs/"),
        ("jobs page pending", "/jobs/?state=pending"),
        ("jobs page by gpus", "/jobs/?ordering=-gpus"),
        ("job page running", f"/jobs/{running}/"),
        ("job page finished", f"/jobs/{finished}/"),
        ("job page pending", f"/jobs/{pending}/"),
        ("job live", f"/ui/jobs/{running}.json"),
        ("history", "/history/"),
        ("history a day", f"/history/?finished_after={day_ago}"),
        ("history failed on a node", f"/history/?state=failed&ran_on={node}"),
        ("teams", "/teams/"),
        ("teams 30 d", "/teams/?window=30d"),
        ("showback", "/showback/"),
        ("showback 30 d by project", "/showback/?window=30d&group_by=project"),
        ("nodes", "/nodes/"),
        ("nodes live", "/ui/nodes.json"),
        ("nodes last page", "/nodes/?page=13"),
        ("nodes one pool", "/nodes/?pool=a100"),
        ("node page", f"/nodes/{node}/"),
        ("node live", f"/ui/nodes/{node}.json"),
        ("notifications", "/notifications/"),
    ]
    out = []
    for who in ("admin", "u000"):
        mine = (lambda url: url) if who == "admin" else (lambda url: url.replace("team-04", "team-00"))
        out += [(f"api {label}", who, api + mine(url), True) for label, url in lists]
        out += [(f"api {label}", who, api + mine(url), False) for label, url in others]
        out += [(f"page {label}", who, url, False) for label, url in page_urls]
    return out


def with_limit(url: str, limit: int) -> str:
    return f"{url}{'&' if '?' in url else '?'}limit={limit}"


def read(client: Any, url: str) -> Any:
    response = client.get(url)
    if response.streaming:
        response.content_read = b"".join(response.streaming_content)
    return response


def counted(client: Any, url: str) -> tuple[Any, list[tuple[str, Any]]]:
    from django.db import connection

    queries: list[tuple[str, Any]] = []

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        queries.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        response = read(client, url)
    return response, queries


def explain(queries: list[tuple[str, Any]], sizes: dict[str, int]) -> tuple[list[str], tuple[float, str]]:
    """Sequential scans of big tables in these queries' plans, and the slowest query."""
    from django.db import connection, transaction

    scans: list[str] = []
    slowest = (0.0, "")
    for sql, params in queries:
        if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            continue
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
                plan = cursor.fetchone()[0]
                transaction.set_rollback(True)
        except Exception as exc:  # a query that needs its own session state: say so, go on
            scans.append(f"(not explained: {type(exc).__name__})")
            continue
        plan = plan if isinstance(plan, list) else json.loads(plan)
        total = plan[0]["Execution Time"]
        if total > slowest[0]:
            slowest = (total, sql[:300])

        def walk(node: dict[str, Any], sql: str = sql) -> None:
            if node["Node Type"] == "Seq Scan" and sizes.get(node.get("Relation Name", ""), 0) > BIG_TABLE_ROWS:
                scans.append(f"Seq Scan {node['Relation Name']} ({sizes[node['Relation Name']]:,} rows, "
                             f"{node.get('Actual Total Time', 0):.1f} ms) in: {sql[:160]}")
            for child in node.get("Plans", []):
                walk(child)

        walk(plan[0]["Plan"])
    return scans, slowest


def measure(runs: int, only: str | None, do_explain: bool) -> tuple[list[dict[str, Any]], bool]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    users = get_user_model()
    clients = {}
    for name in ("admin", "u000"):
        clients[name] = Client()
        clients[name].force_login(users.objects.get(username=name))
    sizes = table_sizes()
    results, growing = [], False
    for label, who, url, is_list in endpoints():
        if only and only not in label:
            continue
        client = clients[who]
        response = read(client, url)
        assert response.status_code == 200, f"{url} as {who}: HTTP {response.status_code} {response.content[:300]!r}"
        _, queries = counted(client, url)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            read(client, url)
            times.append((time.perf_counter() - t0) * 1000)
        row: dict[str, Any] = {"label": label, "as": who, "url": url, "queries": len(queries),
                               "p50_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1)}
        if is_list:
            row["queries_10"] = len(counted(client, with_limit(url, 10))[1])
            row["queries_100"] = len(counted(client, with_limit(url, 100))[1])
            growing |= row["queries_10"] != row["queries_100"]
        if do_explain:
            row["seq_scans"], (slow_ms, slow_sql) = explain(queries, sizes)
            row["slowest_ms"], row["slowest_sql"] = round(slow_ms, 1), slow_sql
        results.append(row)
        grows = "" if not is_list else f"  limit 10/100: {row['queries_10']}/{row['queries_100']}"
        log(f"{label:40s} {who:6s} {row['p50_ms']:8.1f} ms p50 {row['max_ms']:8.1f} max  "
            f"{row['queries']:3d} queries{grows}")
        for scan in row.get("seq_scans", []):
            log(f"    {scan}")
        if do_explain and row["slowest_ms"] > 20:
            log(f"    slowest {row['slowest_ms']} ms: {row['slowest_sql'][:200]}")
    return results, growing


def side_by_side(runs: int, only: str | None = None) -> list[tuple[str, float, float]]:
    """The fixed reads (those whose label contains `only`), the code before and now, alternated
    call by call (medians in ms)."""
    from django.db.models import Count, F, IntegerField, OuterRef, Q, Subquery, Value
    from django.db.models.functions import Coalesce

    from controlplane.models import AllocationGpu, Event, Job, Node, Quota, Team
    from controlplane.services import job_pages, quotas

    def quota_subquery_per_quota() -> list[Any]:
        """quotas.with_held_gpus until 6 Dec 2026: a subquery per quota."""
        held = (AllocationGpu.objects.filter(live=True, node__gpu_type_id=OuterRef("gpu_type_id"),
                                             allocation__job__team_id=OuterRef("team_id"))
                .order_by().values("allocation__job__team_id").annotate(n=Count("pk")).values("n"))
        return list(Quota.objects.annotate(held_gpus=Coalesce(Subquery(held, output_field=IntegerField()), Value(0)))
                    .values_list("pk", "held_gpus"))

    def nodes_joined() -> list[Any]:
        """The API's node list until 6 Dec 2026: every GPU row each node ever had, grouped."""
        qs = Node.objects.annotate(allocated_gpus=Count("allocation_gpus", filter=Q(allocation_gpus__live=True)))
        return [(qs.count(),), *qs.order_by("name").values_list("pk", "allocated_gpus")[:50]]

    def nodes_subquery() -> list[Any]:
        live = (AllocationGpu.objects.filter(node=OuterRef("pk"), live=True).order_by()
                .values("node").annotate(n=Count("pk")).values("n"))
        qs = Node.objects.annotate(allocated_gpus=Coalesce(Subquery(live, output_field=IntegerField()), Value(0)))
        return [(qs.count(),), *qs.order_by("name").values_list("pk", "allocated_gpus")[:50]]

    def events_of_a_kind(distinct: bool) -> list[Any]:
        """The events list's page and COUNT for ?kind=job.finished (django-filter's DISTINCT
        until 6 Dec 2026)."""
        qs = Event.objects.filter(kind__in=["job.finished"])
        qs = qs.distinct() if distinct else qs
        return [(qs.count(),), *qs.order_by("-created_at", "-id").values_list("pk")[:50]]

    def job_page(field: str, two_reads: bool) -> list[Any]:
        """A page of 50 of every job with its related rows, as the API's jobs list reads it, in
        one read (until 6 Dec 2026) or in two (services/job_pages.py)."""
        jobs = (Job.objects.select_related("team", "project", "submitter", "priority_class", "place", "held_by")
                .order_by(F(field.lstrip("-")).desc(nulls_last=True) if field.startswith("-")
                          else F(field).asc(nulls_last=True), "-id"))
        if two_reads:
            return [(j.pk, j.team.name) for j in job_pages.jobs_of_page(jobs, list(job_pages.ids_in_order(jobs)[:50]))]
        return [(j.pk, j.team.name) for j in jobs[:50]]

    from django.db import connection
    from django.utils import timezone

    from controlplane.services import job_costs, job_history

    cost_at = timezone.now()

    def total_cost(distinct: bool) -> list[Any]:
        """The history's total cost of every ended job (job_costs.jobs_total_cost), its jobs made
        distinct (until 6 Dec 2026) or, as no filter of it joins a to-many relation, read as they are."""
        jobs = job_history.ended_jobs(Job.objects.all()).order_by()
        inner, params = jobs.values_list("pk", "requeue_count").query.sql_with_params()
        rows = (f"(SELECT DISTINCT pk, requeues FROM ({inner}) AS named(pk, requeues)) AS w" if distinct
                else f"({inner}) AS w(pk, requeues)")
        sql = job_costs._JOBS_TOTAL_COST_SQL.format(
            rows=rows, costs=job_costs.ENDED_JOB_COSTS, prices=job_costs.PRICE_GENERATION,
            priced=job_costs._PRICED_SQL.format(**job_costs._TABLES, jobs="SELECT pk FROM listed WHERE cents IS NULL"))
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, cost_at, *job_costs._priced_params(cost_at)])
            return [tuple(cursor.fetchone())]

    from controlplane.services import closed_history

    def history_summary(teams: frozenset[int] | None, closed: bool) -> list[Any]:
        """The unfiltered history's totals and total cost: every ended job added up (until 6 Dec
        2026) or the closed totals and the jobs that ended since (services/closed_history.py)."""
        jobs = job_history.ended_jobs(Job.objects.all() if teams is None else Job.objects.filter(team_id__in=teams))
        if closed:
            summary = closed_history.history_summary(jobs, cost_at, teams, whole=True)
            totals, cost = summary.totals, summary.cost_usd
        else:
            totals, cost = job_history.history_totals(jobs), job_costs.jobs_total_cost(jobs, cost_at)
        return [(totals.jobs, tuple(sorted(totals.states.items())), totals._gpu_hours, totals._lost_gpu_hours, cost)]

    import dataclasses
    from operator import attrgetter

    import scheduler_core as engine
    from controlplane.services import snapshot

    factor_fields = attrgetter(*(field.name for field in dataclasses.fields(engine.QueueFactors)))

    def sprio_order(whole: bool) -> list[Any]:
        """`qm sprio`'s queue order, every job in line with its factors (its place among them):
        from a cycle's whole snapshot (until 6 Dec 2026) or from only what the order reads
        (snapshot.read_queue, engine.queue_factors_of), at one instant so aging is the same."""
        config = snapshot.scheduler_config()
        factors = (engine.queue_factors(snapshot.read_snapshot(cost_at, 0).snapshot, config) if whole
                   else engine.queue_factors_of(snapshot.read_queue(cost_at), config))
        return [factor_fields(f) for f in factors]

    assert closed_history.rebuild_if_due(timezone.now()), "the closed totals could not be built"
    team = frozenset({Team.objects.get(name="team-00").pk})
    heat = ("node_id", "gpu_index", "allocation__job_id", "allocation__job__team_id", "allocation__job__team__name")
    pairs = [
        ("node list page and COUNT: join → live subquery", nodes_joined, nodes_subquery),
        ("quotas' held_gpus: per quota → held_now + CASE",
         quota_subquery_per_quota, lambda: list(quotas.with_held_gpus(Quota.objects.all()).values_list("pk", "held_gpus"))),
        ("GPU rows held now with their jobs (heat map): live=True → held()",
         lambda: list(AllocationGpu.objects.filter(live=True).values_list(*heat)),
         lambda: list(AllocationGpu.held().values_list(*heat))),
        ("events of one kind, page and COUNT: DISTINCT → none",
         lambda: events_of_a_kind(True), lambda: events_of_a_kind(False)),
        *((f"jobs page of 50 by {field}: one read → two (job_pages)",
           lambda field=field: job_page(field, False), lambda field=field: job_page(field, True))
          for field in ("-submitted_at", "-gpus", "name", "-started_at", "-finished_at")),
        ("history's total cost, every ended job: DISTINCT → as they are",
         lambda: total_cost(True), lambda: total_cost(False)),
        ("history's totals and cost, admin: every job → closed totals + since",
         lambda: history_summary(None, False), lambda: history_summary(None, True)),
        ("history's totals and cost, team-00: every job → closed totals + since",
         lambda: history_summary(team, False), lambda: history_summary(team, True)),
        ("sprio's queue order: whole snapshot → read_queue (order, factors)",
         lambda: sprio_order(True), lambda: sprio_order(False)),
    ]
    out = []
    for label, before, now in pairs:
        if only and only not in label:
            continue
        assert sorted(map(tuple, before())) == sorted(map(tuple, now())), label  # the same answer
        times: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(runs):
            for way, work in (("before", before), ("now", now)):
                t0 = time.perf_counter()
                work()
                times[way].append((time.perf_counter() - t0) * 1000)
        out.append((label, statistics.median(times["before"]), statistics.median(times["now"])))
        log(f"{label}: {out[-1][1]:.1f} → {out[-1][2]:.1f} ms")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--only", help="endpoints whose label contains this")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--side-by-side", action="store_true",
                        help="only the fixed reads, the code before and now, alternated")
    args = parser.parse_args()
    import django

    django.setup()
    data = {} if args.reuse else build(args.jobs, args.days, args.seed)
    if data:
        print(json.dumps(data))
    if args.build_only:
        return 0
    if args.side_by_side:
        print(f"{'read':66s} {'before ms':>10s} {'now ms':>8s} {'ratio':>6s}")
        for label, before, now in side_by_side(max(args.runs, 7), args.only):
            print(f"{label:66s} {before:10.1f} {now:8.1f} {before / now:6.1f}")
        return 0
    results, growing = measure(args.runs, args.only, args.explain)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'endpoint':42s} {'as':6s} {'p50 ms':>8s} {'max ms':>8s} {'queries':>7s} {'@10/@100':>9s}")
        for r in results:
            grows = f"{r['queries_10']}/{r['queries_100']}" if "queries_10" in r else ""
            print(f"{r['label']:42s} {r['as']:6s} {r['p50_ms']:8.1f} {r['max_ms']:8.1f} {r['queries']:7d} {grows:>9s}")
    return 1 if growing else 0


if __name__ == "__main__":
    sys.exit(main())
