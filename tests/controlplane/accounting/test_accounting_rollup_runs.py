"""The rollup as the Celery beat runs it: every 15 s, sometimes twice for the same instant,
sometimes late. However it is run, the rollups hold the same figures, and they never reach back
before the first run (a fleet the accounting never watched costs nothing).

Fleet: one H100 node of 8 GPUs (reserved, $2.50/GPU-h); team ml holds a guarantee of 8 H100.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Min

from controlplane.models import FleetRollup, GroupRollup, QuotaRollup, UsageRollup
from controlplane.services import accounting, showback
from controlplane.services.access import Access
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, report, running_job

pytestmark = pytest.mark.django_db
FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())
SECONDS = timedelta(seconds=1)


def test_the_second_run_does_not_reach_back_before_the_first() -> None:
    """The accounting starts at 10:00:20 with an idle fleet (its first run covers 10:00:00 to
    10:00:20). The second run, 15 s later, re-derived the five minutes before where the first
    stopped, 09:55–10:00, which no run had ever covered: 5 minutes × 8 GPUs of capacity
    ($1.67) and of ml's idle guarantee ($1.67) appeared for time before the accounting began.
    Capacity must be 8 GPUs × 60 s over the minute from 10:00:00 (rolled whole at 10:01:05)."""
    gpu = h100()
    node(gpu)
    f.make_quota(f.make_team("ml"), gpu, nominal_gpus=8)
    for at in (T0 + 20 * SECONDS, T0 + 35 * SECONDS, T0 + 50 * SECONDS, T0 + 65 * SECONDS):
        accounting.roll_up(at)
    now = T0 + 65 * SECONDS
    assert FleetRollup.objects.filter(bucket=accounting.MINUTE).aggregate(m=Min("start"))["m"] == T0
    assert QuotaRollup.objects.filter(bucket=accounting.MINUTE).aggregate(m=Min("start"))["m"] == T0
    # The report ends on the last whole minute rolled (10:01): the minute from 10:00, nothing before.
    report = showback.showback(showback.Window(T0 - minutes(60), now, "1h"), "team", FINANCE, now)
    assert report.end == T0 + minutes(1)
    assert report.capacity_gpu_seconds == Decimal(8 * 60)
    assert report.idle_reserved_gpu_seconds_total == Decimal(8 * 60)
    assert report.capacity_cost_usd.quantize(Decimal("0.0001")) == Decimal("0.3333")  # 8 × 60 s × $2.50/h


def test_a_late_bind_before_the_first_run_is_still_counted() -> None:
    """The clamp must not hide usage: an allocation bound at 09:58 (before the first run, which
    starts at its bind) is counted whole, and later runs keep it."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0 - minutes(2))
    report(hold(job, [(n, 8)], T0 - minutes(2)), n, T0 - minutes(2), T0 + minutes(1))
    for seconds in (20, 35, 50, 65):
        accounting.roll_up(T0 + seconds * SECONDS)
    usage = UsageRollup.objects.filter(bucket=accounting.MINUTE).aggregate(m=Min("start"))["m"]
    assert usage == T0 - minutes(2)
    now = T0 + 65 * SECONDS
    shown = showback.showback(showback.Window(T0 - minutes(60), now, "1h"), "team", FINANCE, now)
    # to the last whole minute rolled, 10:01
    assert shown.total.allocated_gpu_seconds == Decimal(8 * (120 + 60))
    assert shown.capacity_gpu_seconds == Decimal(8 * (120 + 60))


def _snapshot() -> dict[str, list[tuple[object, ...]]]:
    usage = ("allocated_gpu_seconds", "active_gpu_seconds", "productive_gpu_seconds", "lost_gpu_seconds", "cost_usd",
             "lost_cost_usd")
    return {
        "usage": sorted(UsageRollup.objects.values_list("bucket", "start", "job_id", *usage)),
        "group": sorted(GroupRollup.objects.values_list("bucket", "start", "team_id", *usage)),
        "fleet": sorted(FleetRollup.objects.values_list("bucket", "start", "capacity_gpu_seconds", "capacity_cost_usd",
                                                        *usage)),
        "quota": sorted(QuotaRollup.objects.values_list("bucket", "start", "team_id", "nominal_gpu_seconds",
                                                        "used_gpu_seconds", "idle_gpu_seconds", "idle_cost_usd")),
    }


def test_every_15_seconds_twice_each_or_one_catch_up_gives_the_same_rollups() -> None:
    """Six minutes across midnight (23:57–00:03, so minute, hour and day rollups all end inside
    it) rolled two ways: the beat's 15 s cadence with each tick delivered twice (a second worker,
    a retried task), and a single catch-up. Re-running a tick must not add anything: every row of
    every rollup table agrees, and the total is 8 GPUs × 6 min = 2,880 GPU-s = $2.00. (Twenty
    minutes until 3 Dec: 242 runs, 107 s of the suite, for no rule more.)"""
    midnight = T0.replace(hour=0) + timedelta(days=1)
    start, end = midnight - minutes(3), midnight + minutes(3)
    gpu = h100()
    n = node(gpu)
    f.make_quota(f.make_team("ml"), gpu, nominal_gpus=8)
    job = running_job(f.make_team("vision"), gpus=8, started_at=start)
    report(hold(job, [(n, 8)], start, end), n, start, end, every=timedelta(seconds=10))
    finished = end + minutes(2)

    accounting.catch_up(finished)
    once = _snapshot()
    shown = showback.showback(showback.Window(start - minutes(5), finished, "w"), "team", FINANCE, finished)
    assert shown.total.allocated_gpu_seconds == Decimal(8 * 360)
    assert sum(e.cost_usd for e in shown.entries).quantize(Decimal("0.01")) == Decimal("2.00")
    assert shown.capacity_gpu_seconds == Decimal(8 * 8 * 60)  # from the bind (the first run) to 00:05

    for model in (UsageRollup, GroupRollup, FleetRollup, QuotaRollup):
        model.objects.all().delete()
    from controlplane.models import AccountingCursor, JobProgressRate

    AccountingCursor.objects.all().delete()
    JobProgressRate.objects.all().delete()
    at = start
    while at <= finished:
        accounting.roll_up(at)
        accounting.roll_up(at)
        at += 15 * SECONDS
    accounting.roll_up(finished)
    twice = _snapshot()
    for table in once:
        assert twice[table] == once[table], table
