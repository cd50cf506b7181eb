"""One node's GPU time in three tiers (services/node_tiers.py), on real PostgreSQL, worked out by hand.

Node N: 8 H100. Over the hour T0–T0+60 min:
- job A holds GPUs 0–3 all hour. Its agent reports, every 90 s (samples crossing the minutes'
  bounds), activity 0.5 and 15 steps/s until T0+40 (a steady job: ρ = 900 steps ÷ 120 active
  GPU-s = 7.5 per minute, productive = active); T0+40–T0+50 activity 0 (stalled); T0+50–T0+60
  activity 0.25 and no progress at all (busy, not productive).
  A: allocated 4 × 3600 = 14,400; active 40 × 120 + 10 × 60 = 5,400; productive 40 × 120 = 4,800.
- job B, a gang of 4 GPUs on N (slots 4–7) and 4 on node M, from T0+30 on. Both agents report
  activity 0.5; only M (rank 0) reports progress: 6 steps/s for ten minutes, then 3 steps/s
  (a slowdown with busy kernels). ρ = 360 ÷ 240 = 1.5; the job's productive share of its active
  time is 1 for ten minutes, then 0.5. N's part: allocated 4 × 1800 = 7,200; active 30 × 120 =
  3,600; productive 10 × 120 + 20 × 60 = 2,400 — though N itself reported no step.
N: capacity 8 × 3600 = 28,800 GPU-s (8 GPU-h); allocated 21,600 (6 GPU-h, 75 %); active 9,000
(2.5 GPU-h, 31.25 %); productive 7,200 (2 GPU-h, 25 %).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.choices import EventKind
from controlplane.models import AllocationGpu, Event
from controlplane.services import accounting
from controlplane.services.node_tiers import node_tiers
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, report, running_job

pytestmark = pytest.mark.django_db
NOW = T0 + minutes(60)
EPS = Decimal("0.00001")  # GPU-seconds: the rollup rounds each minute down to the µs


def close(value: Decimal, expected: int | str) -> bool:
    return abs(value - Decimal(expected)) <= EPS


@pytest.fixture
def fleet() -> dict[str, object]:
    gpu_type = h100()
    n, m = node(gpu_type, name="n"), node(gpu_type, name="m")
    team = f.make_team()
    a = running_job(team, gpus=4, started_at=T0)
    b = running_job(team, gpus=8, started_at=T0 + minutes(30))
    held_a = hold(a, [(n, 4)], T0)
    held_b = hold(b, [(n, 4)], T0 + minutes(30), first_index=4)
    # B's other half, on M: the same allocation's GPUs there
    AllocationGpu.objects.bulk_create([AllocationGpu(allocation=held_b, node=m, gpu_index=i) for i in range(4)])
    every = timedelta(seconds=90)
    report(held_a, n, T0, T0 + minutes(40), every=every, activity=0.5, steps_per_s=15)
    report(held_a, n, T0 + minutes(40), T0 + minutes(50), activity=0.0, steps_per_s=0)
    report(held_a, n, T0 + minutes(50), NOW, activity=0.25, steps_per_s=0)
    report(held_b, n, T0 + minutes(30), NOW, activity=0.5, steps_per_s=0)
    report(held_b, m, T0 + minutes(30), T0 + minutes(40), activity=0.5, steps_per_s=6)
    report(held_b, m, T0 + minutes(40), NOW, activity=0.5, steps_per_s=3)
    accounting.catch_up(NOW)
    return {"n": n, "m": m, "a": a, "b": b}


def test_a_nodes_hour_in_three_tiers_with_a_stall_and_no_progress_report(fleet) -> None:
    with CaptureQueriesContext(connection) as queries:
        t = node_tiers(fleet["n"], T0, NOW, NOW)
    assert len(queries) <= 7
    assert t.bucket == accounting.MINUTE and (t.start, t.end) == (T0, NOW)
    assert t.capacity == Decimal(28_800)
    assert t.allocated == Decimal(21_600)
    assert close(t.active, 9_000)
    assert close(t.productive, 7_200)
    assert [round(t.hours(x), 4) for x in ("capacity", "allocated", "active", "productive")] == [
        Decimal("8.0000"), Decimal("6.0000"), Decimal("2.5000"), Decimal("2.0000")]
    assert [round(t.share(x), 4) for x in ("allocated", "active", "productive")] == [0.75, 0.3125, 0.25]
    # a minute per bucket: the stalled minute T0+42 shows only B's active time on N
    by_start = {b.start: b for b in t.buckets}
    assert len(t.buckets) == 60
    first, stalled, idle_busy = by_start[T0 + minutes(1)], by_start[T0 + minutes(42)], by_start[T0 + minutes(55)]
    assert (first.allocated, first.capacity) == (Decimal(240), Decimal(480))
    assert close(first.active, 120) and close(first.productive, 120)
    assert stalled.allocated == Decimal(480) and close(stalled.active, 120) and close(stalled.productive, 60)
    assert close(idle_busy.active, 60 + 120) and close(idle_busy.productive, 60)
    # per GPU: A's slots, B's slots
    gpus = {g.index: g for g in t.gpus}
    assert sorted(gpus) == list(range(8))
    assert gpus[0].allocated == Decimal(3600) and close(gpus[0].active, 1350) and close(gpus[0].productive, 1200)
    assert gpus[5].allocated == Decimal(1800) and close(gpus[5].active, 900) and close(gpus[5].productive, 600)
    assert gpus[0].capacity == Decimal(3600)


def test_node_m_reported_the_gangs_progress_and_gets_only_its_own_half(fleet) -> None:
    t = node_tiers(fleet["m"], T0, NOW, NOW)
    assert t.allocated == Decimal(7_200)
    assert close(t.active, 3_600) and close(t.productive, 2_400)


def test_a_window_cut_mid_stall_and_hour_buckets_give_the_same_figures(fleet) -> None:
    t = node_tiers(fleet["n"], T0 + minutes(45), NOW, NOW)
    # A: 4 × 900 held, 0 active until T0+50 then 10 × 60; B: 4 × 900 held, 15 × 120 active, 15 × 60 productive
    assert t.allocated == Decimal(7_200) and close(t.active, 2_400) and close(t.productive, 900)
    hourly = node_tiers(fleet["n"], T0, NOW, NOW, bucket=accounting.HOUR)
    assert len(hourly.buckets) == 1
    assert hourly.allocated == Decimal(21_600) and close(hourly.active, 9_000) and close(hourly.productive, 7_200)


def test_capacity_counts_from_the_nodes_registration_and_the_window_ends_at_the_rollup(fleet) -> None:
    Event.objects.create(kind=EventKind.NODE_REGISTERED, reason="Registered", actor="agent:n", node=fleet["n"],
                         created_at=T0 - minutes(10))
    assert node_tiers(fleet["n"], T0, NOW, NOW).capacity == Decimal(28_800)  # joined before the window
    Event.objects.filter(node=fleet["n"]).update(created_at=T0 + minutes(20))
    t = node_tiers(fleet["n"], T0, NOW, NOW)
    assert t.joined_at == T0 + minutes(20) and t.capacity == Decimal(8 * 40 * 60)
    # asked from before the accounting's first minute: nothing was watched then, so no capacity either
    Event.objects.filter(node=fleet["n"]).delete()
    earlier = node_tiers(fleet["n"], T0 - minutes(30), NOW, NOW)
    assert earlier.accounting_began == T0 and earlier.capacity == Decimal(28_800) and earlier.allocated == 21_600
    # and the chart's steps start there, not at the window's edge
    assert [b.start for b in earlier.buckets if b.capacity > 0][0] == T0
    hourly = node_tiers(fleet["n"], T0 - minutes(30), NOW, NOW, bucket=accounting.HOUR)
    assert [(b.start, b.end, b.capacity) for b in hourly.buckets if b.capacity] == [(T0, NOW, Decimal(28_800))]
    # asked past the last rollup: the figures stop there
    later = node_tiers(fleet["n"], T0, NOW + minutes(30), NOW + minutes(30))
    assert later.end == NOW and later.allocated == Decimal(21_600)


def test_a_gang_member_gone_early_frees_its_slots_there(fleet) -> None:
    allocation = fleet["b"].allocations.get()
    Event.objects.create(kind=EventKind.ALLOCATION_RELEASED, reason="MemberExited", actor="agent:m",
                         node=fleet["m"], allocation=allocation, created_at=T0 + minutes(50))
    assert node_tiers(fleet["m"], T0, NOW, NOW).allocated == Decimal(4 * 20 * 60)
    assert node_tiers(fleet["n"], T0, NOW, NOW).allocated == Decimal(21_600)


def test_beyond_the_raw_retention_nothing_is_claimed(fleet) -> None:
    later = NOW + timedelta(days=9)
    t = node_tiers(fleet["n"], later - timedelta(days=30), later, later)
    assert t.cut_at_horizon and t.start == accounting.raw_horizon(later)
    assert t.empty and t.allocated == Decimal(0)


def test_the_nodes_add_up_to_the_fleets_rollup(fleet) -> None:
    """Every node's figures summed are the accounting's for the fleet: the same time, counted once."""
    from django.db.models import Sum

    from controlplane.models import FleetRollup

    nodes = [node_tiers(fleet[x], T0, NOW, NOW) for x in ("n", "m")]
    rolled = FleetRollup.objects.filter(bucket=accounting.MINUTE, start__gte=T0, start__lt=NOW).aggregate(
        capacity=Sum("capacity_gpu_seconds"), allocated=Sum("allocated_gpu_seconds"),
        active=Sum("active_gpu_seconds"), productive=Sum("productive_gpu_seconds"))
    assert sum(t.capacity for t in nodes) == rolled["capacity"] == 16 * 3600
    assert sum(t.allocated for t in nodes) == rolled["allocated"] == 28_800
    assert close(sum(t.active for t in nodes), rolled["active"]) and close(rolled["active"], 12_600)
    assert close(sum(t.productive for t in nodes), rolled["productive"]) and close(rolled["productive"], 9_600)
