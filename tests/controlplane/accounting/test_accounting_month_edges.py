"""Showback across a month boundary with price changes, read as finance reads it: the monthly
report, windows with edges at midnight, a window before any data, and every grouping, checked
to the cent against arithmetic done by hand in each docstring.

Fleet: one H100 node of 8 GPUs (reserved). Price: $2.50/GPU-h from 2026-01-01, $2.00 from
2026-11-30 23:00:30 (mid-minute), $3.00 from 2026-12-01 00:00 (the month boundary). Team ml's
job holds all 8 GPUs from 2026-11-30 22:00 to 2026-12-01 02:00; now is 2026-12-01 03:00.

  November (22:00–24:00): 16 GPU-h; 8 × 1.008333 h × $2.50 = $20.1667 + 8 × 0.991667 h × $2.00
  = $15.8667 → $36.03. Capacity 16 GPU-h, all of it allocated: no idle.
  December (00:00–03:00): 16 GPU-h × $3.00 = $48.00; capacity 24 GPU-h, idle 8 GPU-h × $3.00
  = $24.00; the fleet cost $72.00.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from controlplane.choices import CapacityTier
from controlplane.models import Event
from controlplane.services import accounting, job_costs, showback
from controlplane.services.access import Access
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import h100, hold, node, report, running_job

pytestmark = pytest.mark.django_db
FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())
START = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
CENT = Decimal("0.01")


@pytest.fixture
def month_edge() -> dict[str, Any]:
    gpu = h100("2.5000")
    f.make_price_rate(gpu, "2.0000", tier=CapacityTier.RESERVED,
                      effective_from=datetime(2026, 11, 30, 23, 0, 30, tzinfo=UTC))
    f.make_price_rate(gpu, "3.0000", tier=CapacityTier.RESERVED, effective_from=datetime(2026, 12, 1, tzinfo=UTC))
    n = node(gpu)
    team = f.make_team("ml")
    job = running_job(team, gpus=8, started_at=START)
    allocation = hold(job, [(n, 8)], START, START + timedelta(hours=4))
    report(allocation, n, START, START + timedelta(hours=4), tokens_per_s=1000)
    accounting.catch_up(NOW)
    return {"team": team, "job": job}


def read(window: showback.Window, group_by: str = "team") -> dict[str, Any]:
    return showback.showback_json(showback.showback(window, group_by, FINANCE, NOW))


def window(text: str) -> showback.Window:
    return showback.parse_window(text, NOW)


def test_the_monthly_reports_each_charge_their_own_hours_at_their_own_prices(month_edge: Any) -> None:
    november = read(showback.month_window("2026-11", NOW))
    assert november["window"] == {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"}
    ml = november["data"][0]["ml"]
    assert (ml["gpuHours"], ml["gpuCost"]) == (16.0, 36.03)
    assert november["data"][0]["__idle__"]["gpuCost"] == 0.0
    assert november["totals"]["capacityGpuHours"] == 16.0
    december = read(showback.month_window("2026-12", NOW))
    assert december["window"] == {"start": "2026-12-01T00:00:00Z", "end": "2026-12-01T03:00:00Z"}
    ml = december["data"][0]["ml"]
    assert (ml["gpuHours"], ml["gpuCost"], ml["usdPerGpuHour"]) == (16.0, 48.0, 3.0)
    idle = december["data"][0]["__idle__"]
    assert (idle["gpuHours"], idle["gpuCost"]) == (8.0, 24.0)
    assert december["totals"]["totalCost"] == 72.0
    assert december["totals"]["capacityGpuHours"] == 24.0


@pytest.mark.parametrize("text, hours, cost, idle_cost", [
    ("yesterday", 16.0, 36.03, 0.0),
    ("today", 16.0, 48.0, 24.0),
    ("2026-11-30T00:00:00Z,2026-12-01T00:00:00Z", 16.0, 36.03, 0.0),
    ("2026-12-01T00:00:00Z,2026-12-02T00:00:00Z", 16.0, 48.0, 24.0),
    # 23:00–23:00:30 at $2.50 ($0.1667), to midnight at $2.00 ($15.8667), to 01:00 at $3.00 ($24)
    ("2026-11-30T23:00:00Z,2026-12-01T01:00:00Z", 16.0, 40.03, 0.0),
    # the same instants written with an offset
    ("2026-12-01T00:00:00+01:00,2026-12-01T03:00:00+02:00", 16.0, 40.03, 0.0),
    ("2026-11-30T00:00:00Z,2026-12-01T03:00:00Z", 32.0, 84.03, 24.0),
])
def test_windows_with_edges_at_midnight_and_across_the_month(month_edge: Any, text: str, hours: float, cost: float,
                                                             idle_cost: float) -> None:
    body = read(window(text))
    ml = body["data"][0]["ml"]
    assert (ml["gpuHours"], ml["gpuCost"]) == (hours, cost)
    assert body["data"][0]["__idle__"]["gpuCost"] == idle_cost
    assert body["totals"]["totalCost"] == round(cost + idle_cost, 2)


def test_the_two_months_add_up_to_the_window_that_spans_them(month_edge: Any) -> None:
    both = showback.showback(window("2026-11-01T00:00:00Z,2026-12-01T03:00:00Z"), "team", FINANCE, NOW)
    parts = [showback.showback(showback.month_window(m, NOW), "team", FINANCE, NOW) for m in ("2026-11", "2026-12")]
    for attribute in ("allocated_gpu_seconds", "active_gpu_seconds", "productive_gpu_seconds", "cost_usd"):
        assert getattr(both.total, attribute) == sum((getattr(p.total, attribute) for p in parts), Decimal(0))
    assert both.total.useful_tokens == pytest.approx(sum(p.total.useful_tokens for p in parts))
    assert both.capacity_gpu_seconds == sum((p.capacity_gpu_seconds or Decimal(0) for p in parts), Decimal(0))


@pytest.mark.parametrize("group_by", ["team", "project", "job", "priority_class"])
def test_every_grouping_has_the_same_total_and_the_csv_says_what_the_json_says(month_edge: Any, group_by: str) -> None:
    report = showback.showback(window("2026-11-30T23:00:00Z,2026-12-01T01:00:00Z"), group_by, FINANCE, NOW)
    body = showback.showback_json(report)
    assert body["totals"]["gpuCost"] == 40.03
    assert body["totals"]["gpuHours"] == 16.0
    rows = {r[group_by]: r for r in csv.DictReader(io.StringIO(showback.showback_csv(report)))}
    for name, allocation in body["data"][0].items():
        assert Decimal(rows[name]["cost_usd"]) == Decimal(str(allocation["gpuCost"]))
    total = rows["TOTAL"]
    assert (total["gpu_hours_allocated"], total["cost_usd"]) == ("16.0000", "40.03")
    assert Decimal(total["cost_usd"]) == sum(Decimal(r["cost_usd"]) for k, r in rows.items() if k != "TOTAL")


@pytest.mark.parametrize("text", [
    "2026-11-01T00:00:00Z,2026-11-02T00:00:00Z",  # before any data
    "2026-11-30T21:00:00Z,2026-11-30T22:00:00Z",  # the hour just before the first bind
    "2025-01-01T00:00:00Z,2025-12-31T00:00:00Z",
])
def test_a_window_before_any_data_is_zero_everywhere_and_never_nan(month_edge: Any, text: str) -> None:
    report = showback.showback(window(text), "team", FINANCE, NOW)
    body = showback.showback_json(report)
    assert body["totals"]["gpuHours"] == 0.0 and body["totals"]["totalCost"] == 0.0
    assert body["totals"]["capacityGpuHours"] == 0.0
    for value in _numbers(body):
        assert math.isfinite(value)
    text_csv = showback.showback_csv(report)
    assert "nan" not in text_csv.lower() and "inf" not in text_csv.lower()


def test_the_job_page_cost_is_the_sum_of_the_months(month_edge: Any) -> None:
    cost = job_costs.job_cost(month_edge["job"].pk)
    assert cost["cost_usd"] == Decimal("84.03")
    assert cost["gpu_hours_allocated"] == Decimal("32.0000")
    assert not Event.objects.filter(kind="job.preempted").exists()


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []
