"""`/metrics`: live series for Prometheus, named after Kueue's families with our prefix.

Every figure is read from PostgreSQL at scrape time by one custom collector, so each gunicorn
worker (and each host) answers the same numbers; nothing is kept in process memory. Counters
of job events and the admission-attempt histogram are folded in by the accounting task
(services/accounting.py) onto its cursor row, so a scrape reads one row instead of counting the
whole event history.

Families (labels in brackets):
  quartermaster_pending_jobs[team, priority_class, reason, status]        gauge (0, reason empty, for every
                                            team with a quota × priority class × status, always)
  quartermaster_admitted_jobs_total[team, priority_class]                  counter
  quartermaster_finished_jobs_total[team, priority_class, reason]          counter
  quartermaster_preempted_jobs_total[team, priority_class, reason]         counter
  quartermaster_evicted_jobs_total[team, priority_class, reason]           counter
  quartermaster_admission_attempt_duration_seconds                         histogram (sampled cycles)
  quartermaster_cycle_duration_seconds, quartermaster_cycles_total         gauge, counter
  quartermaster_quota_nominal_gpus / _borrowing_limit_gpus / _lending_limit_gpus
                                            [team, gpu_type, cohort]       gauges (no series = no limit)
  quartermaster_quota_usage_gpus[team, gpu_type, cohort]                   gauge (every quota, 0 included)
  quartermaster_gpus_capacity / _allocated / _active / _productive[gpu_type]   gauges
  quartermaster_gpus_allocated_last_minute[gpu_type]                       gauge (allocated over the minute
                                            _active and _productive average: the three tiers of one minute)
  quartermaster_stranded_gpus[pool], quartermaster_largest_free_block_gpus[pool]   gauges (live, as
                                            metrics/fragmentation/ and qm sinfo count them)
  quartermaster_away_gpus[pool]                                            gauge (idle GPUs on nodes that take
                                            no work, as metrics/fragmentation/'s unavailable_gpus and
                                            qm sinfo's AWAY; every pool, 0 included)
  quartermaster_reserved_gpus                                              gauge (the last cycle's)
  quartermaster_leader_epoch                                               gauge
  quartermaster_last_cycle_timestamp_seconds                               gauge
  quartermaster_nodes / quartermaster_node_gpus[pool, state]               gauges (every state, 0 included;
                                            retired nodes left out, as from every fleet figure)
  quartermaster_schedulable_gpus[pool]                                     gauge (GPUs of nodes that take work
                                            now: ready and in no active maintenance window)
  quartermaster_gpus_stopping_overdue[node]                                gauge (GPUs held by jobs told to stop
                                            whose deadline passed over 60 s ago; only such nodes)
  quartermaster_maintenance_nodes[pool, state]                             gauge (state active or upcoming:
                                            nodes in a maintenance window now, or in one to come)
  quartermaster_requeue_lost_gpu_seconds_total                             counter
  quartermaster_preemption_lost_gpu_seconds_total                          counter (deprecated: the same value)
  quartermaster_accounting_rolled_until_timestamp_seconds                  gauge
  quartermaster_oldest_feasible_pending_seconds                            gauge (the last cycle's, as the
                                            overview's tile; 0 when no job that can run waits)
  quartermaster_eta_judged_jobs, quartermaster_eta_on_time_jobs            gauges (jobs started in the last
                                            24 h after waiting with an ETA; of them, started by the first told)

Access: admins (session or API token), or a scraper presenting `Authorization: Bearer <token>`
with the token configured as QM["METRICS_TOKEN"] (or the QM_METRICS_TOKEN environment variable).
Everyone else is refused, as everywhere but /healthz: 401 for credentials that authenticate no
one (none, a wrong token of either scheme), 403 for a valid user who is not an admin, as DRF
answers on /api/.
"""

from __future__ import annotations

import hmac
import os
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db.models import Count, Exists, OuterRef, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from controlplane.api.authentication import TokenAuthentication
from controlplane.api.errors import database_unavailable
from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import (
    AccountingCursor,
    AllocationGpu,
    FleetRollup,
    FleetSample,
    Job,
    MaintenanceWindow,
    Node,
    PriorityClass,
    Quota,
    SchedulerLease,
    Team,
)
from controlplane.services import accounting, eta_record, maintenance
from controlplane.services.access import access_of
from controlplane.services.fleet_figures import fragmentation_figures
from controlplane.services.transitions import REQUEUES_AFTER_END

PREFIX = "quartermaster"
# A stop's deadline passed this long ago and its GPUs are still held: the agent SIGKILLs at the
# deadline and reports within a heartbeat, so what is left is a process that does not die.
STOPPING_OVERDUE_S = 60
# Evictions: the control plane stopped a job before its end (Kueue's "evicted").
_EVICTION_KINDS = (EventKind.JOB_PREEMPTED, EventKind.JOB_RESIZED, EventKind.JOB_REQUEUED, EventKind.JOB_TIMED_OUT)
# `job.finished` reasons stored before every path spelt them as transitions.FINISHED_REASONS
# does: counted under the one spelling, so a database from before reads one series per outcome.
_FINISHED_REASON_SPELLINGS = {"Timedout": "TimedOut"}


class QuartermasterCollector(Collector):
    """Reads the database on every scrape; one instance, registered once, per process."""

    def collect(self) -> Iterator[Any]:
        cursor = AccountingCursor.objects.filter(name=accounting.CURSOR_NAME).first()
        yield self._pending()
        yield from self._event_counters(cursor)
        yield from self._cycles(cursor)
        yield from self._quotas()
        yield from self._gpus(cursor)
        yield from self._fleet_shape()
        yield from self._nodes()
        yield self._stopping_overdue()
        yield from self._leader()
        yield from self._oldest_feasible_wait()
        yield from self._etas()
        lost = float(((cursor.event_counts if cursor else None) or {}).get(accounting.LOST_GPU_SECONDS_KEY, 0.0))
        yield CounterMetricFamily(
            f"{PREFIX}_requeue_lost_gpu_seconds",
            "GPU-seconds of work thrown away (since each job's last checkpoint) when a running job was stopped and "
            "requeued whole: preemptions, resizes, fences and requeues someone asked for (qm requeue) alike (the "
            "jobs' lost_gpu_seconds).",
            value=lost)
        # Its old name, one release more: it always counted resizes and fences too.
        yield CounterMetricFamily(
            f"{PREFIX}_preemption_lost_gpu_seconds",
            f"Deprecated: use {PREFIX}_requeue_lost_gpu_seconds_total, the same value. Despite its name it counts "
            "the work lost to resizes and fences too, not to preemptions alone.",
            value=lost)

    # -- queue ---------------------------------------------------------------------------

    def _pending(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            f"{PREFIX}_pending_jobs", "Jobs waiting, by the engine's reason; status inadmissible = can never run as asked "
            "(reason empty: the 0 kept for every team with a quota, priority class and status).",
            labels=["team", "priority_class", "reason", "status"],
        )
        # Every team with a quota has a series per priority class and status, reason empty, at 0
        # always: with none, an empty queue had no series at all, so a queue-depth graph read "No
        # data" and an alert on it could not tell an empty queue from a broken scrape. A waiting
        # job always has a reason ("Queued" when the engine gave none), so these never hide a job.
        counts: dict[tuple[str, str, str, str], int] = {
            (team, priority_class, "", status): 0
            for team in Quota.objects.values_list("team__name", flat=True).distinct()
            for priority_class in PriorityClass.objects.values_list("name", flat=True)
            for status in ("active", "inadmissible")
        }
        rows = (
            Job.objects.filter(state__in=[JobState.PENDING, JobState.UNSCHEDULABLE])
            .values("team__name", "priority_class__name", "pending_code", "pending_resolvable", "state")
            .annotate(n=Count("id"))
        )
        for r in rows:
            inadmissible = r["state"] == JobState.UNSCHEDULABLE or not r["pending_resolvable"]
            key = (r["team__name"], r["priority_class__name"], r["pending_code"] or "Queued",
                   "inadmissible" if inadmissible else "active")
            counts[key] = counts.get(key, 0) + r["n"]
        for labels, n in sorted(counts.items()):
            family.add_metric(list(labels), n)
        return family

    def _event_counters(self, cursor: AccountingCursor | None) -> Iterator[CounterMetricFamily]:
        admitted = CounterMetricFamily(f"{PREFIX}_admitted_jobs", "Jobs bound to GPUs (admitted), counted per bind.",
                                       labels=["team", "priority_class"])
        finished = CounterMetricFamily(f"{PREFIX}_finished_jobs", "Jobs that reached an end, by how they ended.",
                                       labels=["team", "priority_class", "reason"])
        preempted = CounterMetricFamily(f"{PREFIX}_preempted_jobs", "Jobs preempted and requeued whole.",
                                        labels=["team", "priority_class", "reason"])
        evicted = CounterMetricFamily(
            f"{PREFIX}_evicted_jobs", "Jobs stopped by the control plane before their end (preemption, resize, "
            "fence, runtime limit).", labels=["team", "priority_class", "reason"],
        )
        merged: dict[tuple[str, ...], dict[tuple[str, ...], float]] = defaultdict(lambda: defaultdict(float))
        for key, n in ((cursor.event_counts if cursor else None) or {}).items():
            if key == accounting.LOST_GPU_SECONDS_KEY:
                continue
            kind, team, priority_class, reason = accounting.event_count_labels(key)
            if kind == EventKind.JOB_BOUND:
                merged[("admitted",)][(team, priority_class)] += n
            elif kind == EventKind.JOB_FINISHED:
                merged[("finished",)][(team, priority_class, _FINISHED_REASON_SPELLINGS.get(reason, reason))] += n
            if kind == EventKind.JOB_PREEMPTED:
                merged[("preempted",)][(team, priority_class, reason)] += n
            if kind in _EVICTION_KINDS and reason not in REQUEUES_AFTER_END:   # an ended job stops nothing
                merged[("evicted",)][(team, priority_class, reason)] += n
        for name, family in (("admitted", admitted), ("finished", finished), ("preempted", preempted),
                             ("evicted", evicted)):
            for labels, n in sorted(merged[(name,)].items()):
                family.add_metric(list(labels), n)
            yield family

    def _cycles(self, cursor: AccountingCursor | None) -> Iterator[Any]:
        from controlplane.services.cycle import SAMPLE_EVERY_S

        counts = list((cursor.cycle_bucket_counts if cursor else None) or [0] * len(accounting.CYCLE_BUCKETS_S))
        buckets = [(_le(b), float(c)) for b, c in zip(accounting.CYCLE_BUCKETS_S, counts, strict=False)]
        total = float(cursor.cycle_count) if cursor else 0.0
        buckets.append(("+Inf", total))
        yield HistogramMetricFamily(
            f"{PREFIX}_admission_attempt_duration_seconds",
            "Duration of scheduling cycles (each an admission attempt over the whole queue), sampled: only the "
            f"cycle that wrote each fleet sample (one every {SAMPLE_EVERY_S:g} s at most) is counted, so _count is the number of "
            f"sampled cycles, not of cycles (that is {PREFIX}_cycles_total).", buckets=buckets, sum_value=float(cursor.cycle_sum_s) if cursor else 0.0,
        )
        lease = SchedulerLease.objects.filter(name="scheduler").values("last_cycle_ms", "cycles").first()
        last = GaugeMetricFamily(f"{PREFIX}_cycle_duration_seconds", "Duration of the last scheduling cycle.")
        cycles = CounterMetricFamily(f"{PREFIX}_cycles", "Scheduling cycles committed by the leaders.")
        if lease is not None:
            if lease["last_cycle_ms"] is not None:
                last.add_metric([], lease["last_cycle_ms"] / 1000)
            cycles.add_metric([], lease["cycles"])
        yield last
        yield cycles

    # -- quotas --------------------------------------------------------------------------

    def _quotas(self) -> Iterator[GaugeMetricFamily]:
        labels = ["team", "gpu_type", "cohort"]
        nominal = GaugeMetricFamily(f"{PREFIX}_quota_nominal_gpus", "Guaranteed GPUs per team and GPU type.", labels=labels)
        borrowing = GaugeMetricFamily(f"{PREFIX}_quota_borrowing_limit_gpus",
                                      "Most GPUs a team may borrow beyond its guarantee (absent: unlimited).", labels=labels)
        lending = GaugeMetricFamily(f"{PREFIX}_quota_lending_limit_gpus",
                                    "Most of its guarantee a team may lend (absent: unlimited).", labels=labels)
        # Usage carries the cohort as the quota's other series do, so usage / nominal matches one
        # to one (until 7 Dec it lacked it and needed `ignoring(cohort)`). A team holding a GPU
        # type it has no quota for reads its own cohort there too.
        cohorts = {t["name"]: t["cohort__name"] or "" for t in Team.objects.values("name", "cohort__name")}
        quotas: list[tuple[str, str, str]] = []
        for q in Quota.objects.values("team__name", "gpu_type__name", "team__cohort__name", "nominal_gpus",
                                      "borrowing_limit", "lending_limit"):
            values = [q["team__name"], q["gpu_type__name"], q["team__cohort__name"] or ""]
            quotas.append((values[0], values[1], values[2]))
            nominal.add_metric(values, q["nominal_gpus"])
            if q["borrowing_limit"] is not None:
                borrowing.add_metric(values, q["borrowing_limit"])
            if q["lending_limit"] is not None:
                lending.add_metric(values, q["lending_limit"])
        usage = GaugeMetricFamily(f"{PREFIX}_quota_usage_gpus", "GPUs each team holds now, per GPU type "
                                  "(0 for a quota of which it holds none).", labels=labels)
        # Every quota has its series, 0 while its team holds none of that type: without one, the
        # share of its guarantee a team uses left out exactly the teams using none of it.
        held: dict[tuple[str, str, str], int] = dict.fromkeys(quotas, 0)
        for r in (
            AllocationGpu.held()
            .values("allocation__job__team__name", "node__gpu_type__name")
            .annotate(n=Count("id"))
        ):
            team = r["allocation__job__team__name"]
            held[(team, r["node__gpu_type__name"], cohorts.get(team, ""))] = r["n"]
        for key, n in sorted(held.items()):
            usage.add_metric(list(key), n)
        yield from (nominal, borrowing, lending, usage)

    # -- the three tiers -----------------------------------------------------------------

    def _gpus(self, cursor: AccountingCursor | None) -> Iterator[GaugeMetricFamily]:
        capacity = GaugeMetricFamily(f"{PREFIX}_gpus_capacity", "GPUs of the fleet's nodes.", labels=["gpu_type"])
        types: list[str] = []
        for r in Node.objects.exclude(state=NodeState.RETIRED).values("gpu_type__name").annotate(n=Sum("gpu_count")):
            capacity.add_metric([r["gpu_type__name"]], r["n"])
            types.append(r["gpu_type__name"])
        allocated = GaugeMetricFamily(f"{PREFIX}_gpus_allocated", "GPUs held by live allocations now (0 for a GPU "
                                      "type of the fleet none of whose GPUs are held).", labels=["gpu_type"])
        # Every GPU type with capacity has its series, 0 when nothing holds one: without it the
        # ratio to the capacity dropped an idle type instead of reading 0, and an alert on a pool
        # allocated too little never fired when it was allocated nothing.
        live: dict[str, int] = dict.fromkeys(types, 0)
        for r in AllocationGpu.objects.filter(live=True).values("node__gpu_type__name").annotate(n=Count("id")):
            live[r["node__gpu_type__name"]] = r["n"]
        for gpu_type, n in sorted(live.items()):
            allocated.add_metric([gpu_type], n)
        # The tiers of one minute: active and productive are averaged over the last rolled minute,
        # so a ratio of them to `allocated` (now) mixed two instants and could pass 1 whenever jobs
        # ended in the meantime. `allocated_last_minute` is that minute's allocated tier.
        allocated_minute = GaugeMetricFamily(
            f"{PREFIX}_gpus_allocated_last_minute",
            "GPUs held by allocations, averaged over the last rolled minute: the minute the active and productive "
            "GPUs average over, so allocated >= active >= productive among the three.", labels=["gpu_type"],
        )
        active = GaugeMetricFamily(
            f"{PREFIX}_gpus_active", "Allocated GPUs × reported device activity, averaged over the last rolled minute "
            f"(compare with {PREFIX}_gpus_allocated_last_minute, not the allocated GPUs now).",
            labels=["gpu_type"],
        )
        productive = GaugeMetricFamily(
            f"{PREFIX}_gpus_productive",
            "GPUs' worth of retained progress at the jobs' fault-free rates, over the last rolled minute "
            f"(compare with {PREFIX}_gpus_allocated_last_minute).",
            labels=["gpu_type"],
        )
        rolled = GaugeMetricFamily(f"{PREFIX}_accounting_rolled_until_timestamp_seconds",
                                   "Accounting rollups are complete up to this instant (Unix time).")
        if cursor is not None and cursor.rolled_until is not None:
            rolled.add_metric([], cursor.rolled_until.timestamp())
            minute = accounting.floor_to(cursor.rolled_until, accounting.MINUTE) - timedelta(minutes=1)
            for r in (
                FleetRollup.objects.filter(bucket=accounting.MINUTE, start=minute)
                .values("gpu_type__name")
                .annotate(allocated=Sum("allocated_gpu_seconds"), active=Sum("active_gpu_seconds"),
                          productive=Sum("productive_gpu_seconds"))
            ):
                allocated_minute.add_metric([r["gpu_type__name"]], float(r["allocated"] or 0) / 60)
                active.add_metric([r["gpu_type__name"]], float(r["active"] or 0) / 60)
                productive.add_metric([r["gpu_type__name"]], float(r["productive"] or 0) / 60)
        yield from (capacity, allocated, allocated_minute, active, productive, rolled)

    # -- fleet shape and leadership --------------------------------------------------------

    def _fleet_shape(self) -> Iterator[GaugeMetricFamily]:
        stranded = GaugeMetricFamily(
            f"{PREFIX}_stranded_gpus",
            "Idle GPUs on partly used ready nodes while a job that needs a whole node of the pool waits "
            "(fragmentation), per pool; GPUs held idle for a waiting job's reservation included.",
            labels=["pool"])
        largest = GaugeMetricFamily(
            f"{PREFIX}_largest_free_block_gpus",
            "Most idle GPUs on one ready node, per pool; GPUs held idle for a waiting job's reservation included.",
            labels=["pool"])
        away = GaugeMetricFamily(
            f"{PREFIX}_away_gpus",
            "Idle GPUs on nodes that take no work (cordoned, draining, in a maintenance window now, or whose "
            "agent is suspect, quarantined or down), per pool: in use, free on ready nodes and away add up to "
            "the pool's GPUs.",
            labels=["pool"])
        reserved = GaugeMetricFamily(
            f"{PREFIX}_reserved_gpus",
            "Idle GPUs held for a waiting job's reservation or nomination (nodes draining for a gang); "
            "part of the idle GPUs, and of the stranded ones when on a partly used node.")
        # Live from the allocations, per pool, by the one function metrics/fragmentation/, qm
        # sinfo, the Nodes page and the overview's tile read: the cycle's sample kept the
        # stranded GPUs for the whole fleet only, so no alert could say which pool strands them.
        # Every pool of the fleet has its series (0 on a pool with no ready node).
        figures = fragmentation_figures()
        for pool in figures.pools:
            stranded.add_metric([pool.pool], pool.stranded_gpus)
            largest.add_metric([pool.pool], pool.largest_free_block)
            # The Nodes page's "away on nodes that take no work" and qm sinfo's AWAY (until 7 Dec
            # every surface but /metrics said it).
            away.add_metric([pool.pool], pool.unavailable_gpus)
        if figures.reserved_gpus is not None:  # the last cycle's count; none before the first cycle
            reserved.add_metric([], figures.reserved_gpus)
        yield stranded
        yield reserved
        yield largest
        yield away

    def _nodes(self) -> Iterator[GaugeMetricFamily]:
        """Nodes and their GPUs by pool and state, for an operator's alerts (a node suspect,
        quarantined or down; a pool with too few ready GPUs). Every state of every pool has a
        series, 0 when no node is in it, so an alert on `> 0` or a ratio needs no `absent()`.
        Retired nodes are out of the fleet: no series counts them, and a pool whose nodes are all
        retired has none."""
        nodes = GaugeMetricFamily(
            f"{PREFIX}_nodes", "Nodes per pool and state (ready, suspect, cordoned, draining, down, quarantined).",
            labels=["pool", "state"],
        )
        gpus = GaugeMetricFamily(
            f"{PREFIX}_node_gpus", "GPUs of the nodes per pool and node state (a ready node inside a maintenance "
            "window is ready here, and takes no work: see quartermaster_schedulable_gpus).", labels=["pool", "state"])
        schedulable = GaugeMetricFamily(
            f"{PREFIX}_schedulable_gpus", "GPUs of the nodes that take work now, per pool: ready and inside no "
            "active maintenance window (held or free).", labels=["pool"])
        counts: dict[tuple[str, str], tuple[int, int]] = {}
        taking_work: dict[str, int] = defaultdict(int)
        now = timezone.now()
        # A node inside an active window takes no job (scheduler_core/maintenance.py): its GPUs
        # are in no pool's schedulable capacity, as the cycle's figures, metrics/fragmentation/
        # and the Nodes page count them. One query, grouped by pool, state and whether a window holds it.
        closed = Exists(maintenance.active_at(now).filter(nodes=OuterRef("pk")))
        for r in Node.objects.exclude(state=NodeState.RETIRED).annotate(closed=closed).values(
                "pool", "state", "closed").annotate(n=Count("id"), g=Sum("gpu_count")).order_by():
            n, g = counts.get((r["pool"], r["state"]), (0, 0))
            counts[(r["pool"], r["state"])] = (n + r["n"], g + (r["g"] or 0))
            if r["state"] == NodeState.READY and not r["closed"]:
                taking_work[r["pool"]] += r["g"] or 0
        for pool in sorted({pool for pool, _ in counts}):
            for state in (s for s in NodeState if s != NodeState.RETIRED):
                n, g = counts.get((pool, state.value), (0, 0))
                nodes.add_metric([pool, state.value], n)
                gpus.add_metric([pool, state.value], g)
            schedulable.add_metric([pool], taking_work.get(pool, 0))
        yield nodes
        yield gpus
        yield schedulable
        yield self._maintenance(sorted({pool for pool, _ in counts}))

    def _stopping_overdue(self) -> GaugeMetricFamily:
        """GPUs per node still held by a job told to stop whose deadline passed over
        STOPPING_OVERDUE_S ago: its processes outlive SIGKILL (a process stuck in the kernel, in
        uninterruptible sleep), so the GPUs go to no one, rightly (fencing), and nothing else
        said so: the agent logs it once on the node. One query; a series only per node with such
        GPUs (an alert on `> 0` needs none for the others)."""
        family = GaugeMetricFamily(
            f"{PREFIX}_gpus_stopping_overdue",
            f"GPUs held by jobs told to stop whose deadline passed over {STOPPING_OVERDUE_S} s ago (processes "
            "that outlive SIGKILL), per node.", labels=["node"])
        overdue = timezone.now() - timedelta(seconds=STOPPING_OVERDUE_S)
        for row in AllocationGpu.objects.filter(
                live=True, allocation__state=AllocationState.RELEASING,
                allocation__release_deadline__lt=overdue).values("node__name").annotate(n=Count("id")).order_by(
                "node__name"):
            family.add_metric([row["node__name"]], row["n"])
        return family

    def _maintenance(self, pools: list[str]) -> GaugeMetricFamily:
        """Nodes in a maintenance window now (active) or in one not begun (upcoming), per pool,
        in one query; every pool has both series, 0 included. A node in an active window and in
        an upcoming one counts in both; cancelled and ended windows count nowhere."""
        family = GaugeMetricFamily(
            f"{PREFIX}_maintenance_nodes",
            "Nodes in a maintenance window now (state active) or in one to come (upcoming), per pool.",
            labels=["pool", "state"])
        now = timezone.now()
        rows = {
            r["node__pool"]: r for r in MaintenanceWindow.nodes.through.objects.filter(
                maintenancewindow__cancelled_at__isnull=True, maintenancewindow__end_at__gt=now)
            .exclude(node__state=NodeState.RETIRED).values("node__pool").annotate(
                active=Count("node_id", distinct=True, filter=Q(maintenancewindow__start_at__lte=now)),
                upcoming=Count("node_id", distinct=True, filter=Q(maintenancewindow__start_at__gt=now)))
            .order_by()
        }
        for pool in pools:
            row = rows.get(pool, {})
            family.add_metric([pool, "active"], row.get("active", 0))
            family.add_metric([pool, "upcoming"], row.get("upcoming", 0))
        return family

    def _leader(self) -> Iterator[GaugeMetricFamily]:
        epoch = GaugeMetricFamily(f"{PREFIX}_leader_epoch", "The scheduler leader's epoch (fencing token).")
        last = GaugeMetricFamily(
            f"{PREFIX}_last_cycle_timestamp_seconds",
            "When the last scheduling cycle committed (Unix time); alert when it lags (the loop is down).",
        )
        lease = SchedulerLease.objects.filter(name="scheduler").values("epoch", "last_cycle_at").first()
        if lease is not None:
            epoch.add_metric([], lease["epoch"])
            if lease["last_cycle_at"] is not None:
                last.add_metric([], lease["last_cycle_at"].timestamp())
        yield epoch
        yield last


    def _oldest_feasible_wait(self) -> Iterator[GaugeMetricFamily]:
        # The overview's tile "Oldest feasible job waits", from the same place: which waiting
        # jobs can run is the cycle's finding, so it is the last cycle's (as the reserved GPUs).
        family = GaugeMetricFamily(
            f"{PREFIX}_oldest_feasible_pending_seconds",
            "How long the longest-waiting job that can run on this fleet had waited at the last cycle "
            "(jobs that can never run, held or waiting on another left out; 0 when none such waits).")
        last = FleetSample.objects.order_by("-at").values_list("oldest_feasible_pending_s", flat=True)[:1]
        if last:  # no series before the first cycle
            family.add_metric([], last[0] or 0.0)
        yield family

    def _etas(self) -> Iterator[GaugeMetricFamily]:
        judged, on_time = eta_record.counts(hours=24)
        yield GaugeMetricFamily(
            f"{PREFIX}_eta_judged_jobs",
            "Jobs that started in the last 24 h after waiting with an ETA (services/eta_record.py).", value=judged)
        yield GaugeMetricFamily(
            f"{PREFIX}_eta_on_time_jobs",
            "Of those, the jobs that started no later than the first ETA they were told; the ratio is how far "
            "the ETAs held.", value=on_time)


def _le(bound: float) -> str:
    return repr(float(bound))


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(QuartermasterCollector())


def _metrics_token() -> str:
    return str(settings.QM.get("METRICS_TOKEN") or os.environ.get("QM_METRICS_TOKEN", ""))


def _may_scrape(request: HttpRequest) -> tuple[bool, str]:
    """(allowed, why not). Credentials that authenticate no one (a wrong metrics token, an
    unknown API token, a scheme nobody reads) are 401, as DRF answers them on every /api/
    endpoint; 403 is for someone known who is not an admin. Until 7 Dec a wrong token was a 403,
    so a scraper with a mistyped token looked as if it lacked a right rather than its token."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    token = _metrics_token()
    if header.startswith("Bearer ") and token:
        if hmac.compare_digest(header[len("Bearer "):].strip().encode(), token.encode()):
            return True, ""
        return False, "unauthenticated"
    drf = Request(request)
    for authenticator in (TokenAuthentication(), SessionAuthentication()):
        try:
            found = authenticator.authenticate(drf)
        except AuthenticationFailed:
            return False, "unauthenticated"
        if found is not None:
            return (True, "") if access_of(found[0]).is_admin else (False, "forbidden")
    return False, "unauthenticated"


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The families above, to admins and the scraper; with the database unreachable a 503 in
    JSON logged in one line (api/errors.database_unavailable), as the API and /healthz answer,
    not Django's HTML 500 and a traceback at every scrape."""
    try:
        return _metrics(request)
    except (OperationalError, InterfaceError) as error:
        return database_unavailable(error, request)


def _metrics(request: HttpRequest) -> HttpResponse:
    allowed, refusal = _may_scrape(request)
    if not allowed:
        if refusal == "unauthenticated":
            given = "not accepted" if request.META.get("HTTP_AUTHORIZATION") else "required"
            response = HttpResponse(f"Authentication {given}: an admin session or token, or the metrics bearer "
                                    "token.\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="quartermaster-metrics"'
            return response
        return HttpResponse("Only admins and the configured scraper may read /metrics.\n", status=403,
                            content_type="text/plain")
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)


urlpatterns = [path("", metrics_view, name="metrics")]
