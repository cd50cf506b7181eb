"""A gang on two kinds of capacity is as productive as the same gang on one (finance audit, 5 Dec).

A gang's progress is reported once, by the node hosting rank 0, and the rollup keeps a row per
job, minute, GPU type, capacity tier and borrowed flag; productive = min(active, retained ÷ the
job's fault-free rate) was taken row by row, so the rows without rank 0 had no productive time
and rank 0's was capped at its own active time. On the demo a 64-GPU gang across reserved and
on-demand H100 nodes read 1.89 productive GPU-hours of 2.52 active, having lost 18 GPU-seconds.
Now a job's progress in a minute is spread over its rows in proportion to their active time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db.models import Sum

from controlplane.choices import CapacityTier
from controlplane.models import JobProgressRate, UsageRollup
from controlplane.services import accounting, node_tiers, showback
from controlplane.services.access import Access
from controlplane.services.usage_tiers import PriceBook, Sample, Span, derive_minutes
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, report, running_job

FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())


@pytest.mark.django_db
def test_a_steady_gang_across_reserved_and_on_demand_nodes_is_productive_throughout() -> None:
    """16 H100 (8 reserved at $2.50, 8 on-demand at $4.10) held 10:00–12:00 at activity 0.75,
    rank 0 (the reserved node) reporting 10 steps/s for the gang, the other node none: active =
    0.75 × 16 × 7,200 = 86,400 GPU-s, every minute at the fault-free rate, so productive = active
    = 24 GPU-hours (it read 12: the on-demand node's half had none)."""
    gpu = h100()
    f.make_price_rate(gpu, "4.1000", tier=CapacityTier.ON_DEMAND, effective_from=datetime(2026, 1, 1, tzinfo=UTC))
    reserved, on_demand = node(gpu), node(gpu, CapacityTier.ON_DEMAND)
    job = running_job(f.make_team("ml"), gpus=16, started_at=T0)
    allocation = hold(job, [(reserved, 8), (on_demand, 8)], T0, T0 + minutes(120))
    report(allocation, reserved, T0, T0 + minutes(120))
    report(allocation, on_demand, T0, T0 + minutes(120), steps_per_s=0)
    accounting.catch_up(T0 + minutes(180))

    rows = UsageRollup.objects.filter(bucket=accounting.DAY, job=job)
    assert rows.count() == 2  # one per capacity tier
    sums = rows.aggregate(active=Sum("active_gpu_seconds"), productive=Sum("productive_gpu_seconds"),
                          steps=Sum("steps"), retained=Sum("retained_steps"))
    assert sums["active"] == Decimal(86_400)
    assert sums["productive"] == pytest.approx(Decimal(86_400), abs=Decimal("0.01"))
    assert sums["steps"] == pytest.approx(72_000) and sums["retained"] == pytest.approx(72_000)
    for row in rows:
        assert row.productive_gpu_seconds == pytest.approx(row.active_gpu_seconds, abs=Decimal("0.01"))
    assert JobProgressRate.objects.get(job=job).per_active_gpu_second == pytest.approx(72_000 / 86_400)

    entry = showback.showback(showback.Window(T0, T0 + minutes(180), "3h"), "team", FINANCE,
                              T0 + minutes(180)).entries[0]
    assert entry.productive_gpu_seconds == pytest.approx(entry.active_gpu_seconds, abs=Decimal("0.01"))
    # The node page's tiers share the job's productive time by its ratio: both nodes now have it.
    for n in (reserved, on_demand):
        tiers = node_tiers.node_tiers(n, T0, T0 + minutes(120), T0 + minutes(180))
        assert tiers.productive == pytest.approx(tiers.active, abs=Decimal("0.01")), n.name


def test_a_minutes_progress_is_spread_over_the_jobs_cells_by_active_time() -> None:
    """Pure: rank 0 on a node of one GPU type, the rest on another at half the activity; the
    cells' productive times (retained ÷ rate, capped at active) add up to the job's."""
    start, end = 0, 60_000_000
    spans = [Span(job_id=1, allocation_id=1, node_id=1, gpu_type_id=1, capacity_tier="reserved", borrowed=False,
                  gpus=8, start_us=start, end_us=end),
             Span(job_id=1, allocation_id=1, node_id=2, gpu_type_id=2, capacity_tier="reserved", borrowed=False,
                  gpus=8, start_us=start, end_us=end)]
    samples = [Sample(allocation_id=1, node_id=1, start_us=start, end_us=end, gpus=8, activity=0.8, steps=600,
                      useful_tokens=0),
               Sample(allocation_id=1, node_id=2, start_us=start, end_us=end, gpus=8, activity=0.4, steps=0,
                      useful_tokens=0)]
    cells = derive_minutes(start, end, spans, samples, [], PriceBook()).cells
    first, second = cells[(0, 1, 1, "reserved", False)], cells[(0, 1, 2, "reserved", False)]

    assert first.retained_steps + second.retained_steps == pytest.approx(600)
    assert first.retained_steps == pytest.approx(400) and second.retained_steps == pytest.approx(200)
    assert first.steps == pytest.approx(400) and second.steps == pytest.approx(200)
